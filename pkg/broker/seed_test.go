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

// One test per rule of the seed (shared/spec/idempotency.md); each quotes it.

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// "The key is scoped to (queue, key): the same key on different queues refers to
// different records." Two namespaces never share keys either.
func TestSeed_ScopeIsPerQueue(t *testing.T) {
	e := newEnv(t)
	other := QueueRef{Namespace: "ns", Name: "other"}
	otherNS := QueueRef{Namespace: "ns2", Name: "q"}
	for _, q := range []QueueRef{other, otherNS} {
		if err := e.b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	a := e.mustSubmit(SubmitRequest{IdempotencyKey: "same"})
	ids := map[string]bool{a.ID: true}
	for _, q := range []QueueRef{other, otherNS} {
		r, err := e.b.Submit(ctx, q, SubmitRequest{Type: "demo", IdempotencyKey: "same"})
		if err != nil || r.Duplicate || ids[r.Task.ID] {
			t.Fatalf("queue %s: %+v %v, want a new task", q, r, err)
		}
		ids[r.Task.ID] = true
	}
}

// "1. Acquire with SET NX EX DTQ_IDEM_TTL_S. The winner's record starts as
// processing and its task is ingested normally." dtq acquires with SET NX and
// no expiry: the TTL starts when the task ends
// (TestSeed_RecordGetsItsTTLWhenTheTaskEnds).
func TestSeed_Case1_AcquireCreatesProcessingRecord(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k1"})
	r := e.record("k1")
	if r.TaskID != ti.ID || r.State != IdempotencyProcessing || !r.UpdatedAt.Equal(e.clock.Now()) {
		t.Fatalf("record %+v, task %s", r, ti.ID)
	}
	if ttl := e.rdb.PTTL(ctx, keysFor(e.q).idempotency("k1")).Val(); ttl != -1 {
		t.Fatalf("record TTL %v, want none while the task is not terminal", ttl)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Bands[0] != 1 {
		t.Fatalf("task not queued: %+v", st)
	}
}

// "2. Key present, state processing -> the submission is rejected with 409, code
// IDEMPOTENCY_IN_PROGRESS, including the in-flight task_id."
func TestSeed_Case2_ProcessingIsInProgressWithTaskID(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	_, err := e.submit(SubmitRequest{IdempotencyKey: "k"})
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.TaskID != ti.ID {
		t.Fatalf("TaskID %q, want %q", be.TaskID, ti.ID)
	}
}

// "3. Key present, state completed or failed -> the stored task is returned with
// 200 and duplicate: true. No second logical task is created."
func TestSeed_Case3_CompletedOrFailedReplaysDuplicate(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.DeadLetter = false })
	ok := e.mustSubmit(SubmitRequest{IdempotencyKey: "ok"})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Result: raw(`{"n":1}`)})
	bad := e.mustSubmit(SubmitRequest{IdempotencyKey: "bad", MaxAttempts: 1})
	d, _ = e.deliver("c")
	e.complete(d, Outcome{Err: "boom"})
	for key, want := range map[string]TaskInfo{"ok": ok, "bad": bad} {
		r, err := e.submit(SubmitRequest{IdempotencyKey: key})
		if err != nil || !r.Duplicate || r.Task.ID != want.ID {
			t.Fatalf("%s: %+v %v, want replay of %s", key, r, err, want.ID)
		}
	}
	r, _ := e.submit(SubmitRequest{IdempotencyKey: "ok"})
	if string(r.Task.Result) != `{"n":1}` || r.Task.State != StateSucceeded {
		t.Fatalf("replay lacks the stored task: %+v", r.Task)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 0 {
		t.Fatalf("a replay queued work: %+v", st)
	}
}

