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
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// listAll follows continue tokens and returns the IDs in order and the number
// of pages.
func (e *env) listAll(opts ListOptions) ([]string, int) {
	e.t.Helper()
	var ids []string
	pages := 0
	for {
		page, err := e.b.ListTasks(ctx, e.q, opts)
		if err != nil {
			e.t.Fatalf("list: %v", err)
		}
		pages++
		for _, t := range page.Tasks {
			if t.Payload != nil || t.Result != nil {
				e.t.Fatalf("listed task %s carries payload or result", t.ID)
			}
			ids = append(ids, t.ID)
		}
		if page.Continue == "" {
			return ids, pages
		}
		if pages > 1000 {
			e.t.Fatal("list does not end")
		}
		opts.Continue = page.Continue
	}
}

// Tasks list newest first across pages, with ties of one millisecond (a whole
// batch shares its created_at) split over page boundaries, each task exactly
// once, and the state filter keeps only matching tasks.
func TestListTasksNewestFirstAcrossPages(t *testing.T) {
	e := newEnv(t)
	var want []string // newest first
	for ms := range 5 {
		// 7 tasks in one millisecond: ties that pages of 3 must split.
		var batch []string
		for i := range 7 {
			id := fmt.Sprintf("t%d-%d", ms, i)
			e.mustSubmit(SubmitRequest{ID: id})
			batch = append(batch, id)
		}
		slices.Reverse(batch) // equal scores list by ID, descending
		want = append(batch, want...)
		e.clock.Step(time.Millisecond)
	}
	got, pages := e.listAll(ListOptions{Limit: 3})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("list order (-want +got):\n%s", diff)
	}
	if pages != 12 {
		t.Fatalf("%d pages of 3 for 35 tasks, want 12", pages)
	}

	if _, err := e.b.Cancel(ctx, e.q, "t2-3"); err != nil {
		t.Fatal(err)
	}
	got, _ = e.listAll(ListOptions{State: StateCancelled, Limit: 2})
	if diff := cmp.Diff([]string{"t2-3"}, got); diff != "" {
		t.Fatalf("filtered list (-want +got):\n%s", diff)
	}
	page, err := e.b.ListTasks(ctx, e.q, ListOptions{Limit: 1})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].State != StateQueued || page.Tasks[0].Type != "demo" {
		t.Fatalf("first page: %+v %v", page, err)
	}
}

// Index entries of expired tasks are skipped and removed by the list, and the
// submit script removes the oldest gone entries as it adds new ones.
func TestTaskIndexFollowsRetention(t *testing.T) {
	e := newEnv(t)
	idx := keysFor(e.q).taskIndex()
	for i := range 4 {
		e.mustSubmit(SubmitRequest{ID: fmt.Sprintf("old%d", i)})
		e.clock.Step(time.Millisecond)
	}
	// Retention expiry of two old tasks (a hash TTL running out).
	e.rdb.Del(ctx, keysFor(e.q).task("old0"), keysFor(e.q).task("old2"))
	got, _ := e.listAll(ListOptions{})
	if diff := cmp.Diff([]string{"old3", "old1"}, got); diff != "" {
		t.Fatalf("list (-want +got):\n%s", diff)
	}
	if n := e.rdb.ZCard(ctx, idx).Val(); n != 2 {
		t.Fatalf("index holds %d entries after the list met two gone tasks, want 2", n)
	}

	e.rdb.Del(ctx, keysFor(e.q).task("old1"))
	e.mustSubmit(SubmitRequest{ID: "new"}) // removes old1, the oldest entry, which is gone
	members := e.rdb.ZRange(ctx, idx, 0, -1).Val()
	if diff := cmp.Diff([]string{"old3", "new"}, members); diff != "" {
		t.Fatalf("index after a submit (-want +got):\n%s", diff)
	}
}

func TestListTasksRejectsBadArguments(t *testing.T) {
	e := newEnv(t)
	for name, opts := range map[string]ListOptions{
		"limit too large": {Limit: MaxListLimit + 1},
		"negative limit":  {Limit: -1},
		"not base64":      {Continue: "%%%"},
		"no id":           {Continue: encodeContinue("5", "")},
		"bad score":       {Continue: encodeContinue("x", "a")},
		"bad id":          {Continue: encodeContinue("5", "a{b")},
	} {
		if _, err := e.b.ListTasks(ctx, e.q, opts); CodeOf(err) != CodeInvalidRequest {
			t.Errorf("%s: err = %v, want %s", name, err, CodeInvalidRequest)
		}
	}
}

