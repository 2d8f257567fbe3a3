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

// Package flow checks flow control's acceptance (issue 35) against a real
// redis-server and real worker processes: the test binary started again in
// worker mode, a pkg/worker Server configured from the DTQ_* variables like
// cmd/worker, running the witness handler of internal/testutil/flowcheck,
// which logs every execution's start and end to a file of its own process.
// The checkers read those logs, never dtq's counters:
//
//   - TestGlobalRate: a queue rate limit holds in every window of starts;
//   - TestKeyConcurrency: a per-key cap holds while worker processes are
//     SIGKILLed, and every held slot is given back;
//   - TestHotTenant and TestWeights: fairness between keys.
//
// Each test also runs the same workload, shorter, on a queue without flow
// control and requires its checker to report a violation there: every run
// shows its checker able to fail. DTQ_FLOW_OFF=1 creates every queue of the
// suite without flow control, the build with the mechanism disabled, on
// which every test must fail:
//
//	DTQ_FLOW_OFF=1 go test ./test/flow -count=1 -v
//
// The suite takes about four minutes and skips itself with -short.
package flow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/dtq-dev/dtq/internal/testutil/flowcheck"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// envWitnessLog, set, makes the test binary a worker process whose witness
// handler appends to that file.
const envWitnessLog = "DTQ_FLOW_WITNESS_LOG"

// envOff, set, creates the suite's queues without flow control.
const envOff = "DTQ_FLOW_OFF"

func TestMain(m *testing.M) {
	if path := os.Getenv(envWitnessLog); path != "" {
		if err := runWorker(path); err != nil {
			fmt.Fprintln(os.Stderr, "flow worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runWorker is a worker process: the witness handler on a pkg/worker Server
// until SIGTERM.
func runWorker(path string) error {
	cfg, err := worker.ConfigFromEnv()
	if err != nil {
		return err
	}
	log, err := flowcheck.OpenLog(path)
	if err != nil {
		return err
	}
	defer log.Close()
	mux := worker.NewMux()
	flowcheck.Register(mux, log, cfg.WorkerID)
	srv, err := worker.NewServer(cfg, mux)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := srv.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
