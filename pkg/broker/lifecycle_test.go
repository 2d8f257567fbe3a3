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
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// 200 goroutines submit the same (queue, key) at once, 20 rounds: exactly one
// task per round; every loser gets in-progress or a replay with the winner's id.
func TestConcurrentSubmitSameKey(t *testing.T) {
	e := newEnv(t)
	for round := range 20 {
		key := "round-" + string(rune('a'+round))
		type res struct {
			id  string
			new bool
			err error
		}
		out := make([]res, 200)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range out {
			wg.Go(func() {
				<-start
				r, err := e.b.Submit(ctx, e.q, SubmitRequest{Type: "demo", IdempotencyKey: key})
				if err != nil {
					out[i] = res{err: err}
					if be := (*Error)(nil); errors.As(err, &be) {
						out[i].id = be.TaskID
					}
					return
				}
				out[i] = res{id: r.Task.ID, new: !r.Duplicate}
			})
		}
		close(start)
		wg.Wait()
		winner := ""
		for _, r := range out {
			if r.new {
				if winner != "" {
					t.Fatalf("round %d: two tasks created (%s, %s)", round, winner, r.id)
				}
				winner = r.id
			}
		}
		if winner == "" {
			t.Fatalf("round %d: no task created", round)
		}
		for _, r := range out {
			if r.new {
				continue
			}
			if r.err != nil && CodeOf(r.err) != CodeIdempotencyInProgress {
				t.Fatalf("round %d: loser error %v", round, r.err)
			}
			if r.id != winner {
				t.Fatalf("round %d: loser saw task %q, winner %q", round, r.id, winner)
			}
		}
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 20 {
		t.Fatalf("depth %d, want 20", st.Depth)
	}
}

// Crash window: a worker runs the handler but dies before Complete. After the
// visibility timeout another consumer reclaims the entry, the attempt is
// counted, and the record stays processing until the completion.
func TestCrashWindowReclaimCountsAttempt(t *testing.T) {
	const visibility = 200 * time.Millisecond
	e := newEnv(t, func(c *QueueConfig) { c.VisibilityTimeout = visibility })
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	e.deliver("dead-worker") // never completed
	if ds, _ := e.b.Reclaim(ctx, e.q, "peer", visibility, 10); len(ds) != 0 {
		t.Fatalf("reclaimed before the visibility timeout: %v", ds)
	}
	var ds []Delivery
	deadline := time.Now().Add(5 * time.Second)
	for len(ds) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		ds, _ = e.b.Reclaim(ctx, e.q, "peer", visibility, 10)
	}
	if len(ds) != 1 || !ds[0].Reclaimed || ds[0].TaskID != ti.ID {
		t.Fatalf("reclaim: %+v", ds)
	}
	x, run := e.start("peer", ds[0])
	if run.Attempt != 2 || run.WorkerID != "peer" {
		t.Fatalf("start after reclaim: %+v", run)
	}
	if r := e.record("k"); r.State != IdempotencyProcessing {
		t.Fatalf("record before completion: %+v", r)
	}
	if s := e.complete(x, Outcome{}); s != StateSucceeded {
		t.Fatal(s)
	}
	if r := e.record("k"); r.State != IdempotencyCompleted {
		t.Fatalf("record after completion: %+v", r)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 0 || st.InFlight != 0 {
		t.Fatalf("entry left behind: %+v", st)
	}
}

// A task that kills its worker every time ends dead-lettered after maxAttempts
// executions (original defect 4: crash loops must be bounded).
func TestCrashLoopIsBoundedByMaxAttempts(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k", MaxAttempts: 3})
	e.deliver("w0")
	for i := 1; ; i++ {
		e.clock.Step(time.Minute) // a reclaim follows the visibility timeout
		ds, err := e.b.Reclaim(ctx, e.q, "w", 0, 10)
		if err != nil || len(ds) != 1 {
			t.Fatalf("reclaim %d: %v %v", i, ds, err)
		}
		sr, _ := e.b.Start(ctx, e.q, "w", ds[0])
		if i < 3 {
			if !sr.Run || sr.Task.Attempt != i+1 {
				t.Fatalf("redelivery %d: %+v", i, sr)
			}
			continue
		}
		if sr.Run || sr.Reason != "exhausted" || sr.Task.State != StateDeadLettered {
			t.Fatalf("redelivery %d should exhaust: %+v", i, sr)
		}
		break
	}
	if r := e.record("k"); r.State != IdempotencyFailed {
		t.Fatalf("%+v", r)
	}
	dl, _ := e.b.DeadLetters(ctx, e.q, 10)
	if len(dl) != 1 || dl[0].TaskID != ti.ID || dl[0].Attempts != 3 {
		t.Fatalf("dead letters %+v", dl)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 0 {
		t.Fatalf("%+v", st)
	}
}

// Duplicate entries are absorbed, never run twice as new work.
func TestDuplicateEntryAbsorbed(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{Priority: 3})
	e.rdb.XAdd(ctx, redisXAdd{stream: keysFor(e.q).stream(3), id: ti.ID}.args())
	ds, _ := e.b.Read(ctx, e.q, "c", 10, 0)
	if len(ds) != 2 {
		t.Fatalf("%v", ds)
	}
	first, _ := e.b.Start(ctx, e.q, "c", ds[0])
	second, _ := e.b.Start(ctx, e.q, "c", ds[1])
	if !first.Run || second.Run || second.Reason != "duplicate" {
		t.Fatalf("first %+v second %+v", first, second)
	}
	// A stale entry of an earlier attempt is absorbed too.
	e.complete(Execution{Delivery: ds[0], WorkerID: "c", Attempt: first.Task.Attempt}, Outcome{Err: "x", Retryable: true})
	e.clock.Step(time.Minute)
	if _, _, err := e.b.PromoteDue(ctx, e.q, 10); err != nil {
		t.Fatal(err)
	}
	e.rdb.XAdd(ctx, redisXAdd{stream: keysFor(e.q).stream(3), id: ti.ID}.args())
	ds, _ = e.b.Read(ctx, e.q, "c", 10, 0)
	var ran int
	for _, d := range ds {
		if sr, _ := e.b.Start(ctx, e.q, "c", d); sr.Run {
			ran++
			if sr.Task.Attempt != 2 {
				t.Fatalf("%+v", sr.Task)
			}
		}
	}
	if ran != 1 {
		t.Fatalf("ran %d of %d entries", ran, len(ds))
	}
}

// Retry with backoff through the schedule: Retrying -> (due) Queued attempt+1.
func TestRetryBackoffAndPromote(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Err: "line1\nline2", ErrorClass: "Flaky", Retryable: true})
	got := e.task(ti.ID)
	delay := got.AvailableAt.Sub(e.clock.Now())
	if got.State != StateRetrying || delay < 800*time.Millisecond || delay > 1200*time.Millisecond || got.LastError != "line1 line2" {
		t.Fatalf("after retryable failure: %+v (delay %v)", got, delay)
	}
	if n, next, _ := e.b.PromoteDue(ctx, e.q, 10); n != 0 || !next.Equal(got.AvailableAt) {
		t.Fatalf("promoted early: %d %v", n, next)
	}
	e.clock.Step(2 * time.Second)
	if n, next, _ := e.b.PromoteDue(ctx, e.q, 10); n != 1 || !next.IsZero() {
		t.Fatalf("promote: %d %v", n, next)
	}
	d, run := e.deliver("c")
	// The start's reply is the task as stored after the start (the hash as
	// read, the start's writes over it): no finished_at of the failed attempt.
	if stored := e.task(ti.ID); run.Attempt != 2 || !run.FinishedAt.IsZero() || !reflect.DeepEqual(run, stored) {
		t.Fatalf("started %+v\nstored  %+v", run, stored)
	}
	e.complete(d, Outcome{})
	// The last attempt's retryable failure is final.
	e.mustSubmit(SubmitRequest{MaxAttempts: 1})
	d, _ = e.deliver("c")
	if s := e.complete(d, Outcome{Err: "x", Retryable: true}); s != StateDeadLettered {
		t.Fatal(s)
	}
}

