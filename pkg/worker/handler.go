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

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dtq-dev/dtq/pkg/worker/internal/taskset"
)

// Task is what a handler receives: one attempt at one task.
type Task struct {
	ID             string          // the task id (stable across attempts)
	Type           string          // the handler name it was submitted with
	Queue          string          // "<namespace>/<name>"
	Payload        json.RawMessage // a JSON object
	Attempt        int             // 1 on the first run; grows on retries and crash redeliveries
	MaxAttempts    int             // the last attempt that may run
	IdempotencyKey string          // "" when submitted without one
	Priority       int             // 0..9
	Deadline       time.Time       // the handler's context ends at this time

	// flowKey is the task's flow key (FlowKey).
	flowKey string

	// srv and exec are the Server and execution running the task (nil
	// outside a Server), for ReportProgress.
	srv  *Server
	exec *execution
}

// FlowKey returns the task's flow key ("" when it was submitted without
// one): the tenant or customer its queue's flow control counts it against
// (docs/flow-control.md). A handler may use it, e.g. to choose the
// downstream credentials; its limits were applied before the task started.
func (t *Task) FlowKey() string { return t.flowKey }

func init() {
	taskset.FlowKey = func(t any, key string) { t.(*Task).flowKey = key }
}

// Draining returns a channel that is closed when the worker running t starts
// to drain (Run's context ended, e.g. on SIGTERM: it reads no more tasks and
// waits up to its drain timeout for the running ones). A handler that waits
// (for a rate limit, a lock, a slow dependency) can select on it and return
// ErrHandBack while its task has done nothing yet: the task goes back to the
// queue at once without counting the attempt. Outside a Server (a Task built
// by workertest) it is nil, which never fires.
func (t *Task) Draining() <-chan struct{} {
	if t.srv == nil {
		return nil
	}
	return t.srv.runCtx.Done()
}

// Handler runs tasks. The returned value is stored as the task's JSON result
// (json.RawMessage is stored as is; nil stores null). Handlers must honour ctx:
// it ends at the task deadline, on a cancel request and when a draining worker
// runs out of its budget.
type Handler interface {
	ProcessTask(ctx context.Context, t *Task) (any, error)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, t *Task) (any, error)

// ProcessTask calls f(ctx, t).
func (f HandlerFunc) ProcessTask(ctx context.Context, t *Task) (any, error) { return f(ctx, t) }

// Decode unmarshals the task's payload into a P. A payload that does not decode
// is a permanent failure: the returned error is wrapped with SkipRetry.
func Decode[P any](t *Task) (P, error) {
	var p P
	data := t.Payload
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return p, fmt.Errorf("%w: decode %s payload: %w", SkipRetry, t.Type, err)
	}
	return p, nil
}

// Typed returns a Handler that decodes the payload into a P before calling fn.
// A payload that does not decode fails the task permanently without calling fn.
func Typed[P any](fn func(ctx context.Context, t *Task, p P) (any, error)) Handler {
	return HandlerFunc(func(ctx context.Context, t *Task) (any, error) {
		p, err := Decode[P](t)
		if err != nil {
			return nil, err
		}
		return fn(ctx, t, p)
	})
}

// Mux routes tasks to handlers by task type. A task whose type has no handler
// fails permanently (ErrUnknownType) and nothing runs. The zero Mux is empty and
// ready to use.
type Mux struct {
	mu sync.RWMutex
	m  map[string]Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{} }

// Handle registers h for taskType. It panics on an empty type, a nil handler or
// a type registered twice, like net/http.ServeMux.
func (m *Mux) Handle(taskType string, h Handler) {
	if taskType == "" {
		panic("worker: empty task type")
	}
	if h == nil {
		panic("worker: nil handler for " + taskType)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]Handler{}
	}
	if _, ok := m.m[taskType]; ok {
		panic("worker: multiple registrations for " + taskType)
	}
	m.m[taskType] = h
}

// HandleFunc registers fn for taskType.
func (m *Mux) HandleFunc(taskType string, fn func(ctx context.Context, t *Task) (any, error)) {
	if fn == nil {
		panic("worker: nil handler for " + taskType)
	}
	m.Handle(taskType, HandlerFunc(fn))
}

// Handler returns the handler for taskType and whether there is one.
func (m *Mux) Handler(taskType string) (Handler, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.m[taskType]
	return h, ok
}

// Types lists the registered task types, sorted.
func (m *Mux) Types() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.m))
	for k := range m.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ProcessTask dispatches t to the handler registered for t.Type.
func (m *Mux) ProcessTask(ctx context.Context, t *Task) (any, error) {
	h, ok := m.Handler(t.Type)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, t.Type)
	}
	return h.ProcessTask(ctx, t)
}
