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

// Package httphandlers_test runs the HTTP handler examples (Python, Node)
// behind the real delivery sidecar on a real redis-server: the contract's
// outcomes, the Idempotency-Key and Dtq-Flow-Key they receive, and the
// sidecar's idempotent operation across a SIGKILL of the app.
package httphandlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/delivery"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

const waitFor = 30 * time.Second

// pod is an example app, restarted when it exits (as a kubelet would),
// beside the delivery sidecar.
type pod struct {
	t       *testing.T
	rdb     *redis.Client
	o       workertest.Options
	argv    []string
	env     []string
	mu      sync.Mutex
	cmd     *exec.Cmd
	starts  int
	stopped chan struct{}
}

func freePort(t *testing.T) int {
	p, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func startPod(t *testing.T, dir string, argv ...string) *pod {
	t.Helper()
	return startPodAt(t, "/tasks", dir, argv...)
}

// startPodAt is startPod with the sidecar POSTing to path.
func startPodAt(t *testing.T, path, dir string, argv ...string) *pod {
	t.Helper()
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Fatalf("%s is required (hack/handler-runtimes.sh installs it): %v", argv[0], err)
	}
	appPort, apiPort := freePort(t), freePort(t)
	p := &pod{t: t, rdb: redistest.Start(t).Client(), o: workertest.Options{Namespace: "shop", Queue: workertest.NewQueueName(),
		VisibilityTimeout: 2 * time.Second, Concurrency: 4}, argv: argv, stopped: make(chan struct{})}
	p.env = append(os.Environ(), fmt.Sprintf("PORT=%d", appPort), fmt.Sprintf("DTQ_SIDECAR_URL=http://127.0.0.1:%d", apiPort),
		"RECEIPT_LOG="+filepath.Join(t.TempDir(), "receipts.log"))
	workertest.EnsureQueue(t, p.rdb, p.o)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	go p.supervise(abs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := delivery.Run(ctx, worker.Config{Redis: p.rdb, Namespace: p.o.Namespace, Queue: p.o.Queue, Concurrency: p.o.Concurrency,
			VisibilityTimeout: p.o.VisibilityTimeout, HeartbeatInterval: 500 * time.Millisecond, DrainTimeout: 5 * time.Second,
			Logger: slog.New(slog.DiscardHandler)},
			delivery.Config{HandlerURL: fmt.Sprintf("http://127.0.0.1:%d%s", appPort, path),
				ReadyURL: fmt.Sprintf("http://127.0.0.1:%d/healthz", appPort), APIAddr: fmt.Sprintf("127.0.0.1:%d", apiPort)})
		if err != nil {
			t.Errorf("delivery.Run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		close(p.stopped)
		p.mu.Lock()
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
		}
		p.mu.Unlock()
	})
	return p
}

