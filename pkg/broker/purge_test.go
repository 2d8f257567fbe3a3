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
)

// A purge cancels queued, delayed and retrying tasks (records failed, one
// TaskCancelled event each), in several script calls, and leaves the task a
// worker holds running; the queue is empty afterwards but for that entry.
func TestPurgeQueue(t *testing.T) {
	e := newEnv(t)
	running := e.mustSubmit(SubmitRequest{Priority: 9})
	d, _ := e.deliver("c")
	retrying := e.mustSubmit(SubmitRequest{Priority: 8})
	dr, _ := e.deliver("c")
	e.complete(dr, Outcome{Err: "later", Retryable: true})
	var waiting []string
	for i := range 5 {
		waiting = append(waiting, e.mustSubmit(SubmitRequest{Priority: i % 3, IdempotencyKey: string(rune('a' + i))}).ID)
	}
	waiting = append(waiting, e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Hour)}).ID, retrying.ID)

	n, err := e.b.purgeQueue(ctx, e.q, 2)
	if err != nil || n != 7 {
		t.Fatalf("purged %d, %v; want 7", n, err)
	}
	for _, id := range waiting {
		if got := e.task(id); got.State != StateCancelled {
			t.Errorf("task %s is %s, want Cancelled", id, got.State)
		}
	}
	if r := e.record("a"); r.State != IdempotencyFailed {
		t.Errorf("record %+v, want failed", r)
	}
	if got := e.task(running.ID); got.State != StateRunning {
		t.Errorf("the running task is %s", got.State)
	}
	st, err := e.b.Stats(ctx, e.q)
	if err != nil || st.Depth != 1 || st.InFlight != 1 || st.Scheduled != 0 {
		t.Fatalf("stats after purge %+v, %v; want the running entry only", st, err)
	}
	evs, _ := e.b.ReadEvents(ctx, e.q, "0", 1000, 0)
	cancelled := 0
	for _, ev := range evs {
		if ev.Type == EventCancelled {
			cancelled++
		}
	}
	if cancelled != 7 {
		t.Errorf("%d TaskCancelled events, want 7", cancelled)
	}
	if s := e.complete(d, Outcome{}); s != StateSucceeded {
		t.Errorf("the running task ended %s, want Succeeded", s)
	}
	if n, err := e.b.PurgeQueue(ctx, e.q); err != nil || n != 0 {
		t.Errorf("second purge: %d, %v; want 0", n, err)
	}
}
