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
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/testutil/flowcheck"
	"github.com/dtq-dev/dtq/pkg/broker"
)

const (
	keyCount = 500
	keyCap   = 3
	killEach = 15 * time.Second
)

// Per-key concurrency: 500 keys with concurrency 3, 50,000 tasks of 0-200 ms
// on 10 worker processes x 50 slots, the busiest process SIGKILLed every 15 s and
// started again: from the handlers' own execution log, no moment where more
// than 3 lease-holding executions of one key overlap; afterwards every held
// slot has been given back (the engine's FlowMetrics.Held and every key's
// held slots are 0, the operator's ReconcileFlowSlots finds none to give
// back, no task is Running).
//
// A fifth of the tasks belong to 10 hot keys (1,000 each: at 3 at once, 100 ms
// on average, at least 33 s, so the run sees two kills); the other keys get
// a task with probability proportional to their rank (the busiest about 160
// tasks, the least about one), so they run out of work at different times
// and the caps bind more as fewer keys remain.
func TestKeyConcurrency(t *testing.T) {
	const tasks = 50_000
	r := newRig(t)
	q := r.queue("keys", flowOn(&broker.FlowControl{PerKey: broker.KeyLimits{Concurrency: keyCap}}))
	r.submit(q, keyedTasks(tasks, rand.New(rand.NewPCG(35, 1))))
	p := r.startPool(q, 10, 50)
	begin := time.Now()
	kills, last, moved := 0, int64(-1), time.Now()
	for n := r.succeeded(q); n < tasks; n = r.succeeded(q) {
		if n != last {
			last, moved = n, time.Now()
		}
		if time.Since(moved) > 30*time.Second {
			t.Fatalf("%d of %d tasks succeeded, none for 30 s; flow %+v", n, tasks, r.metrics(q).Flow)
		}
		if time.Since(begin) >= time.Duration(kills+1)*killEach {
			p.kill(r.busiest(q, p))
			kills++
		}
		time.Sleep(50 * time.Millisecond)
	}
	ran := time.Since(begin)
	rep := flowcheck.CheckKeyConcurrency(p.execs(), keyCap)
	t.Logf("%d tasks in %v with %d SIGKILLs: %s", tasks, ran.Round(time.Millisecond), kills, rep)
	if !rep.OK() {
		t.Errorf("more than %d executions of a key held their leases at once:\n%s", keyCap, rep.Details())
	}
	if kills == 0 || rep.Killed == 0 {
		t.Errorf("%d kills hit %d executions: the run tested no crash", kills, rep.Killed)
	}
	r.checkSlotsGivenBack(q)

	// The checker fails without the cap: the same workers and keys on a queue
	// without flow control (5,000 tasks, no kills) run more than 3 of a key.
	off := r.queue("keys-off", nil)
	r.submit(off, keyedTasks(5000, rand.New(rand.NewPCG(35, 2))))
	p = r.startPool(off, 10, 50)
	r.waitFor(time.Minute, "5,000 tasks succeeded", func() bool { return r.succeeded(off) == 5000 })
	rep = flowcheck.CheckKeyConcurrency(p.execs(), keyCap)
	t.Logf("negative control, no flow control: %s", rep)
	if rep.OK() {
		t.Errorf("the checker found no key above %d in a run without flow control: %s", keyCap, rep)
	}
}

// busiest returns the index in p of the worker with the most tasks in
// flight at its last heartbeat.
func (r *rig) busiest(q broker.QueueRef, p *pool) int {
	r.t.Helper()
	ws, err := r.b.Workers(r.t.Context(), q)
	if err != nil {
		r.t.Fatal(err)
	}
	active := map[string]int{}
	for _, w := range ws {
		active[w.ID] = w.Active
	}
	best := 0
	for i, c := range p.procs {
		if active[c.id] > active[p.procs[best].id] {
			best = i
		}
	}
	return best
}

// checkSlotsGivenBack fails the test unless every concurrency slot of q has
// been given back: the engine's held counts are 0, ReconcileFlowSlots finds
// nothing to give back and no task is Running.
func (r *rig) checkSlotsGivenBack(q broker.QueueRef) {
	r.t.Helper()
	m := r.metrics(q)
	running := r.running(q)
	r.t.Logf("after the run: flow %+v, in flight %d, Running tasks %d", m.Flow, m.InFlight, len(running))
	if len(running) > 0 || m.InFlight > 0 {
		r.t.Errorf("%d tasks Running (%v), %d entries in flight after every task succeeded", len(running), head(running), m.InFlight)
	}
	if flowOn(&broker.FlowControl{}) == nil {
		return // no flow control: no slots
	}
	if !m.Flow.Enabled || m.Flow.Held != 0 {
		r.t.Errorf("flow metrics %+v: want enabled with 0 held slots", m.Flow)
	}
	keys, err := r.b.FlowKeys(r.t.Context(), q, keyCount)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, k := range keys {
		if k.Held != 0 {
			r.t.Errorf("key %q holds %d slots after the run", k.Key, k.Held)
		}
	}
	// The operator's check of the slots against the tasks finds nothing to
	// give back.
	if n, err := r.b.ReconcileFlowSlots(r.t.Context(), q); err != nil || n != 0 {
		r.t.Errorf("ReconcileFlowSlots gave back %d slots (%v), want 0", n, err)
	}
}

// keyedTasks returns n tasks of the witness holding 0-200 ms each, shuffled:
// n/5 of them spread evenly over the hot keys k000-k009, the others on key k
// of k010-k499 drawn with weight k-9.
func keyedTasks(n int, rng *rand.Rand) []broker.SubmitRequest {
	const hot = 10
	cum := make([]int, keyCount-hot) // cum[i]: the weights of keys hot..hot+i
	for i := range cum {
		cum[i] = (i + 1) * (i + 2) / 2
	}
	out := make([]broker.SubmitRequest, n)
	for i := range out {
		k := i % hot
		if i >= n/5 {
			k = hot + sort.SearchInts(cum, rng.IntN(cum[len(cum)-1])+1)
		}
		out[i] = task(fmt.Sprintf("k%03d", k), time.Duration(rng.IntN(201))*time.Millisecond)
	}
	rng.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func head(s []string) []string { return s[:min(len(s), 10)] }
