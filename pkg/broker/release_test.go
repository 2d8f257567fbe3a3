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
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// eventsOfTask returns the events of task id, oldest first.
func (e *env) eventsOfTask(id string) []Event {
	e.t.Helper()
	evs, err := e.b.ReadEvents(ctx, e.q, "0", 1000, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []Event
	for _, ev := range evs {
		if ev.TaskID == id {
			out = append(out, ev)
		}
	}
	return out
}

// A task whose handler never began goes back at once with the same attempt;
// another worker reads it right away (no visibility timeout passes: the
// clock is fake and never moves).
func TestReleaseNotRunKeepsTheAttempt(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	x, _ := e.deliver("a")
	st, err := e.b.Release(ctx, e.q, "a", x, false)
	if err != nil || st != StateQueued {
		t.Fatalf("release: %s %v, want Queued", st, err)
	}
	if got := e.task(ti.ID); got.State != StateQueued || got.Attempt != 1 {
		t.Fatalf("after release: %s attempt %d, want Queued attempt 1", got.State, got.Attempt)
	}
	if r := e.record("k"); r.State != IdempotencyProcessing {
		t.Fatalf("record %+v, want processing", r)
	}
	y, run := e.deliver("b")
	if run.ID != ti.ID || run.Attempt != 1 || y.WorkerID != "b" {
		t.Fatalf("b runs %s attempt %d", run.ID, run.Attempt)
	}
	if s := e.complete(y, Outcome{Result: raw(`1`)}); s != StateSucceeded {
		t.Fatalf("complete: %s", s)
	}
	evs := e.eventsOfTask(ti.ID)
	var types []string
	for _, ev := range evs {
		types = append(types, fmt.Sprintf("%s/%d", ev.Type, ev.Attempt))
	}
	if got, want := strings.Join(types, " "), "TaskQueued/1 TaskStarted/1 TaskReleased/1 TaskStarted/1 TaskSucceeded/1"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	// Every stream entry is gone: the released one was deleted, not left pending.
	for band := range Bands {
		if n := e.rdb.XLen(ctx, keysFor(e.q).stream(band)).Val(); n != 0 {
			t.Fatalf("band %d keeps %d entries", band, n)
		}
	}
}

// An interrupted handler's attempt counts, as a crash redelivery does: the
// next run is attempt+1, and past max attempts the task is dead-lettered.
func TestReleaseInterruptedCountsTheAttempt(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{MaxAttempts: 2})
	x, _ := e.deliver("a")
	if st, err := e.b.Release(ctx, e.q, "a", x, true); err != nil || st != StateQueued {
		t.Fatalf("release: %s %v", st, err)
	}
	y, run := e.deliver("b")
	if run.Attempt != 2 {
		t.Fatalf("b runs attempt %d, want 2", run.Attempt)
	}
	st, err := e.b.Release(ctx, e.q, "b", y, true)
	if err != nil || st != StateDeadLettered {
		t.Fatalf("release of the last attempt: %s %v, want DeadLettered", st, err)
	}
	if got := e.task(ti.ID); got.State != StateDeadLettered || got.Attempt != 2 || got.LastErrorClass != "WorkerLost" {
		t.Fatalf("task %s attempt %d class %s", got.State, got.Attempt, got.LastErrorClass)
	}
}

