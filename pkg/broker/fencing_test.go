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

	"github.com/redis/go-redis/v9"
)

// A zombie worker (paused past the visibility timeout, then resumed) can
// neither touch nor complete the entry a peer reclaimed and runs: its touch
// reports the execution lost and leaves the entry with the peer, its late
// retryable failure changes nothing, and the peer's attempt decides the task.
func TestZombieWorkerIsFenced(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k"})
	zombie, _ := e.deliver("zombie")

	// The zombie stops heartbeating; after the visibility timeout a peer
	// reclaims the entry and starts attempt 2.
	ds, err := e.b.Reclaim(ctx, e.q, "peer", 0, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("reclaim: %v %v", ds, err)
	}
	peer, run := e.start("peer", ds[0])
	if run.Attempt != 2 {
		t.Fatalf("peer runs attempt %d, want 2", run.Attempt)
	}
	stream := keysFor(e.q).stream(ds[0].Band)
	owner := func() string {
		t.Helper()
		p, err := e.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: 10}).Result()
		if err != nil || len(p) != 1 {
			t.Fatalf("pending entries %+v %v, want the one entry", p, err)
		}
		return p[0].Consumer
	}

	// The zombie resumes: its heartbeat's touch must not claim the entry back.
	lost, err := e.b.Touch(ctx, e.q, "zombie", []Execution{zombie})
	if err != nil || len(lost) != 1 || lost[0] != zombie {
		t.Fatalf("zombie touch: lost %v, %v; want its execution lost", lost, err)
	}
	if c := owner(); c != "peer" {
		t.Fatalf("entry pending for %s after the zombie's touch, want peer", c)
	}
	// Its late completion (the handler's deadline passed while it was
	// paused: a retryable failure) must not override the live attempt.
	st, err := e.b.Complete(ctx, e.q, zombie, Outcome{Err: "deadline exceeded", Retryable: true})
	if CodeOf(err) != CodeStaleExecution || st != StateRunning {
		t.Fatalf("zombie complete: %s %v, want STALE_EXECUTION with the task Running", st, err)
	}
	if got := e.task(ti.ID); got.State != StateRunning || got.Attempt != 2 || got.WorkerID != "peer" {
		t.Fatalf("after the zombie's completion: %s attempt %d worker %s, want Running attempt 2 by peer", got.State, got.Attempt, got.WorkerID)
	}
	if c := owner(); c != "peer" {
		t.Fatalf("entry pending for %s after the zombie's completion, want peer (not acknowledged)", c)
	}

	// The peer's touch keeps the entry; its completion decides.
	if lost, err := e.b.Touch(ctx, e.q, "peer", []Execution{peer}); err != nil || len(lost) != 0 {
		t.Fatalf("peer touch: lost %v, %v", lost, err)
	}
	if s := e.complete(peer, Outcome{Result: raw(`{"by":"peer"}`)}); s != StateSucceeded {
		t.Fatalf("peer complete: %s", s)
	}
	if r := e.record("k"); r.State != IdempotencyCompleted {
		t.Fatalf("record %+v", r)
	}
	// Now the zombie's entry is gone and its completion still changes nothing.
	if st, err := e.b.Complete(ctx, e.q, zombie, Outcome{Err: "late"}); CodeOf(err) != CodeStaleExecution || st != StateSucceeded {
		t.Fatalf("zombie complete after the peer: %s %v", st, err)
	}
	if got := e.task(ti.ID); got.State != StateSucceeded || string(got.Result) != `{"by":"peer"}` {
		t.Fatalf("task %+v", got)
	}
}

// Fencing compares the attempt too: a worker that reclaimed its own entry and
// runs attempt 2 cannot complete attempt 1 (a stalled handler of its own).
func TestCompleteOfOlderAttemptBySameWorkerIsStale(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{})
	first, _ := e.deliver("w")
	e.clock.Step(time.Minute) // a reclaim follows the visibility timeout
	ds, err := e.b.Reclaim(ctx, e.q, "w", 0, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("reclaim: %v %v", ds, err)
	}
	second, _ := e.start("w", ds[0])
	if _, err := e.b.Complete(ctx, e.q, first, Outcome{Err: "x", Retryable: true}); CodeOf(err) != CodeStaleExecution {
		t.Fatalf("completion of attempt 1: %v, want STALE_EXECUTION", err)
	}
	if s := e.complete(second, Outcome{}); s != StateSucceeded || e.task(ti.ID).Attempt != 2 {
		t.Fatalf("attempt 2: %s", s)
	}
}
