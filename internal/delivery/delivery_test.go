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

package delivery

// Redis integration tests: the sidecar (Run) against a real redis-server and
// a tiny Go HTTP handler (apptest) speaking the contract.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
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
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

const waitFor = 20 * time.Second

// apptest is the app: it acts on the payload's "mode" and counts what it ran.
type apptest struct {
	mu        sync.Mutex
	calls     map[string]int // by task id
	headers   map[string]http.Header
	cancelled atomic.Int32 // requests whose context ended before they answered
	open      atomic.Int32
	maxOpen   atomic.Int32
	routeOK   atomic.Bool // false: every request gets 404 (a wrong route)
	token     atomic.Value
}

func newApp() *apptest {
	a := &apptest{calls: map[string]int{}, headers: map[string]http.Header{}}
	a.routeOK.Store(true)
	return a
}

func (a *apptest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The token first: tests read it once they see a request open.
	a.token.Store(r.Header.Get(HeaderToken))
	n := a.open.Add(1)
	defer a.open.Add(-1)
	for {
		m := a.maxOpen.Load()
		if n <= m || a.maxOpen.CompareAndSwap(m, n) {
			break
		}
	}
	if !a.routeOK.Load() {
		http.NotFound(w, r)
		return
	}
	var p struct {
		Mode string `json:"mode"`
		Ms   int    `json:"ms"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &p)
	id := r.Header.Get(HeaderTaskID)
	a.mu.Lock()
	a.calls[id]++
	call := a.calls[id]
	a.headers[id] = r.Header.Clone()
	a.mu.Unlock()
	attempt, _ := strconv.Atoi(r.Header.Get(HeaderAttempt))
	switch p.Mode {
	case "bad":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"order 42 has no lines"}`))
		return
	case "fail-once":
		if attempt == 1 {
			http.Error(w, "database restarting", http.StatusInternalServerError)
			return
		}
	case "throttle-once":
		if call == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
	case "throttle-long":
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case "verdict-fail":
		w.Header().Set(HeaderVerdict, "fail")
		w.WriteHeader(http.StatusOK)
		return
	case "sleep", "sleep-first":
		if p.Mode == "sleep" || attempt == 1 {
			select {
			case <-time.After(time.Duration(p.Ms) * time.Millisecond):
			case <-r.Context().Done():
				a.cancelled.Add(1)
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"attempt":%d,"payload":%s}`, attempt, body)
}

func (a *apptest) callsOf(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[id]
}

// sidecar runs Run for the app at url on a fresh queue and returns what the
// test needs.
type sidecar struct {
	rdb     *redis.Client
	o       workertest.Options
	apiURL  string
	stop    func()
	stopped chan struct{}
}

func startSidecar(t *testing.T, handlerURL string, o workertest.Options) *sidecar {
	t.Helper()
	return startSidecarOn(t, redistest.Start(t).Client(), handlerURL, o)
}

// startSidecarOn is startSidecar on rdb: a second sidecar on the queue of
// another is a second pod of its Queue.
func startSidecarOn(t *testing.T, rdb *redis.Client, handlerURL string, o workertest.Options) *sidecar {
	t.Helper()
	if o.Queue == "" {
		o.Queue = workertest.NewQueueName()
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = 2 * time.Second
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 5 * time.Second
	}
	workertest.EnsureQueue(t, rdb, o)
	apiAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &sidecar{rdb: rdb, o: o, apiURL: "http://" + apiAddr, stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		err := Run(ctx, worker.Config{Redis: rdb, Namespace: o.Namespace, Queue: o.Queue, Concurrency: o.Concurrency,
			VisibilityTimeout: o.VisibilityTimeout, HeartbeatInterval: min(o.VisibilityTimeout/4, 500*time.Millisecond), DrainTimeout: o.DrainTimeout,
			WorkerID: "sidecar-" + apiAddr, Logger: slog.New(slog.DiscardHandler)},
			Config{HandlerURL: handlerURL, APIAddr: apiAddr})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	s.stop = func() { cancel(); <-s.stopped }
	t.Cleanup(s.stop)
	return s
}

func freeAddr(t *testing.T) string {
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func (s *sidecar) submit(t *testing.T, payload any, so workertest.SubmitOptions) string {
	t.Helper()
	return workertest.Submit(t, s.rdb, s.o, "job", payload, so)
}

func (s *sidecar) get(t *testing.T, id string) broker.TaskInfo {
	t.Helper()
	ti, err := broker.New(s.rdb).GetTask(context.Background(), broker.QueueRef{Namespace: s.o.Namespace, Name: s.o.Queue}, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return ti
}

func (s *sidecar) wait(t *testing.T, id string) broker.TaskInfo {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ti := s.get(t, id)
		if ti.State.Terminal() {
			return ti
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s after %v (attempt %d, error %q)", id, ti.State, waitFor, ti.Attempt, ti.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestContractOutcomes(t *testing.T) {
	t.Parallel()
	app := newApp()
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL+"/tasks", workertest.Options{})
	t.Run("group", func(t *testing.T) { contractCases(t, s, app) })
	if app.cancelled.Load() == 0 {
		t.Error("no request was cancelled at its deadline")
	}
}

func contractCases(t *testing.T, s *sidecar, app *apptest) {
	for name, tc := range map[string]struct {
		payload  string
		timeout  time.Duration
		state    broker.State
		attempt  int
		calls    int
		errPart  string
		class    string
		resultOK bool
	}{
		"2xx succeeds with the body as result":          {payload: `{"mode":"ok"}`, state: broker.StateSucceeded, attempt: 1, calls: 1, resultOK: true},
		"500 then 200 succeeds on attempt 2":            {payload: `{"mode":"fail-once"}`, state: broker.StateSucceeded, attempt: 2, calls: 2, resultOK: true},
		"400 dead-letters with the message":             {payload: `{"mode":"bad"}`, state: broker.StateDeadLettered, attempt: 1, calls: 1, errPart: "HTTP 400 from the handler: order 42 has no lines", class: worker.ClassSkipRetry},
		"429 with Retry-After resends the same attempt": {payload: `{"mode":"throttle-once"}`, state: broker.StateSucceeded, attempt: 1, calls: 2, resultOK: true},
		"a verdict overrides a 2xx":                     {payload: `{"mode":"verdict-fail"}`, state: broker.StateDeadLettered, attempt: 1, calls: 1, errPart: "verdict fail", class: worker.ClassSkipRetry},
		"a request outliving the deadline is cancelled and retried": {payload: `{"mode":"sleep-first","ms":10000}`, timeout: time.Second,
			state: broker.StateSucceeded, attempt: 2, calls: 2, resultOK: true},
		"a task 3x the visibility timeout succeeds once": {payload: `{"mode":"sleep","ms":6500}`, timeout: 20 * time.Second,
			state: broker.StateSucceeded, attempt: 1, calls: 1, resultOK: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := s.submit(t, json.RawMessage(tc.payload), workertest.SubmitOptions{MaxAttempts: 3, Timeout: tc.timeout, IdempotencyKey: "k-" + name})
			ti := s.wait(t, id)
			if ti.State != tc.state || ti.Attempt != tc.attempt || app.callsOf(id) != tc.calls ||
				!strings.Contains(ti.LastError, tc.errPart) || (tc.class != "" && ti.LastErrorClass != tc.class) {
				t.Fatalf("state %s attempt %d calls %d error %q class %q; want %s, %d, %d, %q, %q",
					ti.State, ti.Attempt, app.callsOf(id), ti.LastError, ti.LastErrorClass, tc.state, tc.attempt, tc.calls, tc.errPart, tc.class)
			}
			if tc.resultOK && !strings.Contains(string(ti.Result), `"payload":`+tc.payload) {
				t.Fatalf("result %s, want the payload echoed", ti.Result)
			}
		})
	}
}

func TestRequestHeaders(t *testing.T) {
	t.Parallel()
	app := newApp()
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL+"/", workertest.Options{Namespace: "shop"})
	id := s.submit(t, map[string]string{"mode": "ok"}, workertest.SubmitOptions{IdempotencyKey: "order-7", MaxAttempts: 4, Timeout: time.Minute,
		FlowKey: "tenant-a"})
	ti := s.wait(t, id)
	app.mu.Lock()
	h := app.headers[id]
	app.mu.Unlock()
	dl, err := time.Parse(time.RFC3339, h.Get(HeaderDeadline))
	if err != nil || dl.Before(ti.StartedAt.Add(59*time.Second)) || dl.After(ti.StartedAt.Add(61*time.Second)) {
		t.Errorf("deadline %q (started %s): %v", h.Get(HeaderDeadline), ti.StartedAt, err)
	}
	got := map[string]string{}
	for _, k := range []string{HeaderIdempotencyKey, HeaderTaskID, HeaderTaskType, HeaderAttempt, HeaderMaxAttempts, HeaderNamespace, HeaderQueue,
		HeaderFlowKey, "Content-Type"} {
		got[k] = h.Get(k)
	}
	want := map[string]string{HeaderIdempotencyKey: "order-7", HeaderTaskID: id, HeaderTaskType: "job", HeaderAttempt: "1",
		HeaderMaxAttempts: "4", HeaderNamespace: "shop", HeaderQueue: s.o.Queue, HeaderFlowKey: "tenant-a", "Content-Type": "application/json"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	if len(h.Get(HeaderToken)) < 32 {
		t.Errorf("secret %q too short", h.Get(HeaderToken))
	}
}

// A 404 without a verdict holds delivery (the status says so) instead of
// failing tasks; once the route answers, the held task succeeds.
func TestNotFoundHoldsDelivery(t *testing.T) {
	t.Parallel()
	app := newApp()
	app.routeOK.Store(false)
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL+"/wrong", workertest.Options{Concurrency: 2})
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = s.submit(t, map[string]string{"mode": "ok"}, workertest.SubmitOptions{MaxAttempts: 1, Timeout: time.Minute})
	}
	b := broker.New(s.rdb)
	q := broker.QueueRef{Namespace: s.o.Namespace, Name: s.o.Queue}
	deadline := time.Now().Add(waitFor)
	for {
		ws, err := b.Workers(context.Background(), q)
		if err == nil && len(ws) == 1 && ws[0].Status == StatusHandlerNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers %+v (%v), want one %s", ws, err, StatusHandlerNotFound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	running := 0
	for _, id := range ids {
		switch st := s.get(t, id).State; st {
		case broker.StateRunning:
			running++
		case broker.StateQueued, broker.StatePending:
		default:
			t.Fatalf("task %s is %s while the route is missing", id, st)
		}
	}
	if running > 2 {
		t.Fatalf("%d tasks running with concurrency 2", running)
	}
	app.routeOK.Store(true)
	for _, id := range ids {
		if ti := s.wait(t, id); ti.State != broker.StateSucceeded || ti.Attempt != 1 {
			t.Fatalf("task %s: %s attempt %d %q", id, ti.State, ti.Attempt, ti.LastError)
		}
	}
}

// Nothing is sent before the app listens; the pod's concurrency is capped.
func TestReadinessGateAndConcurrencyCap(t *testing.T) {
	t.Parallel()
	app := newApp()
	addr := freeAddr(t)
	s := startSidecar(t, "http://"+addr+"/", workertest.Options{Concurrency: 3})
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = s.submit(t, map[string]any{"mode": "sleep", "ms": 200}, workertest.SubmitOptions{MaxAttempts: 1})
	}
	time.Sleep(1500 * time.Millisecond)
	for _, id := range ids {
		if st := s.get(t, id).State; st != broker.StateQueued && st != broker.StatePending {
			t.Fatalf("task %s is %s before the app listens", id, st)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: app}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	for _, id := range ids {
		if ti := s.wait(t, id); ti.State != broker.StateSucceeded || ti.Attempt != 1 {
			t.Fatalf("task %s: %s attempt %d %q", id, ti.State, ti.Attempt, ti.LastError)
		}
	}
	if m := app.maxOpen.Load(); m != 3 {
		t.Fatalf("at most %d requests open at once, want 3", m)
	}
}

// On stop the sidecar reads nothing more and lets open requests finish.
func TestDrainFinishesOpenRequests(t *testing.T) {
	t.Parallel()
	app := newApp()
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL, workertest.Options{Concurrency: 2})
	a := s.submit(t, map[string]any{"mode": "sleep", "ms": 1500}, workertest.SubmitOptions{})
	b := s.submit(t, map[string]any{"mode": "sleep", "ms": 1500}, workertest.SubmitOptions{})
	for app.open.Load() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	c := s.submit(t, map[string]any{"mode": "ok"}, workertest.SubmitOptions{})
	s.stop()
	for _, id := range []string{a, b} {
		if ti := s.get(t, id); ti.State != broker.StateSucceeded {
			t.Fatalf("open request's task %s is %s after the drain", id, ti.State)
		}
	}
	if st := s.get(t, c).State; st != broker.StateQueued {
		t.Fatalf("task submitted during the drain is %s, want Queued", st)
	}
}

// On stop, a task the sidecar holds without an open request (here: waiting
// out a Retry-After) is handed back at once, its attempt not counted, and an
// open request still running when the drain budget ends is handed back with
// its attempt counted: another worker reads both at once, long before the
// visibility timeout.
func TestDrainHandsBackTheRest(t *testing.T) {
	t.Parallel()
	app := newApp()
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL, workertest.Options{Concurrency: 2, VisibilityTimeout: 10 * time.Minute, DrainTimeout: 500 * time.Millisecond})
	open := s.submit(t, map[string]any{"mode": "sleep", "ms": 60000}, workertest.SubmitOptions{Timeout: 5 * time.Minute})
	for app.open.Load() < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	// Answered 503 with Retry-After: 60, the sidecar holds it to send it again.
	held := s.submit(t, map[string]any{"mode": "throttle-long"}, workertest.SubmitOptions{Timeout: 5 * time.Minute})
	for app.callsOf(held) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	s.stop()
	for id, want := range map[string]int{held: 1, open: 2} {
		if ti := s.get(t, id); ti.State != broker.StateQueued || ti.Attempt != want {
			t.Fatalf("task %s after the drain: %s attempt %d, want Queued attempt %d", id, ti.State, ti.Attempt, want)
		}
	}
	if app.cancelled.Load() != 1 {
		t.Fatalf("%d requests cancelled by the drain, want the open one", app.cancelled.Load())
	}
	q := broker.QueueRef{Namespace: s.o.Namespace, Name: s.o.Queue}
	ss, err := broker.New(s.rdb).ReadStart(context.Background(), q, "peer", "peer", 2, 0)
	if err != nil || len(ss) != 2 {
		t.Fatalf("another worker reads %+v (%v), want both tasks", ss, err)
	}
}

// A progress report through the loopback API is the Go SDK's: fenced to the
// running execution, bounded, and written to the task and its events.
func TestProgressReachesTheEngine(t *testing.T) {
	t.Parallel()
	app := newApp()
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL, workertest.Options{})
	id := s.submit(t, map[string]any{"mode": "sleep", "ms": 60000}, workertest.SubmitOptions{Timeout: 2 * time.Minute})
	for app.open.Load() < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	token, _ := app.token.Load().(string)
	post := func(body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.apiURL+"/v1/tasks/"+id+"/progress", strings.NewReader(body))
		req.Header.Set(HeaderToken, token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"done": 5, "of": 10}`); code != http.StatusNoContent {
		t.Fatalf("progress: %d %s", code, body)
	}
	if ti := s.get(t, id); string(ti.Progress) != `{"done":5,"of":10}` {
		t.Fatalf("task progress %s", ti.Progress)
	}
	evs, err := broker.New(s.rdb).ReadEvents(context.Background(), broker.QueueRef{Namespace: s.o.Namespace, Name: s.o.Queue}, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Type != broker.EventProgress || last.TaskID != id || last.Attempt != 1 || string(last.Progress) != `{"done":5,"of":10}` {
		t.Fatalf("last event %+v", last)
	}
	if code, body := post(`"` + strings.Repeat("x", worker.MaxProgressBytes) + `"`); code != http.StatusBadRequest || !strings.Contains(body, "INVALID_PROGRESS") {
		t.Fatalf("oversized progress: %d %s", code, body)
	}
	if _, err := broker.New(s.rdb).Cancel(context.Background(), broker.QueueRef{Namespace: s.o.Namespace, Name: s.o.Queue}, id); err != nil {
		t.Fatal(err)
	}
	s.wait(t, id)
	if code, body := post(`{"done": 6}`); code != http.StatusNotFound {
		t.Fatalf("progress of a finished task: %d %s, want 404", code, body)
	}
}

