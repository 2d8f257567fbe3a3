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

// Package apiconv converts between the HTTP API's documents (pkg/client) and
// the engine's types (pkg/broker). The HTTP API server and the direct-Redis
// producer (pkg/client/direct) both use it, so a submission means the same
// through either; it is public only so that the operator's API server can
// import it.
package apiconv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// DefaultPriority is the priority of a submission that sets none.
const DefaultPriority = 5

// RetryAfter is what a QUEUE_FULL answer tells the producer to wait.
const RetryAfter = 5 * time.Second

// maxSeconds bounds delay_seconds and ttl_seconds (100 years) so the times
// they give stay representable.
const maxSeconds = 100 * 365 * 24 * 3600

// Submission converts a submission to the engine's request. headerKey is the
// Idempotency-Key header ("" when absent); it wins over the body's field.
// delay_seconds and ttl_seconds count from now.
func Submission(body client.SubmitRequest, headerKey string, now time.Time) (broker.SubmitRequest, error) {
	req := broker.SubmitRequest{
		Type:           body.TaskType,
		Payload:        body.Payload,
		IdempotencyKey: body.IdempotencyKey,
		Priority:       DefaultPriority,
		MaxAttempts:    body.MaxAttempts,
		Timeout:        time.Duration(body.TimeoutMs) * time.Millisecond,
		Metadata:       body.Metadata,
		FlowKey:        body.FlowKey,
	}
	if headerKey != "" {
		req.IdempotencyKey = headerKey
	}
	if body.Priority != nil {
		req.Priority = *body.Priority
	}
	switch {
	case body.TaskType == "":
		return req, Invalid("task_type", "task_type is required")
	case body.TimeoutMs < 0 || body.TimeoutMs > time.Hour.Milliseconds():
		return req, Invalid("timeout_ms", "timeout_ms must be 1..3600000")
	case body.DelaySeconds < 0 || body.DelaySeconds > maxSeconds || math.IsNaN(body.DelaySeconds):
		return req, Invalid("delay_seconds", "delay_seconds must be 0 or more")
	case body.DelaySeconds > 0 && body.NotBefore != nil:
		return req, Invalid("not_before", "set delay_seconds or not_before, not both")
	case body.TTLSeconds < 0 || body.TTLSeconds > maxSeconds || math.IsNaN(body.TTLSeconds):
		return req, Invalid("ttl_seconds", "ttl_seconds must be more than 0")
	}
	if body.DelaySeconds > 0 {
		req.NotBefore = now.Add(seconds(body.DelaySeconds))
	}
	if body.NotBefore != nil {
		req.NotBefore = *body.NotBefore
	}
	if body.TTLSeconds > 0 {
		req.ExpiresAt = now.Add(seconds(body.TTLSeconds))
	}
	return req, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Invalid is a 400 INVALID_TASK error about field.
func Invalid(field, format string, a ...any) *client.Error {
	return &client.Error{StatusCode: http.StatusBadRequest, Code: client.CodeInvalidTask,
		Message: fmt.Sprintf(format, a...), Details: map[string]any{"field": field}}
}

// Task converts a task record; duplicate marks a replay.
func Task(t broker.TaskInfo, duplicate bool) client.Task {
	out := client.Task{
		TaskID:           t.ID,
		Namespace:        t.Queue.Namespace,
		Queue:            t.Queue.Name,
		TaskType:         t.Type,
		Payload:          t.Payload,
		IdempotencyKey:   t.IdempotencyKey,
		Status:           client.TaskStatus(t.State),
		Priority:         t.Priority,
		Attempt:          t.Attempt,
		PreviousAttempts: t.PrevAttempts,
		MaxAttempts:      t.MaxAttempts,
		TimeoutMs:        t.Timeout.Milliseconds(),
		CreatedAt:        t.CreatedAt,
		AvailableAt:      t.AvailableAt,
		ExpiresAt:        timeOrNil(t.ExpiresAt),
		Metadata:         t.Metadata,
		FlowKey:          t.FlowKey,
		WaitReason:       t.WaitReason,
		Result:           t.Result,
		ResultTruncated:  t.ResultTruncated,
		Duplicate:        duplicate,
		Execution: client.Execution{
			StartedAt:       timeOrNil(t.StartedAt),
			FinishedAt:      timeOrNil(t.FinishedAt),
			WorkerID:        t.WorkerID,
			ErrorClass:      t.LastErrorClass,
			ErrorMessage:    t.LastError,
			CancelRequested: t.CancelRequested,
			Progress:        t.Progress,
			ProgressAt:      timeOrNil(t.ProgressAt),
		},
	}
	if !t.StartedAt.IsZero() && !t.FinishedAt.IsZero() && !t.FinishedAt.Before(t.StartedAt) {
		d := t.FinishedAt.Sub(t.StartedAt).Milliseconds()
		out.Execution.DurationMs = &d
	}
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Stats converts a queue's metrics (its backlog, the age of the oldest task
// waiting at now, the finished totals); workers is its live worker count.
func Stats(q broker.QueueRef, m broker.QueueMetrics, workers int, now time.Time) client.QueueStats {
	out := client.QueueStats{
		Namespace: q.Namespace, Queue: q.Name, Paused: m.Paused, DepthByPriority: m.Lengths[:],
		InFlight: m.InFlight, Scheduled: m.Scheduled, DeadLettered: m.DeadLettered, Workers: workers,
		Finished: map[string]int64{},
	}
	for i := range broker.Bands {
		out.Depth += m.Lengths[i]
		out.Queued += m.Queued[i]
	}
	if !m.OldestQueued.IsZero() {
		out.OldestQueuedAgeSeconds = max(0, now.Sub(m.OldestQueued).Seconds())
	}
	for state, n := range m.Counters.Finished {
		out.Finished[string(state)] = n
	}
	out.Flow = Flow(m.Flow)
	return out
}

// Flow converts a queue's flow metrics; nil when it has no flow control.
func Flow(m broker.FlowMetrics) *client.FlowStats {
	if !m.Enabled {
		return nil
	}
	out := &client.FlowStats{Admissible: m.Admissible, Throttled: m.Throttled, Held: m.Held, ActiveKeys: m.ActiveKeys,
		ParkedKeys: m.ParkedKeys, LimitedBy: make([]client.FlowLimit, 0, len(m.LimitedBy)), MeanExecSeconds: m.MeanExec.Seconds()}
	for _, l := range m.LimitedBy {
		out.LimitedBy = append(out.LimitedBy, client.FlowLimit(l))
	}
	return out
}

// KeyFlow converts one flow key's state.
func KeyFlow(k broker.KeyFlow) client.KeyFlow {
	return client.KeyFlow{Key: k.Key, Queued: k.Queued, Held: k.Held, Concurrency: k.Concurrency, Weight: k.Weight,
		Parked: client.FlowLimit(k.Parked), EligibleAt: timeOrNil(k.EligibleAt)}
}

// Worker converts a worker's heartbeat record.
func Worker(w broker.WorkerInfo) client.Worker {
	return client.Worker{WorkerID: w.ID, Hostname: w.Hostname, Status: w.Status, Concurrency: w.Concurrency,
		InFlight: w.Active, StartedAt: w.StartedAt, LastHeartbeat: w.LastHeartbeat, Version: w.Version, Commit: w.Commit}
}

// DeadLetter converts a dead-letter entry.
func DeadLetter(d broker.DeadLetter) client.DeadLetter {
	return client.DeadLetter{EntryID: d.EntryID, TaskID: d.TaskID, TaskType: d.Type, FailedAt: d.FailedAt,
		AttemptsMade: d.Attempts, LastError: d.LastError, LastErrorClass: d.ErrorClass}
}

// statuses maps each engine code to its HTTP status.
var statuses = map[broker.Code]int{
	broker.CodeInvalidTask:            http.StatusBadRequest,
	broker.CodeInvalidRequest:         http.StatusBadRequest,
	broker.CodePayloadTooLarge:        http.StatusRequestEntityTooLarge,
	broker.CodeIdempotencyInProgress:  http.StatusConflict,
	broker.CodeIdempotencyKeyMismatch: http.StatusUnprocessableEntity,
	broker.CodeQueueFull:              http.StatusTooManyRequests,
	broker.CodeQueueNotFound:          http.StatusNotFound,
	broker.CodeTaskNotFound:           http.StatusNotFound,
	broker.CodeTaskTerminal:           http.StatusGone,
	broker.CodeTaskConflict:           http.StatusConflict,
	broker.CodeDLQEntryNotFound:       http.StatusNotFound,
	broker.CodeConsumerBusy:           http.StatusConflict,
	broker.CodeNotReplicated:          http.StatusServiceUnavailable,
}

// Error converts an engine error into the API's: an engine *Error keeps its
// code (with details: the task ID of IDEMPOTENCY_IN_PROGRESS, with whether
// the request matched, and of IDEMPOTENCY_KEY_MISMATCH, the limits of
// QUEUE_FULL and PAYLOAD_TOO_LARGE, the field of INVALID_TASK, the cause's
// code of NOT_SUBMITTED, whose status is the cause's); a done context is 499
// CANCELED or 504 TIMEOUT; a failure to reach Redis, or a reply saying it
// cannot serve now, is 503 REDIS_UNAVAILABLE; any other error reply of Redis
// (NOPERM, WRONGTYPE, a script's error) is 500 REDIS_ERROR; anything else 500
// INTERNAL_ERROR. The messages carry no text of Redis (the caller logs err,
// which the answer keeps as Err). An *client.Error is returned as is.
func Error(err error) *client.Error {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce
	}
	e := &client.Error{StatusCode: http.StatusInternalServerError, Code: client.CodeInternal,
		Message: "internal error", Details: map[string]any{}, Err: err}
	var be *broker.Error
	var re redis.Error
	switch {
	case errors.As(err, &be):
		e.Code, e.Message = string(be.Code), be.Message
		if st := statuses[be.Code]; st != 0 {
			e.StatusCode = st
		}
		engineDetails(e, be)
	case errors.Is(err, context.Canceled):
		e.StatusCode, e.Code, e.Message = StatusCanceled, client.CodeCanceled, "the request was cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		e.StatusCode, e.Code = http.StatusGatewayTimeout, client.CodeTimeout
		e.Message = "the request ran out of time; a submission may have been written (retry it with its idempotency key)"
	case errors.As(err, &re) && !retryableReply(re):
		e.Code, e.Message = client.CodeRedisError, "Redis refused the command (the server's log has its reply)"
	case unavailable(err):
		e.StatusCode, e.Code, e.Message = http.StatusServiceUnavailable, client.CodeRedisUnavailable, "Redis is unavailable"
	}
	return e
}

// StatusCanceled is the status of CANCELED (nginx's 499 Client Closed
// Request): nobody reads the answer, but logs and metrics count it.
const StatusCanceled = 499

// engineDetails sets the details and fields of an engine error's code.
func engineDetails(e *client.Error, be *broker.Error) {
	switch be.Code {
	case broker.CodeIdempotencyInProgress:
		e.TaskID = be.TaskID
		e.Details["task_id"] = be.TaskID
		if be.RequestMatches != nil {
			e.RequestMatches = be.RequestMatches
			e.Details["request_matches"] = *be.RequestMatches
		}
	case broker.CodeIdempotencyKeyMismatch:
		e.TaskID = be.TaskID
		e.Details["task_id"] = be.TaskID
	case broker.CodeQueueFull:
		e.RetryAfter = RetryAfter
		e.Details["retry_after_s"] = int(RetryAfter.Seconds())
		e.Details["depth"], e.Details["limit"] = be.Depth, be.Limit
	case broker.CodeNotReplicated:
		e.RetryAfter = time.Second
		e.Details["retry_after_s"] = 1
	case broker.CodePayloadTooLarge:
		e.Details["limit"] = be.Limit
	case broker.CodeInvalidTask:
		if be.Field != "" {
			e.Details["field"] = be.Field
		}
	case broker.CodeNotSubmitted:
		cause := Error(be.Err)
		e.StatusCode = cause.StatusCode
		e.Details["cause"] = cause.Code
	}
}

// retryableReplies are the prefixes of Redis error replies that pass with
// time: a node loading its data, a busy script, a failover in progress, a
// replica written to, memory full, too few replicas, a cluster resharding.
var retryableReplies = []string{"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "READONLY", "CLUSTERDOWN",
	"OOM", "NOREPLICAS", "MOVED", "ASK"}

func retryableReply(re redis.Error) bool {
	msg := re.Error()
	for _, p := range retryableReplies {
		if strings.HasPrefix(msg, p+" ") {
			return true
		}
	}
	return false
}

// unavailable reports whether err is a failure to reach or use Redis: a
// network error, a closed connection, a timeout, or a retryable error reply
// (retryableReply; the other replies are classified before).
func unavailable(err error) bool {
	var ne net.Error
	var re redis.Error
	return errors.As(err, &ne) || errors.As(err, &re) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout)
}