// "4. Race on expiry: if the record vanishes between the failed SET NX and the
// follow-up GET, the code retries the claim once rather than erroring." Here
// the decision is one script, so the race cannot interleave; the test runs it
// for real: a completed record expires (Redis's clock) while 16 submitters
// hammer its key. Every call gets an answer (replay of the old task while the
// record lives, then exactly one new claim, in progress for all others): no
// error, and never two new tasks for one key.
func TestSeed_Case4_RecordExpiringUnderConcurrentSubmits(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.IdempotencyTTL = 30 * time.Millisecond })
	old := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	var mu sync.Mutex
	replays, created, busy := 0, map[string]bool{}, map[string]int{}
	var wg sync.WaitGroup
	stop := time.Now().Add(300 * time.Millisecond)
	for range 16 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				r, err := e.b.Submit(ctx, e.q, SubmitRequest{Type: "demo", IdempotencyKey: "k"})
				var be *Error
				mu.Lock()
				switch {
				case err == nil && r.Duplicate && r.Task.ID == old.ID:
					replays++
				case err == nil && !r.Duplicate:
					created[r.Task.ID] = true
				case errors.As(err, &be) && be.Code == CodeIdempotencyInProgress:
					busy[be.TaskID]++
				default:
					t.Errorf("submit: %+v %v", r, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(created) != 1 || replays == 0 {
		t.Fatalf("%d replays of the old task, %d new tasks: want replays, then exactly one new task", replays, len(created))
	}
	for id := range busy {
		if !created[id] {
			t.Fatalf("in progress named %s, not the one new task %v", id, created)
		}
	}
	if rec := e.record("k"); !created[rec.TaskID] || rec.State != IdempotencyProcessing {
		t.Fatalf("record %+v", rec)
	}
}

// "5. Stale record: if the record points at a task hash that no longer exists
// (retention expiry), ingest deletes the record and re-acquires it, creating a
// fresh logical task."
func TestSeed_Case5_StaleRecordIsNewWork(t *testing.T) {
	e := newEnv(t)
	first := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	e.rdb.Del(ctx, keysFor(e.q).task(first.ID))
	r, err := e.submit(SubmitRequest{IdempotencyKey: "k"})
	if err != nil || r.Duplicate || r.Task.ID == first.ID {
		t.Fatalf("%+v %v, want fresh task", r, err)
	}
	if rec := e.record("k"); rec.TaskID != r.Task.ID || rec.State != IdempotencyProcessing {
		t.Fatalf("record %+v", rec)
	}
}

// "Replay is read-only and happens before the queue-depth check, so replaying a
// completed key is never blocked by backpressure." And a full queue writes nothing.
func TestSeed_ReplayBeforeDepthGate(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.MaxDepth = 1 })
	done := e.mustSubmit(SubmitRequest{IdempotencyKey: "done"})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	e.mustSubmit(SubmitRequest{IdempotencyKey: "fill"})
	r, err := e.submit(SubmitRequest{IdempotencyKey: "done"})
	if err != nil || !r.Duplicate || r.Task.ID != done.ID {
		t.Fatalf("replay blocked: %+v %v", r, err)
	}
	before := e.rdb.DBSize(ctx).Val()
	_, err = e.submit(SubmitRequest{IdempotencyKey: "new"})
	if be := wantCode(t, err, CodeQueueFull); be.Depth != 1 || be.Limit != 1 {
		t.Fatalf("%+v", be)
	}
	if after := e.rdb.DBSize(ctx).Val(); after != before {
		t.Fatalf("QUEUE_FULL wrote keys: %d -> %d", before, after)
	}
	if _, err := e.b.Idempotency(ctx, e.q, "new"); CodeOf(err) != CodeTaskNotFound {
		t.Fatalf("record written on QUEUE_FULL: %v", err)
	}
}

// "SUCCEEDED -> record to completed."
func TestSeed_WorkerSucceededMapsToCompleted(t *testing.T) {
	e := newEnv(t)
	e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	d, _ := e.deliver("c")
	if s := e.complete(d, Outcome{}); s != StateSucceeded {
		t.Fatal(s)
	}
	if r := e.record("k"); r.State != IdempotencyCompleted {
		t.Fatalf("%+v", r)
	}
}

// "FAILED / DEAD_LETTERED -> record to failed."
func TestSeed_WorkerFailedAndDeadLetteredMapToFailed(t *testing.T) {
	for _, dlq := range []bool{false, true} {
		e := newEnv(t, func(c *QueueConfig) { c.DeadLetter = dlq })
		e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
		d, _ := e.deliver("c")
		want := StateFailed
		if dlq {
			want = StateDeadLettered
		}
		if s := e.complete(d, Outcome{Err: "permanent"}); s != want {
			t.Fatalf("dlq=%v: state %s, want %s", dlq, s, want)
		}
		if r := e.record("k"); r.State != IdempotencyFailed {
			t.Fatalf("dlq=%v: %+v", dlq, r)
		}
	}
}

