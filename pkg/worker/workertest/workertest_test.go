package workertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
