package worker

// One task's execution: start, the handler under its deadline and cancel, and
// the outcome recorded with Complete.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/dtq-dev/dtq/internal/broker"
)

// process runs one delivery: Start (unless the read already started it), the
// handler, and Complete with its outcome.
func (s *Server) process(e *execution) {
	d := e.d
	// Built only when something is logged: With formats its attributes at
	// once, a cost per task that the hot path does not need.
	// attempt is the entry's until Start says which attempt runs.
	attempt := d.Attempt
	log := func() *slog.Logger {
		return s.log.With("task_id", d.TaskID, "attempt", attempt, "message_id", d.MessageID)
	}
	var sr broker.StartResult
	if e.started != nil {
		sr = *e.started
	} else if err := retryConn(context.Background(), func(ctx context.Context) (err error) {
		sr, err = s.b.Start(ctx, s.q, s.cfg.WorkerID, d)
		return err
	}); err != nil {
		// The entry stays pending; it is reclaimed after the visibility timeout.
		log().Warn("Start", "error", err)
		return
	}
	if !sr.Run {
		s.notRun(d, sr)
		return
	}
	ti := sr.Task
	attempt = ti.Attempt
	lbl := []string{s.q.Namespace, s.q.Name, s.types.of(ti.Type)}
	timeout := ti.Timeout
	if timeout <= 0 {
		timeout = s.defaultTimeout
	}
	startedAt := time.Now()
	task := &Task{
		ID: ti.ID, Type: ti.Type, Queue: s.qname, Payload: ti.Payload, Attempt: ti.Attempt,
		MaxAttempts: ti.MaxAttempts, IdempotencyKey: ti.IdempotencyKey, Priority: ti.Priority,
		Deadline: startedAt.Add(timeout),
	}
	spanCtx, span := s.startSpan(ti)
	defer span.End() // for the returns before the outcome; End is idempotent
	execCtx, cancel := context.WithCancelCause(spanCtx)
	defer cancel(nil)
	s.mu.Lock()
	e.attempt = ti.Attempt
	if e.interrupted || e.leaseLost {
		// The drain budget ran out, or the lease was lost, before the
		// handler ran: leave the task Running with its entry pending, exactly
		// a crash. A peer reclaims it after the visibility timeout and runs
		// it as attempt+1.
		s.mu.Unlock()
		log().Warn("Drain budget exhausted or lease lost before the handler ran; left for redelivery")
		return
	}
	e.cancel = cancel
	if e.cancelReq {
		cancel(errCancelRequested)
	}
	s.mu.Unlock()
	ctx, dcancel := context.WithDeadline(execCtx, task.Deadline)
	defer dcancel()

	if !ti.AvailableAt.IsZero() {
		s.m.wait.WithLabelValues(lbl...).Observe(max(0, startedAt.Sub(ti.AvailableAt).Seconds()))
	}
	s.m.started.WithLabelValues(lbl...).Inc()
	s.busy.Inc()
	res, herr := s.invoke(ctx, task)
	s.mu.Lock()
	e.returned = true
	s.mu.Unlock()
	s.busy.Dec()
	s.m.execution.WithLabelValues(lbl...).Observe(time.Since(startedAt).Seconds())

	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errInterrupted):
		// Never acknowledge interrupted work: the entry stays pending and is
		// redelivered (attempt+1) after the visibility timeout.
		log().Warn("Handler interrupted by drain; left for redelivery")
		return
	case errors.Is(cause, errLeaseLost) && herr != nil:
		// Stopped because a peer runs (or may run) the task: its failure is
		// ours, not the task's. A handler that finished anyway is completed
		// below, and the engine's fencing decides whether it still counts.
		log().Warn("Handler stopped: lease lost; left to the redelivery")
		return
	}
	var out broker.Outcome
	switch {
	case herr == nil:
		data, err := marshalResult(res)
		if err != nil {
			out = broker.Outcome{Err: err.Error(), ErrorClass: ClassBadResult}
		} else {
			out = broker.Outcome{Result: data}
		}
	case errors.Is(cause, errCancelRequested):
		out = broker.Outcome{Err: "cancelled: " + herr.Error(), ErrorClass: "Cancelled", Cancelled: true}
	case errors.Is(cause, context.DeadlineExceeded) && !time.Now().Before(task.Deadline):
		out = broker.Outcome{Err: fmt.Sprintf("deadline exceeded after %s: %v", timeout, herr), ErrorClass: ClassTimeout, Retryable: true}
	default:
		retry, class := classify(herr)
		out = broker.Outcome{Err: herr.Error(), ErrorClass: class, Retryable: retry}
	}
	if out.Err != "" && !out.Cancelled {
		s.m.failed.WithLabelValues(lbl...).Inc()
	}
	endStartSpan(span, out)
	cctx, cspan := completeSpan(spanCtx)
	var state broker.State
	x := s.execution(e)
	err := retryConn(cctx, func(ctx context.Context) (err error) {
		state, err = s.b.Complete(ctx, s.q, x, out)
		return err
	})
	endCompleteSpan(cspan, state, err)
	if errors.Is(err, broker.ErrStaleExecution) {
		log().Warn("Completion not recorded: another worker took the task over", "state", string(state))
		return
	}
	if err != nil {
		log().Error("Complete failed; the entry stays pending and will be redelivered", "error", err)
		return
	}
	if !ti.AvailableAt.IsZero() {
		s.m.latency.WithLabelValues(lbl...).Observe(max(0, time.Since(ti.AvailableAt).Seconds()))
	}
	switch state {
	case broker.StateSucceeded:
		s.m.succeeded.WithLabelValues(lbl...).Inc()
	case broker.StateRetrying:
		s.m.retried.WithLabelValues(lbl...).Inc()
		s.pokeScheduler()
	case broker.StateDeadLettered:
		s.m.deadLettered.WithLabelValues(lbl...).Inc()
	case broker.StateCancelled:
		s.m.cancelled.WithLabelValues(lbl...).Inc()
	}
	if out.Err != "" {
		log().Info("Task attempt failed", "task_type", ti.Type, "class", out.ErrorClass,
			"retryable", out.Retryable, "state", string(state), "error", out.Err)
	} else if s.log.Enabled(context.Background(), slog.LevelDebug) {
		log().Debug("Task done", "task_type", ti.Type, "state", string(state))
	}
}

