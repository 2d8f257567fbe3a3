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
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// One batch of mixed submits keeps per-item semantics, in order: the first of
// two submits with the same key creates, the second gets IN_PROGRESS with the
// first's ID; the depth gate counts entries admitted earlier in the batch; a
// refused item writes nothing; a chosen ID submitted twice replays.
func TestSubmitBatchKeepsPerItemSemantics(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.MaxDepth = 3; c.MaxPayloadBytes = 64 })
	e.mustSubmit(SubmitRequest{}) // depth 1 before the batch
	big := `{"x":"` + string(make([]byte, 80)) + `"}`
	items := []submitItem{
		batchItem("", "k1", "{}"),      // new (depth 2)
		batchItem("", "k1", "{}"),      // busy: the first's ID
		batchItem("", "k4", big),       // toolarge, before the gate: nothing written
		batchItem("fixed", "", "{}"),   // new (depth 3)
		batchItem("fixed", "", "{}"),   // dup of the one just created, before the gate
		batchItem("", "k2", "{}"),      // full: nothing written
		batchItem("", "k1", "{}"),      // still busy
		batchItem("later", "k3", `{}`), // full
		batchItem("", "", `{"a":1}`),   // full
		batchItem("fixed", "k9", `{}`), // dup (ID exists), before the gate
		batchItem("", "k1", `{"b":2}`), // busy
	}
	res, errs, err := e.b.submitBatch(ctx, e.q, items)
	if err != nil {
		t.Fatal(err)
	}
	first := res[0].Task.ID
	if errs[0] != nil || res[0].Duplicate || res[0].Task.State != StateQueued {
		t.Fatalf("item 0: %+v %v", res[0], errs[0])
	}
	if be := wantCode(t, errs[1], CodeIdempotencyInProgress); be.TaskID != first {
		t.Fatalf("item 1 in progress names %s, want %s", be.TaskID, first)
	}
	wantCode(t, errs[2], CodePayloadTooLarge)
	if errs[3] != nil || res[3].Duplicate || res[3].Task.ID != "fixed" {
		t.Fatalf("item 3: %+v %v", res[3], errs[3])
	}
	if errs[4] != nil || !res[4].Duplicate || res[4].Task.ID != "fixed" || res[4].Task.State != StateQueued {
		t.Fatalf("item 4: %+v %v", res[4], errs[4])
	}
	if be := wantCode(t, errs[5], CodeQueueFull); be.Depth != 3 || be.Limit != 3 {
		t.Fatalf("item 5: %+v", be)
	}
	for i := 6; i < len(items); i++ {
		switch {
		case items[i].req.ID == "fixed":
			if errs[i] != nil || !res[i].Duplicate {
				t.Fatalf("item %d: %+v %v", i, res[i], errs[i])
			}
		case items[i].req.IdempotencyKey == "k1":
			wantCode(t, errs[i], CodeIdempotencyInProgress)
		default:
			wantCode(t, errs[i], CodeQueueFull)
		}
	}
	// Refused items wrote nothing: no records for the keys of the full (k2,
	// k3), too large (k4) and duplicate-ID (k9) items, no task "later".
	for _, k := range []string{"k2", "k3", "k4", "k9"} {
		if _, err := e.b.Idempotency(ctx, e.q, k); CodeOf(err) != CodeTaskNotFound {
			t.Fatalf("record %s: %v", k, err)
		}
	}
	if _, err := e.b.GetTask(ctx, e.q, "later"); CodeOf(err) != CodeTaskNotFound {
		t.Fatalf("task later: %v", err)
	}
	if r := e.record("k1"); r.TaskID != first || r.State != IdempotencyProcessing {
		t.Fatalf("record k1: %+v", r)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 3 {
		t.Fatalf("depth %d, want 3", st.Depth)
	}
}

// batchItem is one Submit of a batch: id "" for a fresh random ID, key "" for
// none.
func batchItem(id, key, payload string) submitItem {
	chosen := "1"
	if id == "" {
		id, chosen = NewTaskID(), "0"
	}
	return submitItem{req: SubmitRequest{ID: id, Type: "demo", IdempotencyKey: key, Priority: 5}, payload: []byte(payload), chosenID: chosen}
}