// A filter that matches nothing still ends: pages stop at the scan budget and
// carry a continue token until the index is exhausted.
func TestListTasksFilterScansBoundedPages(t *testing.T) {
	e := newEnv(t)
	n := listScanBudget + 300
	reqs := make([]submitItem, 0, n)
	for i := range n {
		reqs = append(reqs, batchItem(fmt.Sprintf("f%d", i), "", "{}"))
	}
	for i := 0; i < n; i += 100 {
		if _, _, err := e.b.submitBatch(ctx, e.q, reqs[i:min(i+100, n)]); err != nil {
			t.Fatal(err)
		}
	}
	first, err := e.b.ListTasks(ctx, e.q, ListOptions{State: StateSucceeded, Limit: 10})
	if err != nil || len(first.Tasks) != 0 || first.Continue == "" {
		t.Fatalf("first page: %d tasks, continue %q, %v; want none and a continue token", len(first.Tasks), first.Continue, err)
	}
	got, pages := e.listAll(ListOptions{State: StateSucceeded, Limit: 10})
	if len(got) != 0 || pages != 2 {
		t.Fatalf("filtered list: %d tasks in %d pages, want none in 2", len(got), pages)
	}
}

func TestSubmitStoresMetadata(t *testing.T) {
	e := newEnv(t)
	got := e.mustSubmit(SubmitRequest{ID: "m", Metadata: raw(`{ "team" : "billing" }`)})
	if string(got.Metadata) != `{"team":"billing"}` || string(e.task("m").Metadata) != `{"team":"billing"}` {
		t.Fatalf("metadata: submit %s, get %s", got.Metadata, e.task("m").Metadata)
	}
	if md := e.mustSubmit(SubmitRequest{ID: "n", Metadata: raw(`{}`)}).Metadata; md != nil || e.task("n").Metadata != nil {
		t.Fatalf("empty metadata stored: %s", md)
	}
	big := `{"x":"` + string(make([]byte, MaxMetadataBytes)) + `"}`
	for name, md := range map[string]string{"array": `[1]`, "invalid": `{"a":`, "too large": big} {
		if _, err := e.submit(SubmitRequest{Metadata: raw(md)}); CodeOf(err) != CodeInvalidTask {
			t.Errorf("%s metadata: err = %v, want %s", name, err, CodeInvalidTask)
		}
	}
}

// Queues lists the namespace's queues that still have a config.
func TestQueuesOfNamespace(t *testing.T) {
	e := newEnv(t)
	for _, q := range []QueueRef{{"ns", "b"}, {"ns", "a"}, {"other", "c"}} {
		if err := e.b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
	}
	e.rdb.Del(ctx, keysFor(QueueRef{"ns", "b"}).config()) // a deleted Queue
	got, err := e.b.Queues(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "q"}, got); diff != "" {
		t.Fatalf("queues (-want +got):\n%s", diff)
	}
	if e.rdb.SIsMember(ctx, namespaceQueues("ns"), "b").Val() {
		t.Fatal("a deleted queue stays registered")
	}
}

func TestDeadLetterOfTask(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.DefaultMaxAttempts = 1 })
	task := e.mustSubmit(SubmitRequest{Type: "x"})
	if _, err := e.b.DeadLetter(ctx, e.q, task.ID); CodeOf(err) != CodeDLQEntryNotFound {
		t.Fatalf("dead letter of a queued task: %v", err)
	}
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Err: "boom", ErrorClass: "Boom"})
	dl, err := e.b.DeadLetter(ctx, e.q, task.ID)
	if err != nil || dl.TaskID != task.ID || dl.LastError != "boom" || dl.ErrorClass != "Boom" || dl.Attempts != 1 {
		t.Fatalf("dead letter: %+v %v", dl, err)
	}
	if _, err := e.b.PurgeDeadLetters(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.DeadLetter(ctx, e.q, task.ID); CodeOf(err) != CodeDLQEntryNotFound {
		t.Fatalf("dead letter after purge: %v", err)
	}
}

func TestEventBounds(t *testing.T) {
	e := newEnv(t)
	if o, n, err := e.b.EventBounds(ctx, e.q); err != nil || o != "" || n != "" {
		t.Fatalf("bounds of no events: %q %q %v", o, n, err)
	}
	e.mustSubmit(SubmitRequest{})
	if err := e.b.Pause(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	evs, err := e.b.ReadEvents(ctx, e.q, "0", 10, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("events: %v %v", evs, err)
	}
	o, n, err := e.b.EventBounds(ctx, e.q)
	if err != nil || o != evs[0].ID || n != evs[1].ID {
		t.Fatalf("bounds %q %q %v, want %q %q", o, n, err, evs[0].ID, evs[1].ID)
	}
}
