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

// Package workertest helps test dtq handlers, in the spirit of river's
// rivertest.
//
// Unit tests need no Redis: build a Task with NewTask and run a handler with
// Execute, which runs the executor of worker.Server itself (deadline context,
// panic recovery, grace period, JSON result, outcome and retry classification):
//
//	res := workertest.Execute(ctx, mux, workertest.NewTask("email:send", Email{To: "a@b"}))
//	if res.Err != nil { t.Fatal(res.Err) }
//
// Integration tests run a real Server against a Redis they own with
// StartServer, submit tasks with Submit and wait for the outcome with Wait.
package workertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/internal/taskset"
)

var seq atomic.Int64

// TaskOption changes a Task built by NewTask.
type TaskOption func(*worker.Task)

// WithAttempt sets the attempt number (default 1).
func WithAttempt(n int) TaskOption { return func(t *worker.Task) { t.Attempt = n } }

// WithMaxAttempts sets MaxAttempts (default 5).
func WithMaxAttempts(n int) TaskOption { return func(t *worker.Task) { t.MaxAttempts = n } }

// WithIdempotencyKey sets the idempotency key.
func WithIdempotencyKey(k string) TaskOption { return func(t *worker.Task) { t.IdempotencyKey = k } }

// WithTimeout sets the deadline to now+d (default 30s).
func WithTimeout(d time.Duration) TaskOption {
	return func(t *worker.Task) { t.Deadline = time.Now().Add(d) }
}

// WithID sets the task id (default "test-<n>").
func WithID(id string) TaskOption { return func(t *worker.Task) { t.ID = id } }

// WithFlowKey sets the task's flow key (Task.FlowKey; default none).
func WithFlowKey(k string) TaskOption { return func(t *worker.Task) { taskset.FlowKey(t, k) } }