// A submit batch writes one TaskQueued entry for its new tasks only (not for
// a refused or duplicate item); ReadEvents gives one event per task, in order,
// all with that entry's ID, and resuming after it returns nothing.
func TestSubmitBatchWritesOneQueuedEvent(t *testing.T) {
	e := newEnv(t)
	delayed := batchItem("d", "", "{}")
	delayed.req.NotBefore = e.clock.Now().Add(time.Hour)
	items := []submitItem{
		batchItem("a", "k", "{}"),
		batchItem("b", "k", "{}"), // in progress
		batchItem("c", "", "{}"),
		batchItem("a", "", "{}"), // duplicate ID
		delayed,
	}
	if _, _, err := e.b.submitBatch(ctx, e.q, items); err != nil {
		t.Fatal(err)
	}
	if n := e.rdb.XLen(ctx, keysFor(e.q).events()).Val(); n != 1 {
		t.Fatalf("events stream has %d entries, want 1", n)
	}
	evs, err := e.b.ReadEvents(ctx, e.q, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.Type != EventQueued || ev.ID != evs[0].ID || ev.Attempt != 1 || !ev.At.Equal(e.clock.Now()) {
			t.Fatalf("event %+v", ev)
		}
		got = append(got, ev.TaskID)
	}
	if strings.Join(got, " ") != "a c d" {
		t.Fatalf("TaskQueued for %v, want a c d", got)
	}
	if more, _ := e.b.ReadEvents(ctx, e.q, evs[0].ID, 100, 10*time.Millisecond); len(more) != 0 {
		t.Fatalf("after the entry: %v", more)
	}
}

// A failing TaskQueued write (here the events key is a string) does not fail
// the batch's submissions, which are already written: the resync covers a lost
// event, while an error would make callers retry tasks that exist.
func TestSubmitSurvivesEventWriteError(t *testing.T) {
	e := newEnv(t)
	if err := e.rdb.Set(ctx, keysFor(e.q).events(), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.b.Submit(ctx, e.q, SubmitRequest{Type: "demo"})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if ti, err := e.b.GetTask(ctx, e.q, res.Task.ID); err != nil || ti.State != StateQueued {
		t.Fatalf("task %+v %v", ti, err)
	}
}

// Concurrent Submits through the batcher (same key, distinct keys, a full
// queue) get exactly the outcomes of sequential calls in some order.
func TestConcurrentSubmitsThroughBatcher(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.MaxDepth = 50 })
	const n = 120
	var wg sync.WaitGroup
	errs := make([]error, n)
	res := make([]SubmitResult, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", i)
			if i%3 == 0 {
				key = "same"
			}
			res[i], errs[i] = e.b.Submit(ctx, e.q, SubmitRequest{Type: "demo", IdempotencyKey: key})
		}()
	}
	wg.Wait()
	created, busy, full := 0, 0, 0
	sameID := ""
	for i := range n {
		switch CodeOf(errs[i]) {
		case "":
			if errs[i] != nil {
				t.Fatalf("%d: %v", i, errs[i])
			}
			created++
			if i%3 == 0 {
				if sameID != "" {
					t.Fatalf("key same created twice")
				}
				sameID = res[i].Task.ID
			}
		case CodeIdempotencyInProgress:
			busy++
		case CodeQueueFull:
			full++
		default:
			t.Fatalf("%d: %v", i, errs[i])
		}
	}
	if created != 50 || created+busy+full != n {
		t.Fatalf("created %d busy %d full %d", created, busy, full)
	}
	if sameID != "" {
		for i := 0; i < n; i += 3 {
			var be *Error
			if errors.As(errs[i], &be) && be.Code == CodeIdempotencyInProgress && be.TaskID != sameID {
				t.Fatalf("%d: in progress names %s, want %s", i, be.TaskID, sameID)
			}
		}
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 50 {
		t.Fatalf("depth %d", st.Depth)
	}
}

