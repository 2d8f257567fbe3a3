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

// Package demo holds the reference worker's demo handlers (cmd/worker), in a
// package of their own so tests can run them in-process.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/worker"
)

// Task types.
const (
	Echo    = "echo"
	Sleep   = "sleep"
	Flaky   = "flaky"
	Fail    = "fail"
	Counter = "counter"
	Crash   = "crash"
	Gate    = "gate"
)

// CounterKey is the key of the counter name that the counter handler
// increments for tasks of namespace: a key of the namespace's own (see
// worker.AppKeyPrefix), so it works under the namespace's Redis user. The
// hash tag keeps the counter and its markers in one cluster slot.
func CounterKey(namespace, name string) string {
	return worker.AppKeyPrefix(namespace) + "counter:{" + name + "}"
}

// CounterOpTTL is how long the counter handler's IdempotentOperation record lives.
const CounterOpTTL = 24 * time.Hour

// incrOnce increments the counter unless the marker exists (then it returns
// the counter unchanged), setting the marker.
//
// KEYS[1]  -> the counter, CounterKey
// KEYS[2]  -> the marker, <counter>:applied:<operation>
//
// ARGV[1]  -> the marker's TTL, ms
//
// Returns the counter.
var incrOnce = redis.NewScript(`
if redis.call("SET", KEYS[2], "1", "NX", "PX", ARGV[1]) then
  return redis.call("INCR", KEYS[1])
end
return tonumber(redis.call("GET", KEYS[1]) or "0")
`)

// GateKey is the key whose existence opens the gate handler's gate name for
// tasks of namespace (a key of the namespace's own, see CounterKey).
func GateKey(namespace, name string) string {
	return worker.AppKeyPrefix(namespace) + "gate:" + name
}

// GatePayload is the gate handler's payload.
// HoldSeconds sleeps once the gate is open, before the task completes (so a
// test sees it Running).
type GatePayload struct {
	Name        string  `json:"name"`
	HoldSeconds float64 `json:"holdSeconds,omitempty"`
}

// MaxSleep caps the sleep handler.
const MaxSleep = 10 * time.Minute

// SleepPayload is the sleep handler's payload.
type SleepPayload struct {
	Seconds float64 `json:"seconds"`
}

// FlakyPayload is the flaky handler's payload.
type FlakyPayload struct {
	FailTimes int `json:"failTimes"`
}

// CounterPayload is the counter handler's payload. HoldSeconds sleeps after the
// increment, before the task completes (a window for crash tests).
type CounterPayload struct {
	Name        string  `json:"name"`
	HoldSeconds float64 `json:"holdSeconds,omitempty"`
}

// Register adds echo, sleep, flaky, fail, counter and gate to mux. rdb is the Redis
// the counter handler increments in.
func Register(mux *worker.Mux, rdb redis.UniversalClient) {
	mux.HandleFunc(Echo, func(ctx context.Context, t *worker.Task) (any, error) {
		if len(t.Payload) == 0 {
			return json.RawMessage("{}"), nil
		}
		return t.Payload, nil
	})
	mux.Handle(Sleep, worker.Typed(func(ctx context.Context, t *worker.Task, p SleepPayload) (any, error) {
		d := time.Duration(p.Seconds * float64(time.Second))
		if d < 0 || d > MaxSleep {
			return nil, fmt.Errorf("%w: seconds must be within 0..%v", worker.SkipRetry, MaxSleep.Seconds())
		}
		select {
		case <-time.After(d):
			return map[string]any{"slept": p.Seconds}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}))
	mux.Handle(Flaky, worker.Typed(func(ctx context.Context, t *worker.Task, p FlakyPayload) (any, error) {
		if t.Attempt <= p.FailTimes {
			return nil, worker.Retryable(fmt.Errorf("flaky: failing attempt %d of %d planned failures", t.Attempt, p.FailTimes))
		}
		return map[string]any{"attempt": t.Attempt}, nil
	}))
	mux.HandleFunc(Fail, func(ctx context.Context, t *worker.Task) (any, error) {
		return nil, errors.New("fail: permanent failure by design")
	})
	// gate stands for a downstream service: a retryable failure while its gate
	// is closed, success once GateKey exists. A task that ran out of attempts
	// while it was closed succeeds when requeued from the dead letters after
	// the gate opens.
	mux.Handle(Gate, worker.Typed(func(ctx context.Context, t *worker.Task, p GatePayload) (any, error) {
		if p.Name == "" {
			return nil, fmt.Errorf("%w: gate: name is required", worker.SkipRetry)
		}
		ns, _, _ := strings.Cut(t.Queue, "/")
		open, err := rdb.Exists(ctx, GateKey(ns, p.Name)).Result()
		if err != nil {
			return nil, err
		}
		if open == 0 {
			return nil, worker.Retryable(fmt.Errorf("gate: %s is closed (attempt %d)", p.Name, t.Attempt))
		}
		if err := hold(ctx, p.HoldSeconds); err != nil {
			return nil, err
		}
		return map[string]any{"gate": p.Name, "attempt": t.Attempt}, nil
	}))
	mux.Handle(Counter, worker.Typed(func(ctx context.Context, t *worker.Task, p CounterPayload) (any, error) {
		if p.Name == "" {
			return nil, fmt.Errorf("%w: counter: name is required", worker.SkipRetry)
		}
		key := t.IdempotencyKey
		if key == "" {
			key = t.ID
		}
		// One increment per logical task, however often it is redelivered.
		// IdempotentOperation stores the result for redeliveries; the
		// increment is itself idempotent (docs/worker.md, rule 5), because
		// Redis can die after applying it and before replying, and the
		// client's retry or the task's retry would then count it twice.
		ns, queue, _ := strings.Cut(t.Queue, "/")
		op := "counter-op:" + queue + ":" + key
		ran, v, err := worker.IdempotentOperation(ctx, rdb, t.AppKey(op), CounterOpTTL,
			func(ctx context.Context) (int64, error) {
				counter := CounterKey(ns, p.Name)
				return incrOnce.Run(ctx, rdb, []string{counter, counter + ":applied:" + op}, CounterOpTTL.Milliseconds()).Int64()
			})
		if err != nil {
			return nil, err // connection errors are retried by the server
		}
		if err := hold(ctx, p.HoldSeconds); err != nil {
			return nil, err
		}
		return map[string]any{"value": v, "ran": ran}, nil
	}))
}

// hold waits seconds, or returns the cause when ctx ends first.
func hold(ctx context.Context, seconds float64) error {
	if seconds <= 0 {
		return nil
	}
	select {
	case <-time.After(time.Duration(seconds * float64(time.Second))):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// RegisterCrash adds the crash handler, which SIGKILLs its own process (an OOM
// kill, say) every time. Only for crash tests: never register it in a process
// you care about.
func RegisterCrash(mux *worker.Mux) {
	mux.HandleFunc(Crash, func(ctx context.Context, t *worker.Task) (any, error) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute)
		os.Exit(2)
		return nil, nil
	})
}
