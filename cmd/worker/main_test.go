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

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil/chaoscheck"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// These tests build the real binary and run it as worker processes.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func workerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "dtq-worker-bin")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "worker")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type proc struct {
	cmd    *exec.Cmd
	out    *redistest.SyncBuffer
	exited chan struct{}
	err    error
}

// startWorker runs the binary with the DTQ_* contract variables.
func startWorker(t *testing.T, srv *redistest.Server, o workertest.Options, id string, extra ...string) *proc {
	t.Helper()
	cmd := exec.Command(workerBinary(t))
	cmd.Env = append(os.Environ(),
		"DTQ_REDIS_URL="+srv.URL(),
		"DTQ_QUEUE_NAMESPACE="+o.Namespace,
		"DTQ_QUEUE_NAME="+o.Queue,
		fmt.Sprintf("DTQ_WORKER_CONCURRENCY=%d", o.Concurrency),
		"DTQ_VISIBILITY_TIMEOUT="+o.VisibilityTimeout.String(),
		"DTQ_HEARTBEAT_INTERVAL="+o.HeartbeatInterval.String(),
		"DTQ_DRAIN_TIMEOUT="+o.DrainTimeout.String(),
		"DTQ_WORKER_ID="+id,
		"DTQ_METRICS_ADDR=0",
	)
	cmd.Env = append(cmd.Env, extra...)
	p := &proc{cmd: cmd, out: &redistest.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("worker %s output:\n%s", id, p.out.String())
		}
	})
	return p
}

// jsonLines parses a worker's output, failing on a line that is not a JSON
// object with time, level and msg.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["time"] == nil || m["level"] == nil || m["msg"] == nil {
			t.Fatalf("log line %q is not a JSON object with time, level and msg (%v)", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func options() workertest.Options {
	return workertest.Options{
		Namespace: "default", Queue: workertest.NewQueueName(), Concurrency: 4,
		VisibilityTimeout: time.Second, HeartbeatInterval: 250 * time.Millisecond, DrainTimeout: 10 * time.Second,
		RetryBaseDelay: 50 * time.Millisecond, RetryMaxDelay: time.Second, DefaultTimeout: 30 * time.Second,
	}
}

func getTask(t *testing.T, rdb redis.UniversalClient, o workertest.Options, id string) broker.TaskInfo {
	t.Helper()
	ti, err := broker.New(rdb).GetTask(context.Background(), broker.QueueRef{Namespace: o.Namespace, Name: o.Queue}, id)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}

func waitState(t *testing.T, rdb redis.UniversalClient, o workertest.Options, id string, timeout time.Duration, ok func(broker.TaskInfo) bool) broker.TaskInfo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ti := getTask(t, rdb, o, id)
		if ok(ti) {
			return ti
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s (%s): still %s attempt %d worker %s err %q", id, ti.Type, ti.State, ti.Attempt, ti.WorkerID, ti.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminal(ti broker.TaskInfo) bool { return ti.State.Terminal() }

// SIGKILL in the middle of work: a second worker finishes the tasks on attempt 2
// after the visibility timeout, idempotency records go processing -> completed,
// and the counter done inside IdempotentOperation counts once.
func TestCrashRedeliveryAfterSIGKILL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	o := options()
	workertest.EnsureQueue(t, rdb, o)
	q := broker.QueueRef{Namespace: o.Namespace, Name: o.Queue}
	b := broker.New(rdb)

	a := startWorker(t, srv, o, "worker-a")
	sleepID := workertest.Submit(t, rdb, o, demo.Sleep, demo.SleepPayload{Seconds: 2}, workertest.SubmitOptions{IdempotencyKey: "sleep-1"})
	counterID := workertest.Submit(t, rdb, o, demo.Counter, demo.CounterPayload{Name: "crash", HoldSeconds: 2},
		workertest.SubmitOptions{IdempotencyKey: "counter-1"})

	running := func(ti broker.TaskInfo) bool { return ti.State == broker.StateRunning && ti.WorkerID == "worker-a" }
	waitState(t, rdb, o, sleepID, 20*time.Second, running)
	waitState(t, rdb, o, counterID, 20*time.Second, running)
	// The counter's increment happens inside IdempotentOperation before the
	// hold; the kill comes once the operation is recorded done (killed
	// between the two, its 30 s lease would hold worker-b back).
	opKey := broker.AppKeyPrefix(o.Namespace) + "counter-op:" + o.Queue + ":counter-1"
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _ := rdb.Get(context.Background(), demo.CounterKey(o.Namespace, "crash")).Int()
		st, _ := rdb.HGet(context.Background(), opKey, "state").Result()
		if n == 1 && st == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counter %d, operation %q: want 1 and done", n, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, k := range []string{"sleep-1", "counter-1"} {
		if rec, err := b.Idempotency(context.Background(), q, k); err != nil || rec.State != broker.IdempotencyProcessing {
			t.Fatalf("record %s before crash: %+v %v", k, rec, err)
		}
	}

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	startWorker(t, srv, o, "worker-b")

	for _, id := range []string{sleepID, counterID} {
		ti := waitState(t, rdb, o, id, 30*time.Second, terminal)
		if ti.State != broker.StateSucceeded || ti.Attempt != 2 || ti.WorkerID != "worker-b" {
			t.Fatalf("task %s (%s): %s attempt %d worker %s err %q", id, ti.Type, ti.State, ti.Attempt, ti.WorkerID, ti.LastError)
		}
	}
	for _, k := range []string{"sleep-1", "counter-1"} {
		if rec, err := b.Idempotency(context.Background(), q, k); err != nil || rec.State != broker.IdempotencyCompleted {
			t.Fatalf("record %s after redelivery: %+v %v", k, rec, err)
		}
	}
	if n, _ := rdb.Get(context.Background(), demo.CounterKey(o.Namespace, "crash")).Int(); n != 1 {
		t.Fatalf("counter = %d after the crash redelivery, want 1", n)
	}
	if res := string(getTask(t, rdb, o, counterID).Result); res != `{"ran":false,"value":1}` {
		t.Fatalf("counter result %s: want the stored value without a second run", res)
	}
}

