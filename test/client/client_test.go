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

package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// newClient returns a client of the test API whose every response is
// validated against the OpenAPI document.
func newClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(apiServer.URL, client.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil)}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ensureQueue(t *testing.T, name string, mutate func(*broker.QueueConfig)) *client.Queue {
	t.Helper()
	cfg := broker.DefaultQueueConfig()
	mutate(&cfg)
	if err := engine.EnsureQueue(t.Context(), broker.QueueRef{Namespace: "shop", Name: name}, cfg); err != nil {
		t.Fatal(err)
	}
	return newClient(t).Queue("shop", name)
}

func wantError(t *testing.T, err error, sentinel *client.Error, status int) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &e) || e.StatusCode != status {
		t.Fatalf("err = %v, want %s with status %d", err, sentinel.Code, status)
	}
	if e.RequestID == "" {
		t.Fatalf("error %v carries no request ID", err)
	}
	return e
}

func TestSubmitAnswers(t *testing.T) {
	ctx := t.Context()
	q := newClient(t).Queue("shop", "idle")
	first, err := q.Submit(ctx, "send", map[string]int{"n": 1}, client.IdempotencyKey("answers"), client.Metadata(map[string]string{"team": "a"}),
		client.MaxAttempts(3), client.Timeout(2*time.Second), client.TTL(time.Hour), client.Priority(0))
	if err != nil || first.Duplicate || first.Status != client.StatusQueued || first.Priority != 0 || first.MaxAttempts != 3 ||
		first.TimeoutMs != 2000 || first.ExpiresAt == nil || string(first.Metadata) != `{"team":"a"}` {
		t.Fatalf("first submission: %+v %v", first, err)
	}
	_, err = q.Submit(ctx, "send", nil, client.IdempotencyKey("answers"))
	if e := wantError(t, err, client.ErrIdempotencyInProgress, http.StatusConflict); e.TaskID != first.TaskID {
		t.Fatalf("in progress names %q, want %q", e.TaskID, first.TaskID)
	}
	delayed, err := q.Submit(ctx, "send", nil, client.Delay(time.Hour))
	if err != nil || delayed.Status != client.StatusPending || delayed.AvailableAt.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("delayed: %+v %v", delayed, err)
	}
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
	if nb, err := q.Submit(ctx, "send", nil, client.NotBefore(at)); err != nil || !nb.AvailableAt.Equal(at) {
		t.Fatalf("not before: %+v %v", nb, err)
	}

	e := wantError(t, errOf(q.Submit(ctx, "send", nil, client.Priority(42))), client.ErrInvalidTask, http.StatusBadRequest)
	if e.Details["field"] != "priority" {
		t.Fatalf("invalid priority names field %v", e.Details["field"])
	}
	wantError(t, errOf(q.Submit(ctx, "send", nil, client.Delay(-time.Second))), client.ErrInvalidTask, http.StatusBadRequest)
	wantError(t, errOf(q.Submit(ctx, "", nil)), client.ErrInvalidTask, http.StatusBadRequest)
	wantError(t, errOf(newClient(t).Queue("shop", "nope").Submit(ctx, "send", nil)), client.ErrQueueNotFound, http.StatusNotFound)

	tiny := ensureQueue(t, "tiny", func(c *broker.QueueConfig) { c.MaxDepth = 1; c.MaxPayloadBytes = 16 })
	if _, err := tiny.Submit(ctx, "send", nil); err != nil {
		t.Fatal(err)
	}
	full := wantError(t, errOf(tiny.Submit(ctx, "send", nil)), client.ErrQueueFull, http.StatusTooManyRequests)
	if full.RetryAfter != 5*time.Second {
		t.Fatalf("queue full: retry after %v, want 5s", full.RetryAfter)
	}
	wantError(t, errOf(tiny.Submit(ctx, "send", map[string]string{"x": strings.Repeat("x", 20)})), client.ErrPayloadTooLarge,
		http.StatusRequestEntityTooLarge)
}

func errOf(_ *client.Task, err error) error { return err }

