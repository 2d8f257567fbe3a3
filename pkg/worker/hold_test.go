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
	"sync/atomic"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// While Config.Hold holds, nothing is read and the worker record says why;
// once it lets go, the task runs.
func TestHoldStopsReads(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var held atomic.Bool
	held.Store(true)
	var ran atomic.Int32
	h := workertest.StartServer(t, rdb, worker.HandlerFunc(func(context.Context, *worker.Task) (any, error) { ran.Add(1); return nil, nil }),
		workertest.Options{HeartbeatInterval: 200 * time.Millisecond, Hold: func() string {
			if held.Load() {
				return "waiting-for-app"
			}
			return ""
		}})
	id := h.Submit("x", nil, workertest.SubmitOptions{})
	b := broker.New(rdb)
	q := broker.QueueRef{Namespace: "default", Name: h.Queue()}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, err := b.Workers(context.Background(), q)
		if err == nil && len(ws) == 1 && ws[0].Status == "waiting-for-app" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers %+v (%v), want status waiting-for-app", ws, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if ti, err := b.GetTask(context.Background(), q, id); err != nil || ti.State != broker.StateQueued || ran.Load() != 0 {
		t.Fatalf("task %s (%v), %d runs while held; want Queued, none", ti.State, err, ran.Load())
	}
	held.Store(false)
	for {
		ti, err := b.GetTask(context.Background(), q, id)
		if err == nil && ti.State == broker.StateSucceeded {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("task %s (%v) after the hold ended", ti.State, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
