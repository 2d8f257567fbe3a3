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

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dtq-dev/dtq/internal/testutil/redistest"
)

// Every script runs unchanged on a three-master Redis Cluster: each touches only
// keys under its queue's hash tag.
func TestScriptsOnCluster(t *testing.T) {
	cc := redistest.StartCluster(t, 3)
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
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
