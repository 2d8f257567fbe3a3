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
	"slices"
	"testing"
)

// deadLetter submits a task that fails its one attempt and returns its ID.
func (e *env) deadLetter() string {
	e.t.Helper()
	ti := e.mustSubmit(SubmitRequest{MaxAttempts: 1})
	d, _ := e.deliver("c")
	if s := e.complete(d, Outcome{Err: "boom"}); s != StateDeadLettered {
		e.t.Fatalf("state %s, want DeadLettered", s)
	}
	return ti.ID
}

// Dead letters page past any limit, newest first, each page after the
// entry the one before ended with.
func TestDeadLettersPages(t *testing.T) {
	e := newEnv(t)
	var want []string
	for range 5 {
		want = append([]string{e.deadLetter()}, want...)
	}
	var got []string
	before := ""
	for range 4 {
		page, err := e.b.DeadLettersBefore(ctx, e.q, before, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, d := range page {
			got = append(got, d.TaskID)
		}
		before = page[len(page)-1].EntryID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
}

// RequeueDeadLetters requeues the entries up to its fence, oldest first,
// skips a task that someone else requeued meanwhile, and leaves the entries
// after the fence alone.
func TestRequeueDeadLetters(t *testing.T) {
	e := newEnv(t)
	ids := []string{e.deadLetter(), e.deadLetter(), e.deadLetter(), e.deadLetter()}
	dls, err := e.b.DeadLetters(ctx, e.q, 10)
	if err != nil {
		t.Fatal(err)
	}
	through := dls[1].EntryID // the third task's entry
	// Another client's requeue of the first task, caught between its read
	// of the entries and its script: the entry is still there, the task not
	// DeadLettered.
	if err := e.rdb.HSet(ctx, keysFor(e.q).task(ids[0]), "state", string(StateQueued)).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.b.RequeueDeadLetters(ctx, e.q, through)
	if err != nil || res.Requeued != 2 || res.Skipped != 1 || res.Through != through {
		t.Fatalf("requeue through %s: %+v %v, want 2 requeued and 1 skipped", through, res, err)
	}
	for i, want := range []State{StateQueued, StateQueued, StateQueued, StateDeadLettered} {
		if got := e.task(ids[i]).State; got != want {
			t.Errorf("task %d is %s, want %s", i, got, want)
		}
	}
	left, _ := e.b.DeadLetters(ctx, e.q, 10)
	if len(left) != 2 || left[0].TaskID != ids[3] || left[1].TaskID != ids[0] {
		t.Fatalf("entries left %+v, want the fourth task's and the skipped first's", left)
	}

	res, err = e.b.RequeueDeadLetters(ctx, e.q, "") // the newest entry is the fence
	if err != nil || res.Requeued != 1 || res.Skipped != 1 || res.Through != left[0].EntryID {
		t.Fatalf("requeue all: %+v %v", res, err)
	}
	if _, err := e.b.PurgeDeadLetters(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	if res, err := e.b.RequeueDeadLetters(ctx, e.q, ""); err != nil || res != (RequeueAllResult{}) {
		t.Fatalf("requeue of an empty dead-letter stream: %+v %v", res, err)
	}
}
