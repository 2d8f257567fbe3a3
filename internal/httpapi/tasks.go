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

package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/apiconv"
	"github.com/dtq-dev/dtq/pkg/tracing"
)

// IdempotencyKeyHeader carries a submission's idempotency key; it wins over
// the body's idempotency_key (the seed).
const IdempotencyKeyHeader = "Idempotency-Key"

// MaxBatch is the most tasks one batch may hold.
const MaxBatch = 1000

// submit and submitBatch continue the trace of the request's traceparent
// header, if any (tracing.FromHeader): the engine's dtq.submit span is its
// child and the tasks carry it to their handlers.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	var body submitBody
	if err := s.decodeBody(w, r, s.opts.MaxBodyBytes, client.CodeInvalidTask, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := apiconv.Submission(body.request(), r.Header.Get(IdempotencyKeyHeader), time.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.b.Submit(tracing.FromHeader(r.Context(), r.Header), q, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, apiconv.SubmitStatus(res.Duplicate), apiconv.Submitted(res))
}

// submitBatch submits up to MaxBatch tasks in order, each with exactly the
// semantics of a single submission (SubmitMany), and answers 200 with one
// result per task. Only a failure of the whole batch (bad body, unknown
// queue, Redis failing before any task was written) is an error answer; when
// Redis fails after some tasks were written, the items not written answer
// NOT_SUBMITTED.
func (s *Server) submitBatch(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	if r.Header.Get(IdempotencyKeyHeader) != "" {
		s.writeError(w, r, invalidRequest(IdempotencyKeyHeader,
			"the Idempotency-Key header does not apply to a batch: set idempotency_key on each task"))
		return
	}
	var body batchBody
	if err := s.decodeBody(w, r, s.opts.MaxBatchBodyBytes, client.CodeInvalidTask, &body); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(body.Tasks) == 0 || len(body.Tasks) > MaxBatch {
		s.writeError(w, r, invalidRequest("tasks", "a batch holds 1..%d tasks, not %d", MaxBatch, len(body.Tasks)))
		return
	}
	reqs := make([]client.SubmitRequest, len(body.Tasks))
	for i, item := range body.Tasks {
		reqs[i] = item.request()
	}
	ctx := tracing.FromHeader(r.Context(), r.Header)
	results, err := apiconv.Batch(reqs, time.Now(), func(sub []broker.SubmitRequest) ([]broker.SubmitResult, []error, error) {
		return s.b.SubmitMany(ctx, q, sub)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logFailedItems(r, results)
	writeJSON(w, http.StatusOK, client.BatchResponse{Results: results})
}

// logFailedItems logs the first 5xx item of a batch with its cause's own
// text (which the answer leaves out), and how many there were.
func (s *Server) logFailedItems(r *http.Request, results []client.BatchResult) {
	n, first := 0, -1
	for i, res := range results {
		if res.Error != nil && res.Status >= 500 {
			if n++; first < 0 {
				first = i
			}
		}
	}
	if n > 0 {
		s.log.Error("Batch items failed", "path", r.URL.Path, "request_id", requestID(r), "items", n,
			"first", first, "code", results[first].Error.Code, "error", results[first].Error.Err)
	}
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	t, err := s.b.GetTask(r.Context(), q, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiconv.Task(t, false))
}

// listTasks answers a page of the queue's tasks, newest first: ?status= (a
// TaskStatus, any case, underscores ignored: dead_lettered works), ?limit=
// (1..500, 50) and ?continue= (the previous page's); or, with
// ?idempotency_key=, the key's task alone (tasksByKey).
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	if key := r.URL.Query().Get("idempotency_key"); key != "" {
		s.tasksByKey(w, r, q, key)
		return
	}
	opts := broker.ListOptions{Continue: r.URL.Query().Get("continue")}
	if v := r.URL.Query().Get("status"); v != "" {
		st, ok := parseStatus(v)
		if !ok {
			s.writeError(w, r, invalidRequest("status", "unknown status %q", v))
			return
		}
		opts.State = st
	}
	limit, err := limitParam(r, broker.MaxListLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opts.Limit = limit
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.b.ListTasks(r.Context(), q, opts)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := client.TaskList{Tasks: make([]client.Task, 0, len(page.Tasks)), Continue: page.Continue}
	for _, t := range page.Tasks {
		out.Tasks = append(out.Tasks, apiconv.Task(t, false))
	}
	out.Count = len(out.Tasks)
	writeJSON(w, http.StatusOK, out)
}

// tasksByKey answers the task that key's idempotency record names, or no task
// when the key has no record (never used, or its record expired after the
// Queue's idempotencyTTL).
func (s *Server) tasksByKey(w http.ResponseWriter, r *http.Request, q broker.QueueRef, key string) {
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	out := client.TaskList{Tasks: []client.Task{}}
	rec, err := s.b.Idempotency(r.Context(), q, key)
	if err == nil {
		var t broker.TaskInfo
		if t, err = s.b.GetTask(r.Context(), q, rec.TaskID); err == nil {
			t.Payload, t.Result = nil, nil // as in every list
			out.Tasks = append(out.Tasks, apiconv.Task(t, false))
		}
	}
	if err != nil && !errors.Is(err, broker.ErrTaskNotFound) {
		s.writeError(w, r, err)
		return
	}
	out.Count = len(out.Tasks)
	writeJSON(w, http.StatusOK, out)
}

func parseStatus(v string) (broker.State, bool) {
	v = strings.ReplaceAll(v, "_", "")
	for _, st := range client.TaskStatuses {
		if strings.EqualFold(string(st), v) {
			return broker.State(st), true
		}
	}
	return "", false
}

// limitParam reads ?limit= (1..max, default 50).
func limitParam(r *http.Request, max int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 50, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, invalidRequest("limit", "limit must be 1..%d", max)
	}
	return n, nil
}

// cancelTask answers 202 when the task ended Cancelled, 409 CANCEL_REQUESTED
// when it is running (its worker is asked to stop it), 410 TASK_TERMINAL when
// it had finished.
func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	id := r.PathValue("id")
	state, err := s.b.Cancel(r.Context(), q, id)
	switch {
	case errors.Is(err, broker.ErrTaskTerminal):
		s.writeError(w, r, &client.Error{StatusCode: http.StatusGone, Code: client.CodeTaskTerminal,
			Message: "task " + id + " has already finished: " + string(state),
			Details: map[string]any{"task_id": id, "status": string(state)}})
	case err != nil:
		s.writeError(w, r, err)
	case state == broker.StateRunning:
		s.writeError(w, r, &client.Error{StatusCode: http.StatusConflict, Code: client.CodeCancelRequested,
			Message: "task " + id + " is running: its worker was asked to cancel it",
			Details: map[string]any{"task_id": id, "status": string(state)}})
	default:
		writeJSON(w, http.StatusAccepted, client.CancelResponse{TaskID: id, Status: client.TaskStatus(state)})
	}
}