// A Retrying task whose TTL passed ends Expired on promotion (original defect 3).
func TestRetryingTaskExpiresOnPromote(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k", ExpiresAt: e.clock.Now().Add(1500 * time.Millisecond)})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Err: "x", Retryable: true})
	e.clock.Step(5 * time.Second)
	if n, _, _ := e.b.PromoteDue(ctx, e.q, 10); n != 0 {
		t.Fatalf("moved %d", n)
	}
	if got := e.task(ti.ID); got.State != StateExpired {
		t.Fatalf("%+v", got)
	}
	if r := e.record("k"); r.State != IdempotencyFailed {
		t.Fatalf("%+v", r)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Scheduled != 0 || st.Depth != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestDelayedTask(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Minute)})
	if ti.State != StatePending {
		t.Fatal(ti.State)
	}
	if ds, _ := e.b.Read(ctx, e.q, "c", 1, 0); len(ds) != 0 {
		t.Fatalf("delivered early %v", ds)
	}
	if s, err := e.b.Cancel(ctx, e.q, e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Second)}).ID); s != StateCancelled || err != nil {
		t.Fatal(s, err)
	}
	e.clock.Step(time.Minute)
	if n, _, _ := e.b.PromoteDue(ctx, e.q, 10); n != 1 {
		t.Fatalf("moved %d", n)
	}
	_, run := e.deliver("c")
	if run.ID != ti.ID || run.Attempt != 1 {
		t.Fatalf("%+v", run)
	}
}

