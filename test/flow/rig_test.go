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

package flow

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/testutil/flowcheck"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
)

const (
	visibility = 3 * time.Second
	heartbeat  = 500 * time.Millisecond
)

// rig is one test's redis-server and engine.
type rig struct {
	t   *testing.T
	srv *redistest.Server
	b   *broker.Broker
}

func newRig(t *testing.T) *rig {
	t.Helper()
	if testing.Short() {
		t.Skip("the flow control suite runs worker processes for minutes")
	}
	srv := redistest.Start(t)
	return &rig{t: t, srv: srv, b: broker.New(srv.Client())}
}

// flowOn returns fc, or nil when DTQ_FLOW_OFF is set: a queue of the main
// run is created with it.
func flowOn(fc *broker.FlowControl) *broker.FlowControl {
	if os.Getenv(envOff) != "" {
		return nil
	}
	return fc
}

// queue creates queue name of namespace "flow" with flow control fc (nil:
// none).
func (r *rig) queue(name string, fc *broker.FlowControl) broker.QueueRef {
	r.t.Helper()
	q := broker.QueueRef{Namespace: "flow", Name: name}
	cfg := broker.DefaultQueueConfig()
	cfg.MaxDepth = 1_000_000
	cfg.VisibilityTimeout = visibility
	cfg.Retry = broker.RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Jitter: 0.2}
	cfg.Flow = fc
	if err := r.b.EnsureQueue(r.t.Context(), q, cfg); err != nil {
		r.t.Fatal(err)
	}
	return q
}

// task is a witness task of key holding hold.
func task(key string, hold time.Duration) broker.SubmitRequest {
	p, _ := json.Marshal(flowcheck.Payload{Key: key, HoldMs: int(hold / time.Millisecond)})
	return broker.SubmitRequest{Type: flowcheck.TaskType, Payload: p, Priority: 5, FlowKey: key}
}

// submit submits reqs in batches and returns their task IDs.
func (r *rig) submit(q broker.QueueRef, reqs []broker.SubmitRequest) []string {
	r.t.Helper()
	ids := make([]string, 0, len(reqs))
	for batch := range slices.Chunk(reqs, 1000) {
		res, errs, err := r.b.SubmitMany(r.t.Context(), q, batch)
		if err != nil {
			r.t.Fatal(err)
		}
		for i := range res {
			if errs[i] != nil {
				r.t.Fatal(errs[i])
			}
			ids = append(ids, res[i].Task.ID)
		}
	}
	return ids
}

func (r *rig) metrics(q broker.QueueRef) broker.QueueMetrics {
	r.t.Helper()
	m, err := r.b.QueueMetrics(r.t.Context(), q)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

// waitFor polls cond every 50 ms until it holds, failing the test after d.
func (r *rig) waitFor(d time.Duration, what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: not after %v", what, d)
		}
	}
}

// waitStarted waits until a task of q has started and returns when it saw it.
func (r *rig) waitStarted(q broker.QueueRef) time.Time {
	r.waitFor(time.Minute, "a task started", func() bool {
		m := r.metrics(q)
		return m.InFlight > 0 || m.Counters.Finished[broker.StateSucceeded] > 0
	})
	return time.Now()
}

func (r *rig) succeeded(q broker.QueueRef) int64 {
	return r.metrics(q).Counters.Finished[broker.StateSucceeded]
}

// running lists q's Running tasks.
func (r *rig) running(q broker.QueueRef) []string {
	r.t.Helper()
	var ids []string
	opts := broker.ListOptions{State: broker.StateRunning, Limit: broker.MaxListLimit}
	for {
		l, err := r.b.ListTasks(r.t.Context(), q, opts)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, ti := range l.Tasks {
			ids = append(ids, ti.ID)
		}
		if l.Continue == "" {
			return ids
		}
		opts.Continue = l.Continue
	}
}

// records returns q's tasks by ID, as ListTasks gives them (no payload or
// result).
func (r *rig) records(q broker.QueueRef) map[string]broker.TaskInfo {
	r.t.Helper()
	out := map[string]broker.TaskInfo{}
	opts := broker.ListOptions{Limit: broker.MaxListLimit}
	for {
		l, err := r.b.ListTasks(r.t.Context(), q, opts)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, ti := range l.Tasks {
			out[ti.ID] = ti
		}
		if l.Continue == "" {
			return out
		}
		opts.Continue = l.Continue
	}
}

