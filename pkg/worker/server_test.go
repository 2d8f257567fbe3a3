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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workermetrics"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

const waitFor = 20 * time.Second

func demoServer(t *testing.T, o workertest.Options) (*workertest.Harness, *redis.Client) {
	t.Helper()
	if o.Metrics == nil {
		o.Metrics = workermetrics.New()
	}
	rdb := redistest.Start(t).Client()
	mux := worker.NewMux()
	registerTestHandlers(mux)
	return workertest.StartServer(t, rdb, mux, o), rdb
}

func qref(h *workertest.Harness) broker.QueueRef {
	return broker.QueueRef{Namespace: h.Options().Namespace, Name: h.Queue()}
}

// The original's demo: 100 of 100 echo tasks succeed with their payload as result.
func TestEchoHundred(t *testing.T) {
	t.Parallel()
	h, _ := demoServer(t, workertest.Options{Concurrency: 8})
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = h.Submit(echoType, map[string]int{"n": i}, workertest.SubmitOptions{})
	}
	for i, id := range ids {
		st := h.Wait(id, waitFor)
		if st.State != "Succeeded" || st.Attempt != 1 {
			t.Fatalf("task %d: state %s attempt %d err %q", i, st.State, st.Attempt, st.LastError)
		}
		var got map[string]int
		if err := json.Unmarshal(st.Result, &got); err != nil || got["n"] != i {
			t.Fatalf("task %d: result %s", i, st.Result)
		}
	}
}

func TestFlakySucceedsOnAttemptThree(t *testing.T) {
	t.Parallel()
	h, _ := demoServer(t, workertest.Options{})
	id := h.Submit(flakyType, flakyPayload{FailTimes: 2}, workertest.SubmitOptions{MaxAttempts: 5})
	st := h.Wait(id, waitFor)
	if st.State != "Succeeded" || st.Attempt != 3 {
		t.Fatalf("state %s attempt %d err %q", st.State, st.Attempt, st.LastError)
	}
	if !strings.Contains(string(st.Result), `"attempt":3`) {
		t.Fatalf("result %s", st.Result)
	}
	assertMetric(t, h, `dtq_worker_tasks_retried_total{namespace="default",queue="`+h.Queue()+`",task_type="flaky"} 2`)
}

// A permanent error dead-letters at once, whatever maxAttempts says, and the
// idempotency record moves to failed.
func TestFailDeadLettersAndRecordFailed(t *testing.T) {
	t.Parallel()
	h, rdb := demoServer(t, workertest.Options{})
	id := h.Submit(failType, nil, workertest.SubmitOptions{MaxAttempts: 3, IdempotencyKey: "fail-1"})
	st := h.Wait(id, waitFor)
	if st.State != "DeadLettered" || st.Attempt != 1 || st.ErrorClass != worker.ClassPermanent {
		t.Fatalf("state %s attempt %d class %q err %q", st.State, st.Attempt, st.ErrorClass, st.LastError)
	}
	rec, err := broker.New(rdb).Idempotency(context.Background(), qref(h), "fail-1")
	if err != nil || rec.State != broker.IdempotencyFailed || rec.TaskID != id {
		t.Fatalf("idempotency record %+v, %v", rec, err)
	}
	assertMetric(t, h, `dtq_worker_tasks_dead_lettered_total{namespace="default",queue="`+h.Queue()+`",task_type="fail"} 1`)
}

// Retryable failures exhaust maxAttempts and then dead-letter.
func TestRetryableExhaustsMaxAttempts(t *testing.T) {
	t.Parallel()
	h, _ := demoServer(t, workertest.Options{})
	id := h.Submit(flakyType, flakyPayload{FailTimes: 10}, workertest.SubmitOptions{MaxAttempts: 3})
	st := h.Wait(id, waitFor)
	if st.State != "DeadLettered" || st.Attempt != 3 || st.ErrorClass != worker.ClassRetryable {
		t.Fatalf("state %s attempt %d class %q", st.State, st.Attempt, st.ErrorClass)
	}
}