// Delayed tasks count toward maxDepth, and so do retrying ones: the gate
// counts every unfinished task, so a flood of delayed work cannot bypass
// backpressure.
func TestDelayedTasksCountTowardMaxDepth(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.MaxDepth = 3 })
	later := e.clock.Now().Add(time.Hour)
	e.mustSubmit(SubmitRequest{NotBefore: later})
	e.mustSubmit(SubmitRequest{NotBefore: later})
	e.mustSubmit(SubmitRequest{})
	_, err := e.submit(SubmitRequest{NotBefore: later})
	if be := wantCode(t, err, CodeQueueFull); be.Depth != 3 || be.Limit != 3 {
		t.Fatalf("QUEUE_FULL %+v, want depth 3 of 3", be)
	}
	// The queued one fails retryably: it moves to the schedule and still counts.
	d, _ := e.deliver("c")
	if s := e.complete(d, Outcome{Err: "x", Retryable: true}); s != StateRetrying {
		t.Fatal(s)
	}
	_, err = e.submit(SubmitRequest{})
	wantCode(t, err, CodeQueueFull)
	// A finished task frees its place.
	e.clock.Step(2 * time.Hour)
	if _, _, err := e.b.PromoteDue(ctx, e.q, 10); err != nil {
		t.Fatal(err)
	}
	d, _ = e.deliver("c")
	e.complete(d, Outcome{})
	e.mustSubmit(SubmitRequest{})
}

// A finished task's payload is dropped from Redis when it succeeded, was
// cancelled or expired (it never runs again; its result and idempotency record
// stay), and kept when it failed or was dead-lettered: those can be requeued
// or retried.
func TestFinishedTaskPayload(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.DeadLetter = true })
	p := raw(`{"order":42}`)
	ok := e.mustSubmit(SubmitRequest{Payload: p, IdempotencyKey: "ok"})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Result: raw(`{"done":true}`)})
	got := e.task(ok.ID)
	if got.State != StateSucceeded || got.Payload != nil || string(got.Result) != `{"done":true}` {
		t.Fatalf("succeeded: %+v, want no payload and the result", got)
	}
	if r := e.record("ok"); r.State != IdempotencyCompleted {
		t.Fatalf("record %+v", r)
	}
	cancelled := e.mustSubmit(SubmitRequest{Payload: p})
	if _, err := e.b.Cancel(ctx, e.q, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	expired := e.mustSubmit(SubmitRequest{Payload: p, ExpiresAt: e.clock.Now().Add(time.Second)})
	e.clock.Step(2 * time.Second)
	if ds, _ := e.b.Read(ctx, e.q, "c", 10, 0); len(ds) != 1 {
		t.Fatalf("read %v", ds)
	} else if sr, _ := e.b.Start(ctx, e.q, "c", ds[0]); sr.Reason != "expired" {
		t.Fatalf("%+v", sr)
	}
	for _, id := range []string{cancelled.ID, expired.ID} {
		if got := e.task(id); !got.State.Terminal() || got.Payload != nil {
			t.Fatalf("%s: %s with payload %s, want none", id, got.State, got.Payload)
		}
	}
	dead := e.mustSubmit(SubmitRequest{Payload: p})
	d, _ = e.deliver("c")
	e.complete(d, Outcome{Err: "permanent"})
	if got := e.task(dead.ID); got.State != StateDeadLettered || string(got.Payload) != string(p) {
		t.Fatalf("dead-lettered: %s payload %s, want it kept", got.State, got.Payload)
	}
	if rq, err := e.b.Requeue(ctx, e.q, dead.ID); err != nil || string(rq.Payload) != string(p) {
		t.Fatalf("requeue: %+v %v", rq, err)
	}
}