// A handler that kills its worker every time is dead-lettered after maxAttempts
// instead of looping; a supervisor (like the kubelet) keeps restarting workers.
func TestCrashLoopEndsDeadLettered(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	o := options()
	workertest.EnsureQueue(t, rdb, o)
	id := workertest.Submit(t, rdb, o, demo.Crash, nil, workertest.SubmitOptions{MaxAttempts: 3})
	echoID := workertest.Submit(t, rdb, o, demo.Echo, map[string]int{"after": 1}, workertest.SubmitOptions{Priority: 1})

	starts := 0
	deadline := time.Now().Add(45 * time.Second)
	for {
		ti := getTask(t, rdb, o, id)
		if ti.State.Terminal() {
			if ti.State != broker.StateDeadLettered || ti.Attempt > 3 {
				t.Fatalf("crash task: %s attempt %d", ti.State, ti.Attempt)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crash task still %s at attempt %d after %d worker starts", ti.State, ti.Attempt, starts)
		}
		if starts > 5 {
			t.Fatalf("worker restarted %d times for a task with maxAttempts 3", starts)
		}
		p := startWorker(t, srv, o, fmt.Sprintf("crashy-%d", starts), "DTQ_DEMO_CRASH=true")
		starts++
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second): // no crash: the task may have ended
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.exited
		}
	}
	// The queue keeps working after the poison task.
	startWorker(t, srv, o, "healthy", "DTQ_DEMO_CRASH=true")
	if ti := waitState(t, rdb, o, echoID, 20*time.Second, terminal); ti.State != broker.StateSucceeded {
		t.Fatalf("echo after crash loop: %s", ti.State)
	}
}

// SIGTERM during work: in-flight tasks finish within the drain budget, unread
// entries stay in the stream and run on another worker, and every task
// submitted ends Succeeded, executed exactly once on its first attempt (the
// chaos handler's execution log says so, not the task records).
func TestSIGTERMDrainLosesNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	o := options()
	o.Concurrency = 2
	o.DrainTimeout = 8 * time.Second
	workertest.EnsureQueue(t, rdb, o)
	chaosLog := filepath.Join(t.TempDir(), "executions")
	chaosEnv := demo.EnvChaosLog + "=" + chaosLog

	const n = 10
	ids := map[string]bool{}
	keys := map[string]string{} // task ID -> logical key
	for i := range n {
		key := fmt.Sprintf("drain-%d", i)
		id := workertest.Submit(t, rdb, o, demo.Chaos, demo.ChaosPayload{Key: key, HoldSeconds: 1}, workertest.SubmitOptions{})
		ids[id], keys[id] = true, key
	}
	a := startWorker(t, srv, o, "drain-a", chaosEnv)
	// Wait until both slots are busy, then SIGTERM.
	deadline := time.Now().Add(20 * time.Second)
	for {
		busy := 0
		for id := range ids {
			if ti := getTask(t, rdb, o, id); ti.State == broker.StateRunning {
				busy++
			}
		}
		if busy == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("worker a never had two tasks running")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sent := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.exited:
	case <-time.After(o.DrainTimeout + 5*time.Second):
		t.Fatal("worker a did not exit after SIGTERM within its drain budget")
	}
	if a.err != nil {
		t.Fatalf("worker a exit: %v", a.err)
	}
	t.Logf("worker a drained in %s", time.Since(sent))
	// With no DTQ_LOG_LEVEL set, the log is JSON lines at info, each with the
	// worker's namespace, queue and worker_id.
	msgs := map[string]bool{}
	for _, line := range jsonLines(t, a.out.String()) {
		msgs[line["msg"].(string)] = true
		if line["level"] == "debug" || line["namespace"] != o.Namespace || line["queue"] != o.Queue || line["worker_id"] != "drain-a" {
			t.Errorf("log line %v: want level info or above, namespace %s, queue %s, worker_id drain-a", line, o.Namespace, o.Queue)
		}
	}
	if !msgs["Worker ready"] || !msgs["Draining"] || !msgs["Worker stopped"] {
		t.Errorf("log messages %v lack Worker ready, Draining, Worker stopped", msgs)
	}

	byA, queued := 0, 0
	for id := range ids {
		ti := getTask(t, rdb, o, id)
		switch {
		case ti.State == broker.StateSucceeded && ti.WorkerID == "drain-a":
			byA++
		case ti.State == broker.StateQueued:
			queued++
		default:
			t.Fatalf("after drain task %s is %s (worker %s): neither finished by a nor left queued", id, ti.State, ti.WorkerID)
		}
	}
	if byA < 2 || byA+queued != n {
		t.Fatalf("a finished %d, %d left queued, of %d", byA, queued, n)
	}
	stats, err := broker.New(rdb).Stats(context.Background(), broker.QueueRef{Namespace: o.Namespace, Name: o.Queue})
	if err != nil || stats.InFlight != 0 {
		t.Fatalf("after drain: in flight %d (%v)", stats.InFlight, err)
	}

	startWorker(t, srv, o, "drain-b", chaosEnv)
	var tasks []chaoscheck.Logical
	for id := range ids {
		ti := waitState(t, rdb, o, id, 30*time.Second, terminal)
		tasks = append(tasks, chaoscheck.Logical{Key: keys[id], TaskIDs: []string{id},
			Succeeded: ti.State == broker.StateSucceeded, Attempt: ti.Attempt, MaxAttempts: ti.MaxAttempts})
	}
	r := check(t, rdb, chaosLog, tasks)
	if !r.OK() || r.Redeliveries != 0 || r.Accepted != n {
		t.Fatalf("%s, want %d accepted, each executed once\n%s", r, n, r.Details(10))
	}
}