// WithContext returns err joined with ctx's error when ctx is done and err
// does not already say so: go-redis reports a passed deadline as an i/o
// timeout of the connection, which Error would call REDIS_UNAVAILABLE.
func WithContext(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && err != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// Submitted converts a submission's answer: the task, whether it is a
// replay, and whether the request matched the original's.
func Submitted(res broker.SubmitResult) client.Task {
	t := Task(res.Task, res.Duplicate)
	t.RequestMatches = res.RequestMatches
	return t
}

// SubmitStatus is the HTTP status of a successful submission: 202 for a new
// task, 200 for a replay.
func SubmitStatus(duplicate bool) int {
	if duplicate {
		return http.StatusOK
	}
	return http.StatusAccepted
}

// Batch submits a batch: each request is converted (an invalid one gets its
// INVALID_TASK result and is not sent), submit runs the others in order
// (broker.SubmitMany), and the results come back one per request, each with
// the status a single submission would have got. The error is submit's
// failure of the whole batch.
func Batch(reqs []client.SubmitRequest, now time.Time,
	submit func([]broker.SubmitRequest) ([]broker.SubmitResult, []error, error)) ([]client.BatchResult, error) {
	out := make([]client.BatchResult, len(reqs))
	valid := make([]broker.SubmitRequest, 0, len(reqs))
	pos := make([]int, 0, len(reqs))
	for i, r := range reqs {
		req, err := Submission(r, "", now)
		if err != nil {
			out[i] = failed(err)
			continue
		}
		valid, pos = append(valid, req), append(pos, i)
	}
	res, errs, err := submit(valid)
	if err != nil {
		return nil, err
	}
	for j, i := range pos {
		if errs[j] != nil {
			out[i] = failed(errs[j])
			continue
		}
		t := Submitted(res[j])
		out[i] = client.BatchResult{Status: SubmitStatus(res[j].Duplicate), Task: &t}
	}
	return out, nil
}

func failed(err error) client.BatchResult {
	e := Error(err)
	return client.BatchResult{Status: e.StatusCode, Error: e}
}
