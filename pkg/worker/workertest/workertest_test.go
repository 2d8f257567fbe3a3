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

package workertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

func TestExecuteClassifies(t *testing.T) {
	h := worker.NewMux()
	h.HandleFunc("panic", func(ctx context.Context, t *worker.Task) (any, error) { panic("x") })
	h.HandleFunc("chan", func(ctx context.Context, t *worker.Task) (any, error) { return make(chan int), nil })
	h.HandleFunc("conn", func(ctx context.Context, t *worker.Task) (any, error) {
		return nil, fmt.Errorf("dial: %w", errors.Join(context.Canceled)) // a context error is not a connection error
	})
	h.HandleFunc("attempt", func(ctx context.Context, t *worker.Task) (any, error) { return t.Attempt, nil })
	cases := []struct {
		typ, class string
		retry, pan bool
	}{
		{"panic", worker.ClassPanic, false, true},
		{"chan", worker.ClassBadResult, false, false},
		{"conn", worker.ClassPermanent, false, false},
	}
	for _, c := range cases {
		r := workertest.Execute(context.Background(), h, workertest.NewTask(c.typ, nil))
		if r.Class != c.class || r.Retryable != c.retry || r.Panicked != c.pan || r.Err == nil {
			t.Errorf("%s: %+v", c.typ, r)
		}
	}
	r := workertest.Execute(context.Background(), h, workertest.NewTask("attempt", nil, workertest.WithAttempt(3)))
	if r.Err != nil || string(r.Value) != "3" {
		t.Fatalf("attempt: %+v", r)
	}
}

// Execute runs the Server's executor: after its context ends, a handler gets a
// grace period to return, and what it returns then is what is recorded.
func TestExecuteWaitsTheGracePeriod(t *testing.T) {
	cleanup := errors.New("rolled back the half-written order")
	h := worker.HandlerFunc(func(ctx context.Context, _ *worker.Task) (any, error) {
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // cleaning up, well within the grace period
		return nil, cleanup
	})
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(worker.ErrCancelRequested)
	r := workertest.Execute(ctx, h, workertest.NewTask("order", nil))
	if !r.Cancelled || !errors.Is(r.Err, cleanup) {
		t.Fatalf("want the handler's own error recorded as Cancelled after the grace period, got %+v", r)
	}
}

// A handler that ignores its context is abandoned once the grace period has
// passed, and the attempt is recorded as a timeout.
func TestExecuteAbandonsAHandlerIgnoringItsContext(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h := worker.HandlerFunc(func(context.Context, *worker.Task) (any, error) {
		<-release
		return "too late", nil
	})
	done := make(chan workertest.Result, 1)
	go func() {
		done <- workertest.Execute(context.Background(), h, workertest.NewTask("stuck", nil, workertest.WithTimeout(50*time.Millisecond)))
	}()
	select {
	case r := <-done:
		if r.Class != worker.ClassTimeout || !r.Retryable || !errors.Is(r.Err, context.DeadlineExceeded) {
			t.Fatalf("want a retryable timeout, got %+v", r)
		}
	case <-time.After(30 * time.Second): // safety net: the grace period is one second
		t.Fatal("Execute did not abandon a handler that ignores its context")
	}
}

// The cause of the context's end decides the outcome as in a Server: a cancel
// request is recorded Cancelled, a drain or a lost lease records nothing, the
// task deadline is a retryable timeout.
func TestExecuteMapsTheCancelCause(t *testing.T) {
	h := worker.HandlerFunc(func(ctx context.Context, _ *worker.Task) (any, error) {
		<-ctx.Done()
		return nil, fmt.Errorf("stopped: %w", ctx.Err())
	})
	cases := map[string]struct {
		cause                       error // nil: the task deadline ends the context
		class                       string
		retry, cancelled, redeliver bool
		errPrefix                   string
	}{
		"cancel requested":  {cause: worker.ErrCancelRequested, class: "Cancelled", cancelled: true, errPrefix: "cancelled: stopped"},
		"drain interrupted": {cause: worker.ErrInterrupted, redeliver: true},
		"lease lost":        {cause: worker.ErrLeaseLost, redeliver: true},
		"caller cancelled":  {cause: context.Canceled, class: worker.ClassPermanent, errPrefix: "stopped"},
		"task deadline":     {class: worker.ClassTimeout, retry: true, errPrefix: "deadline exceeded after"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if c.cause != nil {
				time.AfterFunc(10*time.Millisecond, func() { cancel(c.cause) })
			}
			r := workertest.Execute(ctx, h, workertest.NewTask("job", nil, workertest.WithTimeout(200*time.Millisecond)))
			msg := ""
			if r.Err != nil {
				msg = r.Err.Error()
			}
			if r.Class != c.class || r.Retryable != c.retry || r.Cancelled != c.cancelled || r.Redeliver != c.redeliver ||
				!strings.HasPrefix(msg, c.errPrefix) || (c.errPrefix == "") != (r.Err == nil) {
				t.Fatalf("got %+v (err %q)", r, msg)
			}
		})
	}
}

// Run a handler as a unit, without Redis.
func ExampleExecute() {
	h := worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (any, error) {
		if t.Attempt < 2 {
			return nil, worker.Retryable(errors.New("not yet"))
		}
		return map[string]int{"attempt": t.Attempt}, nil
	})
	r1 := workertest.Execute(context.Background(), h, workertest.NewTask("job", nil))
	r2 := workertest.Execute(context.Background(), h, workertest.NewTask("job", nil, workertest.WithAttempt(2)))
	fmt.Println(r1.Err, r1.Retryable, r1.Class)
	fmt.Println(string(r2.Value), r2.Err)
	// Output:
	// not yet true Retryable
	// {"attempt":2} <nil>
}

func TestNewTaskWithFlowKey(t *testing.T) {
	if k := workertest.NewTask("t", nil, workertest.WithFlowKey("tenant-a")).FlowKey(); k != "tenant-a" {
		t.Fatalf("flow key %q", k)
	}
	if k := workertest.NewTask("t", nil).FlowKey(); k != "" {
		t.Fatalf("flow key %q without one", k)
	}
}
