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

import "testing"

// Retry runs a Failed task (no dead-letter queue) again with attempt 1, its
// attempts added to PrevAttempts and its record back to processing; the
// same token again changes nothing, a new token retries again.
func TestRetryFailed(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.DeadLetter = false })
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k", MaxAttempts: 1})
	d, _ := e.deliver("c")
	if s := e.complete(d, Outcome{Err: "boom"}); s != StateFailed {
		t.Fatalf("state %s, want Failed", s)
	}
	_, err := e.b.Requeue(ctx, e.q, ti.ID)
	wantCode(t, err, CodeTaskConflict) // a dead-letter requeue needs a dead letter

	got, err := e.b.Retry(ctx, e.q, ti.ID, "uid/1")
	if err != nil || got.State != StateQueued || got.Attempt != 1 || got.PrevAttempts != 1 {
		t.Fatalf("retry: %+v %v; want Queued, attempt 1, 1 previous attempt", got, err)
	}
	if r := e.record("k"); r.State != IdempotencyProcessing || r.TaskID != ti.ID {
		t.Fatalf("record %+v, want processing for %s", r, ti.ID)
	}
	d, _ = e.deliver("c")
	e.complete(d, Outcome{Err: "boom again"})

	again, err := e.b.Retry(ctx, e.q, ti.ID, "uid/1")
	if err != nil || again.State != StateFailed || again.PrevAttempts != 1 {
		t.Fatalf("retry with the applied token: %+v %v; want the Failed task unchanged", again, err)
	}
	next, err := e.b.Retry(ctx, e.q, ti.ID, "uid/2")
	if err != nil || next.State != StateQueued || next.PrevAttempts != 2 {
		t.Fatalf("retry with a new token: %+v %v; want Queued with 2 previous attempts", next, err)
	}
	d, _ = e.deliver("c")
	if s := e.complete(d, Outcome{Result: raw(`{"ok":true}`)}); s != StateSucceeded {
		t.Fatalf("state %s, want Succeeded", s)
	}
	if r := e.record("k"); r.State != IdempotencyCompleted {
		t.Fatalf("record %+v, want completed", r)
	}
}

// Retry of a DeadLettered task removes its dead-letter entry; any state but
// Failed and DeadLettered is a conflict, and the token is required.
func TestRetryStates(t *testing.T) {
	e := newEnv(t)
	dead := e.mustSubmit(SubmitRequest{})
	d, _ := e.deliver("c")
	if s := e.complete(d, Outcome{Err: "bad"}); s != StateDeadLettered {
		t.Fatalf("state %s, want DeadLettered", s)
	}
	if _, err := e.b.Retry(ctx, e.q, dead.ID, "t"); err != nil {
		t.Fatal(err)
	}
	if dl, _ := e.b.DeadLetters(ctx, e.q, 10); len(dl) != 0 {
		t.Fatalf("dead letters after retry: %+v", dl)
	}

	done := e.mustSubmit(SubmitRequest{Priority: 9})
	d, _ = e.deliver("c")
	if d.TaskID != done.ID {
		t.Fatalf("delivered %s, want %s", d.TaskID, done.ID)
	}
	e.complete(d, Outcome{})
	_, err := e.b.Retry(ctx, e.q, done.ID, "t")
	if be := wantCode(t, err, CodeTaskConflict); be.Message != "task "+done.ID+" is Succeeded, not Failed or DeadLettered" {
		t.Fatalf("message %q", be.Message)
	}
	_, err = e.b.Retry(ctx, e.q, dead.ID, "t2") // queued again
	wantCode(t, err, CodeTaskConflict)
	_, err = e.b.Retry(ctx, e.q, "missing", "t")
	wantCode(t, err, CodeTaskNotFound)
	_, err = e.b.Retry(ctx, e.q, dead.ID, "")
	wantCode(t, err, CodeInvalidTask)
}
