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
	"context"
	"encoding/json"
	"testing"

	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// The counter counts a task once even when the IdempotentOperation record of
// an applied increment is missing (Redis died after the INCR and before its
// reply, so fn's result was never stored and the task ran again).
func TestCounterIncrementIsIdempotent(t *testing.T) {
	rdb := redistest.Start(t).Client()
	mux := worker.NewMux()
	Register(mux, rdb)
	ctx := context.Background()
	task := &worker.Task{ID: "t1", Type: Counter, Queue: "ns/q", IdempotencyKey: "k", Payload: json.RawMessage(`{"name":"x"}`)}
	for run := range 2 {
		if _, err := mux.ProcessTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, task.AppKey("counter-op:q:k")).Err(); err != nil { // as if never stored
			t.Fatal(err)
		}
		if n, _ := rdb.Get(ctx, CounterKey("ns", "x")).Int(); n != 1 {
			t.Fatalf("run %d: counter %d, want 1", run+1, n)
		}
	}
}

// The gate handler fails while its gate is closed and succeeds once it opens.
func TestGate(t *testing.T) {
	rdb := redistest.Start(t).Client()
	mux := worker.NewMux()
	Register(mux, rdb)
	ctx := context.Background()
	task := &worker.Task{ID: "t1", Type: Gate, Queue: "ns/q", Payload: json.RawMessage(`{"name":"billing"}`)}
	if _, err := mux.ProcessTask(ctx, task); err == nil {
		t.Fatal("the gate is closed, yet the task succeeded")
	}
	if err := rdb.Set(ctx, GateKey("ns", "billing"), "open", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := mux.ProcessTask(ctx, task); err != nil {
		t.Fatalf("the gate is open, yet the task failed: %v", err)
	}
}