// "CANCELLED / EXPIRED -> record to failed." (queued cancel, running cancel,
// expiry before start)
func TestSeed_WorkerCancelledAndExpiredMapToFailed(t *testing.T) {
	e := newEnv(t)
	queued := e.mustSubmit(SubmitRequest{IdempotencyKey: "queued"})
	if s, err := e.b.Cancel(ctx, e.q, queued.ID); err != nil || s != StateCancelled {
		t.Fatalf("%s %v", s, err)
	}
	running := e.mustSubmit(SubmitRequest{IdempotencyKey: "running"})
	d, _ := e.deliver("c")
	if s, err := e.b.Cancel(ctx, e.q, running.ID); err != nil || s != StateRunning {
		t.Fatalf("%s %v", s, err)
	}
	if ids, _ := e.b.CancelRequested(ctx, e.q, []string{running.ID, queued.ID}); len(ids) != 1 || ids[0] != running.ID {
		t.Fatalf("cancel requested %v", ids)
	}
	if s := e.complete(d, Outcome{Cancelled: true}); s != StateCancelled {
		t.Fatal(s)
	}
	e.mustSubmit(SubmitRequest{IdempotencyKey: "expired", ExpiresAt: e.clock.Now().Add(time.Second)})
	e.clock.Step(2 * time.Second)
	ds, _ := e.b.Read(ctx, e.q, "c", 10, 0)
	if len(ds) != 1 {
		t.Fatalf("deliveries %v", ds)
	}
	if sr, _ := e.b.Start(ctx, e.q, "c", ds[0]); sr.Run || sr.Reason != "expired" || sr.Task.State != StateExpired {
		t.Fatalf("%+v", sr)
	}
	for _, k := range []string{"queued", "running", "expired"} {
		if r := e.record(k); r.State != IdempotencyFailed {
			t.Fatalf("%s: %+v", k, r)
		}
	}
}

// "RETRYING -> record stays processing. ... a resubmission still gets 409 until
// it finishes."
func TestSeed_WorkerRetryingStaysProcessing(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	d, _ := e.deliver("c")
	if s := e.complete(d, Outcome{Err: "flaky", Retryable: true}); s != StateRetrying {
		t.Fatal(s)
	}
	if r := e.record("k"); r.State != IdempotencyProcessing {
		t.Fatalf("%+v", r)
	}
	_, err := e.submit(SubmitRequest{IdempotencyKey: "k"})
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.TaskID != ti.ID {
		t.Fatal(be)
	}
}

// "Tasks submitted without a key have no record; complete_idem is a no-op for them."
func TestSeed_NoKeyNoRecord(t *testing.T) {
	e := newEnv(t)
	e.mustSubmit(SubmitRequest{})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	if n := len(e.rdb.Keys(ctx, KeyPrefix(e.q)+"idempotency:*").Val()); n != 0 {
		t.Fatalf("%d idempotency records", n)
	}
}

// "dtq_worker.idem.complete_idem writes with SET ... XX (only if the record
// exists) and KEEPTTL, preserving the original expiry": dtq keeps the XX, but
// a record has no expiry while its task is not terminal (TestIdempotency-
// WindowCoversDelay), so the terminal write gives it the idempotency TTL,
// counted from the end. A retry keeps it without expiry.
func TestSeed_RecordGetsItsTTLWhenTheTaskEnds(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.IdempotencyTTL = time.Minute })
	e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	rk := keysFor(e.q).idempotency("k")
	if ttl := e.rdb.PTTL(ctx, rk).Val(); ttl != -1 {
		t.Fatalf("TTL of a processing record %v, want none", ttl)
	}
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Err: "flaky", Retryable: true})
	if ttl := e.rdb.PTTL(ctx, rk).Val(); ttl != -1 {
		t.Fatalf("TTL of a retrying task's record %v, want none", ttl)
	}
	e.clock.Step(time.Minute)
	if _, _, err := e.b.PromoteDue(ctx, e.q, 10); err != nil {
		t.Fatal(err)
	}
	d, _ = e.deliver("c")
	e.complete(d, Outcome{})
	if ttl := e.rdb.PTTL(ctx, rk).Val(); ttl <= 50*time.Second || ttl > time.Minute {
		t.Fatalf("TTL after completion %v, want the idempotency TTL (1m)", ttl)
	}
	// XX: a record that vanished is not recreated by the completion.
	e.mustSubmit(SubmitRequest{IdempotencyKey: "gone"})
	d, _ = e.deliver("c")
	e.rdb.Del(ctx, keysFor(e.q).idempotency("gone"))
	e.complete(d, Outcome{})
	if _, err := e.b.Idempotency(ctx, e.q, "gone"); CodeOf(err) != CodeTaskNotFound {
		t.Fatalf("completion recreated a vanished record: %v", err)
	}
}

