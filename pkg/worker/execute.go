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

// One task's execution by a Server: start, the shared executor (run.go) under
// the task's deadline and cancel, and the outcome recorded with Complete.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/wait"
)

// process runs one delivery: Start (unless the read already started it), the
// handler, and Complete with its outcome. It returns the next entry read with
// the completion (see readsNext), nil when none.
func (s *Server) process(e *execution) *execution {
	ti, ok := s.start(e)
	if !ok {
		return nil
	}
	startedAt := time.Now()
	task, timeout := s.task(ti, startedAt)
	spanCtx, span := s.startSpan(ti)
	defer span.End() // for the returns before the outcome; End is idempotent
	ctx, cancel := context.WithCancelCause(spanCtx)
	defer cancel(nil)
	if !s.arm(e, ti.Attempt, cancel) {
		// The drain budget ran out, or the lease was lost, before the
		// handler ran: hand the task back uncounted (or leave it to whoever
		// took it over).
		s.handBack(e, false, "the drain budget ran out or the lease was lost before the handler ran")
		return nil
	}
	if s.holding() {
		// A read already waiting when the hold began delivered it: a holding
		// worker runs nothing new, so it goes back uncounted.
		s.handBack(e, false, "the worker holds its reads (Config.Hold)")
		return nil
	}
	task.srv, task.exec = s, e

	tm := s.metricsOf(ti.Type)
	if !ti.AvailableAt.IsZero() {
		tm.Wait(max(0, startedAt.Sub(ti.AvailableAt)))
	}
	tm.Started()
	s.qm.InFlight(1)
	out := execute(ctx, s.h, task, timeout, s.log)
	s.mu.Lock()
	e.returned = true
	e.stopProgress()
	s.mu.Unlock()
	s.qm.InFlight(-1)
	tm.Execution(time.Since(startedAt))

	if out.HandBack && !s.draining() && !s.holding() {
		out = Outcome{Err: errors.New("the handler handed the task back while its worker was neither draining nor holding its reads"), Class: ClassRetryable, Retryable: true}
	}
	if out.Redeliver {
		s.handBack(e, !out.HandBack, "the handler stopped", "cause", context.Cause(ctx))
		return nil
	}
	if out.Err != nil && !out.Cancelled {
		tm.Failed()
	}
	return s.record(spanCtx, span, e, ti, tm, out)
}

// task returns the Task a handler gets for ti started at startedAt, and its
// timeout (the queue's default when the task has none).
func (s *Server) task(ti broker.TaskInfo, startedAt time.Time) (*Task, time.Duration) {
	timeout := ti.Timeout
	if timeout <= 0 {
		timeout = s.defaultTimeout
	}
	return &Task{
		ID: ti.ID, Type: ti.Type, Queue: s.qname, Payload: ti.Payload, Attempt: ti.Attempt,
		MaxAttempts: ti.MaxAttempts, IdempotencyKey: ti.IdempotencyKey, Priority: ti.Priority,
		Deadline: startedAt.Add(timeout), flowKey: ti.FlowKey,
	}, timeout
}

// logFor returns the server's logger with e's task, attempt (the entry's
// until Start says which runs) and message ID. It is built only when
// something is logged: With formats its attributes at once, a cost per task
// that the hot path does not need.
func (s *Server) logFor(e *execution) *slog.Logger {
	s.mu.Lock()
	attempt := e.attempt
	s.mu.Unlock()
	if attempt == 0 {
		attempt = e.d.Attempt
	}
	return s.log.With("task_id", e.d.TaskID, "attempt", attempt, "message_id", e.d.MessageID)
}

// start returns the started task of e (started by the read, or by Start now),
// and false when it does not run: a Start that failed (the entry stays
// pending and is reclaimed after the visibility timeout) or a delivery the
// engine skipped (notRun).
func (s *Server) start(e *execution) (broker.TaskInfo, bool) {
	var sr broker.StartResult
	if e.started != nil {
		sr = *e.started
	} else if err := retryConn(context.Background(), func(ctx context.Context) (err error) {
		sr, err = s.b.Start(ctx, s.q, s.cfg.WorkerID, e.d)
		return err
	}); err != nil {
		s.logFor(e).Warn("Start", "error", err)
		return broker.TaskInfo{}, false
	}
	if !sr.Run {
		s.notRun(e.d, sr)
		return broker.TaskInfo{}, false
	}
	return sr.Task, true
}

// arm records e's attempt and its handler's cancel, so the cancel poll, the
// lease check and the drain can stop it (a cancel already requested stops it
// at once). False when the drain or the lease already gave the task up.
func (s *Server) arm(e *execution, attempt int, cancel context.CancelCauseFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.attempt = attempt
	if e.interrupted || e.leaseLost {
		return false
	}
	e.cancel = cancel
	if e.cancelReq {
		cancel(ErrCancelRequested)
	}
	return true
}