// Wait, cancel and the dead-letter operations on the queue with a worker.
func TestTaskLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	q := newClient(t).Queue("shop", "emails")

	failed, err := q.Submit(ctx, "fail", nil, client.IdempotencyKey("lifecycle-fail"))
	if err != nil {
		t.Fatal(err)
	}
	if failed, err = q.Wait(ctx, failed.TaskID); err != nil || failed.Status != client.StatusDeadLettered ||
		!strings.Contains(failed.Execution.ErrorMessage, "out of stock") {
		t.Fatalf("failed task: %+v %v", failed, err)
	}
	dls, err := q.DeadLetters(ctx, 500)
	if err != nil || !slices.ContainsFunc(dls, func(d client.DeadLetter) bool { return d.TaskID == failed.TaskID }) {
		t.Fatalf("dead letters %+v %v lack %s", dls, err, failed.TaskID)
	}
	requeued, err := q.Requeue(ctx, failed.TaskID)
	if err != nil || requeued.Status != client.StatusQueued || requeued.Attempt != 1 || requeued.PreviousAttempts != 1 {
		t.Fatalf("requeued: %+v %v", requeued, err)
	}
	// The record is processing again: the key maps to the requeued task (in
	// progress, or replayed if the worker has failed it again already).
	again, err := q.Submit(ctx, "fail", nil, client.IdempotencyKey("lifecycle-fail"))
	var e *client.Error
	if !(errors.As(err, &e) && e.Code == client.CodeIdempotencyInProgress && e.TaskID == failed.TaskID) &&
		!(err == nil && again.Duplicate && again.TaskID == failed.TaskID) {
		t.Fatalf("resubmission after requeue: %+v %v, want the requeued task", again, err)
	}
	if again, err = q.Wait(ctx, failed.TaskID); err != nil || again.Status != client.StatusDeadLettered {
		t.Fatalf("requeued task: %+v %v", again, err)
	}
	wantError(t, errOf(q.Requeue(ctx, requeued.TaskID+"x")), client.ErrTaskNotFound, http.StatusNotFound)
	dl, err := q.Discard(ctx, failed.TaskID)
	if err != nil || dl.TaskID != failed.TaskID || dl.LastErrorClass == "" {
		t.Fatalf("discard: %+v %v", dl, err)
	}
	_, err = q.DeadLetter(ctx, failed.TaskID)
	wantError(t, err, client.ErrDLQEntryNotFound, http.StatusNotFound)
	if _, err := q.Purge(ctx); err != nil {
		t.Fatal(err)
	}

	sleeping, err := q.Submit(ctx, "sleep", map[string]float64{"seconds": 30})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, q, sleeping.TaskID, client.StatusRunning)
	_, err = q.Cancel(ctx, sleeping.TaskID)
	if e := wantError(t, err, client.ErrCancelRequested, http.StatusConflict); e.TaskID != sleeping.TaskID {
		t.Fatalf("cancel requested names %q", e.TaskID)
	}
	if done, err := q.Wait(ctx, sleeping.TaskID); err != nil || done.Status != client.StatusCancelled {
		t.Fatalf("cancelled running task: %+v %v", done, err)
	}
	_, err = q.Cancel(ctx, sleeping.TaskID)
	wantError(t, err, client.ErrTaskTerminal, http.StatusGone)
	_, err = q.Cancel(ctx, "no-such-task")
	wantError(t, err, client.ErrTaskNotFound, http.StatusNotFound)

	idle := newClient(t).Queue("shop", "idle")
	queued, err := idle.Submit(ctx, "send", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := idle.Cancel(ctx, queued.TaskID); err != nil || res.Status != client.StatusCancelled {
		t.Fatalf("cancel queued: %+v %v", res, err)
	}
}