// A batch that fails as a whole (queue config missing) returns the error to
// every caller in it.
func TestBatchErrorReachesEveryCaller(t *testing.T) {
	e := newEnv(t)
	missing := QueueRef{Namespace: "ns", Name: "missing"}
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.b.Submit(ctx, missing, SubmitRequest{Type: "demo", IdempotencyKey: NewTaskID()})
			if CodeOf(err) != CodeQueueNotFound {
				t.Errorf("err = %v, want QUEUE_NOT_FOUND", err)
			}
		}()
	}
	wg.Wait()

	// And a connection-level error reaches every caller of a batch.
	boom := errors.New("boom")
	release := make(chan struct{})
	var calls atomic.Int32
	bt := newBatcher(1, func(ctx context.Context, reqs []int) ([]int, []error, error) {
		if calls.Add(1) == 1 {
			<-release
			return []int{reqs[0]}, nil, nil
		}
		return nil, nil, boom
	})
	go func() { _, _ = bt.do(ctx, 0) }() // occupies the flusher so the next ones queue up
	waitFor(t, func() bool { return calls.Load() == 1 })
	got := make(chan error, 10)
	for i := 1; i <= 10; i++ {
		go func() { _, err := bt.do(ctx, i); got <- err }()
	}
	waitFor(t, func() bool { bt.mu.Lock(); defer bt.mu.Unlock(); return len(bt.waiting) == 10 })
	close(release)
	for range 10 {
		if err := <-got; !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d script calls, want 2 (the ten queued callers in one batch)", n)
	}
}

// A caller whose context ends while queued is dropped from the batch; one whose
// context ends while its batch runs gets its context error; the others get
// their own results.
func TestBatchCallerCancellation(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	bt := newBatcher(1, func(ctx context.Context, reqs []int) ([]int, []error, error) {
		mu.Lock()
		batches = append(batches, append([]int(nil), reqs...))
		first := len(batches) == 1
		mu.Unlock()
		if first {
			<-release
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		out := make([]int, len(reqs))
		errs := make([]error, len(reqs))
		for i, r := range reqs {
			out[i] = r * 10
			if r == 4 {
				errs[i] = errors.New("item 4 failed")
			}
		}
		return out, errs, nil
	})
	inflight, cancelInflight := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { _, err := bt.do(inflight, 1); first <- err }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 1 })

	queued, cancelQueued := context.WithCancel(ctx)
	type reply struct {
		v   int
		err error
	}
	replies := make([]chan reply, 6)
	for i := 2; i <= 5; i++ {
		replies[i] = make(chan reply, 1)
		c := ctx
		if i == 3 {
			c = queued
		}
		go func() { v, err := bt.do(c, i); replies[i] <- reply{v, err} }()
		waitFor(t, func() bool { bt.mu.Lock(); defer bt.mu.Unlock(); return len(bt.waiting) == i-1 })
	}
	cancelQueued()
	if r := <-replies[3]; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("queued caller: %v", r.err)
	}
	cancelInflight()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("in-flight caller: %v", err)
	}
	close(release)
	for _, i := range []int{2, 5} {
		if r := <-replies[i]; r.err != nil || r.v != i*10 {
			t.Fatalf("caller %d: %+v", i, r)
		}
	}
	if r := <-replies[4]; r.err == nil || r.err.Error() != "item 4 failed" {
		t.Fatalf("caller 4: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 2 || fmt.Sprint(batches[1]) != "[2 4 5]" {
		t.Fatalf("batches %v, want [[1] [2 4 5]]", batches)
	}
}

