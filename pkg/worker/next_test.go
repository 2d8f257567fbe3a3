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

// A slot that finishes a task reads its next one with the completion
// (CompleteNext). These tests show what must still stop it: a due reclaim,
// the drain, and Config.Hold.

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

// A worker whose slots never run dry (a producer keeps the queue full)
// still reclaims a dead peer's entry after the visibility timeout.
func TestBusyWorkerStillReclaims(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	o := workertest.Options{Queue: workertest.NewQueueName(), Concurrency: 2, VisibilityTimeout: 500 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond}
	workertest.EnsureQueue(t, rdb, o)
	q := broker.QueueRef{Namespace: "default", Name: o.Queue}
	dead := workertest.Submit(t, rdb, o, "work", nil, workertest.SubmitOptions{})
	if ss, err := broker.New(rdb).ReadStart(context.Background(), q, "dead-peer", "dead-peer", 1, 0); err != nil || len(ss) != 1 || ss[0].TaskID != dead {
		t.Fatalf("the dead peer's read: %+v %v", ss, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { // keep at least 20 tasks queued
		for ctx.Err() == nil {
			if st, err := broker.New(rdb).Stats(ctx, q); err == nil && st.Queued < 20 {
				workertest.Submit(t, rdb, o, "work", nil, workertest.SubmitOptions{})
				continue
			}
			time.Sleep(time.Millisecond)
		}
	}()
	mux := worker.NewMux()
	mux.HandleFunc("work", func(context.Context, *worker.Task) (any, error) { time.Sleep(2 * time.Millisecond); return nil, nil })
	h := workertest.StartServer(t, rdb, mux, o)
	if st := h.Wait(dead, waitFor); st.State != "Succeeded" || st.Attempt != 2 {
		t.Fatalf("the dead peer's task: %s attempt %d, want Succeeded on attempt 2", st.State, st.Attempt)
	}
}

// Stopping a worker with a backlog: the tasks in flight finish, the rest
// stay Queued (no slot keeps reading next tasks into the drain).
func TestDrainStopsNextReads(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	o := workertest.Options{Queue: workertest.NewQueueName(), Concurrency: 2}
	workertest.EnsureQueue(t, rdb, o)
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = workertest.Submit(t, rdb, o, "work", nil, workertest.SubmitOptions{})
	}
	var done atomic.Int32
	mux := worker.NewMux()
	mux.HandleFunc("work", func(context.Context, *worker.Task) (any, error) {
		time.Sleep(20 * time.Millisecond)
		done.Add(1)
		return nil, nil
	})
	h := workertest.StartServer(t, rdb, mux, o)
	for done.Load() < 10 {
		time.Sleep(5 * time.Millisecond)
	}
	h.Stop()
	var succeeded, queued int
	for _, id := range ids {
		switch st := h.Get(id); st.State {
		case "Succeeded":
			succeeded++
		case "Queued":
			queued++
		default:
			t.Errorf("task %s is %s after the drain, want Succeeded or Queued", id, st.State)
		}
	}
	if queued < 150 {
		t.Errorf("%d succeeded, %d queued after stopping at about 10: the drain kept reading", succeeded, queued)
	}
}

// Config.Hold stops the slots' next reads too: once it holds, at most the
// tasks already read finish.
func TestHoldStopsNextReads(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var held atomic.Bool
	var ran atomic.Int32
	h := workertest.StartServer(t, rdb, worker.HandlerFunc(func(context.Context, *worker.Task) (any, error) {
		time.Sleep(20 * time.Millisecond)
		ran.Add(1)
		return nil, nil
	}), workertest.Options{Concurrency: 2, VisibilityTimeout: worker.DefaultVisibilityTimeout, Hold: func() string {
		// (the default visibility timeout: with the harness's 2 s a reclaim
		// would be due so often that it, not Hold, stopped the next reads)
		if held.Load() {
			return "held"
		}
		return ""
	}})
	for range 200 {
		h.Submit("work", nil, workertest.SubmitOptions{})
	}
	for ran.Load() < 10 {
		time.Sleep(5 * time.Millisecond)
	}
	held.Store(true)
	time.Sleep(200 * time.Millisecond) // the two tasks in flight finish
	before := ran.Load()
	time.Sleep(500 * time.Millisecond)
	if after := ran.Load(); after != before {
		t.Errorf("%d tasks ran while held (from %d to %d)", after-before, before, after)
	}
}