// record completes e with out (ti's run, started under spanCtx and span),
// retrying connection errors (retryConn), and counts the state the task
// moved to in tm. When readsNext, the completion reads the slot's next entry too
// (CompleteNext), which record returns.
func (s *Server) record(spanCtx context.Context, span trace.Span, e *execution, ti broker.TaskInfo, tm TaskMetrics, out Outcome) (next *execution) {
	var state broker.State
	x := s.execution(e)
	bo := out.broker()
	endStartSpan(span, bo)
	if err := s.failure(); err != nil {
		s.logFor(e).Warn("Completion not recorded: the queue's Redis layout is one this worker cannot read; the task is redelivered to a newer worker")
		return nil
	}
	cctx, cspan := s.completeSpan(spanCtx)
	readNext := s.readsNext()
	err := retryConn(cctx, func(ctx context.Context) (err error) {
		if !readNext {
			state, err = s.b.Complete(ctx, s.q, x, bo)
			return err
		}
		sent := time.Now()
		var st *broker.Started
		state, st, err = s.b.CompleteNext(ctx, s.q, x, bo, s.cfg.WorkerID)
		if st != nil {
			next = s.toRun(st, sent)
		}
		return err
	})
	endCompleteSpan(cspan, state, err)
	if errors.Is(err, broker.ErrStaleExecution) {
		s.logFor(e).Warn("Completion not recorded: another worker took the task over", "state", string(state))
		return next
	}
	if errors.Is(err, broker.ErrNotReplicated) {
		s.logFor(e).Warn("Completion recorded on the Redis master, but no replica acknowledged it in time; "+
			"a failover before the replica has it runs the task again", "error", err)
		return next
	}
	if err != nil {
		s.logFor(e).Error("Complete failed; the entry stays pending and will be redelivered", "error", err)
		return next
	}
	if !ti.AvailableAt.IsZero() {
		tm.Latency(max(0, time.Since(ti.AvailableAt)))
	}
	switch state {
	case broker.StateSucceeded:
		tm.Succeeded()
	case broker.StateRetrying:
		tm.Retried()
		s.pokeScheduler()
	case broker.StateDeadLettered:
		tm.DeadLettered()
	case broker.StateCancelled:
		tm.Cancelled()
	}
	if out.Err != nil {
		s.logFor(e).Info("Task attempt failed", "task_type", ti.Type, "class", out.Class,
			"retryable", out.Retryable, "state", string(state), "error", bo.Err)
	} else if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.logFor(e).Debug("Task done", "task_type", ti.Type, "state", string(state))
	}
	return next
}

// draining reports whether the drain has begun (Run's context ended).
func (s *Server) draining() bool { return s.runCtx.Err() != nil }

// holding reports whether Config.Hold holds reads.
func (s *Server) holding() bool { return s.cfg.Hold != nil && s.cfg.Hold() != "" }

// handBack gives e's task back to its queue at once (Release) for any worker
// to read, instead of leaving it pending until a peer reclaims it after the
// visibility timeout; ran says whether its handler began (the attempt then
// counts). A task whose lease was lost is left to whoever took it over (the
// engine's fencing would refuse it anyway). why and args say what happened,
// for the log.
func (s *Server) handBack(e *execution, ran bool, why string, args ...any) {
	s.mu.Lock()
	lost, x := e.leaseLost, s.execution(e)
	s.mu.Unlock()
	log := s.logFor(e).With(args...)
	if s.failure() != nil {
		log.Warn(why + "; not handed back: the queue's Redis layout is one this worker cannot read; the task is redelivered to a newer worker")
		return
	}
	if lost {
		log.Warn(why + "; the lease was lost, so the task is left to its redelivery")
		return
	}
	var state broker.State
	err := retryConn(context.Background(), func(ctx context.Context) (err error) {
		state, err = s.b.Release(ctx, s.q, s.cfg.WorkerID, x, ran)
		return err
	})
	switch {
	case errors.Is(err, broker.ErrStaleExecution):
		log.Warn(why+"; not handed back: another worker took the task over", "state", string(state))
	case err != nil:
		log.Error(why+"; hand-back failed: the entry stays pending and is reclaimed after the visibility timeout", "error", err)
	default:
		log.Info(why+"; task handed back", "attempt_counted", ran, "state", string(state))
	}
}

// broker returns o as the engine's Outcome.
func (o Outcome) broker() broker.Outcome {
	if o.Err == nil {
		return broker.Outcome{Result: o.Result}
	}
	return broker.Outcome{Err: o.Err.Error(), ErrorClass: o.Class, Retryable: o.Retryable, Cancelled: o.Cancelled}
}

// retryConn runs f until it succeeds, fails with an error other than a
// connection or not-serving one (isConnErr), or opTimeout has passed, backing
// off from 50 ms to 1 s: a blip or a Redis restart must not turn finished work
// into a redelivery, nor an IdempotentOperation's fn into a second run.
func retryConn(parent context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, opTimeout)
	defer cancel()
	for i := 0; ; i++ {
		err := f(ctx)
		if err == nil || !isConnErr(err) || wait.Sleep(ctx, time.Duration(min(50<<min(i, 5), 1000))*time.Millisecond) != nil {
			return err
		}
	}
}
