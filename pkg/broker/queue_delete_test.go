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
	"time"
)

// TaskCRTasks lists exactly the unfinished tasks Task CRs submitted: queued,
// delayed, running and retrying ones, not finished ones nor other submitters'.
func TestTaskCRTasks(t *testing.T) {
	e := newEnv(t)
	cr := func(req SubmitRequest) string { req.FromTaskCR = true; return e.mustSubmit(req).ID }
	running := cr(SubmitRequest{Priority: 9})
	x, _ := e.deliver("c")
	finished := cr(SubmitRequest{Priority: 8})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	retrying := cr(SubmitRequest{Priority: 7})
	d, _ = e.deliver("c")
	e.complete(d, Outcome{Err: "x", Retryable: true})
	queued := cr(SubmitRequest{})
	delayed := cr(SubmitRequest{NotBefore: e.clock.Now().Add(time.Hour), IdempotencyKey: "k"})
	e.mustSubmit(SubmitRequest{})                                                   // over HTTP, say
	e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Hour), ID: "api"}) // too
	got, err := e.b.TaskCRTasks(ctx, e.q)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{running, retrying, queued, delayed}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("TaskCRTasks = %v, want %v (not the finished %s)", got, want, finished)
	}
	if x.TaskID != running {
		t.Fatalf("delivered %s, want %s", x.TaskID, running)
	}
}

// Deleting a queue cancels its unfinished tasks, removes every key under its
// prefix and nothing else; its running tasks' workers see them gone; new
// submissions get QUEUE_NOT_FOUND; deleting it again is a no-op.
func TestDeleteQueue(t *testing.T) {
	e := newEnv(t)
	other := QueueRef{Namespace: "ns", Name: "q2"}
	if err := e.b.EnsureQueue(ctx, other, DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Submit(ctx, other, SubmitRequest{Type: "demo", IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	otherKeys := e.rdb.Keys(ctx, KeyPrefix(other)+"*").Val()

	running := e.mustSubmit(SubmitRequest{Priority: 9, IdempotencyKey: "r"})
	e.deliver("c")
	done := e.mustSubmit(SubmitRequest{Priority: 8})
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Result: raw(`1`)})
	e.mustSubmit(SubmitRequest{IdempotencyKey: "q"})
	e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Hour)})
	if err := e.b.Heartbeat(ctx, e.q, WorkerInfo{ID: "c"}, time.Minute); err != nil {
		t.Fatal(err)
	}

	n, err := e.b.DeleteQueue(ctx, e.q)
	if err != nil || n != 3 {
		t.Fatalf("DeleteQueue: %d cancelled, %v; want the running, queued and delayed ones", n, err)
	}
	if left := e.rdb.Keys(ctx, KeyPrefix(e.q)+"*").Val(); len(left) != 0 {
		t.Fatalf("keys left: %v", left)
	}
	if got := e.rdb.Keys(ctx, KeyPrefix(other)+"*").Val(); !slices.Equal(sorted(got), sorted(otherKeys)) {
		t.Fatalf("the other queue's keys changed: %v, were %v", got, otherKeys)
	}
	if ids, err := e.b.CancelRequested(ctx, e.q, []string{running.ID}); err != nil || len(ids) != 1 {
		t.Fatalf("cancel poll of the running task: %v %v, want it stopped", ids, err)
	}
	if _, err := e.submit(SubmitRequest{}); CodeOf(err) != CodeQueueNotFound {
		t.Fatalf("submit after delete: %v", err)
	}
	if _, err := e.b.GetTask(ctx, e.q, done.ID); CodeOf(err) != CodeTaskNotFound {
		t.Fatalf("finished task after delete: %v", err)
	}
	if n, err := e.b.DeleteQueue(ctx, e.q); n != 0 || err != nil {
		t.Fatalf("second DeleteQueue: %d %v", n, err)
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }
