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

package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dtq-dev/dtq/pkg/worker"
)

// The tests' task types, after the reference worker's demo handlers
// (internal/demo, which the operator's module holds).
const (
	echoType  = "echo"  // returns its payload
	sleepType = "sleep" // sleeps sleepPayload's seconds
	flakyType = "flaky" // fails flakyPayload's first attempts, retryably
	failType  = "fail"  // fails for good
)

type sleepPayload struct {
	Seconds float64 `json:"seconds"`
}

type flakyPayload struct {
	FailTimes int `json:"failTimes"`
}

func registerTestHandlers(mux *worker.Mux) {
	mux.HandleFunc(echoType, func(_ context.Context, t *worker.Task) (any, error) {
		if len(t.Payload) == 0 {
			return json.RawMessage("{}"), nil
		}
		return t.Payload, nil
	})
	mux.Handle(sleepType, worker.Typed(func(ctx context.Context, _ *worker.Task, p sleepPayload) (any, error) {
		select {
		case <-time.After(time.Duration(p.Seconds * float64(time.Second))):
			return map[string]any{"slept": p.Seconds}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}))
	mux.Handle(flakyType, worker.Typed(func(_ context.Context, t *worker.Task, p flakyPayload) (any, error) {
		if t.Attempt <= p.FailTimes {
			return nil, worker.Retryable(fmt.Errorf("flaky: failing attempt %d of %d planned failures", t.Attempt, p.FailTimes))
		}
		return map[string]any{"attempt": t.Attempt}, nil
	}))
	mux.HandleFunc(failType, func(context.Context, *worker.Task) (any, error) {
		return nil, errors.New("fail: permanent failure by design")
	})
}