// Submissions of one key make one logical task: while it runs, a second
// submission is in progress naming it; after it ends, one is a replay. The
// handler counts its executions with no guard at all, so a second task for
// the key would show; a sentinel task queued behind the duplicates proves
// the worker had the chance to run them.
func TestDuplicateKeyRunsOnce(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var runs atomic.Int32
	running, release := make(chan struct{}, 4), make(chan struct{})
	mux := worker.NewMux()
	mux.HandleFunc("once", func(ctx context.Context, t *worker.Task) (any, error) {
		runs.Add(1)
		running <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	})
	mux.HandleFunc("sentinel", func(ctx context.Context, t *worker.Task) (any, error) { return nil, nil })
	h := workertest.StartServer(t, rdb, mux, workertest.Options{Concurrency: 4})
	b := broker.New(rdb)
	id1 := h.Submit("once", nil, workertest.SubmitOptions{IdempotencyKey: "k1"})
	select {
	case <-running:
	case <-time.After(waitFor):
		t.Fatal("the first task did not start")
	}
	_, err := b.Submit(context.Background(), qref(h), broker.SubmitRequest{Type: "once", IdempotencyKey: "k1", Priority: 5})
	var be *broker.Error
	if !errors.As(err, &be) || be.Code != broker.CodeIdempotencyInProgress || be.TaskID != id1 {
		t.Fatalf("second submission while the first runs: %v, want IDEMPOTENCY_IN_PROGRESS naming %s", err, id1)
	}
	close(release)
	if st := h.Wait(id1, waitFor); st.State != "Succeeded" {
		t.Fatalf("state %s err %q", st.State, st.LastError)
	}
	if id2 := h.Submit("once", nil, workertest.SubmitOptions{IdempotencyKey: "k1"}); id2 != id1 {
		t.Fatalf("a submission after the first ended made task %s, want a replay of %s", id2, id1)
	}
	h.Wait(h.Submit("sentinel", nil, workertest.SubmitOptions{}), waitFor)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times for one key, want 1", n)
	}
}

func TestCancelRunningTaskThroughContext(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var sawCancel atomic.Bool
	started := make(chan struct{}, 1)
	mux := worker.NewMux()
	mux.HandleFunc("wait", func(ctx context.Context, t *worker.Task) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		sawCancel.Store(true)
		return nil, ctx.Err()
	})
	h := workertest.StartServer(t, rdb, mux, workertest.Options{})
	id := h.Submit("wait", nil, workertest.SubmitOptions{})
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("handler did not start")
	}
	state, err := broker.New(rdb).Cancel(context.Background(), qref(h), id)
	if err != nil || state != broker.StateRunning {
		t.Fatalf("cancel: %s %v", state, err)
	}
	st := h.Wait(id, waitFor)
	if st.State != "Cancelled" || !sawCancel.Load() {
		t.Fatalf("state %s, handler saw cancel %v", st.State, sawCancel.Load())
	}
}

// A handler that overruns its timeout is retried, and the retry runs.
func TestTimeoutRetries(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	mux := worker.NewMux()
	var causes sync.Map
	mux.HandleFunc("slow-once", func(ctx context.Context, t *worker.Task) (any, error) {
		if t.Attempt == 1 {
			<-ctx.Done()
			causes.Store(t.Attempt, context.Cause(ctx))
			return nil, ctx.Err()
		}
		return "ok", nil
	})
	h := workertest.StartServer(t, rdb, mux, workertest.Options{Metrics: workermetrics.New()})
	id := h.Submit("slow-once", nil, workertest.SubmitOptions{Timeout: 200 * time.Millisecond, MaxAttempts: 3})
	st := h.Wait(id, waitFor)
	if st.State != "Succeeded" || st.Attempt != 2 {
		t.Fatalf("state %s attempt %d err %q", st.State, st.Attempt, st.LastError)
	}
	if c, _ := causes.Load(1); !errors.Is(c.(error), context.DeadlineExceeded) {
		t.Fatalf("attempt 1 cause %v", c)
	}
	assertMetric(t, h, `dtq_worker_tasks_retried_total{namespace="default",queue="`+h.Queue()+`",task_type="slow-once"} 1`)
}

