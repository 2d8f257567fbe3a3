/*
Copyright 2026 The dtq Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/worker"
)

// The chaos handler is the fault suite's witness (test/e2e, cmd/worker's
// tests). Unlike the counter handler it guards nothing: every execution
// appends one line to an append-only log that no idempotency guard touches,
// then applies a plain increment per logical task. A checker that reads both
// (internal/testutil/chaoscheck) can therefore see every execution, including
// a second one of the same logical task.
const (
	// Chaos is the handler's task type.
	Chaos = "chaos"
	// EnvChaosLog names the log file; cmd/worker registers the handler only
	// when it is set.
	EnvChaosLog = "DTQ_DEMO_CHAOS_LOG"
)

// ChaosEffectKey is the counter the chaos handler increments for key in a
// namespace: a key of the namespace's own (worker.AppKeyPrefix), so it works
// under the namespace's Redis user.
func ChaosEffectKey(namespace, key string) string {
	return worker.AppKeyPrefix(namespace) + "chaos:" + key
}

// ChaosPayload is the chaos handler's payload.
type ChaosPayload struct {
	// Key names the logical task (the submissions' idempotency key).
	Key string `json:"key"`
	// HoldSeconds sleeps after the increment, before the task completes.
	HoldSeconds float64 `json:"holdSeconds,omitempty"`
	// FirstAttemptMiB, on the task's first attempt only, allocates and
	// touches this many MiB after the increment and keeps it through the
	// hold: above the container's memory limit the kernel OOM-kills the
	// worker mid-task (test/node), and the redelivered attempt completes.
	FirstAttemptMiB int `json:"firstAttemptMiB,omitempty"`
}

// ChaosExecution is one line of the chaos log: one execution of the handler.
type ChaosExecution struct {
	Key     string    `json:"key"`
	TaskID  string    `json:"task"`
	Attempt int       `json:"attempt"`
	Worker  string    `json:"worker"`
	At      time.Time `json:"at"`
}

// ChaosResult is the handler's result: who ran the attempt that succeeded.
type ChaosResult struct {
	Attempt int    `json:"attempt"`
	Worker  string `json:"worker"`
}

// RegisterChaos adds the chaos handler to mux. Each execution appends its
// line to log (opened O_APPEND: one write per line, so concurrent workers
// never interleave), then INCRs ChaosEffectKey in effects. Give effects
// a client that never retries a command (MaxRetries -1): a retry after a lost
// reply would apply one execution's increment twice, which the checker would
// rightly call a duplicate. A failed increment is a retryable error.
func RegisterChaos(mux *worker.Mux, effects redis.UniversalClient, log *os.File, workerID string) {
	mux.Handle(Chaos, worker.Typed(func(ctx context.Context, t *worker.Task, p ChaosPayload) (any, error) {
		if p.Key == "" {
			return nil, fmt.Errorf("%w: chaos: key is required", worker.SkipRetry)
		}
		line, _ := json.Marshal(ChaosExecution{Key: p.Key, TaskID: t.ID, Attempt: t.Attempt, Worker: workerID, At: time.Now().UTC()})
		if _, err := log.Write(append(line, '\n')); err != nil {
			return nil, worker.Retryable(fmt.Errorf("chaos: append to the log: %w", err))
		}
		if err := effects.Incr(ctx, t.AppKey("chaos:"+p.Key)).Err(); err != nil {
			return nil, worker.Retryable(fmt.Errorf("chaos: increment: %w", err))
		}
		var ballast [][]byte
		if t.Attempt == 1 {
			for range p.FirstAttemptMiB {
				b := make([]byte, 1<<20)
				for i := 0; i < len(b); i += 4096 {
					b[i] = 1
				}
				ballast = append(ballast, b)
			}
		}
		if err := hold(ctx, p.HoldSeconds); err != nil {
			return nil, err
		}
		runtime.KeepAlive(ballast)
		return ChaosResult{Attempt: t.Attempt, Worker: workerID}, nil
	}))
}

// OpenChaosLog opens (creating) the chaos log for appending.
func OpenChaosLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// ReadChaosLog reads every execution in the chaos log at path. A torn last
// line (a worker killed in the middle of its write) is skipped.
func ReadChaosLog(path string) ([]ChaosExecution, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ChaosExecution
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e ChaosExecution
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Key != "" {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
