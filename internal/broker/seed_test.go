package broker

// One test per rule of the seed (shared/spec/idempotency.md); each quotes it.

import (
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
// processing and its task is ingested normally."
func TestSeed_Case1_AcquireCreatesProcessingRecord(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k1"})
	r := e.record("k1")
	if r.TaskID != ti.ID || r.State != IdempotencyProcessing || !r.UpdatedAt.Equal(e.clock.Now()) {
		t.Fatalf("record %+v, task %s", r, ti.ID)
	}
	ttl := e.rdb.PTTL(ctx, keysFor(e.q).idempotency("k1")).Val()
	if ttl <= 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("record TTL %v, want 24h", ttl)
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
// follow-up GET, the code retries the claim" - here the decision is one script,
// so a record that is gone at submission simply means a new claim.
func TestSeed_Case4_VanishedRecordIsClaimedAgain(t *testing.T) {
	e := newEnv(t)
	first := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	e.rdb.Del(ctx, keysFor(e.q).idempotency("k"))
	second := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	if second.ID == first.ID || e.record("k").TaskID != second.ID {
		t.Fatalf("want a new claim, got %s (first %s)", second.ID, first.ID)
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
// exists) and KEEPTTL, preserving the original expiry": the TTL does not grow.
func TestSeed_CompletionKeepsTTL(t *testing.T) {
	e := newEnv(t)
	e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	rk := keysFor(e.q).idempotency("k")
	e.rdb.PExpire(ctx, rk, time.Minute)
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	if ttl := e.rdb.PTTL(ctx, rk).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL after completion %v, want <= 1m (kept)", ttl)
	}
	// XX: a record that expired is not recreated by the completion.
	e.mustSubmit(SubmitRequest{IdempotencyKey: "gone"})
	d, _ = e.deliver("c")
	e.rdb.Del(ctx, keysFor(e.q).idempotency("gone"))
	e.complete(d, Outcome{})
	if _, err := e.b.Idempotency(ctx, e.q, "gone"); CodeOf(err) != CodeTaskNotFound {
		t.Fatalf("completion recreated an expired record: %v", err)
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