// Read returns at most count entries in total (XREADGROUP COUNT is per stream,
// original defect 8), p9 first, and every entry read is delivered.
func TestReadCapsTotalAndDrainsP9First(t *testing.T) {
	e := newEnv(t)
	for _, p := range []int{1, 9, 5, 9, 1, 5} {
		e.mustSubmit(SubmitRequest{Priority: p})
	}
	ds, err := e.b.Read(ctx, e.q, "c", 3, 0)
	if err != nil || len(ds) != 3 || ds[0].Band != 9 || ds[1].Band != 9 || ds[2].Band != 5 {
		t.Fatalf("%+v %v", ds, err)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.InFlight != 3 || st.Queued != 3 {
		t.Fatalf("%+v", st)
	}
}

func TestReadBlocksUntilSubmit(t *testing.T) {
	e := newEnv(t)
	got := make(chan []Delivery, 1)
	go func() {
		ds, _ := e.b.Read(ctx, e.q, "c", 5, 5*time.Second)
		got <- ds
	}()
	time.Sleep(50 * time.Millisecond)
	e.mustSubmit(SubmitRequest{})
	select {
	case ds := <-got:
		if len(ds) != 1 {
			t.Fatalf("%v", ds)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Read did not wake up on a new entry")
	}
	if ds, _ := e.b.Read(ctx, e.q, "c", 5, 20*time.Millisecond); len(ds) != 0 {
		t.Fatalf("%v", ds)
	}
}

func TestPauseStopsDelivery(t *testing.T) {
	e := newEnv(t)
	e.mustSubmit(SubmitRequest{})
	if err := e.b.Pause(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	if p, _ := e.b.Paused(ctx, e.q); !p {
		t.Fatal("not paused")
	}
	if ds, _ := e.b.Read(ctx, e.q, "c", 1, 0); len(ds) != 0 {
		t.Fatalf("paused queue delivered %v", ds)
	}
	if st, _ := e.b.Stats(ctx, e.q); !st.Paused || st.Queued != 1 {
		t.Fatalf("%+v", st)
	}
	if err := e.b.Resume(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	e.deliver("c")
}

func TestEventsStream(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	if err := e.b.Pause(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	evs, err := e.b.ReadEvents(ctx, e.q, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, string(ev.Type))
	}
	want := "TaskQueued TaskStarted TaskSucceeded QueuePaused"
	if strings.Join(types, " ") != want || evs[0].TaskID != ti.ID || !evs[0].At.Equal(e.clock.Now()) {
		t.Fatalf("events %v, want %s", evs, want)
	}
	if more, _ := e.b.ReadEvents(ctx, e.q, evs[len(evs)-1].ID, 100, 10*time.Millisecond); len(more) != 0 {
		t.Fatalf("%v", more)
	}
}

func TestDeadLetterAdmin(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for range 3 {
		ti := e.mustSubmit(SubmitRequest{})
		d, _ := e.deliver("c")
		e.complete(d, Outcome{Err: "bad", ErrorClass: "Permanent"})
		ids = append(ids, ti.ID)
	}
	dl, _ := e.b.DeadLetters(ctx, e.q, 10)
	if len(dl) != 3 || dl[0].TaskID != ids[2] || dl[0].LastError != "bad" {
		t.Fatalf("%+v", dl)
	}
	if err := e.b.Discard(ctx, e.q, ids[0]); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.b.Discard(ctx, e.q, ids[0]), CodeDLQEntryNotFound)
	if e.task(ids[0]).State != StateDeadLettered {
		t.Fatal("discard changed the task state")
	}
	live := e.mustSubmit(SubmitRequest{})
	_, err := e.b.Requeue(ctx, e.q, live.ID)
	wantCode(t, err, CodeTaskConflict)
	_, err = e.b.Requeue(ctx, e.q, "nope")
	wantCode(t, err, CodeTaskNotFound)
	if n, err := e.b.PurgeDeadLetters(ctx, e.q); err != nil || n != 2 {
		t.Fatalf("purged %d %v", n, err)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.DeadLettered != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestCancelStates(t *testing.T) {
	e := newEnv(t)
	_, err := e.b.Cancel(ctx, e.q, "missing")
	wantCode(t, err, CodeTaskNotFound)
	ti := e.mustSubmit(SubmitRequest{})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	_, err = e.b.Cancel(ctx, e.q, ti.ID)
	wantCode(t, err, CodeTaskTerminal)
	// A cancel requested while the entry sat in a worker's buffer wins at Start.
	ti = e.mustSubmit(SubmitRequest{})
	ds, _ := e.b.Read(ctx, e.q, "c", 1, 0)
	if _, err := e.b.Cancel(ctx, e.q, ti.ID); err != nil {
		t.Fatal(err)
	}
	if sr, _ := e.b.Start(ctx, e.q, "c", ds[0]); sr.Run || sr.Task.State != StateCancelled {
		t.Fatalf("%+v", sr)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 0 || st.InFlight != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestSubmitValidation(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.MaxPayloadBytes = 16 })
	for name, req := range map[string]SubmitRequest{
		"no type":      {},
		"bad id":       {Type: "t", ID: "a b"},
		"array":        {Type: "t", Payload: raw(`[1]`)},
		"invalid json": {Type: "t", Payload: raw(`{`)},
		"priority":     {Type: "t", Priority: 10},
		"attempts":     {Type: "t", MaxAttempts: 11},
		"timeout":      {Type: "t", Timeout: 2 * time.Hour},
		"long key":     {Type: "t", IdempotencyKey: strings.Repeat("k", 257)},
	} {
		_, err := e.b.Submit(ctx, e.q, req)
		if CodeOf(err) != CodeInvalidTask {
			t.Errorf("%s: %v, want INVALID_TASK", name, err)
		}
	}
	_, err := e.submit(SubmitRequest{Payload: raw(`{"a": "0123456789abcdef"}`)})
	if be := wantCode(t, err, CodePayloadTooLarge); be.Limit != 16 {
		t.Fatal(be)
	}
	_, err = e.b.Submit(ctx, QueueRef{Namespace: "ns", Name: "missing"}, SubmitRequest{Type: "t"})
	wantCode(t, err, CodeQueueNotFound)
	// The controller's path: the same ID twice ingests once.
	a := e.mustSubmit(SubmitRequest{ID: "uid-1"})
	r, err := e.submit(SubmitRequest{ID: "uid-1"})
	if err != nil || !r.Duplicate || r.Task.ID != a.ID {
		t.Fatalf("%+v %v", r, err)
	}
}

// A handler that returns no result stores none: the task succeeds without a
// result key, and reads show no result.
func TestNoResultStoresNothing(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{})
	d, _ := e.deliver("c")
	if s := e.complete(d, Outcome{}); s != StateSucceeded {
		t.Fatalf("state %s", s)
	}
	if got := e.task(ti.ID); got.State != StateSucceeded || got.Result != nil {
		t.Fatalf("state %s result %q", got.State, got.Result)
	}
	if n := e.rdb.Exists(ctx, keysFor(e.q).result(ti.ID)).Val(); n != 0 {
		t.Fatal("a result key was written for a task without a result")
	}
}

func TestResultTruncated(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.ResultMaxBytes = 10 })
	ti := e.mustSubmit(SubmitRequest{})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Result: raw(`{"long":"0123456789"}`)})
	got := e.task(ti.ID)
	if !got.ResultTruncated || string(got.Result) != `"{\"long\":\"0"` {
		t.Fatalf("result %s truncated=%v", got.Result, got.ResultTruncated)
	}
	if ttl := e.rdb.PTTL(ctx, keysFor(e.q).result(ti.ID)).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("result TTL %v", ttl)
	}
}

