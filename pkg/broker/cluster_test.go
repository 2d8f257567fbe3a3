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

package broker

import (
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// Every script runs unchanged on a three-master Redis Cluster: each touches only
// keys under its queue's hash tag.
func TestScriptsOnCluster(t *testing.T) {
	cc := redistest.StartCluster(t, 3)
	clk := newFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	b := New(cc, WithClock(clk))
	slots := map[int64]bool{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		q := QueueRef{Namespace: "ns", Name: name}
		slots[cc.ClusterKeySlot(ctx, KeyPrefix(q)).Val()/5462] = true
		if err := b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
		ti, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k", Priority: 7})
		if err != nil {
			t.Fatalf("%s submit: %v", name, err)
		}
		if _, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k"}); CodeOf(err) != CodeIdempotencyInProgress {
			t.Fatalf("%s resubmit: %v", name, err)
		}
		ds, err := b.Read(ctx, q, "c", 5, 0)
		if err != nil || len(ds) != 1 {
			t.Fatalf("%s read: %v %v", name, ds, err)
		}
		sr, err := b.Start(ctx, q, "c", ds[0])
		if err != nil || !sr.Run {
			t.Fatalf("%s start: %+v %v", name, sr, err)
		}
		x := Execution{Delivery: ds[0], WorkerID: "c", Attempt: sr.Task.Attempt}
		if lost, err := b.Touch(ctx, q, "c", []Execution{x}); err != nil || len(lost) != 0 {
			t.Fatalf("%s touch: lost %v, %v", name, lost, err)
		}
		if s, err := b.Complete(ctx, q, x, Outcome{Err: "x", Retryable: true}); err != nil || s != StateRetrying {
			t.Fatalf("%s complete: %s %v", name, s, err)
		}
		clk.Step(time.Minute)
		if n, _, err := b.PromoteDue(ctx, q, 10); err != nil || n != 1 {
			t.Fatalf("%s promote: %d %v", name, n, err)
		}
		ds, _ = b.Read(ctx, q, "c", 5, 0)
		sr, _ = b.Start(ctx, q, "c", ds[0])
		// Reclaimed by c2 but not started there: c's execution is still the task's.
		if rc, err := b.Reclaim(ctx, q, "c2", 0, 5); err != nil || len(rc) != 1 {
			t.Fatalf("%s reclaim: %v %v", name, rc, err)
		}
		x = Execution{Delivery: ds[0], WorkerID: "c", Attempt: sr.Task.Attempt}
		if s, err := b.Complete(ctx, q, x, Outcome{Err: "fatal"}); err != nil || s != StateDeadLettered {
			t.Fatalf("%s complete: %s %v", name, s, err)
		}
		if _, err := b.Requeue(ctx, q, ti.Task.ID); err != nil {
			t.Fatalf("%s requeue: %v", name, err)
		}
		if s, err := b.Cancel(ctx, q, ti.Task.ID); err != nil || s != StateCancelled {
			t.Fatalf("%s cancel: %s %v", name, s, err)
		}
		if err := b.Pause(ctx, q); err != nil {
			t.Fatal(err)
		}
		if _, err := b.PurgeDeadLetters(ctx, q); err != nil {
			t.Fatal(err)
		}
		if err := b.RemoveConsumer(ctx, q, "c"); err != nil {
			t.Fatal(err)
		}
		st, err := b.Stats(ctx, q)
		if err != nil || st.Depth != 0 || !st.Paused {
			t.Fatalf("%s stats: %+v %v", name, st, err)
		}
		if evs, err := b.ReadEvents(ctx, q, "0", 100, 0); err != nil || len(evs) < 8 {
			t.Fatalf("%s events: %v %v", name, evs, err)
		}
		if r, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k"}); err != nil || !r.Duplicate {
			t.Fatalf("%s replay: %+v %v", name, r, err)
		}
	}
	if len(slots) < 2 {
		t.Fatalf("queues all on one master; the test would not exercise the cluster")
	}
}

// The flow control scripts run unchanged on Redis Cluster too: every key
// they build is under the queue's hash tag.
func TestFlowScriptsOnCluster(t *testing.T) {
	cc := redistest.StartCluster(t, 3)
	clk := newFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	b := New(cc, WithClock(clk))
	fc := &FlowControl{Rate: &FlowRate{Limit: 100, Period: time.Second, Burst: 10}, MaxConcurrency: 10,
		PerKey: KeyLimits{Concurrency: 1}, Overrides: map[string]KeyOverride{"gold": {Weight: 3}}}
	for _, name := range []string{"a", "b", "c", "d"} {
		q := QueueRef{Namespace: "ns", Name: name}
		cfg := DefaultQueueConfig()
		cfg.Flow = fc
		if err := b.EnsureQueue(ctx, q, cfg); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range []string{"gold", "gold", "x", "y"} {
			r, err := b.Submit(ctx, q, SubmitRequest{Type: "t", FlowKey: k, Priority: 5})
			if err != nil {
				t.Fatalf("%s submit: %v", name, err)
			}
			ids = append(ids, r.Task.ID)
		}
		ss, err := b.ReadStart(ctx, q, "c", "c", 10, 0)
		if err != nil || len(ss) != 3 {
			t.Fatalf("%s read-start: %d %v", name, len(ss), err)
		}
		if ti, err := b.GetTask(ctx, q, ids[1]); err != nil || ti.WaitReason != "key gold at concurrency 1/1" {
			t.Fatalf("%s wait reason: %+v %v", name, ti.WaitReason, err)
		}
		m, err := b.QueueMetrics(ctx, q)
		if err != nil || m.Flow.Held != 3 || m.Flow.Throttled != 1 {
			t.Fatalf("%s metrics: %+v %v", name, m.Flow, err)
		}
		if ks, err := b.FlowKeys(ctx, q, 10); err != nil || len(ks) != 3 {
			t.Fatalf("%s flow keys: %+v %v", name, ks, err)
		}
		xs := make([]Execution, len(ss))
		for i, s := range ss {
			xs[i] = Execution{Delivery: s.Delivery, WorkerID: "c", Attempt: s.Task.Attempt}
		}
		if st, err := b.Complete(ctx, q, xs[0], Outcome{Err: "x", Retryable: true}); err != nil || st != StateRetrying {
			t.Fatalf("%s complete: %s %v", name, st, err)
		}
		if st, err := b.Release(ctx, q, "c", xs[1], false); err != nil || st != StateQueued {
			t.Fatalf("%s release: %s %v", name, st, err)
		}
		clk.Step(time.Minute)
		if n, _, err := b.PromoteDue(ctx, q, 10); err != nil || n != 1 {
			t.Fatalf("%s promote: %d %v", name, n, err)
		}
		if _, err := b.Cancel(ctx, q, ids[1]); err != nil {
			t.Fatalf("%s cancel: %v", name, err)
		}
		if n, err := b.PurgeQueue(ctx, q); err != nil || n != 2 {
			t.Fatalf("%s purge: %d %v", name, n, err)
		}
		if n, err := b.ReconcileFlowSlots(ctx, q); err != nil || n != 0 {
			t.Fatalf("%s reconcile: %d %v", name, n, err)
		}
		if _, err := b.ReadStart(ctx, q, "c", "c", 1, 5*time.Millisecond); err != nil {
			t.Fatalf("%s blocking read-start: %v", name, err)
		}
		cfg.Flow = nil
		if err := b.EnsureQueue(ctx, q, cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Complete(ctx, q, xs[2], Outcome{}); err != nil {
			t.Fatalf("%s complete after disabling: %v", name, err)
		}
	}
}