// supervise runs the app until the test ends, restarting it when it exits.
func (p *pod) supervise(dir string) {
	for {
		cmd := exec.Command(p.argv[0], p.argv[1:]...)
		cmd.Dir, cmd.Env, cmd.Stderr = dir, p.env, os.Stderr
		p.mu.Lock()
		select {
		case <-p.stopped:
			p.mu.Unlock()
			return
		default:
		}
		p.cmd = cmd
		p.starts++
		err := cmd.Start()
		p.mu.Unlock()
		if err == nil {
			_ = cmd.Wait()
		}
		select {
		case <-p.stopped:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *pod) submit(taskType, payload, key string) string {
	p.t.Helper()
	return workertest.Submit(p.t, p.rdb, p.o, taskType, json.RawMessage(payload), workertest.SubmitOptions{MaxAttempts: 3, IdempotencyKey: key})
}

func (p *pod) wait(id string) broker.TaskInfo {
	p.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ti, err := broker.New(p.rdb).GetTask(context.Background(), broker.QueueRef{Namespace: p.o.Namespace, Name: p.o.Queue}, id)
		if err != nil {
			p.t.Fatal(err)
		}
		if ti.State.Terminal() {
			return ti
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("task %s still %s (attempt %d, %q)", id, ti.State, ti.Attempt, ti.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *pod) receipts() int {
	f, err := os.Open(strings.TrimPrefix(p.env[len(p.env)-1], "RECEIPT_LOG="))
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

func TestPython(t *testing.T) {
	t.Parallel()
	p := startPod(t, "python", "python3", "handler.py")
	contract(t, p)
	// SIGKILLed right after the guarded side effect: the redelivery finds
	// the operation done and does not send the receipt again.
	id := p.submit("receipt", `{"order":"77","die_after_effect":true}`, "receipt-77")
	ti := p.wait(id)
	var res struct {
		SentNow bool `json:"sent_now"`
		Attempt int  `json:"attempt"`
	}
	_ = json.Unmarshal(ti.Result, &res)
	if ti.State != broker.StateSucceeded || ti.Attempt != 2 || res.SentNow || p.receipts() != 1 {
		t.Fatalf("receipt task %s attempt %d result %s (%q), %d receipts sent; want Succeeded on attempt 2, sent once (not now)",
			ti.State, ti.Attempt, ti.Result, ti.LastError, p.receipts())
	}
	p.mu.Lock()
	starts := p.starts
	p.mu.Unlock()
	if starts < 2 {
		t.Fatalf("the app started %d times: it was not killed", starts)
	}
}

// A wrong route costs the Python example's tasks no attempt: its 404s are
// sent again every 2 s (not glued to the unread body of the last one, which
// the app answered 501) and the task goes back uncounted at each deadline.
func TestPythonWrongRoute(t *testing.T) {
	t.Parallel()
	p := startPodAt(t, "/wrong", "python", "python3", "handler.py")
	id := workertest.Submit(t, p.rdb, p.o, "greet", json.RawMessage(`{"name":"Lin"}`), workertest.SubmitOptions{MaxAttempts: 1, Timeout: 5 * time.Second})
	time.Sleep(7 * time.Second) // resends after 404s, and a deadline
	ti, err := broker.New(p.rdb).GetTask(context.Background(), broker.QueueRef{Namespace: p.o.Namespace, Name: p.o.Queue}, id)
	if err != nil || ti.State.Terminal() || ti.Attempt != 1 {
		t.Fatalf("a task of a wrong route after 7 s: %s attempt %d error %q (%v); want not ended, attempt 1", ti.State, ti.Attempt, ti.LastError, err)
	}
}

func TestNode(t *testing.T) {
	t.Parallel()
	p := startPod(t, "node", "node", "handler.js")
	contract(t, p)
	for range 2 {
		if ti := p.wait(p.submit("receipt", `{"order":"9"}`, "")); ti.State != broker.StateSucceeded {
			t.Fatalf("receipt: %s %q", ti.State, ti.LastError)
		}
	}
	if n := p.receipts(); n != 1 {
		t.Fatalf("two receipt tasks for one order sent %d receipts, want 1", n)
	}
}

// contract checks the outcomes both examples share.
func contract(t *testing.T, p *pod) {
	t.Helper()
	busyOperation(t, p)
	ok := p.wait(p.submit("greet", `{"name":"Ada"}`, "greet-ada"))
	var res map[string]any
	_ = json.Unmarshal(ok.Result, &res)
	if ok.State != broker.StateSucceeded || res["greeting"] != "hello, Ada" || res["idempotency_key"] != "greet-ada" || res["flow_key"] != "" {
		t.Fatalf("greet: %s result %s", ok.State, ok.Result)
	}
	// The task's flow key reaches the app as Dtq-Flow-Key, which it echoes.
	keyed := p.wait(workertest.Submit(t, p.rdb, p.o, "greet", json.RawMessage(`{"name":"Kay"}`), workertest.SubmitOptions{FlowKey: "tenant-a"}))
	res = nil
	_ = json.Unmarshal(keyed.Result, &res)
	if keyed.State != broker.StateSucceeded || res["flow_key"] != "tenant-a" {
		t.Fatalf("greet with flow key tenant-a: %s result %s, want the key echoed", keyed.State, keyed.Result)
	}
	// Its progress report reached the task and its events through the sidecar.
	if string(ok.Progress) != `{"step":"greeting"}` {
		t.Fatalf("greet's progress %s, want {\"step\":\"greeting\"}", ok.Progress)
	}
	evs, err := broker.New(p.rdb).ReadEvents(context.Background(), broker.QueueRef{Namespace: p.o.Namespace, Name: p.o.Queue}, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	progressed := false
	for _, ev := range evs {
		progressed = progressed || ev.TaskID == ok.ID && ev.Type == broker.EventProgress && string(ev.Progress) == `{"step":"greeting"}`
	}
	if !progressed {
		t.Fatalf("no TaskProgress event for greet in %+v", evs)
	}
	if ti := p.wait(p.submit("greet", `{"fail_first_attempt":true}`, "")); ti.State != broker.StateSucceeded || ti.Attempt != 2 {
		t.Fatalf("500 then 200: %s attempt %d %q", ti.State, ti.Attempt, ti.LastError)
	}
	ti := p.wait(p.submit("greet", `{"reject":"name is required"}`, ""))
	if ti.State != broker.StateDeadLettered || ti.Attempt != 1 || !strings.Contains(ti.LastError, "HTTP 400 from the handler: name is required") {
		t.Fatalf("400: %s attempt %d %q", ti.State, ti.Attempt, ti.LastError)
	}
}

// busyOperation: while another holder runs an operation, the examples wait
// for it no longer than the task's deadline, then fail the attempt (500,
// retried) saying so, instead of looping on after the sidecar gave up.
func busyOperation(t *testing.T, p *pod) {
	t.Helper()
	c, err := worker.ClaimOperation(context.Background(), p.rdb, worker.AppKeyPrefix(p.o.Namespace)+"receipt:busy", time.Minute)
	if err != nil || c.State != worker.OperationAcquired {
		t.Fatalf("claim: %+v %v", c, err)
	}
	id := workertest.Submit(t, p.rdb, p.o, "receipt", json.RawMessage(`{"order":"busy"}`), workertest.SubmitOptions{MaxAttempts: 1, Timeout: 3 * time.Second})
	if ti := p.wait(id); ti.State != broker.StateDeadLettered || !strings.Contains(ti.LastError, "HTTP 500 from the handler: operation receipt:busy still running elsewhere at the task's deadline") {
		t.Fatalf("receipt whose operation another holder runs: %s attempt %d %q; want dead-lettered after its one attempt, the app's 500 naming the deadline", ti.State, ti.Attempt, ti.LastError)
	}
}