// The idempotency window covers the task's life: with idempotencyTTL 5s, a
// keyed task delayed 10s still owns its key at 7s, so a second submission is
// in progress (a duplicate of the first), not new work. Real seconds: the
// record's expiry is Redis's clock, not the test's.
func TestIdempotencyWindowCoversDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *QueueConfig) { c.IdempotencyTTL = 5 * time.Second })
	first := e.mustSubmit(SubmitRequest{IdempotencyKey: "k", NotBefore: e.clock.Now().Add(10 * time.Second)})
	time.Sleep(7 * time.Second)
	_, err := e.submit(SubmitRequest{IdempotencyKey: "k"})
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.TaskID != first.ID {
		t.Fatalf("second submission at 7s names %s, want %s", be.TaskID, first.ID)
	}
	e.clock.Step(10 * time.Second)
	if n, _, _ := e.b.PromoteDue(ctx, e.q, 10); n != 1 {
		t.Fatalf("promoted %d", n)
	}
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	if r, err := e.submit(SubmitRequest{IdempotencyKey: "k"}); err != nil || !r.Duplicate || r.Task.ID != first.ID {
		t.Fatalf("after completion: %+v %v, want a replay of %s", r, err, first.ID)
	}
}

// "On DLQ requeue (admin), the record is reset to processing so that a
// resubmission with the same key gets 409."
func TestSeed_DLQRequeueGives409(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Err: "permanent"})
	if r, err := e.submit(SubmitRequest{IdempotencyKey: "k"}); err != nil || !r.Duplicate {
		t.Fatalf("before requeue: %+v %v", r, err)
	}
	rq, err := e.b.Requeue(ctx, e.q, ti.ID)
	if err != nil || rq.State != StateQueued || rq.Attempt != 1 {
		t.Fatalf("requeue: %+v %v", rq, err)
	}
	if r := e.record("k"); r.State != IdempotencyProcessing {
		t.Fatalf("%+v", r)
	}
	_, err = e.submit(SubmitRequest{IdempotencyKey: "k"})
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.TaskID != ti.ID {
		t.Fatal(be)
	}
}

// "A resubmission with the same key after a cancel replays the cancelled task
// (duplicate: true); it does not create a new task and does not return 409."
func TestSeed_CancelledThenResubmittedReplaysDuplicate(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	if _, err := e.b.Cancel(ctx, e.q, ti.ID); err != nil {
		t.Fatal(err)
	}
	r, err := e.submit(SubmitRequest{IdempotencyKey: "k"})
	if err != nil || !r.Duplicate || r.Task.ID != ti.ID || r.Task.State != StateCancelled {
		t.Fatalf("%+v %v", r, err)
	}
}

// "TTL expiry. Records live DTQ_IDEM_TTL_S. After expiry, the same key submits
// a brand-new logical task."
func TestSeed_TTLExpiryAllowsNewTask(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.IdempotencyTTL = 50 * time.Millisecond })
	first := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	deadline := time.Now().Add(5 * time.Second)
	for e.rdb.Exists(ctx, keysFor(e.q).idempotency("k")).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("record never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r, err := e.submit(SubmitRequest{IdempotencyKey: "k"})
	if err != nil || r.Duplicate || r.Task.ID == first.ID {
		t.Fatalf("%+v %v", r, err)
	}
}