// The loopback API refuses a request without the pod's secret, and serves
// the idempotent operation's steps on worker.IdempotentOperation's records.
func TestAPI(t *testing.T) {
	t.Parallel()
	app := newApp()
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL, workertest.Options{Namespace: "shop"})
	s.wait(t, s.submit(t, map[string]string{"mode": "ok"}, workertest.SubmitOptions{}))
	token, _ := app.token.Load().(string)
	call := func(secret, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.apiURL+path, strings.NewReader(body))
		if strings.HasPrefix(path, "/v1/tasks/") && !strings.HasSuffix(path, "/progress") {
			req.Method = http.MethodGet
		}
		if secret != "" {
			req.Header.Set(HeaderToken, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/v1/operations/claim", "/v1/operations/finish", "/v1/operations/release", "/v1/operations/renew", "/v1/tasks/x", "/v1/tasks/x/progress"} {
		for _, secret := range []string{"", "wrong", token + "x"} {
			if code, _ := call(secret, path, `{"key":"k"}`); code != http.StatusUnauthorized {
				t.Errorf("%s with secret %q: %d, want 401", path, secret, code)
			}
		}
	}
	code, body := call(token, "/v1/operations/claim", `{"key":"receipt:1","leaseMs":5000}`)
	var c worker.OperationClaim
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil || c.State != worker.OperationAcquired || c.Token == "" {
		t.Fatalf("claim: %d %s", code, body)
	}
	if code, body := call(token, "/v1/operations/claim", `{"key":"receipt:1"}`); code != http.StatusOK || !strings.Contains(body, `"running"`) {
		t.Fatalf("second claim while held: %d %s", code, body)
	}
	if code, body := call(token, "/v1/operations/finish", `{"key":"receipt:1","token":"`+c.Token+`","result":{"charged":12}}`); code != http.StatusOK {
		t.Fatalf("finish: %d %s", code, body)
	}
	// A Go handler's IdempotentOperation on the same key sees the record.
	ran, res, err := worker.IdempotentOperation(context.Background(), s.rdb, worker.AppKeyPrefix("shop")+"receipt:1", time.Hour,
		func(context.Context) (map[string]int, error) { return map[string]int{"charged": 99}, nil })
	if err != nil || ran || res["charged"] != 12 {
		t.Fatalf("IdempotentOperation after the API's finish: ran %v result %v err %v", ran, res, err)
	}
	if code, body := call(token, "/v1/operations/claim", `{"key":"receipt:1"}`); code != http.StatusOK || !strings.Contains(body, `"done"`) || !strings.Contains(body, `"charged":12`) {
		t.Fatalf("claim after finish: %d %s", code, body)
	}
	if code, _ := call(token, "/v1/tasks/nope", ""); code != http.StatusNotFound {
		t.Fatalf("state of a task not running here: %d, want 404", code)
	}
}