// A task whose cancel was requested ends Cancelled instead of going back.
func TestReleaseOfCancelRequestedTaskCancels(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	x, _ := e.deliver("a")
	if _, err := e.b.Cancel(ctx, e.q, ti.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := e.b.Release(ctx, e.q, "a", x, false); err != nil || st != StateCancelled {
		t.Fatalf("release: %s %v, want Cancelled", st, err)
	}
	if r := e.record("k"); r.State != IdempotencyFailed {
		t.Fatalf("record %+v, want failed", r)
	}
}

// A worker that lost its lease cannot hand back a task a peer reclaimed,
// whether the peer started it yet or not, nor an older attempt of its own.
func TestReleaseIsFenced(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{})
	zombie, _ := e.deliver("zombie")
	ds, err := e.b.Reclaim(ctx, e.q, "peer", 0, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("reclaim: %v %v", ds, err)
	}
	// Reclaimed, not started yet: the task hash still names the zombie's
	// execution, the entry is pending for the peer.
	if st, err := e.b.Release(ctx, e.q, "zombie", zombie, false); CodeOf(err) != CodeStaleExecution || st != StateRunning {
		t.Fatalf("zombie release before the peer's start: %s %v, want STALE_EXECUTION", st, err)
	}
	peer, run := e.start("peer", ds[0])
	if run.Attempt != 2 {
		t.Fatalf("peer runs attempt %d", run.Attempt)
	}
	if st, err := e.b.Release(ctx, e.q, "zombie", zombie, true); CodeOf(err) != CodeStaleExecution || st != StateRunning {
		t.Fatalf("zombie release after the peer's start: %s %v, want STALE_EXECUTION", st, err)
	}
	// The peer reclaiming its own entry again: its attempt 2 execution is
	// stale for a hand-back of attempt 1 under its name.
	old := peer
	old.Attempt = 1
	if _, err := e.b.Release(ctx, e.q, "peer", old, true); CodeOf(err) != CodeStaleExecution {
		t.Fatalf("release of an older attempt: %v, want STALE_EXECUTION", err)
	}
	if got := e.task(ti.ID); got.State != StateRunning || got.Attempt != 2 || got.WorkerID != "peer" {
		t.Fatalf("after stale releases: %s attempt %d by %s", got.State, got.Attempt, got.WorkerID)
	}
	p, err := e.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: keysFor(e.q).stream(ds[0].Band), Group: group, Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 1 || p[0].Consumer != "peer" {
		t.Fatalf("pending %+v %v, want the one entry with peer", p, err)
	}
	if s := e.complete(peer, Outcome{}); s != StateSucceeded {
		t.Fatalf("peer complete: %s", s)
	}
}

// Progress is fenced, bounded, stored on the task and in its events, and
// cleared when a new attempt starts.
func TestProgress(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{})
	x, _ := e.deliver("a")
	if err := e.b.Progress(ctx, e.q, x, []byte(`{ "done": 3, "total": 10 }`)); err != nil {
		t.Fatal(err)
	}
	got := e.task(ti.ID)
	if string(got.Progress) != `{"done":3,"total":10}` || !got.ProgressAt.Equal(e.clock.Now().Truncate(1e6)) {
		t.Fatalf("task progress %s at %v", got.Progress, got.ProgressAt)
	}
	evs := e.eventsOfTask(ti.ID)
	last := evs[len(evs)-1]
	if last.Type != EventProgress || last.Attempt != 1 || string(last.Progress) != `{"done":3,"total":10}` {
		t.Fatalf("last event %+v", last)
	}
	for _, bad := range []string{`{"done":`, ``, `"` + strings.Repeat("x", MaxProgressBytes) + `"`} {
		if err := e.b.Progress(ctx, e.q, x, []byte(bad)); CodeOf(err) != CodeInvalidRequest {
			t.Fatalf("progress %.20q: %v, want INVALID_REQUEST", bad, err)
		}
	}
	// A peer takes the task over: the old holder's progress is refused.
	ds, err := e.b.Reclaim(ctx, e.q, "peer", 0, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("reclaim: %v %v", ds, err)
	}
	peer, started := e.start("peer", ds[0])
	if stored := e.task(ti.ID); !reflect.DeepEqual(started, stored) {
		t.Fatalf("started %+v\nstored  %+v", started, stored)
	}
	if err := e.b.Progress(ctx, e.q, x, []byte(`{"done":9}`)); CodeOf(err) != CodeStaleExecution {
		t.Fatalf("stale progress: %v, want STALE_EXECUTION", err)
	}
	if got := e.task(ti.ID); got.Progress != nil || !got.ProgressAt.IsZero() {
		t.Fatalf("attempt 2's progress %s at %v, want none (cleared at its start)", got.Progress, got.ProgressAt)
	}
	if err := e.b.Progress(ctx, e.q, peer, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	e.complete(peer, Outcome{})
	if err := e.b.Progress(ctx, e.q, peer, []byte(`2`)); CodeOf(err) != CodeStaleExecution {
		t.Fatalf("progress after completion: %v, want STALE_EXECUTION", err)
	}
	if got := e.task(ti.ID); string(got.Progress) != `1` {
		t.Fatalf("finished task's progress %s, want the last reported", got.Progress)
	}
}
