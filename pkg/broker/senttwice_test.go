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
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// twice returns a Broker on e's server (and clock) whose script calls are
// each sent twice (redistest.SendTwice).
func (e *env) twice() *Broker {
	rdb := redis.NewClient(&redis.Options{Addr: e.rdb.Options().Addr})
	e.t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(redistest.SendTwice{})
	return New(rdb, WithClock(e.clock))
}

// entries is the number of entries in e's queue's streams.
func (e *env) entries() int64 {
	e.t.Helper()
	var n int64
	for _, s := range keysFor(e.q).streams() {
		l, err := e.rdb.XLen(ctx, s).Result()
		if err != nil {
			e.t.Fatal(err)
		}
		n += l
	}
	return n
}

// scheduled is the number of members of e's queue's schedule.
func (e *env) scheduled() int64 {
	e.t.Helper()
	n, err := e.rdb.ZCard(ctx, keysFor(e.q).schedule()).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// eventCount is the number of task id's events of type typ.
func (e *env) eventCount(id, typ string) int {
	e.t.Helper()
	n := 0
	for _, ev := range e.eventsOfTask(id) {
		if string(ev.Type) == typ {
			n++
		}
	}
	return n
}

// wantOnce fails unless the task id has exactly one event of type typ, the
// queue's streams n entries and its schedule s members.
func (e *env) wantOnce(id, typ string, n, s int64) {
	e.t.Helper()
	if c := e.eventCount(id, typ); c != 1 {
		e.t.Errorf("%d %s events, want 1", c, typ)
	}
	if got := e.entries(); got != n {
		e.t.Errorf("the streams hold %d entries, want %d", got, n)
	}
	if got := e.scheduled(); got != s {
		e.t.Errorf("the schedule holds %d members, want %d", got, s)
	}
}

// wantQueued fails unless task id is Queued with attempt and its entry is
// the one its hash names.
func (e *env) wantQueued(id, attempt string) {
	e.t.Helper()
	h, err := e.rdb.HMGet(ctx, keysFor(e.q).task(id), "state", "attempt", "msg").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	if h[0] != string(StateQueued) || h[1] != attempt {
		e.t.Errorf("task %v attempt %v, want Queued attempt %s", h[0], h[1], attempt)
	}
	for _, s := range keysFor(e.q).streams() {
		if n, _ := e.rdb.XRange(ctx, s, str(h[2]), str(h[2])).Result(); len(n) == 1 {
			return
		}
	}
	e.t.Errorf("the entry %v the task names is not in its stream", h[2])
}

// Every script a worker, the API or the manager sends twice, as go-redis
// does when the first reply is lost, writes nothing the second time: no
// second stream entry or event, no state reset, no attempt counted twice,
// and (on the hot path) the answer of the first send. The scripts whose
// second send answers otherwise (release, requeue, discard, promote, the
// purges: "stale", "conflict", a count of 0) are checked for their effect.
// docs/redis.md ("Scripts sent twice") has the table.
func TestScriptsSentTwice(t *testing.T) {
	t.Run("submit", func(t *testing.T) {
		e := newEnv(t)
		r, err := e.twice().Submit(ctx, e.q, SubmitRequest{Type: "t"})
		if err != nil || r.Duplicate || r.Task.State != StateQueued {
			t.Fatalf("submit sent twice: %s duplicate %v %v, want a new Queued task", r.Task.State, r.Duplicate, err)
		}
		e.wantOnce(r.Task.ID, "TaskQueued", 1, 0)
		e.wantQueued(r.Task.ID, "1")
		if c := e.metrics().Counters.Accepted; c != 1 {
			t.Errorf("accepted %d, want 1", c)
		}
	})
	t.Run("submit with a key", func(t *testing.T) {
		e := newEnv(t)
		r, err := e.twice().Submit(ctx, e.q, SubmitRequest{Type: "t", IdempotencyKey: "k"})
		if err != nil || r.Duplicate || r.Task.State != StateQueued {
			t.Fatalf("keyed submit sent twice: %s duplicate %v %v, want a new Queued task", r.Task.State, r.Duplicate, err)
		}
		e.wantOnce(r.Task.ID, "TaskQueued", 1, 0)
		if rec := e.record("k"); rec.TaskID != r.Task.ID {
			t.Errorf("record names %s, want %s", rec.TaskID, r.Task.ID)
		}
	})
	t.Run("submit delayed", func(t *testing.T) {
		e := newEnv(t)
		r, err := e.twice().Submit(ctx, e.q, SubmitRequest{Type: "t", NotBefore: e.clock.Now().Add(time.Hour)})
		if err != nil || r.Duplicate || r.Task.State != StatePending {
			t.Fatalf("delayed submit sent twice: %s duplicate %v %v, want a new Pending task", r.Task.State, r.Duplicate, err)
		}
		e.wantOnce(r.Task.ID, "TaskQueued", 0, 1)
	})
	t.Run("submit many", func(t *testing.T) {
		e := newEnv(t)
		res, errs, err := e.twice().SubmitMany(ctx, e.q, []SubmitRequest{
			{Type: "t"}, {Type: "t", IdempotencyKey: "k"}, {Type: "t", NotBefore: e.clock.Now().Add(time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []State{StateQueued, StateQueued, StatePending} {
			if errs[i] != nil || res[i].Duplicate || res[i].Task.State != want {
				t.Errorf("item %d sent twice: %s duplicate %v %v, want a new %s task", i, res[i].Task.State, res[i].Duplicate, errs[i], want)
			}
		}
		if n, s := e.entries(), e.scheduled(); n != 2 || s != 1 {
			t.Errorf("%d entries and %d scheduled, want 2 and 1", n, s)
		}
	})
	t.Run("submit through the auto-pipeliner", func(t *testing.T) {
		e := newEnv(t)
		other := QueueRef{Namespace: "ns", Name: "other"}
		if err := e.b.EnsureQueue(ctx, other, DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
		d := e.twice()
		const n = 40
		var wg sync.WaitGroup
		errs := make(chan error, 2*n)
		for i := range 2 * n { // concurrent calls on two queues share pipelines
			wg.Go(func() {
				q := []QueueRef{e.q, other}[i%2]
				if r, err := d.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: strconv.Itoa(i)}); err != nil || r.Duplicate {
					errs <- fmt.Errorf("submit %d: duplicate %v %w", i, r.Duplicate, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for _, q := range []QueueRef{e.q, other} {
			if m, err := e.b.QueueMetrics(ctx, q); err != nil || m.Counters.Accepted != n {
				t.Errorf("%s accepted %d %v, want %d", q, m.Counters.Accepted, err, n)
			}
		}
		if got := e.entries(); got != n {
			t.Errorf("the streams of %s hold %d entries, want %d", e.q, got, n)
		}
	})
	t.Run("submit with an ID", func(t *testing.T) {
		e := newEnv(t)
		r, err := e.twice().Submit(ctx, e.q, SubmitRequest{Type: "t", ID: "mine"})
		if err != nil || r.Task.ID != "mine" {
			t.Fatalf("submit with an ID sent twice: %s %v", r.Task.ID, err)
		}
		e.wantOnce("mine", "TaskQueued", 1, 0)
	})
	t.Run("start", func(t *testing.T) {
		e := newEnv(t)
		id := e.mustSubmit(SubmitRequest{}).ID
		ds, err := e.b.Read(ctx, e.q, "w", 1, 0)
		if err != nil || len(ds) != 1 {
			t.Fatalf("read: %v %v", ds, err)
		}
		sr, err := e.twice().Start(ctx, e.q, "w", ds[0])
		if err != nil || !sr.Run || sr.Task.Attempt != 1 {
			t.Fatalf("start sent twice: run %v attempt %d %v, want run attempt 1", sr.Run, sr.Task.Attempt, err)
		}
		e.wantOnce(id, "TaskStarted", 1, 0)
	})
	t.Run("start reclaimed", func(t *testing.T) {
		e := newEnv(t)
		id := e.mustSubmit(SubmitRequest{}).ID
		e.deliver("a")
		e.clock.Step(time.Minute) // the worker died; its entry idles
		ds, err := e.b.Reclaim(ctx, e.q, "b", 0, 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("reclaim: %v %v", ds, err)
		}
		sr, err := e.twice().Start(ctx, e.q, "b", ds[0])
		if err != nil || !sr.Run || sr.Task.Attempt != 2 {
			t.Fatalf("reclaimed start sent twice: run %v attempt %d %v, want run attempt 2", sr.Run, sr.Task.Attempt, err)
		}
		if ti := e.task(id); ti.Attempt != 2 || ti.WorkerID != "b" {
			t.Errorf("task attempt %d worker %s, want attempt 2 of b", ti.Attempt, ti.WorkerID)
		}
	})
	t.Run("complete", func(t *testing.T) {
		e := newEnv(t)
		e.mustSubmit(SubmitRequest{})
		x, ti := e.deliver("w")
		st, err := e.twice().Complete(ctx, e.q, x, Outcome{Result: raw(`{"ok":1}`)})
		if err != nil || st != StateSucceeded {
			t.Fatalf("complete sent twice: %v %v, want Succeeded", st, err)
		}
		e.wantOnce(ti.ID, "TaskSucceeded", 0, 0)
	})
	t.Run("complete with a retry", func(t *testing.T) {
		e := newEnv(t)
		e.mustSubmit(SubmitRequest{})
		x, ti := e.deliver("w")
		st, err := e.twice().Complete(ctx, e.q, x, Outcome{Err: "boom", Retryable: true})
		if err != nil || st != StateRetrying {
			t.Fatalf("complete sent twice: %v %v, want Retrying", st, err)
		}
		e.wantOnce(ti.ID, "TaskRetryScheduled", 0, 1)
	})
	t.Run("touch", func(t *testing.T) {
		e := newEnv(t)
		e.mustSubmit(SubmitRequest{})
		x, _ := e.deliver("w")
		if lost, err := e.twice().Touch(ctx, e.q, "w", []Execution{x}); err != nil || len(lost) != 0 {
			t.Fatalf("touch sent twice: lost %v %v, want none", lost, err)
		}
	})
	t.Run("progress", func(t *testing.T) {
		e := newEnv(t)
		e.mustSubmit(SubmitRequest{})
		x, ti := e.deliver("w")
		if err := e.twice().Progress(ctx, e.q, x, raw(`{"done":1}`)); err != nil {
			t.Fatalf("progress sent twice: %v", err)
		}
		e.wantOnce(ti.ID, "TaskProgress", 1, 0)
	})
	t.Run("cancel", func(t *testing.T) {
		e := newEnv(t)
		id := e.mustSubmit(SubmitRequest{}).ID
		if st, err := e.twice().Cancel(ctx, e.q, id); err != nil || st != StateCancelled {
			t.Fatalf("cancel sent twice: %v %v, want Cancelled", st, err)
		}
		e.wantOnce(id, "TaskCancelled", 0, 0)
	})
	t.Run("cancel running", func(t *testing.T) {
		e := newEnv(t)
		e.mustSubmit(SubmitRequest{})
		_, ti := e.deliver("w")
		if st, err := e.twice().Cancel(ctx, e.q, ti.ID); err != nil || st != StateRunning {
			t.Fatalf("cancel sent twice: %v %v, want Running", st, err)
		}
		e.wantOnce(ti.ID, "TaskCancelRequested", 1, 0)
	})
	t.Run("release", func(t *testing.T) {
		e := newEnv(t)
		e.mustSubmit(SubmitRequest{})
		x, ti := e.deliver("w")
		// The second send finds the task Queued: stale, nothing written.
		if st, err := e.twice().Release(ctx, e.q, "w", x, false); err != nil && !errors.Is(err, ErrStaleExecution) {
			t.Fatalf("release sent twice: %v %v", st, err)
		}
		e.wantOnce(ti.ID, "TaskReleased", 1, 0)
		e.wantQueued(ti.ID, "1")
	})
	t.Run("promote", func(t *testing.T) {
		e := newEnv(t)
		id := e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Second)}).ID
		e.clock.Step(2 * time.Second)
		if _, _, err := e.twice().PromoteDue(ctx, e.q, 10); err != nil {
			t.Fatalf("promote sent twice: %v", err)
		}
		if n, s := e.entries(), e.scheduled(); n != 1 || s != 0 {
			t.Errorf("%d entries and %d scheduled, want 1 and 0", n, s)
		}
		e.wantQueued(id, "1")
	})
	t.Run("retry", func(t *testing.T) {
		e := newEnv(t)
		id := e.deadLetter()
		if ti, err := e.twice().Retry(ctx, e.q, id, "token"); err != nil || ti.State != StateQueued {
			t.Fatalf("retry sent twice: %s %v, want Queued", ti.State, err)
		}
		e.wantOnce(id, "TaskRetried", 1, 0)
	})
	t.Run("requeue", func(t *testing.T) {
		e := newEnv(t)
		id := e.deadLetter()
		// The second send finds the task Queued: a conflict, nothing written.
		if _, err := e.twice().Requeue(ctx, e.q, id); err != nil && CodeOf(err) != CodeTaskConflict {
			t.Fatalf("requeue sent twice: %v", err)
		}
		e.wantOnce(id, "TaskRetried", 1, 0)
	})
	t.Run("discard", func(t *testing.T) {
		e := newEnv(t)
		id := e.deadLetter()
		// The second send finds no entry, nothing written.
		if err := e.twice().Discard(ctx, e.q, id); err != nil && CodeOf(err) != CodeDLQEntryNotFound {
			t.Fatalf("discard sent twice: %v", err)
		}
		if n, _ := e.rdb.XLen(ctx, keysFor(e.q).deadLetter()).Result(); n != 0 || e.task(id).State != StateDeadLettered {
			t.Errorf("%d dead-letter entries, task %s; want none and DeadLettered", n, e.task(id).State)
		}
	})
	t.Run("purge dead letters", func(t *testing.T) {
		e := newEnv(t)
		e.deadLetter()
		if _, err := e.twice().PurgeDeadLetters(ctx, e.q); err != nil {
			t.Fatal(err)
		}
		if n, _ := e.rdb.XLen(ctx, keysFor(e.q).deadLetter()).Result(); n != 0 {
			t.Errorf("%d dead-letter entries, want none", n)
		}
	})
	t.Run("remove consumer", func(t *testing.T) {
		e := newEnv(t)
		e.mustSubmit(SubmitRequest{})
		x, _ := e.deliver("w")
		e.complete(x, Outcome{})
		if err := e.twice().RemoveConsumer(ctx, e.q, "w"); err != nil {
			t.Fatalf("remove consumer sent twice: %v", err)
		}
	})
	t.Run("pause", func(t *testing.T) {
		e := newEnv(t)
		if err := e.twice().Pause(ctx, e.q); err != nil {
			t.Fatal(err)
		}
		e.wantOnce("", "QueuePaused", 0, 0)
	})
	t.Run("purge queue", func(t *testing.T) {
		e := newEnv(t)
		id := e.mustSubmit(SubmitRequest{}).ID
		if _, err := e.twice().PurgeQueue(ctx, e.q); err != nil {
			t.Fatal(err)
		}
		e.wantOnce(id, "TaskCancelled", 0, 0)
	})
}