type handlerResult struct {
	v   any
	err error
}

// invoke runs the handler, turning a panic into ErrPanic. When ctx ends first the
// handler gets handlerGrace to return; a handler that ignores its context is
// then abandoned (its goroutine keeps running, like asynq's).
func (s *Server) invoke(ctx context.Context, t *Task) (any, error) {
	ch := make(chan handlerResult, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("Handler panicked", "task_id", t.ID, "attempt", t.Attempt, "task_type", t.Type, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				ch <- handlerResult{err: fmt.Errorf("%w: %v", ErrPanic, r)}
			}
		}()
		v, err := s.h.ProcessTask(ctx, t)
		ch <- handlerResult{v: v, err: err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	t0 := time.NewTimer(handlerGrace)
	defer t0.Stop()
	select {
	case r := <-ch:
		if r.err == nil && ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			// cancelled or interrupted: a nil error does not mean it finished
			return nil, context.Cause(ctx)
		}
		return r.v, r.err
	case <-t0.C:
		s.log.Warn("Handler ignored its context; abandoned", "task_id", t.ID, "attempt", t.Attempt, "task_type", t.Type)
		return nil, context.Cause(ctx)
	}
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

// retryConn runs f until it succeeds, fails with an error other than a
// connection or not-serving one (isConnErr), or opTimeout has passed, backing
// off from 50 ms to 1 s: a blip or a Redis restart must not turn finished work
// into a redelivery, nor an IdempotentOperation's fn into a second run.
func retryConn(parent context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, opTimeout)
	defer cancel()
	for i := 0; ; i++ {
		err := f(ctx)
		if err == nil || !isConnErr(err) || !sleepCtx(ctx, time.Duration(min(50<<min(i, 5), 1000))*time.Millisecond) {
			return err
		}
	}
}
