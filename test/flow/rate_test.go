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
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/broker"
	"github.com/dtq-dev/dtq/internal/testutil/flowcheck"
)

// Global rate: rateLimit {limit 200, period 1s, burst 20} with 10 worker
// processes x 50 slots and 5 ms handlers over a backlog of more than 60 s.
// From the handlers' own start times: no window of length t holds more than
// 200 t + 20 starts (every window between two starts is checked), and the
// first 60 s hold 12,000 starts within 2% (the burst's 20 included).
func TestGlobalRate(t *testing.T) {
	const (
		backlog = 13_000 // 200/s for 61 s leaves 780
		run     = 60 * time.Second
		want    = 12_000
	)
	lim := flowcheck.Rate{Limit: 200, Period: time.Second, Burst: 20}
	r := newRig(t)
	q := r.queue("rate", flowOn(&broker.FlowControl{Rate: &broker.FlowRate{Limit: lim.Limit, Period: lim.Period, Burst: lim.Burst}}))
	r.submit(q, repeatTask(backlog, task("", 5*time.Millisecond)))
	p := r.startPool(q, 10, 50)
	time.Sleep(time.Until(r.waitStarted(q).Add(run + time.Second)))
	left := r.backlogged(q)
	begin := time.Now()
	starts := flowcheck.Starts(p.execs())
	if len(starts) == 0 {
		t.Fatal("no handler started")
	}
	rep := flowcheck.CheckRate(starts, lim)
	total := flowcheck.CountIn(starts, starts[0], run)
	t.Logf("rate limit 200/s burst 20, 10 processes x 50 slots: %s; %d starts in the first %v (want %d +-2%%); checked in %v",
		rep, total, run, want, time.Since(begin).Round(time.Millisecond))
	if !left {
		t.Errorf("the backlog of %d ran out before the run ended: the run did not measure the limit", backlog)
	}
	if !rep.OK() {
		t.Errorf("a window of starts exceeds the rate limit: %s", rep)
	}
	if total < want*98/100 || total > want*102/100 {
		t.Errorf("%d starts in the first %v, want %d +-2%%", total, run, want)
	}

	// The checker fails without the limit: the same workers on a queue
	// without flow control (2,000 tasks) exceed it.
	off := r.queue("rate-off", nil)
	r.submit(off, repeatTask(2000, task("", 5*time.Millisecond)))
	p = r.startPool(off, 10, 50)
	r.waitFor(time.Minute, "2,000 tasks succeeded", func() bool { return r.succeeded(off) == 2000 })
	rep = flowcheck.CheckRate(flowcheck.Starts(p.execs()), lim)
	t.Logf("negative control, no flow control: %s", rep)
	if rep.OK() {
		t.Errorf("the checker found no window over the limit in a run without flow control: %s", rep)
	}
}

func repeatTask(n int, req broker.SubmitRequest) []broker.SubmitRequest {
	out := make([]broker.SubmitRequest, n)
	for i := range out {
		out[i] = req
	}
	return out
}