func TestWorkersAndRemoveConsumer(t *testing.T) {
	e := newEnv(t)
	w := WorkerInfo{ID: "w1", Hostname: "h", Concurrency: 4, Status: "ready", StartedAt: e.clock.Now()}
	if err := e.b.Heartbeat(ctx, e.q, w, time.Second); err != nil {
		t.Fatal(err)
	}
	ws, _ := e.b.Workers(ctx, e.q)
	if len(ws) != 1 || ws[0].ID != "w1" || ws[0].Concurrency != 4 || !ws[0].LastHeartbeat.Equal(e.clock.Now()) {
		t.Fatalf("%+v", ws)
	}
	if ttl := e.rdb.PTTL(ctx, keysFor(e.q).worker("w1")).Val(); ttl <= 2*time.Second || ttl > 3*time.Second {
		t.Fatalf("heartbeat TTL %v", ttl)
	}
	e.mustSubmit(SubmitRequest{})
	d, _ := e.deliver("w1")
	wantCode(t, e.b.RemoveConsumer(ctx, e.q, "w1"), CodeConsumerBusy)
	e.complete(d, Outcome{})
	if err := e.b.RemoveConsumer(ctx, e.q, "w1"); err != nil {
		t.Fatal(err)
	}
}

func TestQueueConfigRoundTrip(t *testing.T) {
	e := newEnv(t)
	got, err := e.b.QueueConfig(ctx, e.q)
	if err != nil || got != DefaultQueueConfig() {
		t.Fatalf("%+v %v", got, err)
	}
	_, err = e.b.QueueConfig(ctx, QueueRef{Namespace: "x", Name: "y"})
	wantCode(t, err, CodeQueueNotFound)
	if err := e.b.EnsureQueue(ctx, QueueRef{Namespace: "a}", Name: "b"}, DefaultQueueConfig()); err == nil {
		t.Fatal("accepted a queue name that breaks the hash tag")
	}
}