func TestPermanentKinds(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var ran atomic.Int32
	mux := worker.NewMux()
	mux.HandleFunc("panic", func(ctx context.Context, t *worker.Task) (any, error) { ran.Add(1); panic("boom") })
	mux.HandleFunc("skip", func(ctx context.Context, t *worker.Task) (any, error) {
		ran.Add(1)
		return nil, worker.Retryable(fmt.Errorf("looks transient but: %w", worker.SkipRetry))
	})
	mux.HandleFunc("ctx-canceled", func(ctx context.Context, t *worker.Task) (any, error) {
		ran.Add(1)
		return nil, context.Canceled // not our cancel: permanent
	})
	mux.Handle("typed", worker.Typed(func(ctx context.Context, t *worker.Task, p struct{ N int }) (any, error) {
		ran.Add(1)
		return p.N, nil
	}))
	h := workertest.StartServer(t, rdb, mux, workertest.Options{})
	cases := []struct {
		typ, payload, class string
		runs                int32
	}{
		{"panic", `{}`, worker.ClassPanic, 1},
		{"skip", `{}`, worker.ClassSkipRetry, 1},
		{"ctx-canceled", `{}`, worker.ClassPermanent, 1},
		{"typed", `{"N":"not a number"}`, worker.ClassSkipRetry, 0},
		{"no-such-type", `{}`, worker.ClassUnknownType, 0},
	}
	for _, c := range cases {
		before := ran.Load()
		id := h.Submit(c.typ, json.RawMessage(c.payload), workertest.SubmitOptions{MaxAttempts: 5})
		st := h.Wait(id, waitFor)
		if st.State != "DeadLettered" || st.Attempt != 1 || st.ErrorClass != c.class {
			t.Errorf("%s: state %s attempt %d class %q err %q", c.typ, st.State, st.Attempt, st.ErrorClass, st.LastError)
		}
		if got := ran.Load() - before; got != c.runs {
			t.Errorf("%s: handler ran %d times, want %d", c.typ, got, c.runs)
		}
	}
	if h.Server().Status() == worker.StatusStopped {
		t.Fatal("a panic stopped the server")
	}
}

// Never more deliveries than slots: with concurrency 2 and ten long tasks, only
// two entries are ever pending for the worker.
func TestNoPrefetchBeyondSlots(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	release := make(chan struct{})
	var running, peak atomic.Int32
	mux := worker.NewMux()
	mux.HandleFunc("hold", func(ctx context.Context, t *worker.Task) (any, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		defer running.Add(-1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	})
	o := workertest.Options{Queue: workertest.NewQueueName(), Concurrency: 2}
	workertest.EnsureQueue(t, rdb, o)
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = workertest.Submit(t, rdb, o, "hold", nil, workertest.SubmitOptions{Priority: i})
	}
	h := workertest.StartServer(t, rdb, mux, o)
	deadline := time.Now().Add(waitFor)
	for running.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	stats, err := broker.New(rdb).Stats(context.Background(), qref(h))
	if err != nil {
		t.Fatal(err)
	}
	if stats.InFlight != 2 {
		t.Fatalf("in flight %d with 2 slots (stats %+v)", stats.InFlight, stats)
	}
	// Strict priority: the two running are the highest bands (9 and 8).
	for _, id := range ids[8:] {
		if st := h.Get(id); st.State != "Running" {
			t.Errorf("task at priority %s is %s, want Running", id, st.State)
		}
	}
	close(release)
	for _, id := range ids {
		if st := h.Wait(id, waitFor); st.State != "Succeeded" {
			t.Fatalf("state %s", st.State)
		}
	}
	if peak.Load() > 2 {
		t.Fatalf("peak concurrency %d > 2", peak.Load())
	}
}