// waitStatus polls Get until the task reaches want (a test helper; Wait is
// for terminal states).
func waitStatus(t *testing.T, q *client.Queue, id string, want client.TaskStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := q.Get(t.Context(), id)
		if err == nil && got.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %+v %v, want %s", id, got, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// List pages newest first across continue tokens, and filters by status.
func TestListPages(t *testing.T) {
	ctx := t.Context()
	q := ensureQueue(t, "listed", func(*broker.QueueConfig) {})
	var want []string
	for i := range 7 {
		tk, err := q.Submit(ctx, "send", map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{tk.TaskID}, want...)
		time.Sleep(2 * time.Millisecond) // distinct created_at: a defined order
	}
	if _, err := q.Cancel(ctx, want[3]); err != nil {
		t.Fatal(err)
	}
	var got []string
	opts := client.ListOptions{Limit: 3}
	for pages := 0; ; pages++ {
		page, err := q.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page.Tasks {
			if tk.Payload != nil {
				t.Fatalf("listed task carries its payload: %+v", tk)
			}
			got = append(got, tk.TaskID)
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	if !slices.Equal(got, want) {
		t.Fatalf("list order %v, want %v", got, want)
	}
	page, err := q.List(ctx, client.ListOptions{Status: "cancelled"})
	if err != nil || page.Count != 1 || page.Tasks[0].TaskID != want[3] {
		t.Fatalf("cancelled tasks: %+v %v", page, err)
	}
	keyed, err := q.Submit(ctx, "send", nil, client.IdempotencyKey("listed-key"))
	if err != nil {
		t.Fatal(err)
	}
	page, err = q.List(ctx, client.ListOptions{IdempotencyKey: "listed-key"})
	if err != nil || page.Count != 1 || page.Tasks[0].TaskID != keyed.TaskID {
		t.Fatalf("tasks of key listed-key: %+v %v, want %s alone", page, err, keyed.TaskID)
	}
	if page, err = q.List(ctx, client.ListOptions{IdempotencyKey: "no-such-key"}); err != nil || page.Count != 0 {
		t.Fatalf("tasks of an unknown key: %+v %v, want none", page, err)
	}
	_, err = q.List(ctx, client.ListOptions{Status: "Sleeping"})
	wantError(t, err, client.ErrInvalidRequest, http.StatusBadRequest)
	_, err = q.List(ctx, client.ListOptions{Continue: "garbage!"})
	wantError(t, err, client.ErrInvalidRequest, http.StatusBadRequest)
}

// Dead letters page past any page size, and RequeueAll runs every one
// again (each dead-letters again: "fail" fails for good), fenced at the
// newest entry when it started.
func TestDeadLetterPagesAndRequeueAll(t *testing.T) {
	ctx := t.Context()
	q := newClient(t).Queue("shop", "emails")
	if _, err := q.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	var want []string
	for range 5 {
		tk, err := q.Submit(ctx, "fail", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tk, err = q.Wait(ctx, tk.TaskID); err != nil || tk.Status != client.StatusDeadLettered {
			t.Fatalf("fail task: %+v %v", tk, err)
		}
		want = append([]string{tk.TaskID}, want...)
	}
	var got []string
	opts := client.DeadLetterListOptions{Limit: 2}
	for {
		page, err := q.ListDeadLetters(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Entries {
			got = append(got, d.TaskID)
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dead letters by pages of 2: %v, want %v", got, want)
	}
	_, err := q.ListDeadLetters(ctx, client.DeadLetterListOptions{Continue: "garbage"})
	wantError(t, err, client.ErrInvalidRequest, http.StatusBadRequest)

	res, err := q.RequeueAll(ctx, "")
	if err != nil || res.Requeued != 5 || res.Skipped != 0 || res.Through == "" {
		t.Fatalf("requeue all: %+v %v, want 5 requeued", res, err)
	}
	for _, id := range want {
		tk, err := q.Wait(ctx, id)
		if err != nil || tk.Status != client.StatusDeadLettered || tk.PreviousAttempts != 1 {
			t.Fatalf("requeued task %s: %+v %v, want DeadLettered again after its second run", id, tk, err)
		}
	}
	// The first requeue's fence excludes the new entries.
	if res, err := q.RequeueAll(ctx, res.Through); err != nil || res.Requeued != 0 {
		t.Fatalf("requeue through the old fence: %+v %v, want nothing requeued", res, err)
	}
}

func TestQueueAdministration(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	qs, err := c.Queues(ctx, "shop")
	if err != nil || !slices.ContainsFunc(qs, func(s client.QueueStats) bool { return s.Queue == "emails" }) {
		t.Fatalf("queues of shop: %+v %v", qs, err)
	}
	q := c.Queue("shop", "emails")
	ws, err := q.Workers(ctx)
	if err != nil || len(ws) != 1 || ws[0].Concurrency != 4 {
		t.Fatalf("workers: %+v %v", ws, err)
	}
	paused := ensureQueue(t, "paused", func(*broker.QueueConfig) {})
	if err := paused.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := paused.Stats(ctx); err != nil || !st.Paused || len(st.DepthByPriority) != 10 {
		t.Fatalf("stats after pause: %+v %v", st, err)
	}
	if err := paused.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := paused.Stats(ctx); err != nil || st.Paused {
		t.Fatalf("stats after resume: %+v %v", st, err)
	}
	// PurgeTasks cancels the waiting tasks (two queued, one delayed), not
	// the queue's dead letters.
	purged := ensureQueue(t, "purged", func(*broker.QueueConfig) {})
	if err := purged.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	var waiting []string
	for _, opts := range [][]client.SubmitOption{nil, nil, {client.Delay(time.Hour)}} {
		task, err := purged.Submit(ctx, "echo", nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, task.TaskID)
	}
	// The two queued tasks wait (the queue is paused): the oldest's age
	// grows from its submission.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := purged.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queued == 2 && st.OldestQueuedAgeSeconds > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats of a paused queue with 2 waiting tasks: %+v", st)
		}
	}
	if n, err := purged.PurgeTasks(ctx); err != nil || n != 3 {
		t.Fatalf("purge of 3 waiting tasks: %d %v", n, err)
	}
	if st, err := purged.Stats(ctx); err != nil || st.OldestQueuedAgeSeconds != 0 || st.Finished["Cancelled"] != 3 {
		t.Fatalf("stats after the purge: %+v %v, want nothing waiting and 3 finished Cancelled", st, err)
	}
	for _, id := range waiting {
		if task, err := purged.Get(ctx, id); err != nil || task.Status != client.StatusCancelled {
			t.Fatalf("purged task %s: %+v %v", id, task, err)
		}
	}
	if n, err := purged.PurgeTasks(ctx); err != nil || n != 0 {
		t.Fatalf("second purge: %d %v", n, err)
	}
	_, err = c.Queue("shop", "nope").PurgeTasks(ctx)
	wantError(t, err, client.ErrQueueNotFound, http.StatusNotFound)
	_, err = c.Queue("shop", "nope").Stats(ctx)
	wantError(t, err, client.ErrQueueNotFound, http.StatusNotFound)
	_, err = c.Queue("shop", "Not_A_Name").Workers(ctx)
	wantError(t, err, client.ErrQueueNotFound, http.StatusNotFound)
}

// An event stream whose connection drops again and again returns every
// event once, in order: each TaskQueued of 300 tasks submitted meanwhile.
func TestEventStreamResumesAfterDroppedConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	q := ensureQueue(t, "dropped", func(*broker.QueueConfig) {})
	stream, err := q.Events(ctx, client.EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	want := map[string]bool{}
	for round := range 10 {
		// Through the engine: the dropped connections would fail HTTP submissions.
		reqs := make([]broker.SubmitRequest, 30)
		for i := range reqs {
			reqs[i] = broker.SubmitRequest{Type: "send"}
		}
		res, _, err := engine.SubmitMany(ctx, broker.QueueRef{Namespace: "shop", Name: "dropped"}, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			want[r.Task.ID] = true
		}
		if round%3 == 0 {
			apiServer.CloseClientConnections()
		}
	}
	seen := map[string]bool{}
	last := ""
	for len(seen) < len(want) {
		ev, err := stream.Next()
		if err != nil {
			t.Fatalf("after %d of %d events: %v", len(seen), len(want), err)
		}
		if ev.Type != client.EventQueued {
			t.Fatalf("unexpected event %+v", ev)
		}
		if seen[ev.TaskID] || !want[ev.TaskID] {
			t.Fatalf("event %+v repeated or not of this test", ev)
		}
		if last != "" && !eventAfter(ev.EventID, last) {
			t.Fatalf("event %s after %s: out of order", ev.EventID, last)
		}
		seen[ev.TaskID], last = true, ev.EventID
		if len(seen)%50 == 25 {
			apiServer.CloseClientConnections() // mid-stream, mid-batch entry
		}
	}
	if stream.LastEventID() != last {
		t.Fatalf("LastEventID %q, want %q", stream.LastEventID(), last)
	}
}

// eventAfter orders event IDs "<ms>-<seq>:<i>".
func eventAfter(a, b string) bool {
	var am, as, ai, bm, bs, bi uint64
	_, _ = fmt.Sscanf(a, "%d-%d:%d", &am, &as, &ai)
	_, _ = fmt.Sscanf(b, "%d-%d:%d", &bm, &bs, &bi)
	return slices.Compare([]uint64{am, as, ai}, []uint64{bm, bs, bi}) > 0
}