// NewTask builds a Task of taskType. payload is marshalled to JSON unless it is
// already a json.RawMessage or []byte; nil means {}.
func NewTask(taskType string, payload any, opts ...TaskOption) *worker.Task {
	var raw json.RawMessage
	switch p := payload.(type) {
	case nil:
		raw = json.RawMessage("{}")
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		b, err := json.Marshal(p)
		if err != nil {
			panic(fmt.Sprintf("workertest.NewTask: marshal payload: %v", err))
		}
		raw = b
	}
	t := &worker.Task{
		ID: "test-" + strconv.FormatInt(seq.Add(1), 10), Type: taskType, Queue: "default/test",
		Payload: raw, Attempt: 1, MaxAttempts: 5, Priority: 5, Deadline: time.Now().Add(30 * time.Second),
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Result is what Execute observed.
type Result struct {
	Value json.RawMessage // the handler's result as the server would store it (nil: null)
	// Err is the failure the server would record (nil on success): the
	// handler's error, wrapped as "cancelled: ..." or "deadline exceeded
	// after ...: ..." when its context's end decides the outcome.
	Err       error
	Retryable bool   // the server would retry it while attempts remain
	Class     string // the error class the server would record (worker.Class*, or "Cancelled")
	Cancelled bool   // the server would record the task Cancelled
	// Redeliver: the server would record nothing and leave the task to its
	// redelivery (ctx ended with worker.ErrInterrupted, or worker.ErrLeaseLost
	// and the handler failed).
	Redeliver bool
	Panicked  bool
	Duration  time.Duration
}

// Execute runs h on t with worker.Execute, the executor of worker.Server: a
// context ending at t.Deadline (default 30s from now), panic recovery, the
// handler's grace period after its context ends (a handler that ignores it is
// abandoned after a second), the JSON result, and the outcome mapped from the
// error and the cause of the context's end. To see what a cancel request, a
// drain or a lost lease does, cancel ctx with context.WithCancelCause and
// worker.ErrCancelRequested, worker.ErrInterrupted or worker.ErrLeaseLost.
func Execute(ctx context.Context, h worker.Handler, t *worker.Task) Result {
	if t.Deadline.IsZero() {
		t.Deadline = time.Now().Add(30 * time.Second)
	}
	start := time.Now()
	o := worker.Execute(ctx, h, t, discard)
	return Result{Value: o.Result, Err: o.Err, Retryable: o.Retryable, Class: o.Class, Cancelled: o.Cancelled,
		Redeliver: o.Redeliver, Panicked: errors.Is(o.Err, worker.ErrPanic), Duration: time.Since(start)}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// Options configures StartServer. Zero fields take test-friendly defaults.
type Options struct {
	Namespace         string        // default "default"
	Queue             string        // default: a fresh name per call of NewQueueName
	Concurrency       int           // default 4
	VisibilityTimeout time.Duration // default 2s
	HeartbeatInterval time.Duration // default 500ms
	DrainTimeout      time.Duration // default 5s
	RetryBaseDelay    time.Duration // queue retry base delay; default 50ms
	RetryMaxDelay     time.Duration // default 1s
	DefaultTimeout    time.Duration // queue default handler timeout; default 30s
	WorkerID          string        // default: generated
	Logger            *slog.Logger  // default: discard
	Hold              func() string // worker.Config.Hold; default: never holds
	// TracerProvider is worker.Config.TracerProvider; default the global one.
	TracerProvider trace.TracerProvider
	// Metrics is worker.Config.Metrics; default none.
	Metrics worker.Metrics
}

var queueSeq atomic.Int64

// NewQueueName returns a queue name unique within the test binary.
func NewQueueName() string { return "wt" + strconv.FormatInt(queueSeq.Add(1), 10) }

// EnsureQueue creates (or updates) the queue with test-friendly settings from o
// (short retry delays), as the Queue controller would.
func EnsureQueue(tb testing.TB, rdb redis.UniversalClient, o Options) {
	tb.Helper()
	o = o.withDefaults()
	cfg := broker.DefaultQueueConfig()
	cfg.Retry = broker.RetryPolicy{BaseDelay: o.RetryBaseDelay, MaxDelay: o.RetryMaxDelay, Jitter: 0.2}
	cfg.VisibilityTimeout = o.VisibilityTimeout
	cfg.DefaultTimeout = o.DefaultTimeout
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := broker.New(rdb).EnsureQueue(ctx, broker.QueueRef{Namespace: o.Namespace, Name: o.Queue}, cfg); err != nil {
		tb.Fatalf("workertest: ensure queue: %v", err)
	}
}

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Queue == "" {
		o.Queue = NewQueueName()
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = 2 * time.Second
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = min(500*time.Millisecond, o.VisibilityTimeout/3)
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 5 * time.Second
	}
	if o.RetryBaseDelay == 0 {
		o.RetryBaseDelay = 50 * time.Millisecond
	}
	if o.RetryMaxDelay == 0 {
		o.RetryMaxDelay = time.Second
	}
	if o.DefaultTimeout == 0 {
		o.DefaultTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = discard
	}
	return o
}

// Harness is a Server running in the background for one test.
type Harness struct {
	tb     testing.TB
	opts   Options
	rdb    redis.UniversalClient
	b      *broker.Broker
	q      broker.QueueRef
	srv    *worker.Server
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// StartServer ensures the queue (EnsureQueue) and runs a worker.Server for h on
// rdb until the test ends (or Stop). Call it again with the same Options.Queue to
// run several workers on one queue.
func StartServer(tb testing.TB, rdb redis.UniversalClient, h worker.Handler, o Options) *Harness {
	tb.Helper()
	o = o.withDefaults()
	EnsureQueue(tb, rdb, o)
	srv, err := worker.NewServer(worker.Config{
		Redis: rdb, Namespace: o.Namespace, Queue: o.Queue, Concurrency: o.Concurrency,
		VisibilityTimeout: o.VisibilityTimeout, HeartbeatInterval: o.HeartbeatInterval, DrainTimeout: o.DrainTimeout,
		WorkerID: o.WorkerID, Logger: o.Logger, Hold: o.Hold, TracerProvider: o.TracerProvider, Metrics: o.Metrics,
	}, h)
	if err != nil {
		tb.Fatalf("workertest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := &Harness{tb: tb, opts: o, rdb: rdb, b: broker.New(rdb), q: broker.QueueRef{Namespace: o.Namespace, Name: o.Queue},
		srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { hs.done <- srv.Run(ctx) }()
	tb.Cleanup(func() { hs.Stop() })
	return hs
}

// Server returns the running server.
func (h *Harness) Server() *worker.Server { return h.srv }

// Queue returns the queue name.
func (h *Harness) Queue() string { return h.opts.Queue }

// Options returns the effective options (pass them to another StartServer to
// add a worker on the same queue).
func (h *Harness) Options() Options { return h.opts }

// Stop drains the server (as on SIGTERM) and waits for Run to return.
func (h *Harness) Stop() {
	h.once.Do(func() {
		h.cancel()
		select {
		case err := <-h.done:
			if err != nil {
				h.tb.Errorf("workertest: Run: %v", err)
			}
		case <-time.After(h.opts.DrainTimeout + 15*time.Second):
			h.tb.Errorf("workertest: server did not stop within the drain timeout")
		}
	})
}

// SubmitOptions are the optional fields of a submission.
type SubmitOptions struct {
	IdempotencyKey string
	Priority       int // default 5
	MaxAttempts    int
	Timeout        time.Duration
	Delay          time.Duration
	FlowKey        string // the task's flow key (Task.FlowKey); default none
}

// Submit adds a task and returns its id (the existing task's id for a replayed
// idempotency key).
func (h *Harness) Submit(taskType string, payload any, so SubmitOptions) string {
	h.tb.Helper()
	return Submit(h.tb, h.rdb, h.opts, taskType, payload, so)
}

// Submit adds a task to the queue of o (after EnsureQueue with the same o)
// without a running server, e.g. to pre-load a backlog, and returns its id.
func Submit(tb testing.TB, rdb redis.UniversalClient, o Options, taskType string, payload any, so SubmitOptions) string {
	tb.Helper()
	o = o.withDefaults()
	raw, err := json.Marshal(payload)
	if err != nil {
		tb.Fatalf("workertest: marshal payload: %v", err)
	}
	if payload == nil {
		raw = json.RawMessage("{}")
	}
	if so.Priority == 0 {
		so.Priority = 5
	}
	req := broker.SubmitRequest{Type: taskType, Payload: raw, IdempotencyKey: so.IdempotencyKey, Priority: so.Priority,
		MaxAttempts: so.MaxAttempts, Timeout: so.Timeout, FlowKey: so.FlowKey}
	if so.Delay > 0 {
		req.NotBefore = time.Now().Add(so.Delay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := broker.New(rdb).Submit(ctx, broker.QueueRef{Namespace: o.Namespace, Name: o.Queue}, req)
	if err != nil {
		tb.Fatalf("workertest: submit %s: %v", taskType, err)
	}
	return res.Task.ID
}

// TaskState is a task's record as Wait and Get return it.
type TaskState struct {
	ID         string
	Type       string
	State      string // Pending, Queued, Running, Retrying, Succeeded, Failed, DeadLettered, Cancelled, Expired
	Attempt    int
	Result     json.RawMessage
	LastError  string
	ErrorClass string
	WorkerID   string
}

// Terminal reports whether the task has finished.
func (s TaskState) Terminal() bool { return broker.State(s.State).Terminal() }

// Get reads a task.
func (h *Harness) Get(id string) TaskState {
	h.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ti, err := h.b.GetTask(ctx, h.q, id)
	if err != nil {
		h.tb.Fatalf("workertest: get %s: %v", id, err)
	}
	return TaskState{ID: ti.ID, Type: ti.Type, State: string(ti.State), Attempt: ti.Attempt, Result: ti.Result,
		LastError: ti.LastError, ErrorClass: ti.LastErrorClass, WorkerID: ti.WorkerID}
}

// Wait polls the task until it is terminal and returns it; it fails the test
// after timeout.
func (h *Harness) Wait(id string, timeout time.Duration) TaskState {
	h.tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := h.Get(id)
		if st.Terminal() {
			return st
		}
		if time.Now().After(deadline) {
			h.tb.Fatalf("workertest: task %s not finished after %s: state %s attempt %d, last error %q",
				id, timeout, st.State, st.Attempt, st.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
