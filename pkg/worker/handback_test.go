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

package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// longVisibility is far longer than any of these tests: a task they see run
// again was handed back, not reclaimed after the visibility timeout.
const longVisibility = 10 * time.Minute

// readableNow reads the queue as another worker would: the task must be
// there, long before the visibility timeout, and start with attempt want. It
// reads again while it finds nothing: a worker that holds its reads may have
// had a read waiting when it handed the task back, and hands it back again
// (uncounted) only after that read delivers it.
func readableNow(t *testing.T, rdb *redis.Client, q broker.QueueRef, id string, want int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ss, err := broker.New(rdb).ReadStart(context.Background(), q, "peer", "peer", 1, 0)
		if err == nil && len(ss) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil || len(ss) != 1 || !ss[0].Run || ss[0].TaskID != id || ss[0].Task.Attempt != want {
			t.Fatalf("another worker reads %+v (%v); want task %s to run as attempt %d", ss, err, id, want)
		}
		return
	}
}

// Past the drain budget, an interrupted handler's task is handed back at
// once, its attempt counted (the handler ran): another worker reads it as
// attempt 2 right away, long before the visibility timeout.
func TestDrainHandsBackInterruptedWork(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	started := make(chan int, 4)
	mux := worker.NewMux()
	mux.HandleFunc("long", func(ctx context.Context, t *worker.Task) (any, error) {
		started <- t.Attempt
		<-ctx.Done()
		return nil, ctx.Err()
	})
	o := workertest.Options{VisibilityTimeout: longVisibility, HeartbeatInterval: 200 * time.Millisecond, DrainTimeout: 300 * time.Millisecond}
	a := workertest.StartServer(t, rdb, mux, o)
	id := a.Submit("long", nil, workertest.SubmitOptions{})
	if at := <-started; at != 1 {
		t.Fatalf("first attempt %d", at)
	}
	a.Stop()
	if st := a.Get(id); st.State != "Queued" || st.Attempt != 2 {
		t.Fatalf("after the interrupted drain: %s attempt %d, want Queued attempt 2 (handed back, counted)", st.State, st.Attempt)
	}
	readableNow(t, rdb, qref(a), id, 2)
}

// A handler that has not begun its task when the drain starts hands it back
// with ErrHandBack: the attempt is not counted. Outside a drain the same
// error is a retryable failure.
func TestHandBackWhileDrainingIsUncounted(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	started := make(chan int, 4)
	proceed := make(chan struct{})
	mux := worker.NewMux()
	mux.HandleFunc("wait", func(ctx context.Context, t *worker.Task) (any, error) {
		started <- t.Attempt
		<-proceed
		return nil, worker.ErrHandBack
	})
	o := workertest.Options{VisibilityTimeout: longVisibility, HeartbeatInterval: 200 * time.Millisecond, DrainTimeout: 10 * time.Second}
	a := workertest.StartServer(t, rdb, mux, o)

	// Not draining: a retryable failure, attempt counted.
	first := a.Submit("wait", nil, workertest.SubmitOptions{MaxAttempts: 1})
	<-started
	proceed <- struct{}{}
	if st := a.Wait(first, waitFor); st.State != "DeadLettered" || st.Attempt != 1 || st.ErrorClass != worker.ClassRetryable {
		t.Fatalf("hand-back outside a drain: %s attempt %d class %s, want DeadLettered after its one attempt, class Retryable", st.State, st.Attempt, st.ErrorClass)
	}

	id := a.Submit("wait", nil, workertest.SubmitOptions{})
	<-started
	stopped := make(chan struct{})
	go func() { a.Stop(); close(stopped) }()
	for a.Server().Status() != worker.StatusDraining {
		time.Sleep(5 * time.Millisecond)
	}
	close(proceed)
	<-stopped
	if st := a.Get(id); st.State != "Queued" || st.Attempt != 1 {
		t.Fatalf("handed back while draining: %s attempt %d, want Queued attempt 1 (not counted)", st.State, st.Attempt)
	}
	readableNow(t, rdb, qref(a), id, 1)
}

// Task.Draining is closed when the drain starts: a handler waiting on it
// hands its task back at once, uncounted, the draining worker does not read
// it again, and another worker runs it as attempt 1. (Without the signal the
// handler waits out its 30 s fallback and the task ends Succeeded "late" on
// this worker; with the drain's read started from a context the drain does
// not end, the handed-back task ran again here, up to three times.)
func TestDrainingSignal(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	started := make(chan struct{}, 10)
	mux := worker.NewMux()
	mux.HandleFunc("wait", func(ctx context.Context, t *worker.Task) (any, error) {
		started <- struct{}{}
		select {
		case <-t.Draining():
			return nil, worker.ErrHandBack
		case <-time.After(30 * time.Second):
			return "late", nil
		}
	})
	if (&worker.Task{}).Draining() != nil {
		t.Fatal("a Task outside a Server has a draining signal")
	}
	o := workertest.Options{VisibilityTimeout: longVisibility, HeartbeatInterval: 200 * time.Millisecond, DrainTimeout: time.Minute}
	a := workertest.StartServer(t, rdb, mux, o)
	id := a.Submit("wait", nil, workertest.SubmitOptions{})
	<-started
	a.Stop()
	if n := len(started); n != 0 {
		t.Fatalf("the draining worker ran the handed-back task %d more times", n)
	}
	if st := a.Get(id); st.State != "Queued" || st.Attempt != 1 {
		t.Fatalf("after the drain: %s attempt %d, want Queued attempt 1 (handed back, not counted)", st.State, st.Attempt)
	}
	o.Queue = a.Queue()
	b := workertest.StartServer(t, rdb, worker.HandlerFunc(func(context.Context, *worker.Task) (any, error) { return "ran", nil }), o)
	if st := b.Wait(id, waitFor); st.State != "Succeeded" || st.Attempt != 1 {
		t.Fatalf("on the next worker: %s attempt %d, want Succeeded attempt 1", st.State, st.Attempt)
	}
}

