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

package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Queue is a handle on one queue of the API; Client.Queue returns it.
type Queue struct {
	c    *Client
	path string
}

var _ Producer = (*Queue)(nil)

// Submit submits a task: payload is encoded as JSON (see NewSubmitRequest).
// It returns the new task, or with Duplicate set the existing task that an
// idempotency key mapped the submission to (its result included while
// retained) and RequestMatches saying whether this submission's type and
// payload are the original's. ErrIdempotencyInProgress (TaskID: the task in
// progress; RequestMatches), ErrIdempotencyKeyMismatch (TaskID: the key's
// task, another request, on a Queue that rejects such reuse), ErrQueueFull
// (RetryAfter), ErrPayloadTooLarge, ErrInvalidTask and ErrQueueNotFound are
// the usual refusals.
func (q *Queue) Submit(ctx context.Context, taskType string, payload any, opts ...SubmitOption) (*Task, error) {
	req, err := NewSubmitRequest(taskType, payload, opts...)
	if err != nil {
		return nil, err
	}
	var t Task
	if err := q.c.do(ctx, http.MethodPost, q.path+"/tasks", nil, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// SubmitBatch submits up to 1000 tasks in one request. Each gets exactly the
// answer it would get alone at its place in the batch: a result per request,
// in order, whose Err says why it was refused. The error is for the batch as
// a whole (bad request, unknown queue, unreachable API).
func (q *Queue) SubmitBatch(ctx context.Context, reqs []SubmitRequest) ([]BatchResult, error) {
	var out BatchResponse
	if err := q.c.do(ctx, http.MethodPost, q.path+"/tasks:batch", nil, BatchRequest{Tasks: reqs}, &out); err != nil {
		return nil, err
	}
	for _, r := range out.Results {
		if r.Error != nil {
			r.Error.StatusCode = r.Status
			r.Error.fillFromDetails()
		}
	}
	return out.Results, nil
}

// Err returns the item's error, or nil when it was submitted (or replayed).
func (r BatchResult) Err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Get returns a task with its result and execution; ErrTaskNotFound once it
// is gone (the Queue's taskRetention after it finished).
func (q *Queue) Get(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := q.c.do(ctx, http.MethodGet, q.path+"/tasks/"+url.PathEscape(id), nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Wait returns the task once it has finished (Status.Terminal), following
// the queue's events stream (no polling): it opens the stream, reads the
// task, and reads it again when the stream says it finished.
func (q *Queue) Wait(ctx context.Context, id string) (*Task, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := q.Events(ctx, EventsOptions{TaskID: id})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for {
		t, err := q.Get(ctx, id)
		if err != nil || t.Status.Terminal() {
			return t, err
		}
		for {
			ev, err := s.Next()
			if err != nil {
				return nil, err
			}
			if ev.Type == EventsTruncated || ev.TaskID == id && ev.Type.Terminal() {
				break
			}
		}
	}
}

// Cancel cancels a task that has not started (Status Cancelled).
// ErrCancelRequested says it is running and its worker was asked to stop it;
// ErrTaskTerminal that it had finished; ErrTaskNotFound.
func (q *Queue) Cancel(ctx context.Context, id string) (*CancelResponse, error) {
	var out CancelResponse
	if err := q.c.do(ctx, http.MethodPost, q.path+"/tasks/"+url.PathEscape(id)+"/cancel", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns a page of the queue's tasks, newest first, without payloads
// and results. Follow Continue until it is empty: with a Status filter a page
// can be short, even empty, before the end.
func (q *Queue) List(ctx context.Context, opts ListOptions) (*TaskList, error) {
	v := url.Values{}
	if opts.Status != "" {
		v.Set("status", string(opts.Status))
	}
	if opts.Limit != 0 {
		v.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Continue != "" {
		v.Set("continue", opts.Continue)
	}
	if opts.IdempotencyKey != "" {
		v.Set("idempotency_key", opts.IdempotencyKey)
	}
	var out TaskList
	if err := q.c.do(ctx, http.MethodGet, q.path+"/tasks?"+v.Encode(), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Stats returns the queue's backlog and live worker count.
func (q *Queue) Stats(ctx context.Context) (*QueueStats, error) {
	var out QueueStats
	if err := q.c.do(ctx, http.MethodGet, q.path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Pause stops workers from starting the queue's tasks (submissions are still
// accepted); it sets the Queue's spec.paused.
func (q *Queue) Pause(ctx context.Context) error {
	return q.c.do(ctx, http.MethodPost, q.path+"/pause", nil, nil, nil)
}

// Resume undoes Pause.
func (q *Queue) Resume(ctx context.Context) error {
	return q.c.do(ctx, http.MethodPost, q.path+"/resume", nil, nil, nil)
}

// PurgeTasks cancels every task waiting in the queue (queued, delayed or
// waiting for a retry; running ones finish) and returns how many it
// cancelled. It is not the dead-letter purge (Purge).
func (q *Queue) PurgeTasks(ctx context.Context) (int64, error) {
	var out PurgeResponse
	err := q.c.do(ctx, http.MethodPost, q.path+"/purge", nil, nil, &out)
	return out.Purged, err
}

// Workers lists the queue's live workers.
func (q *Queue) Workers(ctx context.Context) ([]Worker, error) {
	var out WorkerList
	err := q.c.do(ctx, http.MethodGet, q.path+"/workers", nil, nil, &out)
	return out.Workers, err
}

// DeadLetters lists up to limit dead-letter entries (1..500; 0 means 50),
// newest first: the first page of ListDeadLetters.
func (q *Queue) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	out, err := q.ListDeadLetters(ctx, DeadLetterListOptions{Limit: limit})
	if err != nil {
		return nil, err
	}
	return out.Entries, nil
}

// ListDeadLetters returns a page of dead-letter entries, newest first.
// Follow Continue until it is empty to read them all.
func (q *Queue) ListDeadLetters(ctx context.Context, opts DeadLetterListOptions) (*DeadLetterList, error) {
	v := url.Values{}
	if opts.Limit != 0 {
		v.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Continue != "" {
		v.Set("continue", opts.Continue)
	}
	var out DeadLetterList
	if err := q.c.do(ctx, http.MethodGet, q.path+"/dead-letter?"+v.Encode(), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RequeueAll requeues, as Requeue does, the task of every dead-letter entry
// up to the entry ID through ("" for the newest when the call starts),
// oldest first. Entries added meanwhile are left alone, and a task someone
// else requeued or removed meanwhile is skipped, never run twice; after an
// error, calling again with the same through requeues the rest.
func (q *Queue) RequeueAll(ctx context.Context, through string) (*RequeueAllResponse, error) {
	path := q.path + "/dead-letter/requeue"
	if through != "" {
		path += "?through=" + url.QueryEscape(through)
	}
	var out RequeueAllResponse
	if err := q.c.do(ctx, http.MethodPost, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeadLetter returns the dead-letter entry of task id (ErrDLQEntryNotFound).
func (q *Queue) DeadLetter(ctx context.Context, id string) (*DeadLetter, error) {
	var out DeadLetter
	if err := q.c.do(ctx, http.MethodGet, q.path+"/dead-letter/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Requeue runs a dead-lettered task again: attempt back to 1 (the earlier
// runs' attempts summed in PreviousAttempts) and its idempotency record back to processing.
// ErrTaskConflict when it is not dead-lettered.
func (q *Queue) Requeue(ctx context.Context, id string) (*Task, error) {
	var out Task
	if err := q.c.do(ctx, http.MethodPost, q.path+"/dead-letter/"+url.PathEscape(id)+"/requeue", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Discard removes a task's dead-letter entry and returns it; the task stays
// DeadLettered.
func (q *Queue) Discard(ctx context.Context, id string) (*DeadLetter, error) {
	var out DeadLetter
	if err := q.c.do(ctx, http.MethodPost, q.path+"/dead-letter/"+url.PathEscape(id)+"/discard", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Purge removes every dead-letter entry and returns how many went.
func (q *Queue) Purge(ctx context.Context) (int64, error) {
	var out PurgeResponse
	err := q.c.do(ctx, http.MethodPost, q.path+"/dead-letter/purge", nil, nil, &out)
	return out.Purged, err
}