func TestMetricsNoIDsInLabels(t *testing.T) {
	t.Parallel()
	h, _ := demoServer(t, workertest.Options{})
	id := h.Submit(echoType, map[string]string{"secret": "payload-value"}, workertest.SubmitOptions{})
	h.Wait(id, waitFor)
	body := scrape(t, h)
	for _, want := range []string{
		`dtq_worker_tasks_started_total{namespace="default",queue="` + h.Queue() + `",task_type="echo"} 1`,
		`dtq_worker_tasks_succeeded_total{namespace="default",queue="` + h.Queue() + `",task_type="echo"} 1`,
		`dtq_worker_task_execution_seconds_count{namespace="default",queue="` + h.Queue() + `",task_type="echo"} 1`,
		`dtq_worker_task_wait_seconds_count{namespace="default",queue="` + h.Queue() + `",task_type="echo"} 1`,
		`dtq_worker_task_latency_seconds_count{namespace="default",queue="` + h.Queue() + `",task_type="echo"} 1`,
		`dtq_worker_tasks_in_flight{namespace="default",queue="` + h.Queue() + `"} 0`,
		`dtq_worker_slots{namespace="default",queue="` + h.Queue() + `"} 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, id) || strings.Contains(body, "payload-value") {
		t.Fatal("metrics contain a task id or payload")
	}
	// Only what happened has a series: no zero-valued outcome the task never had.
	for _, none := range []string{"failed", "retried", "dead_lettered", "cancelled"} {
		if s := "dtq_worker_tasks_" + none + "_total{"; strings.Contains(body, s) {
			t.Errorf("metrics have a %s series for a task that succeeded", s)
		}
	}
}

func scrape(t *testing.T, h *workertest.Harness) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.Options().Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func assertMetric(t *testing.T, h *workertest.Harness, line string) {
	t.Helper()
	// The metric is updated after Complete returns; give it a moment.
	deadline := time.Now().Add(2 * time.Second)
	for {
		body := scrape(t, h)
		if strings.Contains(body, line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q", line)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Executions run on reused executor goroutines; none outlives Run, not even
// the one that finished the last task during the drain. Not parallel: it counts
// executor goroutines in the whole process.
func TestRunLeavesNoExecutors(t *testing.T) {
	h, _ := demoServer(t, workertest.Options{Concurrency: 8})
	id := h.Submit(sleepType, sleepPayload{Seconds: 0.5}, workertest.SubmitOptions{})
	deadline := time.Now().Add(waitFor)
	for h.Get(id).State != "Running" {
		if time.Now().After(deadline) {
			t.Fatalf("task not running: %s", h.Get(id).State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.Stop() // drains: the sleep ends, its executor goes idle, Run returns
	if st := h.Get(id); st.State != "Succeeded" {
		t.Fatalf("state after drain %s", st.State)
	}
	executors := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "worker.(*Server).executor(")
	}
	deadline = time.Now().Add(300 * time.Millisecond) // well under the 1 s idle exit
	for executors() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := executors(); n > 0 {
		t.Fatalf("%d executor goroutines left after Run returned", n)
	}
}

// Metrics are opt-in: without Config.Metrics the server answers /healthz and
// /readyz but has no /metrics; with workermetrics it serves the dtq_worker_*
// series.
func TestMetricsEndpoint(t *testing.T) {
	for name, tc := range map[string]struct {
		metrics worker.Metrics
		status  int
	}{
		"none":          {nil, http.StatusNotFound},
		"workermetrics": {workermetrics.New(), http.StatusOK},
	} {
		t.Run(name, func(t *testing.T) {
			addr, err := loopback.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			srv, err := worker.NewServer(worker.Config{Redis: redistest.Start(t).Client(), Queue: "q", MetricsAddr: addr,
				Metrics: tc.metrics, Logger: slog.New(slog.DiscardHandler)}, worker.NewMux())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) { // no queue "q": Run waits for it
					t.Errorf("Run: %v", err)
				}
			}()
			get := func(path string) (int, string) {
				deadline := time.Now().Add(5 * time.Second)
				for {
					resp, err := http.Get("http://" + addr + path)
					if err == nil {
						b, _ := io.ReadAll(resp.Body)
						_ = resp.Body.Close()
						return resp.StatusCode, string(b)
					}
					if time.Now().After(deadline) {
						t.Fatalf("GET %s: %v", path, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if code, _ := get("/healthz"); code != http.StatusOK {
				t.Fatalf("/healthz answers %d", code)
			}
			code, body := get("/metrics")
			if code != tc.status || (code == http.StatusOK && !strings.Contains(body, `dtq_worker_slots{namespace="default",queue="q"} 4`)) {
				t.Fatalf("/metrics answers %d, want %d:\n%s", code, tc.status, body)
			}
		})
	}
}
