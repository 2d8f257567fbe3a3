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

// ReadStart reads p9 first, never more than count in total, and starts what it
// reads exactly as Start would.
func TestReadStartCapsTotalP9FirstAndStarts(t *testing.T) {
	e := newEnv(t)
	for _, p := range []int{1, 9, 5, 9, 1, 5} {
		e.mustSubmit(SubmitRequest{Priority: p, Payload: raw(`{"p":1}`)})
	}
	ss, err := e.b.ReadStart(ctx, e.q, "c", "w1", 3, 0)
	if err != nil || len(ss) != 3 || ss[0].Band != 9 || ss[1].Band != 9 || ss[2].Band != 5 {
		t.Fatalf("%+v %v", ss, err)
	}
	for _, s := range ss {
		if s.Err != nil || !s.Run || s.Reason != "run" || s.Task.State != StateRunning || s.Task.WorkerID != "w1" ||
			s.Task.Attempt != 1 || s.Task.ID != s.TaskID || string(s.Task.Payload) != `{"p":1}` {
			t.Fatalf("%+v", s)
		}
		if got := e.task(s.TaskID); got.State != StateRunning {
			t.Fatalf("%+v", got)
		}
	}
	if st, _ := e.b.Stats(ctx, e.q); st.InFlight != 3 || st.Queued != 3 {
		t.Fatalf("%+v", st)
	}
	// The delivery completes like one from Read+Start.
	if s := e.complete(Execution{Delivery: ss[0].Delivery, WorkerID: "w1", Attempt: 1}, Outcome{}); s != StateSucceeded {
		t.Fatal(s)
	}
	// Starting it again (a client retry) is what Start would answer.
	ss2, _ := e.b.ReadStart(ctx, e.q, "c", "w1", 10, 0)
	if len(ss2) != 3 {
		t.Fatalf("%+v", ss2)
	}
	if sr, err := e.b.Start(ctx, e.q, "w1", ss2[0].Delivery); err != nil || !sr.Run {
		t.Fatalf("%+v %v", sr, err)
	}
}

// Every reason an entry does not run acknowledges it and still counts toward
// the total; the run entries behind them are started.
func TestReadStartSkipReasons(t *testing.T) {
	e := newEnv(t)
	k := keysFor(e.q)
	dup := e.mustSubmit(SubmitRequest{Priority: 5})
	e.rdb.XAdd(ctx, redisXAdd{stream: k.stream(5), id: dup.ID}.args()) // a second entry of dup
	cancelled := e.mustSubmit(SubmitRequest{Priority: 5})
	e.rdb.HSet(ctx, k.task(cancelled.ID), "cancel_requested", 1)
	expired := e.mustSubmit(SubmitRequest{Priority: 5, ExpiresAt: e.clock.Now().Add(time.Second)})
	terminal := e.mustSubmit(SubmitRequest{Priority: 5})
	e.rdb.HSet(ctx, k.task(terminal.ID), "state", string(StateSucceeded))
	retrying := e.mustSubmit(SubmitRequest{Priority: 5})
	e.rdb.HSet(ctx, k.task(retrying.ID), "state", string(StateRetrying))
	missing := e.mustSubmit(SubmitRequest{Priority: 5})
	e.rdb.Del(ctx, k.task(missing.ID))
	last := e.mustSubmit(SubmitRequest{Priority: 5})
	e.clock.Step(2 * time.Second)

	ss, err := e.b.ReadStart(ctx, e.q, "c", "w", 7, 0)
	if err != nil || len(ss) != 7 {
		t.Fatalf("%+v %v", ss, err)
	}
	want := []struct {
		id     string
		reason string
		state  State
	}{
		{dup.ID, "run", StateRunning},
		{dup.ID, "duplicate", StateRunning},
		{cancelled.ID, "cancelled", StateCancelled},
		{expired.ID, "expired", StateExpired},
		{terminal.ID, "terminal", StateSucceeded},
		{retrying.ID, "retrying", StateRetrying},
		{missing.ID, "missing", ""},
	}
	for i, w := range want {
		s := ss[i]
		if s.Err != nil || s.TaskID != w.id || s.Reason != w.reason || s.Run != (w.reason == "run") || s.Task.State != w.state {
			t.Fatalf("entry %d: %+v, want %+v", i, s, w)
		}
	}
	// Only the running entry is pending; the rest are acknowledged and deleted.
	if st, _ := e.b.Stats(ctx, e.q); st.InFlight != 1 || st.Queued != 1 {
		t.Fatalf("%+v", st)
	}
	if ss, _ := e.b.ReadStart(ctx, e.q, "c", "w", 7, 0); len(ss) != 1 || ss[0].TaskID != last.ID || !ss[0].Run {
		t.Fatalf("%+v", ss)
	}
}