// Progress reports are written at once, then coalesced to one write a second
// carrying the latest value; they show on the task and in its events.
func TestReportProgress(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var q broker.QueueRef
	b := broker.New(rdb)
	mux := worker.NewMux()
	mux.HandleFunc("report", func(ctx context.Context, t *worker.Task) (any, error) {
		if err := t.ReportProgress(ctx, map[string]int{"done": 0}); err != nil {
			return nil, err
		}
		// A tight loop: all but the first coalesce into one write.
		for i := 1; i <= 100; i++ {
			if err := t.ReportProgress(ctx, map[string]int{"done": i}); err != nil {
				return nil, err
			}
		}
		if err := t.ReportProgress(ctx, make(chan int)); err == nil {
			return nil, errors.New("a value that is not JSON was accepted")
		}
		for {
			ti, err := b.GetTask(ctx, q, t.ID)
			if err != nil {
				return nil, err
			}
			if string(ti.Progress) == `{"done":100}` {
				return "ok", nil
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	a := workertest.StartServer(t, rdb, mux, workertest.Options{})
	q = qref(a)
	id := a.Submit("report", nil, workertest.SubmitOptions{Timeout: waitFor})
	if st := a.Wait(id, waitFor); st.State != "Succeeded" {
		t.Fatalf("task %s: %s", st.State, st.LastError)
	}
	evs, err := b.ReadEvents(context.Background(), q, "0", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.TaskID == id && ev.Type == broker.EventProgress {
			got = append(got, string(ev.Progress))
		}
	}
	// The first report and the coalesced latest one (a third only if one
	// write took over a second on a loaded machine), never 101.
	if len(got) < 2 || len(got) > 3 || got[0] != `{"done":0}` || got[len(got)-1] != `{"done":100}` {
		t.Fatalf("TaskProgress events %q, want {\"done\":0} then {\"done\":100}", got)
	}
}

// While Config.Hold holds, a handler's ErrHandBack hands its task back
// uncounted outside a drain too (the delivery sidecar's task held on a
// missing route at its deadline): the holding worker reads nothing, so
// another worker reads the task at once, as the same attempt.
func TestHandBackWhileHoldingIsUncounted(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var held atomic.Bool
	mux := worker.NewMux()
	mux.HandleFunc("wait", func(ctx context.Context, t *worker.Task) (any, error) {
		held.Store(true) // say, the app answered 404
		return nil, worker.ErrHandBack
	})
	o := workertest.Options{VisibilityTimeout: longVisibility, HeartbeatInterval: 200 * time.Millisecond,
		Hold: func() string {
			if held.Load() {
				return "handler-not-found"
			}
			return ""
		}}
	a := workertest.StartServer(t, rdb, mux, o)
	id := a.Submit("wait", nil, workertest.SubmitOptions{MaxAttempts: 1})
	deadline := time.Now().Add(waitFor)
	for {
		ran := held.Load() // before Get: a Queued read before the handler ran is not the hand-back
		st := a.Get(id)
		if ran && st.State == "Queued" {
			break
		}
		if st.State == "DeadLettered" || time.Now().After(deadline) {
			t.Fatalf("handed back while holding: %s attempt %d class %s error %q, want Queued attempt 1 (not counted)", st.State, st.Attempt, st.ErrorClass, st.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
	readableNow(t, rdb, qref(a), id, 1)
}

// A read already waiting when the hold begins may still deliver a task: the
// holding worker hands it back uncounted without running its handler.
func TestHoldStopsAWaitingRead(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var held atomic.Bool
	ran := make(chan string, 4)
	release := make(chan struct{})
	mux := worker.NewMux()
	mux.HandleFunc("first", func(ctx context.Context, t *worker.Task) (any, error) {
		ran <- t.ID
		<-release
		return nil, nil
	})
	mux.HandleFunc("second", func(ctx context.Context, t *worker.Task) (any, error) {
		ran <- t.ID
		return nil, nil
	})
	o := workertest.Options{VisibilityTimeout: longVisibility, HeartbeatInterval: 200 * time.Millisecond, Concurrency: 2,
		Hold: func() string {
			if held.Load() {
				return "handler-not-found"
			}
			return ""
		}}
	a := workertest.StartServer(t, rdb, mux, o)
	a.Submit("first", nil, workertest.SubmitOptions{})
	<-ran
	// The read loop takes the second slot and waits in a blocking read
	// (readBlock, a second) before the hold begins.
	time.Sleep(200 * time.Millisecond)
	held.Store(true)
	id := a.Submit("second", nil, workertest.SubmitOptions{})
	// The waiting read wakes on the new entry and starts it; give it its
	// second before another worker reads, or the other one may win the race.
	time.Sleep(time.Second)
	select {
	case got := <-ran:
		t.Fatalf("task %s ran on the holding worker", got)
	default:
	}
	close(release)
	readableNow(t, rdb, qref(a), id, 1)
}