// pool is a set of worker processes of one queue, each slots wide.
type pool struct {
	r     *rig
	q     broker.QueueRef
	slots int
	dir   string
	procs []*proc // the running incarnation of each worker
	gone  []*proc // incarnations that ended
}

// proc is one incarnation of a worker process.
type proc struct {
	id     string
	log    string
	cmd    *exec.Cmd
	out    *redistest.SyncBuffer
	exited chan struct{}
	ended  time.Time // when it was seen gone
}

// startPool starts n worker processes of q with slots execution slots each
// and waits until every one is ready (its heartbeat says so).
func (r *rig) startPool(q broker.QueueRef, n, slots int) *pool {
	r.t.Helper()
	p := &pool{r: r, q: q, slots: slots, dir: r.t.TempDir()}
	for i := range n {
		p.procs = append(p.procs, p.start(fmt.Sprintf("%s-w%d", q.Name, i)))
	}
	r.waitFor(time.Minute, fmt.Sprintf("%d workers ready", n), func() bool {
		ws, err := r.b.Workers(r.t.Context(), q)
		if err != nil {
			r.t.Fatal(err)
		}
		ready := 0
		for _, w := range ws {
			if w.Status == worker.StatusReady || w.Status == worker.StatusBusy {
				ready++
			}
		}
		return ready == n
	})
	r.t.Cleanup(func() {
		p.stop()
		if r.t.Failed() {
			for _, c := range append(p.gone, p.procs...) {
				if out := c.out.String(); out != "" {
					r.t.Logf("worker %s (%s), last output:\n%s", c.id, filepath.Base(c.log), tail(out, 2000))
				}
			}
		}
	})
	return p
}

func (p *pool) start(id string) *proc {
	bin, err := os.Executable()
	if err != nil {
		p.r.t.Fatal(err)
	}
	c := &proc{id: id, log: filepath.Join(p.dir, fmt.Sprintf("%s.%d.log", id, len(p.gone))),
		out: &redistest.SyncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(bin)
	c.cmd.Env = append(os.Environ(),
		envWitnessLog+"="+c.log,
		"DTQ_REDIS_URL="+p.r.srv.URL(),
		"DTQ_QUEUE_NAMESPACE="+p.q.Namespace,
		"DTQ_QUEUE_NAME="+p.q.Name,
		fmt.Sprintf("DTQ_WORKER_CONCURRENCY=%d", p.slots),
		"DTQ_VISIBILITY_TIMEOUT="+visibility.String(),
		"DTQ_HEARTBEAT_INTERVAL="+heartbeat.String(),
		"DTQ_DRAIN_TIMEOUT=5s",
		"DTQ_WORKER_ID="+id,
		"DTQ_METRICS_ADDR=0",
		"DTQ_LOG_LEVEL=warn",
	)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		p.r.t.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	return c
}

// kill SIGKILLs worker i and starts it again (the same worker ID, as a
// restarted container keeps its pod's name).
func (p *pool) kill(i int) {
	c := p.procs[i]
	c.stop()
	p.gone = append(p.gone, c)
	p.procs[i] = p.start(c.id)
}

// stop SIGKILLs every worker (the runs need no drain: what ran is in the logs).
func (p *pool) stop() {
	for _, c := range p.procs {
		c.stop()
	}
	p.gone, p.procs = append(p.gone, p.procs...), nil
}

func (c *proc) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
	if c.ended.IsZero() {
		c.ended = time.Now()
	}
}

// execs stops the pool and returns every execution its workers logged. It
// fails the test when a handler was given another flow key than its task was
// submitted with.
func (p *pool) execs() []flowcheck.Exec {
	p.r.t.Helper()
	p.stop()
	var out []flowcheck.Exec
	for _, c := range p.gone {
		es, err := flowcheck.ReadLog(c.log, c.ended)
		if err != nil && !os.IsNotExist(err) {
			p.r.t.Fatal(err)
		}
		out = append(out, es...)
	}
	for _, e := range out {
		if e.FlowKey != e.Key {
			p.r.t.Errorf("task %s attempt %d, submitted with flow key %q, ran with Task.FlowKey() %q", e.TaskID, e.Attempt, e.Key, e.FlowKey)
			break
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[strings.IndexByte(s[len(s)-n:], '\n')+len(s)-n+1:]
}
