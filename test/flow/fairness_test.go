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
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/testutil/flowcheck"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// The fairness runs use 10 worker processes x 4 slots and 50 ms handlers:
// at most 800 starts a second, so a backlog outlasts the run.
const (
	fairProcs = 10
	fairSlots = 4
	fairHold  = 50 * time.Millisecond
)

// Hot tenant: 100,000 tasks of key A queued first, then key B submits one
// task per second for 60 s. For each task of B the checker counts the tasks
// of A whose handlers started after B was queued and before B's handler
// started (flowcheck.CheckAhead): no task of B may have more than aheadBound
// of them, a count of starts that does not depend on the machine's speed.
// Without flow control B waits behind A's backlog: the same with B
// submitting for 10 s must fail the same checker, with thousands ahead.
// B's submit-to-start latencies are logged, not checked: they follow the
// machine's load (tests time nothing; benchmarks do).
func TestHotTenant(t *testing.T) {
	r := newRig(t)
	ahead, lat := r.hotTenant("hot", flowOn(&broker.FlowControl{Fairness: broker.FairnessWeighted}), 60)
	t.Logf("key B behind 100,000 tasks of key A, weighted fairness: %s (bound %d); %s", ahead, aheadBound, lat)
	if !ahead.OK(aheadBound) {
		t.Errorf("more than %d tasks of A started ahead of a task of B: %s", aheadBound, ahead)
	}

	ahead, lat = r.hotTenant("hot-off", nil, 10)
	t.Logf("negative control, no flow control: %s; %s", ahead, lat)
	if ahead.OK(aheadBound) {
		t.Errorf("without flow control no more than %d tasks of A started ahead of a task of B: %s", aheadBound, ahead)
	}
}

// aheadBound is how many tasks of A may start after a task of B was queued
// (the reply to its submission came) and before it starts. Weighted fairness
// gives B, back after an idle second, the band's virtual time as its start
// tag, below A's next one, so the first claim after B was queued admits B
// first. The tasks of A that start in between are those admitted before B
// was queued that had not started yet, at most one per slot (fairProcs x
// fairSlots); those B's claim admits beside it (fairSlots-1); and those the
// other slots take while B's handler starts after its claim, one round of
// them (fairProcs x fairSlots - 1): a slot takes a second task only after
// its task's fairHold, and a loaded machine slows B's process and the others
// alike. Without flow control B waits behind the whole backlog: thousands.
const aheadBound = fairProcs*fairSlots + (fairSlots - 1) + (fairProcs*fairSlots - 1)

// hotTenant queues 100,000 tasks of key A on queue name, starts the workers,
// then submits one task of key B a second, bTasks times, and returns the
// starts of A ahead of each task of B and B's submit-to-start latencies. A's
// backlog must outlast B's submissions.
func (r *rig) hotTenant(name string, fc *broker.FlowControl, bTasks int) (flowcheck.AheadReport, flowcheck.LatencyReport) {
	r.t.Helper()
	const backlog = 100_000
	q := r.queue(name, fc)
	began := time.Now()
	r.submit(q, repeatTask(backlog, task("A", fairHold)))
	r.t.Logf("%s: %d tasks of A queued in %v", name, backlog, time.Since(began).Round(time.Millisecond))
	p := r.startPool(q, fairProcs, fairSlots)
	first := r.waitStarted(q)
	sent := map[string]time.Time{}   // when B's submission was sent
	queued := map[string]time.Time{} // when its reply came: B was queued by then
	for i := range bTasks {
		time.Sleep(time.Until(first.Add(time.Duration(i+1) * time.Second)))
		at := time.Now()
		res, err := r.b.Submit(r.t.Context(), q, task("B", fairHold))
		if err != nil {
			r.t.Fatal(err)
		}
		sent[res.Task.ID], queued[res.Task.ID] = at, time.Now()
	}
	time.Sleep(time.Second) // B's last task starts (or waits on)
	execs := p.execs()
	a := 0
	for _, e := range execs {
		if e.Key == "A" {
			a++
		}
	}
	if a >= backlog {
		r.t.Errorf("%s: all %d tasks of A started: B did not compete with A's backlog to the end", name, a)
	}
	return flowcheck.CheckAhead(queued, execs, "A"), flowcheck.CheckLatency(sent, execs)
}

// Weights 5:3:2 with every key backlogged: each key's share of the starts is
// within 3% of its weight's share (50%, 30%, 20%; 3% of 20% is 0.6 points) in
// every window. The run lasts 30 s; the windows are 5 s long, one starting
// every second (26 windows of about 4,000 starts, of which about 800 of the
// key of weight 2, so 3% is about 24 starts), instead of 30 s windows over a
// run of minutes. Without flow control the shares follow the submission order
// (the same number of tasks of each key, shuffled: a third each) and must
// fail the same checker in a 10 s run.
func TestWeights(t *testing.T) {
	weights := map[string]int64{"w5": 5, "w3": 3, "w2": 2}
	fc := &broker.FlowControl{Fairness: broker.FairnessWeighted, Overrides: map[string]broker.KeyOverride{}}
	for k, w := range weights {
		fc.Overrides[k] = broker.KeyOverride{Weight: w}
	}
	r := newRig(t)
	rep := r.weighted("weights", flowOn(fc), weights, 30*time.Second)
	t.Logf("weights 5:3:2: %s", rep)
	if !rep.OK() {
		t.Errorf("a key's share of the starts is off its weight by more than 3%%: %s", rep)
	}

	rep = r.weighted("weights-off", nil, weights, 10*time.Second)
	t.Logf("negative control, no flow control: %s", rep)
	if rep.OK() {
		t.Errorf("the checker found every share within 3%% of its weight in a run without flow control: %s", rep)
	}
}

// weighted queues 15,000 tasks of each of the weights' keys, shuffled (at
// most 800 starts a second for 30 s give the key of weight 5 12,000), runs
// the workers for run and returns the shares of the starts.
func (r *rig) weighted(name string, fc *broker.FlowControl, weights map[string]int64, run time.Duration) flowcheck.ShareReport {
	r.t.Helper()
	const perKey = 15_000
	var reqs []broker.SubmitRequest
	for k := range weights {
		reqs = append(reqs, repeatTask(perKey, task(k, fairHold))...)
	}
	rng := rand.New(rand.NewPCG(35, 3))
	rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	q := r.queue(name, fc)
	r.submit(q, reqs)
	p := r.startPool(q, fairProcs, fairSlots)
	time.Sleep(time.Until(r.waitStarted(q).Add(run)))
	execs := p.execs()
	starts := flowcheck.Starts(execs)
	if len(starts) == 0 {
		r.t.Fatalf("%s: no handler started", name)
	}
	rep := flowcheck.CheckShares(execs, weights, starts[0], starts[len(starts)-1], 5*time.Second, time.Second, 0.03)
	for k := range weights {
		if rep.Totals[k] >= perKey {
			r.t.Errorf("%s: key %s started all its %d tasks: it was not backlogged to the end", name, k, perKey)
		}
	}
	return rep
}
