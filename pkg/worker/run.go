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

package worker

// The executor shared by Server and workertest: one run of a handler under
// its context (deadline, cancel with a cause), with panic recovery, the grace
// period and the abandon path, and the pure mapping of what happened to the
// Outcome a Server records.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// handlerGrace is how long a handler gets to return after its context ended.
const handlerGrace = time.Second

// Causes of a handler's context ending besides its deadline: a handler reads
// them with context.Cause(ctx), and a test cancels a context with one of them
// to make Execute see what a Server's handler would.
var (
	// ErrCancelRequested: the task's cancel was requested (Task CR deleted,
	// API or kubectl cancel). The run is recorded as Cancelled.
	ErrCancelRequested = errors.New("worker: task cancel requested")
	// ErrInterrupted: a draining worker ran out of its budget. The run is not
	// recorded; the task is handed back to its queue at once and runs again
	// as attempt+1.
	ErrInterrupted = errors.New("worker: drain budget exhausted; task handed back for redelivery")
	// ErrLeaseLost: no heartbeat reached Redis for a visibility timeout, or
	// another worker took the task over. A run that fails is not recorded;
	// one that succeeds anyway is, fenced by the engine.
	ErrLeaseLost = errors.New("worker: lease lost (no heartbeat for a visibility timeout, or another worker took the task over); task left to its redelivery")
)

// ErrHandBack, returned by a handler (or wrapped in its error), says that it
// has not begun the task's work, for example because it was still waiting
// for a rate limit or a dependency when its worker began to drain: the
// worker hands the task back to its queue at once, for any worker, and the
// attempt is not counted (the next run has the same attempt number). The
// delivery sidecar returns it for tasks it holds but has not sent to the app.
// It applies only while the worker drains or holds its reads (Config.Hold:
// it then reads nothing, so the task goes to another worker, or back to this
// one once its hold ends); otherwise it is a retryable failure (the attempt
// counts, with the queue's backoff), so a handler cannot bounce a task
// between workers without end.
var ErrHandBack = errors.New("worker: the handler did not begin the task; hand it back")

// Outcome is how a Server records one run of a handler.
type Outcome struct {
	// Result is the handler's value as stored on success (nil: none).
	Result json.RawMessage
	// Err is the failure recorded (nil on success): the handler's error,
	// wrapped as "cancelled: ..." or "deadline exceeded after ...: ..." when
	// the cause of its context's end decides the outcome.
	Err       error
	Class     string // the error class recorded (Class*, or "Cancelled")
	Retryable bool   // retried while attempts remain
	Cancelled bool   // recorded as Cancelled
	// Redeliver: nothing is recorded. A Server hands the task back to its
	// queue at once (attempt+1: the interrupted run counts, as a crash
	// would), unless its lease was lost: then the task is left to its
	// redelivery by whoever took it over.
	Redeliver bool
	// HandBack (with Redeliver): the handler returned ErrHandBack; a
	// draining or holding Server hands the task back without counting the
	// attempt.
	HandBack bool
}

// Execute runs h on t exactly as a Server runs a started task, with a context
// ending at t.Deadline: a panic becomes ErrPanic, a handler still running
// handlerGrace after its context ended is abandoned (its goroutine keeps
// running), and the outcome is mapped from the result, the error and the
// cause of the context's end (context.Cause: ErrCancelRequested,
// ErrInterrupted, ErrLeaseLost or the deadline). workertest.Execute is built
// on it; panics and abandoned handlers are logged to log.
func Execute(ctx context.Context, h Handler, t *Task, log *slog.Logger) Outcome {
	return execute(ctx, h, t, time.Until(t.Deadline).Round(time.Millisecond), log)
}

// execute is Execute with the task's timeout, for the deadline message.
func execute(ctx context.Context, h Handler, t *Task, timeout time.Duration, log *slog.Logger) Outcome {
	ctx, cancel := context.WithDeadline(ctx, t.Deadline)
	defer cancel()
	v, err := invoke(ctx, h, t, log)
	return outcome(v, err, context.Cause(ctx), time.Now(), t.Deadline, timeout)
}

type handlerResult struct {
	v   any
	err error
}

// invoke runs the handler, turning a panic into ErrPanic. When ctx ends first the
// handler gets handlerGrace to return; a handler that ignores its context is
// then abandoned (its goroutine keeps running, like asynq's).
func invoke(ctx context.Context, h Handler, t *Task, log *slog.Logger) (any, error) {
	ch := make(chan handlerResult, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				log.Error("Handler panicked", "task_id", t.ID, "attempt", t.Attempt, "task_type", t.Type, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				ch <- handlerResult{err: fmt.Errorf("%w: %v", ErrPanic, r)}
			}
		}()
		v, err := h.ProcessTask(ctx, t)
		ch <- handlerResult{v: v, err: err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	grace := time.NewTimer(handlerGrace)
	defer grace.Stop()
	select {
	case r := <-ch:
		if r.err == nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			// cancelled or interrupted: a nil error does not mean it finished
			return nil, context.Cause(ctx)
		}
		return r.v, r.err
	case <-grace.C:
		log.Warn("Handler ignored its context; abandoned", "task_id", t.ID, "attempt", t.Attempt, "task_type", t.Type)
		return nil, context.Cause(ctx)
	}
}

// outcome maps one handler run to what is recorded: the value v and error herr
// it returned (from invoke), the cause of its context's end (nil while it had
// not ended), the time it returned, and the task's deadline and timeout.
func outcome(v any, herr, cause error, now, deadline time.Time, timeout time.Duration) Outcome {
	switch {
	case errors.Is(herr, ErrHandBack):
		return Outcome{Redeliver: true, HandBack: true}
	case errors.Is(cause, ErrInterrupted):
		// Never acknowledge interrupted work, even work that finished.
		return Outcome{Redeliver: true}
	case errors.Is(cause, ErrLeaseLost) && herr != nil:
		// Stopped because a peer runs (or may run) the task: its failure is
		// ours, not the task's. A handler that finished anyway is recorded
		// below, and the engine's fencing decides whether it still counts.
		return Outcome{Redeliver: true}
	case herr == nil:
		data, err := marshalResult(v)
		if err != nil {
			return Outcome{Err: err, Class: ClassBadResult}
		}
		return Outcome{Result: data}
	case errors.Is(cause, ErrCancelRequested):
		return Outcome{Err: fmt.Errorf("cancelled: %w", herr), Class: "Cancelled", Cancelled: true}
	case errors.Is(cause, context.DeadlineExceeded) && !now.Before(deadline):
		return Outcome{Err: fmt.Errorf("deadline exceeded after %s: %w", timeout, herr), Class: ClassTimeout, Retryable: true}
	}
	retry, class := classify(herr)
	return Outcome{Err: herr, Class: class, Retryable: retry}
}

func marshalResult(v any) (json.RawMessage, error) {
	switch r := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(r) {
			return nil, errors.New("handler result is not valid JSON")
		}
		return r, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("handler result: %w", err)
	}
	return data, nil
}