// Concurrent Starts and Completes of many deliveries batch and keep per-item
// results; starting one delivery twice in one batch runs it once.
func TestStartCompleteBatches(t *testing.T) {
	e := newEnv(t)
	const n = 60
	for range n {
		e.mustSubmit(SubmitRequest{})
	}
	ds, err := e.b.Read(ctx, e.q, "w", n, 0)
	if err != nil || len(ds) != n {
		t.Fatalf("read %d %v", len(ds), err)
	}
	items := []startItem{{worker: "w", d: ds[0]}, {worker: "w", d: ds[0]}, {worker: "other", d: ds[0]}}
	res, errs, err := e.b.startBatch(ctx, e.q, items)
	if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("start batch: %v %v", err, errs)
	}
	if !res[0].Run || !res[1].Run || res[2].Run || res[2].Reason != "duplicate" {
		t.Fatalf("start batch: %+v", res)
	}
	ds = ds[1:]
	var wg sync.WaitGroup
	states := make([]State, len(ds))
	for i, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sr, err := e.b.Start(ctx, e.q, "w", d)
			if err != nil || !sr.Run || sr.Task.State != StateRunning {
				t.Errorf("start %d: %+v %v", i, sr, err)
				return
			}
			out := Outcome{Result: raw(`{"i":1}`)}
			if i%2 == 1 {
				out = Outcome{Err: "x", Retryable: true}
			}
			states[i], err = e.b.Complete(ctx, e.q, Execution{Delivery: d, WorkerID: "w", Attempt: sr.Task.Attempt}, out)
			if err != nil {
				t.Errorf("complete %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	for i, s := range states {
		want := StateSucceeded
		if i%2 == 1 {
			want = StateRetrying
		}
		if s != want {
			t.Fatalf("complete %d: %s, want %s", i, s, want)
		}
	}
	// The absorbed copy acknowledged ds[0]'s entry; the 29 failures wait to retry.
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 0 || st.Scheduled != n/2-1 {
		t.Fatalf("stats %+v", st)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// A Redis error in one item of a start or complete batch fails that item only
// (the Lua try helper); the other items of the batch go through.
func TestBatchItemRedisErrorFailsThatItemOnly(t *testing.T) {
	e := newEnv(t)
	a, b := e.mustSubmit(SubmitRequest{}), e.mustSubmit(SubmitRequest{})
	ds, err := e.b.Read(ctx, e.q, "w", 2, 0)
	if err != nil || len(ds) != 2 {
		t.Fatalf("read %d %v", len(ds), err)
	}
	res, errs, err := e.b.startBatch(ctx, e.q, []startItem{{worker: "w", d: ds[0]}, {worker: "w", d: ds[1]}})
	if err != nil || errs[0] != nil || errs[1] != nil || !res[0].Run || !res[1].Run {
		t.Fatalf("start: %+v %v %v", res, errs, err)
	}
	// b's task hash becomes a string: every hash command on it fails.
	if err := e.rdb.Set(ctx, keysFor(e.q).task(b.ID), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ds[0].TaskID != a.ID {
		ds[0], ds[1] = ds[1], ds[0]
	}
	states, errs, err := e.b.completeBatch(ctx, e.q, []completeItem{
		{x: Execution{Delivery: ds[0], WorkerID: "w", Attempt: 1}, kind: "ok"},
		{x: Execution{Delivery: ds[1], WorkerID: "w", Attempt: 1}, kind: "ok"}})
	if err != nil {
		t.Fatalf("the whole batch failed: %v", err)
	}
	if errs[0] != nil || states[0].state != StateSucceeded {
		t.Fatalf("good item: %s %v", states[0].state, errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "WRONGTYPE") {
		t.Fatalf("bad item: %s %v, want its WRONGTYPE error", states[1].state, errs[1])
	}
}

// The hot path's scripter runs a lone call on the client and a call made
// while another is in flight on the auto-pipeliner.
func TestSharedScripterPipelinesOnlyConcurrentCalls(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	s, ok := New(rdb).fast.(*sharedScripter)
	if !ok {
		t.Fatalf("the broker's scripter is %T", New(rdb).fast)
	}
	if got := s.pick(); got != redis.Scripter(rdb) {
		t.Fatalf("a lone call runs on %T, want the client", got)
	}
	if got := s.pick(); got != redis.Scripter(s.pipe) {
		t.Fatalf("a call beside one in flight runs on %T, want the auto-pipeliner", got)
	}
	s.inFlight.Add(-2)
	if got := s.pick(); got != redis.Scripter(rdb) {
		t.Fatalf("after both ended, a lone call runs on %T, want the client", got)
	}
}

// A batcher runs at most its number of flushes at a time: with two, a second
// batch runs while the first is in Redis, and callers beyond wait for one to
// end and go in the next batch together.
func TestBatcherFlights(t *testing.T) {
	release := make(chan struct{})
	var running, most, calls atomic.Int32
	bt := newBatcher(2, func(ctx context.Context, reqs []int) ([]int, []error, error) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if calls.Add(1) <= 2 {
			<-release
		}
		running.Add(-1)
		return reqs, nil, nil
	})
	var wg sync.WaitGroup
	do := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := bt.do(ctx, i); err != nil || r != i {
				t.Errorf("do(%d) = %d, %v", i, r, err)
			}
		}()
	}
	do(0)
	waitFor(t, func() bool { return calls.Load() == 1 })
	do(1)
	waitFor(t, func() bool { return calls.Load() == 2 })
	for i := 2; i < 12; i++ {
		do(i)
	}
	waitFor(t, func() bool { bt.mu.Lock(); defer bt.mu.Unlock(); return len(bt.waiting) == 10 })
	close(release)
	wg.Wait()
	if m, n := most.Load(), calls.Load(); m != 2 || n > 4 {
		t.Fatalf("%d flushes at a time in %d calls, want 2 at most, and the ten waiting callers in at most two more", m, n)
	}
}
