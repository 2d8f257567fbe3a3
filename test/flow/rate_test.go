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

	"github.com/dtq-dev/dtq/internal/testutil/flowcheck"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// Global rate: rateLimit {limit 200, period 1s, burst 20} with 10 worker
// processes x 50 slots and 5 ms handlers over a backlog of more than 60 s:
// no window of length t holds more than 200 t + 20 starts, and the first 60 s
// hold 12,000 starts within 2% (the burst's 20 included).
//
// Checked on two records of each start: the task records' started_at (the
// Redis server's clock when the claim admitted it, to the millisecond, the
// clock the limit counts by), which must obey the limit as they are; and
// the handlers' own start times, each known to lie after that admission: a
// handler starts a round trip and a goroutine's wait after it, tens of
// milliseconds on a loaded machine, which alone would push a burst's starts
// into a later window, so a window counts the starts certainly inside it
// (flowcheck.CheckRate over the spans from admission to handler start); the
// log shows the check on the handlers' times alone too.
func TestGlobalRate(t *testing.T) {
	const (
		backlog = 13_000 // 200/s for 61 s leaves 780
		run     = 60 * time.Second
		want    = 12_000
	)
	lim := flowcheck.Rate{Limit: 200, Period: time.Second, Burst: 20}
	r := newRig(t)
	q := r.queue("rate", flowOn(&broker.FlowControl{Rate: &broker.FlowRate{Limit: lim.Limit, Period: lim.Period, Burst: lim.Burst}}))
	p := r.startPool(q, 10, 50) // ready before the backlog comes: no start waits for a process still starting
	r.submit(q, repeatTask(backlog, task("", 5*time.Millisecond)))
	time.Sleep(time.Until(r.waitStarted(q).Add(run + time.Second)))
	execs := p.execs()
	if len(execs) == 0 {
		t.Fatal("no handler started")
	}
	recs := r.records(q)
	spans, unknown := admissionSpans(execs, recs)
	rep := flowcheck.CheckRate(spans, lim)
	recorded := flowcheck.CheckRate(recordedStarts(recs), lim)
	starts := flowcheck.Starts(execs)
	total := flowcheck.CountIn(starts, starts[0], run)
	t.Logf("rate limit 200/s burst 20, 10 processes x 50 slots: recorded starts: %s; handler starts after their admission: %s (%d starts with no admission time); "+
		"on the handlers' start times alone: %s; %d starts in the first %v (want %d +-2%%)",
		recorded, rep, unknown, flowcheck.CheckRate(points(starts), lim), total, run, want)
	if len(starts) >= backlog {
		t.Errorf("the backlog of %d ran out before the run ended: the run did not measure the limit", backlog)
	}
	if !recorded.OK() {
		t.Errorf("a window of the recorded starts (started_at) exceeds the rate limit: %s", recorded)
	}
	if !rep.OK() {
		t.Errorf("a window of starts exceeds the rate limit: %s", rep)
	}
	if unknown*100 > len(execs) {
		t.Errorf("%d of %d starts have no admission time: the windows miss them", unknown, len(execs))
	}
	if total < want*98/100 || total > want*102/100 {
		t.Errorf("%d starts in the first %v, want %d +-2%%", total, run, want)
	}

	// The checker fails without the limit: the same workers on a queue
	// without flow control (2,000 tasks) exceed it.
	off := r.queue("rate-off", nil)
	p = r.startPool(off, 10, 50)
	r.submit(off, repeatTask(2000, task("", 5*time.Millisecond)))
	r.waitFor(time.Minute, "2,000 tasks succeeded", func() bool { return r.succeeded(off) == 2000 })
	recs = r.records(off)
	spans, _ = admissionSpans(p.execs(), recs)
	rep, recorded = flowcheck.CheckRate(spans, lim), flowcheck.CheckRate(recordedStarts(recs), lim)
	t.Logf("negative control, no flow control: recorded starts: %s; handler starts: %s", recorded, rep)
	if rep.OK() || recorded.OK() {
		t.Errorf("the checkers found no window over the limit in a run without flow control: %s; %s", recorded, rep)
	}
}

// recordedStarts is each task's latest start as its record has it, a
// millisecond long: started_at is truncated to the millisecond, so the
// start lies somewhere in it.
func recordedStarts(recs map[string]broker.TaskInfo) []flowcheck.Span {
	var out []flowcheck.Span
	for _, ti := range recs {
		if !ti.StartedAt.IsZero() {
			out = append(out, flowcheck.Span{From: ti.StartedAt, To: ti.StartedAt.Add(time.Millisecond)})
		}
	}
	return out
}

// admissionSpans places each execution's start between its attempt's
// started_at (when the claim admitted it, on the Redis server's clock) and its handler's
// start. An execution whose attempt the record no longer shows (its task
// ran again: a lease lost) gets no lower bound and counts in no window
// (unknown).
func admissionSpans(execs []flowcheck.Exec, recs map[string]broker.TaskInfo) (spans []flowcheck.Span, unknown int) {
	for _, e := range execs {
		sp := flowcheck.Span{To: e.Start}
		if ti, ok := recs[e.TaskID]; ok && ti.Attempt == e.Attempt && !ti.StartedAt.IsZero() {
			sp.From = ti.StartedAt
			if sp.From.After(sp.To) {
				sp.From = sp.To
			}
		} else {
			unknown++
		}
		spans = append(spans, sp)
	}
	return spans, unknown
}

func points(ts []time.Time) []flowcheck.Span {
	out := make([]flowcheck.Span, len(ts))
	for i, t := range ts {
		out[i] = flowcheck.Span{From: t, To: t}
	}
	return out
}

func repeatTask(n int, req broker.SubmitRequest) []broker.SubmitRequest {
	out := make([]broker.SubmitRequest, n)
	for i := range out {
		out[i] = req
	}
	return out
}