// A started entry whose worker stops before running it is a crash: a peer
// reclaims it and runs it as attempt+1.
func TestReadStartUnrunEntryIsReclaimed(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{})
	if ss, _ := e.b.ReadStart(ctx, e.q, "gone", "gone", 1, 0); len(ss) != 1 || !ss[0].Run {
		t.Fatalf("%+v", ss)
	}
	ds, err := e.b.Reclaim(ctx, e.q, "peer", 0, 10)
	if err != nil || len(ds) != 1 || ds[0].TaskID != ti.ID {
		t.Fatalf("%+v %v", ds, err)
	}
	sr, err := e.b.Start(ctx, e.q, "peer", ds[0])
	if err != nil || !sr.Run || sr.Task.Attempt != 2 || sr.Task.WorkerID != "peer" {
		t.Fatalf("%+v %v", sr, err)
	}
}

func TestReadStartBlocksUntilSubmitAndPause(t *testing.T) {
	e := newEnv(t)
	got := make(chan []Started, 1)
	go func() {
		ss, _ := e.b.ReadStart(ctx, e.q, "c", "w", 5, 5*time.Second)
		got <- ss
	}()
	time.Sleep(50 * time.Millisecond)
	e.mustSubmit(SubmitRequest{})
	select {
	case ss := <-got:
		if len(ss) != 1 || !ss[0].Run {
			t.Fatalf("%+v", ss)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("ReadStart did not wake up on a new entry")
	}
	if ss, _ := e.b.ReadStart(ctx, e.q, "c", "w", 5, 20*time.Millisecond); len(ss) != 0 {
		t.Fatalf("%+v", ss)
	}
	e.mustSubmit(SubmitRequest{})
	if err := e.b.Pause(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	if ss, _ := e.b.ReadStart(ctx, e.q, "c", "w", 5, 0); len(ss) != 0 {
		t.Fatalf("paused queue delivered %+v", ss)
	}
	if err := e.b.Resume(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	if ss, _ := e.b.ReadStart(ctx, e.q, "c", "w", 5, 0); len(ss) != 1 {
		t.Fatalf("%+v", ss)
	}
}

// CompleteNext completes and reads the next entry in one call: the next is
// started exactly as ReadStart starts it, none when nothing is ready or the
// queue is paused, and a stale completion still hands its entry over. After
// SCRIPT FLUSH (a restarted Redis) both scripts load again.
func TestCompleteNext(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.mustSubmit(SubmitRequest{Priority: 5})
	}
	ss, err := e.b.ReadStart(ctx, e.q, "w1", "w1", 1, 0)
	if err != nil || len(ss) != 1 {
		t.Fatalf("%+v %v", ss, err)
	}
	x := Execution{Delivery: ss[0].Delivery, WorkerID: "w1", Attempt: 1}
	e.rdb.ScriptFlush(ctx)
	st, next, err := e.b.CompleteNext(ctx, e.q, x, Outcome{Result: raw(`{"ok":1}`)}, "w1")
	if err != nil || st != StateSucceeded || next == nil || next.Err != nil || !next.Run || next.Task.State != StateRunning || next.Task.WorkerID != "w1" {
		t.Fatalf("state %s next %+v err %v", st, next, err)
	}
	if got := e.task(next.TaskID); got.State != StateRunning || got.Attempt != 1 {
		t.Fatalf("next task %+v", got)
	}
	// A stale completion (an attempt that is not the task's) is refused, and
	// the entry read with it is still handed over.
	stale := x
	stale.Attempt = 7
	st, next2, err := e.b.CompleteNext(ctx, e.q, stale, Outcome{}, "w1")
	if CodeOf(err) != CodeStaleExecution || st != StateSucceeded || next2 == nil || !next2.Run || next2.TaskID == next.TaskID {
		t.Fatalf("stale: state %s next %+v err %v", st, next2, err)
	}
	// Nothing left: no next.
	x2 := Execution{Delivery: next.Delivery, WorkerID: "w1", Attempt: 1}
	if st, n, err := e.b.CompleteNext(ctx, e.q, x2, Outcome{}, "w1"); err != nil || st != StateSucceeded || n != nil {
		t.Fatalf("empty queue: state %s next %+v err %v", st, n, err)
	}
	// Paused: the completion is recorded, nothing is read.
	e.mustSubmit(SubmitRequest{Priority: 5})
	if err := e.b.Pause(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	x3 := Execution{Delivery: next2.Delivery, WorkerID: "w1", Attempt: 1}
	if st, n, err := e.b.CompleteNext(ctx, e.q, x3, Outcome{}, "w1"); err != nil || st != StateSucceeded || n != nil {
		t.Fatalf("paused: state %s next %+v err %v", st, n, err)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Queued != 1 || st.InFlight != 0 {
		t.Fatalf("paused: %+v", st)
	}
}