// check runs the chaos checker on tasks with the log at path and the effect
// counters in rdb.
func check(t *testing.T, rdb redis.UniversalClient, path string, tasks []chaoscheck.Logical) chaoscheck.Report {
	t.Helper()
	log, err := demo.ReadChaosLog(path)
	if err != nil {
		t.Fatal(err)
	}
	effects := map[string]int64{}
	for _, lt := range tasks {
		n, err := rdb.Get(context.Background(), demo.ChaosEffectKey("default", lt.Key)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		effects[lt.Key] = n
	}
	r := chaoscheck.Check(tasks, log, effects)
	t.Log(r)
	return r
}

// A zombie worker, paused (SIGSTOP) past the visibility timeout while it runs
// a task and resumed (SIGCONT) while a peer runs the reclaimed copy, neither
// claims the entry back nor records its own execution: it learns from its
// heartbeat that it lost the lease and stops its handler. The peer's attempt 2
// is the task's outcome.
func TestZombieWorkerIsFenced(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	o := options() // visibility 1s, heartbeat 250ms
	workertest.EnsureQueue(t, rdb, o)
	chaosLog := filepath.Join(t.TempDir(), "executions")
	chaosEnv := demo.EnvChaosLog + "=" + chaosLog

	zombie := startWorker(t, srv, o, "zombie", chaosEnv)
	id := workertest.Submit(t, rdb, o, demo.Chaos, demo.ChaosPayload{Key: "z", HoldSeconds: 4}, workertest.SubmitOptions{MaxAttempts: 3})
	// Pause it once its handler runs (it logged its execution), so that on a
	// build without fencing its late completion would come before the peer's.
	deadline := time.Now().Add(20 * time.Second)
	for log, _ := demo.ReadChaosLog(chaosLog); len(log) == 0; log, _ = demo.ReadChaosLog(chaosLog) {
		if time.Now().After(deadline) {
			t.Fatalf("the zombie never ran the task:\n%s", zombie.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := zombie.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	startWorker(t, srv, o, "peer", chaosEnv)
	waitState(t, rdb, o, id, 20*time.Second, func(ti broker.TaskInfo) bool { return ti.WorkerID == "peer" })
	if err := zombie.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	ti := waitState(t, rdb, o, id, 30*time.Second, terminal)
	var res demo.ChaosResult
	_ = json.Unmarshal(ti.Result, &res)
	if ti.State != broker.StateSucceeded || ti.Attempt != 2 || res != (demo.ChaosResult{Attempt: 2, Worker: "peer"}) {
		t.Fatalf("task %s attempt %d result %s, want Succeeded with the peer's attempt 2", ti.State, ti.Attempt, ti.Result)
	}
	r := check(t, rdb, chaosLog, []chaoscheck.Logical{{Key: "z", TaskIDs: []string{id}, Succeeded: true, Attempt: ti.Attempt, MaxAttempts: 3}})
	if !r.OK() || r.Redeliveries != 1 {
		t.Fatalf("%s, want one execution each by the zombie and the peer\n%s", r, r.Details(10))
	}
	deadline = time.Now().Add(10 * time.Second)
	for out := zombie.out.String(); !strings.Contains(out, "lease lost") && !strings.Contains(out, "completion not recorded"); out = zombie.out.String() {
		if time.Now().After(deadline) {
			t.Fatalf("the zombie never reported its lost lease or its fenced completion:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