// redisXAdd appends a raw dispatch entry, as a duplicate would appear.
type redisXAdd struct{ stream, id string }

func (x redisXAdd) args() *redis.XAddArgs {
	return &redis.XAddArgs{Stream: x.stream, Values: []any{"t", x.id, "a", "1"}}
}

// Retention counts from the end: a waiting or running task never expires, a
// finished one keeps the queue's TaskRetention, and a DLQ requeue clears it.
func TestTaskRetentionStartsWhenTaskFinishes(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.DeadLetter = true })
	ttl := func(id string) time.Duration {
		t.Helper()
		d, err := e.rdb.PTTL(ctx, keysFor(e.q).task(id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	task := e.mustSubmit(SubmitRequest{Priority: 5, MaxAttempts: 1})
	if d := ttl(task.ID); d != -1 {
		t.Fatalf("queued task has TTL %v, want none", d)
	}
	d, _ := e.deliver("c1")
	if got := ttl(task.ID); got != -1 {
		t.Fatalf("running task has TTL %v, want none", got)
	}
	if s := e.complete(d, Outcome{Err: "boom", ErrorClass: "Permanent"}); s != StateDeadLettered {
		t.Fatalf("state %s, want DeadLettered", s)
	}
	if got := ttl(task.ID); got <= 0 || got > DefaultQueueConfig().TaskRetention {
		t.Fatalf("finished task TTL %v, want (0, %v]", got, DefaultQueueConfig().TaskRetention)
	}
	if _, err := e.b.Requeue(ctx, e.q, task.ID); err != nil {
		t.Fatal(err)
	}
	if got := ttl(task.ID); got != -1 {
		t.Fatalf("requeued task has TTL %v, want none", got)
	}
}

// go-redis re-sends a command whose reply was lost; Start must then answer the
// same instead of absorbing the running entry as a duplicate.
func TestStartIsIdempotentForTheSameWorker(t *testing.T) {
	e := newEnv(t)
	task := e.mustSubmit(SubmitRequest{Priority: 5})
	d, _ := e.deliver("c1")
	again, err := e.b.Start(ctx, e.q, "c1", d.Delivery)
	if err != nil || !again.Run || again.Task.Attempt != 1 {
		t.Fatalf("second Start: %+v, %v; want run at attempt 1", again, err)
	}
	if s := e.complete(d, Outcome{Result: []byte(`1`)}); s != StateSucceeded {
		t.Fatalf("state %s after complete, want Succeeded", s)
	}
	if got := e.task(task.ID); got.State != StateSucceeded || got.Attempt != 1 {
		t.Fatalf("task %+v, want Succeeded at attempt 1", got)
	}
	// So must Complete: the same execution completed again gets its state back.
	if s := e.complete(d, Outcome{Err: "late", Retryable: true}); s != StateSucceeded {
		t.Fatalf("second Complete: state %s, want Succeeded", s)
	}
}
