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
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

var ctx = context.Background()

type env struct {
	t     *testing.T
	b     *Broker
	rdb   *redis.Client
	clock *fakeClock
	q     QueueRef
}

// newEnv starts a private redis-server and a queue "ns/q" with cfg (defaults
// when nil).
func newEnv(t *testing.T, mutate ...func(*QueueConfig)) *env {
	t.Helper()
	srv := redistest.Start(t)
	clk := newFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	e := &env{t: t, b: New(srv.Client(), WithClock(clk)), rdb: srv.Client(), clock: clk, q: QueueRef{Namespace: "ns", Name: "q"}}
	cfg := DefaultQueueConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	if err := e.b.EnsureQueue(ctx, e.q, cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) submit(req SubmitRequest) (SubmitResult, error) {
	e.t.Helper()
	if req.Type == "" {
		req.Type = "demo"
	}
	return e.b.Submit(ctx, e.q, req)
}

func (e *env) mustSubmit(req SubmitRequest) TaskInfo {
	e.t.Helper()
	r, err := e.submit(req)
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return r.Task
}

// deliver reads one entry and starts it as worker consumer; it fails when there
// is nothing to run.
func (e *env) deliver(consumer string) (Execution, TaskInfo) {
	e.t.Helper()
	ds, err := e.b.Read(ctx, e.q, consumer, 1, 0)
	if err != nil || len(ds) != 1 {
		e.t.Fatalf("read: %v %v", ds, err)
	}
	return e.start(consumer, ds[0])
}

// start starts d as worker consumer; it fails when d does not run.
func (e *env) start(consumer string, d Delivery) (Execution, TaskInfo) {
	e.t.Helper()
	sr, err := e.b.Start(ctx, e.q, consumer, d)
	if err != nil || !sr.Run {
		e.t.Fatalf("start: %+v %v", sr, err)
	}
	return Execution{Delivery: d, WorkerID: consumer, Attempt: sr.Task.Attempt}, sr.Task
}

func (e *env) complete(x Execution, out Outcome) State {
	e.t.Helper()
	s, err := e.b.Complete(ctx, e.q, x, out)
	if err != nil {
		e.t.Fatalf("complete: %v", err)
	}
	return s
}

func (e *env) record(key string) IdempotencyRecord {
	e.t.Helper()
	r, err := e.b.Idempotency(ctx, e.q, key)
	if err != nil {
		e.t.Fatalf("idempotency record %q: %v", key, err)
	}
	return r
}

func (e *env) task(id string) TaskInfo {
	e.t.Helper()
	ti, err := e.b.GetTask(ctx, e.q, id)
	if err != nil {
		e.t.Fatalf("get task %s: %v", id, err)
	}
	return ti
}

func wantCode(t *testing.T, err error, code Code) *Error {
	t.Helper()
	var be *Error
	if !errors.As(err, &be) || be.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
	return be
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// fakeClock is the tests' Clock: it moves only when Step moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(now time.Time) *fakeClock { return &fakeClock{now: now} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Step moves the clock by d.
func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
