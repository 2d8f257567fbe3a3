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

package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"
)

// newFlowEnv is newEnv with flow control fc, its rate limits on the test's
// clock (rateClock) so stepping the clock moves them.
func newFlowEnv(t *testing.T, fc FlowControl, mutate ...func(*QueueConfig)) *env {
	t.Helper()
	e := newEnv(t, append([]func(*QueueConfig){func(c *QueueConfig) { c.Flow = &fc }}, mutate...)...)
	e.b.rateClock = e.clock
	return e
}

// claim is ReadStart of up to n tasks for worker w without blocking; it
// fails on an error or on an entry that does not run.
func (e *env) claim(w string, n int) []Execution {
	e.t.Helper()
	ss, err := e.b.ReadStart(ctx, e.q, w, w, n, 0)
	if err != nil {
		e.t.Fatalf("read-start: %v", err)
	}
	xs := make([]Execution, 0, len(ss))
	for _, s := range ss {
		if s.Err != nil || !s.Run {
			e.t.Fatalf("read-start entry: %+v", s)
		}
		xs = append(xs, Execution{Delivery: s.Delivery, WorkerID: w, Attempt: s.Task.Attempt})
	}
	return xs
}

// keyed submits n tasks of flow key k (priority 5 unless prio is given).
func (e *env) keyed(k string, n int, prio ...int) []string {
	e.t.Helper()
	p := 5
	if len(prio) > 0 {
		p = prio[0]
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.mustSubmit(SubmitRequest{FlowKey: k, Priority: p}).ID
	}
	return ids
}

// keysOf returns the flow key of each execution's task.
func (e *env) keysOf(xs []Execution) []string {
	e.t.Helper()
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = e.task(x.TaskID).FlowKey
	}
	return out
}

// held returns the queue's held slots (fc:held) as task ID -> key.
func (e *env) held() map[string]string {
	e.t.Helper()
	m, err := e.rdb.HGetAll(ctx, keysFor(e.q).flowHeld()).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// Flow control reads back as written and goes away when removed. More than
// eight overrides are kept in a hash table, not a listpack that every lookup
// of the claim scans; the marker that converts it is no override.
func TestFlowConfigRoundTrip(t *testing.T) {
	many := FlowControl{Fairness: FairnessWeighted, Overrides: map[string]KeyOverride{}}
	for i := range 20 {
		many.Overrides[fmt.Sprintf("tenant-%d", i)] = KeyOverride{Weight: int64(1 + i%5)}
	}
	for _, c := range []struct {
		name     string
		fc       FlowControl
		encoding string // of fc:o
	}{
		{"every limit", FlowControl{
			Rate: &FlowRate{Limit: 200, Period: time.Second, Burst: 20}, MaxConcurrency: 400,
			PerKey:   KeyLimits{Concurrency: 3, Rate: &FlowRate{Limit: 10, Period: 1500 * time.Millisecond, Burst: 1}},
			Fairness: FairnessFIFO,
			Overrides: map[string]KeyOverride{"gold": {Weight: 5, KeyLimits: KeyLimits{Concurrency: 10}},
				"": {Weight: 2, KeyLimits: KeyLimits{Rate: &FlowRate{Limit: 1, Period: time.Minute, Burst: 1}}}},
		}, "listpack"},
		{"20 overrides", many, "hashtable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFlowEnv(t, c.fc)
			if enc := e.rdb.ObjectEncoding(ctx, keysFor(e.q).flowOverrides()).Val(); enc != c.encoding {
				t.Errorf("fc:o with %d overrides is a %q, want a %s", len(c.fc.Overrides), enc, c.encoding)
			}
			got, err := e.b.QueueConfig(ctx, e.q)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(&c.fc, got.Flow, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("flow control read back (-want +got):\n%s", d)
			}
			cfg := got
			cfg.Flow = nil
			if err := e.b.EnsureQueue(ctx, e.q, cfg); err != nil {
				t.Fatal(err)
			}
			if got, _ := e.b.QueueConfig(ctx, e.q); got.Flow != nil {
				t.Errorf("flow control after removing it: %+v", got.Flow)
			}
		})
	}
}

func TestFlowInvalidConfigNamesTheField(t *testing.T) {
	e := newEnv(t)
	for field, fc := range map[string]FlowControl{
		"rateLimit.limit":                {Rate: &FlowRate{Limit: 0, Period: time.Second}},
		"perKey.rateLimit.period":        {PerKey: KeyLimits{Rate: &FlowRate{Limit: 1}}},
		"maxConcurrency":                 {MaxConcurrency: -1},
		"fairness":                       {Fairness: "Random"},
		`overrides["a"].weight`:          {Overrides: map[string]KeyOverride{"a": {Weight: 1001}}},
		`overrides["a\x01"].key`:         {Overrides: map[string]KeyOverride{"a\x01": {}}},
		`overrides["b"].rateLimit.limit`: {Overrides: map[string]KeyOverride{"b": {KeyLimits: KeyLimits{Rate: &FlowRate{Period: time.Second}}}}},
	} {
		cfg := DefaultQueueConfig()
		cfg.Flow = &fc
		err := e.b.EnsureQueue(ctx, e.q, cfg)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want one naming the field", field, err)
		}
	}
}

func TestFlowClaimRunsAndGivesSlotsBack(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 2}})
	e.keyed("a", 3)
	e.keyed("b", 1)
	k := keysFor(e.q)
	if n, _ := e.rdb.LLen(ctx, k.prefix+"fc:q:5:a").Result(); n != 3 {
		t.Fatalf("a's list holds %d tasks, want 3", n)
	}
	if n, _ := e.rdb.XLen(ctx, k.stream(5)).Result(); n != 0 {
		t.Fatalf("the band stream holds %d entries before any claim, want 0", n)
	}
	xs := e.claim("w", 10)
	if got := e.keysOf(xs); len(got) != 3 {
		t.Fatalf("claimed %v, want two of a and one of b", got)
	}
	if h := e.held(); len(h) != 3 {
		t.Fatalf("held %v, want 3 slots", h)
	}
	for _, x := range xs {
		e.complete(x, Outcome{Result: raw(`{}`)})
	}
	if h := e.held(); len(h) != 0 {
		t.Fatalf("held after completing %v", h)
	}
	xs = e.claim("w", 10)
	if got := e.keysOf(xs); len(got) != 1 || got[0] != "a" {
		t.Fatalf("claimed %v after the slots came back, want a's third", got)
	}
}

// setFlow changes the queue's flow control at runtime (EnsureQueue).
func (e *env) setFlow(fc *FlowControl) {
	e.t.Helper()
	cfg, err := e.b.QueueConfig(ctx, e.q)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.Flow = fc
	if err := e.b.EnsureQueue(ctx, e.q, cfg); err != nil {
		e.t.Fatal(err)
	}
}

// count returns how many of keys are k.
func countOf(keys []string, k string) int {
	n := 0
	for _, x := range keys {
		if x == k {
			n++
		}
	}
	return n
}

// GCRA: from the tasks' own start times, no interval of length t holds more
// than burst + t*limit/period starts, and a worker claiming all the time
// gets about that many.
func TestFlowRateAdmitsAtMostBurstPlusRate(t *testing.T) {
	const limit, burst = 10, 3
	e := newFlowEnv(t, FlowControl{Rate: &FlowRate{Limit: limit, Period: time.Second, Burst: burst}})
	e.keyed("a", 60)
	e.keyed("b", 60)
	var starts []time.Time
	begin := e.clock.Now()
	for e.clock.Since(begin) < 5*time.Second {
		for range e.claim("w", 50) {
			starts = append(starts, e.clock.Now())
		}
		e.clock.Step(37 * time.Millisecond)
	}
	for i := range starts {
		for j := i; j < len(starts); j++ {
			window := starts[j].Sub(starts[i])
			if n, most := float64(j-i+1), burst+window.Seconds()*limit; n > most+1e-9 {
				t.Fatalf("%v holds %v starts, at most %v", window, n, most)
			}
		}
	}
	elapsed := e.clock.Since(begin) - 37*time.Millisecond
	if want := burst + int(elapsed.Seconds()*limit); len(starts) < want-1 {
		t.Fatalf("%d starts in %v, want about %d", len(starts), elapsed, want)
	}
}

// A rate admits by its clock (the Redis server's; here a test clock 7 s
// ahead of the engine's), so the starts it admits are stamped with that
// clock: recorded starts obey the rate whatever the worker's clock says or
// how long its claim waited. A queue without a rate stamps the worker's.
func TestFlowRatedStartsCarryTheRateClock(t *testing.T) {
	const ahead = 7 * time.Second
	rate := &FlowRate{Limit: 10, Period: time.Second, Burst: 2}
	for _, c := range []struct {
		name  string
		fc    FlowControl
		rated bool
	}{
		{"queue rate", FlowControl{Rate: rate}, true},
		{"key rate", FlowControl{PerKey: KeyLimits{Rate: rate}}, true},
		{"no rate", FlowControl{PerKey: KeyLimits{Concurrency: 2}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFlowEnv(t, c.fc)
			// A task that expires while it waits, first in a's list: the
			// claim finishes it on the engine's clock, on which it has
			// expired (the rate clock is behind by then).
			gone := e.mustSubmit(SubmitRequest{FlowKey: "a", Priority: 5, ExpiresAt: e.clock.Now().Add(time.Minute)}).ID
			e.keyed("a", 2)
			e.b.rateClock = newFakeClock(e.clock.Now().Add(ahead))
			e.clock.Step(2 * time.Minute)
			xs := e.claim("w", 10)
			if len(xs) != 2 || xs[0].TaskID == gone || xs[1].TaskID == gone {
				t.Fatalf("claimed %+v, want the 2 tasks that did not expire", xs)
			}
			if g := e.task(gone); g.State != StateExpired || !g.FinishedAt.Equal(e.clock.Now()) {
				t.Errorf("the expired task: %s, finished at %v, want Expired at the engine's %v", g.State, g.FinishedAt, e.clock.Now())
			}
			want := e.clock.Now()
			if c.rated {
				want = e.b.rateClock.Now()
			}
			for _, x := range xs {
				if got := e.task(x.TaskID).StartedAt; !got.Equal(want) {
					t.Errorf("started_at %v, want %v (rated: %v, the rate clock %v ahead of the engine's)", got, want, c.rated, ahead)
				}
			}
		})
	}
}

// An undelivered stream entry ahead of the claim's own (which no path
// should leave in a flow-controlled queue's stream; here written by hand) is
// not started: the claim moves its task to its key list and delivers only
// what it admitted.
func TestFlowClaimMovesAStrayStreamEntry(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 5}})
	as := e.keyed("a", 2)
	b := e.keyed("b", 1)[0]
	k := keysFor(e.q)
	// The first claim ends the move of the streams' backlog that enabling
	// flow control starts (fc_migrate), which would move the stray too.
	if xs := e.claim("w", 1); len(xs) != 1 || xs[0].TaskID != as[0] {
		t.Fatalf("first claim: %+v, want %s", xs, as[0])
	}
	a := as[1]
	if err := e.rdb.LRem(ctx, k.flowList(5, "b"), 1, b).Err(); err != nil {
		t.Fatal(err)
	}
	msg, err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.stream(5), Values: []any{"t", b, "a", "1"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, k.task(b), "msg", msg, "fq", "").Err(); err != nil {
		t.Fatal(err)
	}
	xs := e.claim("w", 1)
	if len(xs) != 1 || xs[0].TaskID != a {
		t.Fatalf("claimed %+v, want %s (b's entry was not admitted)", xs, a)
	}
	if n := e.rdb.LLen(ctx, k.flowList(5, "b")).Val(); n != 1 {
		t.Fatalf("b's list holds %d after the claim, want its stray task back", n)
	}
	if p := e.rdb.XPending(ctx, k.stream(5), group).Val(); p.Count != 2 {
		t.Fatalf("%d entries pending, want the two admitted", p.Count)
	}
	if xs := e.claim("w", 1); len(xs) != 1 || xs[0].TaskID != b {
		t.Fatalf("next claim: %+v, want %s from its key list", xs, b)
	}
}

func TestFlowMaxConcurrency(t *testing.T) {
	e := newFlowEnv(t, FlowControl{MaxConcurrency: 3})
	e.keyed("a", 5)
	e.keyed("b", 5)
	xs := e.claim("w1", 10)
	if len(xs) != 3 {
		t.Fatalf("claimed %d, want maxConcurrency 3", len(xs))
	}
	if got := e.claim("w2", 10); len(got) != 0 {
		t.Fatalf("a second worker claimed %d at the cap", len(got))
	}
	e.complete(xs[0], Outcome{})
	if got := e.claim("w2", 10); len(got) != 1 {
		t.Fatalf("claimed %d after one slot freed, want 1", len(got))
	}
}

// A key at its cap steps aside: another key's task behind its backlog
// starts at once. (FIFO fairness: a's queued tasks are all older than b's.)
func TestFlowKeyAtCapDoesNotBlockAnother(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 1}, Fairness: FairnessFIFO})
	e.keyed("a", 50)
	e.clock.Step(time.Second)
	e.keyed("b", 1)
	first := e.claim("w", 1)
	if got := e.keysOf(first); got[0] != "a" {
		t.Fatalf("first claim %v, want a (oldest)", got)
	}
	if got := e.keysOf(e.claim("w", 5)); len(got) != 1 || got[0] != "b" {
		t.Fatalf("claim with a at its cap got %v, want b's task", got)
	}
	if p, _ := e.rdb.HGet(ctx, keysFor(e.q).prefix+sufFlowParked, "a").Result(); p != "c5" {
		t.Fatalf("a parked %q, want c5", p)
	}
	if got := e.claim("w", 5); len(got) != 0 {
		t.Fatalf("claimed %d with every key at its cap", len(got))
	}
	e.complete(first[0], Outcome{})
	if got := e.keysOf(e.claim("w", 5)); len(got) != 1 || got[0] != "a" {
		t.Fatalf("claim after a's slot freed got %v, want one of a", got)
	}
}

func TestFlowPrioritiesStayStrict(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 2}})
	e.keyed("low", 3, 3)
	e.keyed("high", 3, 7)
	e.keyed("high2", 1, 7)
	got := e.keysOf(e.claim("w", 3))
	if countOf(got, "low") != 0 {
		t.Fatalf("claimed %v: band 3 before band 7 had work left that its limits admit", got)
	}
	// Band 7's keys are at their caps: band 3 runs.
	if got := e.keysOf(e.claim("w", 5)); countOf(got, "low") != 2 || len(got) != 2 {
		t.Fatalf("claimed %v with band 7 capped, want low's two", got)
	}
}

// Keys share a band by weight (start-time fair queueing), from the first
// claim on.
func TestFlowWeightedShares(t *testing.T) {
	e := newFlowEnv(t, FlowControl{Overrides: map[string]KeyOverride{"a": {Weight: 5}, "b": {Weight: 3}, "c": {Weight: 2}}})
	for _, k := range []string{"a", "b", "c"} {
		e.keyed(k, 120)
	}
	var got []string
	for range 10 {
		got = append(got, e.keysOf(e.claim("w", 10))...)
	}
	for k, want := range map[string]int{"a": 50, "b": 30, "c": 20} {
		if n := countOf(got, k); n < want-1 || n > want+1 {
			t.Errorf("%s: %d of 100 starts, want %d±1", k, n, want)
		}
	}
}

// A weight change applies to the backlog already queued.
func TestFlowWeightChangeAppliesToTheBacklog(t *testing.T) {
	fc := FlowControl{}
	e := newFlowEnv(t, fc)
	e.keyed("a", 100)
	e.keyed("b", 100)
	if got := e.keysOf(e.claim("w", 20)); countOf(got, "a") != 10 {
		t.Fatalf("equal weights: %d of 20 for a", countOf(got, "a"))
	}
	fc.Overrides = map[string]KeyOverride{"a": {Weight: 3}}
	e.setFlow(&fc)
	if got := e.keysOf(e.claim("w", 40)); countOf(got, "a") < 29 || countOf(got, "a") > 31 {
		t.Fatalf("a at weight 3: %d of 40, want 30", countOf(got, "a"))
	}
}

// FIFO fairness: the key whose head task is oldest goes first.
func TestFlowFIFOFairness(t *testing.T) {
	e := newFlowEnv(t, FlowControl{Fairness: FairnessFIFO})
	e.keyed("a", 2)
	e.clock.Step(time.Second)
	e.keyed("b", 1)
	e.clock.Step(time.Second)
	e.keyed("a", 1)
	if got := e.keysOf(e.claim("w", 4)); !slices.Equal(got, []string{"a", "a", "b", "a"}) {
		t.Fatalf("FIFO order %v, want a a b a", got)
	}
}

// heldCounts returns fc:hc: key -> slots held.
func (e *env) heldCounts() map[string]string {
	e.t.Helper()
	m, err := e.rdb.HGetAll(ctx, keysFor(e.q).prefix+sufFlowHeldCount).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// reclaimStart reclaims every entry (minimum idle 0) as worker w and starts
// the first.
func (e *env) reclaimStart(w string) StartResult {
	e.t.Helper()
	ds, err := e.b.Reclaim(ctx, e.q, w, 0, 10)
	if err != nil || len(ds) != 1 {
		e.t.Fatalf("reclaim: %v %v", ds, err)
	}
	sr, err := e.b.Start(ctx, e.q, w, ds[0])
	if err != nil {
		e.t.Fatalf("start reclaimed: %v", err)
	}
	return sr
}

// A held slot belongs to one task and is given back on every way out of
// Running, once: after each exit (done twice where the API allows) no slot
// is held, and a task queued again takes exactly one when it starts again.
func TestFlowSlotGivenBackOnEveryExit(t *testing.T) {
	for name, c := range map[string]struct {
		maxAttempts int
		expires     bool
		exit        func(e *env, x Execution) State
	}{
		"success": {exit: func(e *env, x Execution) State { return e.complete(x, Outcome{}) }},
		"retry":   {exit: func(e *env, x Execution) State { return e.complete(x, Outcome{Err: "e", Retryable: true}) }},
		"dead letter": {exit: func(e *env, x Execution) State {
			return e.complete(x, Outcome{Err: "fatal"})
		}},
		"cancel": {exit: func(e *env, x Execution) State {
			if _, err := e.b.Cancel(ctx, e.q, x.TaskID); err != nil {
				e.t.Fatal(err)
			}
			return e.complete(x, Outcome{Cancelled: true})
		}},
		"hand-back before the handler ran": {exit: func(e *env, x Execution) State {
			st, err := e.b.Release(ctx, e.q, x.WorkerID, x, false)
			if err != nil {
				e.t.Fatal(err)
			}
			return st
		}},
		"hand-back of an interrupted last attempt": {maxAttempts: 1, exit: func(e *env, x Execution) State {
			st, err := e.b.Release(ctx, e.q, x.WorkerID, x, true)
			if err != nil {
				e.t.Fatal(err)
			}
			return st
		}},
		"lease lost, reclaimed and completed by the new owner": {exit: func(e *env, x Execution) State {
			sr := e.reclaimStart("w2")
			if !sr.Run || len(e.held()) != 1 {
				e.t.Fatalf("crash redelivery: run %v, held %v (the slot stays the task's)", sr.Run, e.held())
			}
			if _, err := e.b.Complete(ctx, e.q, x, Outcome{}); CodeOf(err) != CodeStaleExecution {
				e.t.Fatalf("the old owner's completion: %v", err)
			}
			ds := Delivery{MessageID: x.MessageID, Band: x.Band, TaskID: x.TaskID, Attempt: x.Attempt}
			return e.complete(Execution{Delivery: ds, WorkerID: "w2", Attempt: sr.Task.Attempt}, Outcome{})
		}},
		"crash loop exhausts the attempts": {maxAttempts: 1, exit: func(e *env, x Execution) State {
			sr := e.reclaimStart("w2")
			return sr.Task.State
		}},
		"cancel requested, then reclaimed": {exit: func(e *env, x Execution) State {
			if _, err := e.b.Cancel(ctx, e.q, x.TaskID); err != nil {
				e.t.Fatal(err)
			}
			return e.reclaimStart("w2").Task.State
		}},
		"expired, then reclaimed": {expires: true, exit: func(e *env, x Execution) State {
			e.clock.Step(2 * time.Minute)
			return e.reclaimStart("w2").Task.State
		}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newFlowEnv(t, FlowControl{MaxConcurrency: 5, PerKey: KeyLimits{Concurrency: 1}})
			req := SubmitRequest{FlowKey: "k", MaxAttempts: c.maxAttempts}
			if c.expires {
				req.ExpiresAt = e.clock.Now().Add(time.Minute)
			}
			e.mustSubmit(req)
			xs := e.claim("w1", 1)
			if len(xs) != 1 || len(e.held()) != 1 || e.heldCounts()["k"] != "1" {
				t.Fatalf("claim: %v, held %v %v", xs, e.held(), e.heldCounts())
			}
			st := c.exit(e, xs[0])
			if h, hc := e.held(), e.heldCounts(); len(h) != 0 || len(hc) != 0 {
				t.Fatalf("after the exit (%s) held %v, counts %v", st, h, hc)
			}
			// Once more where it can be: a completion again is answered
			// as the first was and gives nothing back twice.
			if st != StateQueued && !st.Terminal() {
				e.clock.Step(time.Hour)
				if _, _, err := e.b.PromoteDue(ctx, e.q, 10); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.b.Complete(ctx, e.q, xs[0], Outcome{}); err != nil && CodeOf(err) != CodeStaleExecution {
				t.Fatalf("completing again: %v", err)
			}
			if h, hc := e.held(), e.heldCounts(); len(h) != 0 || len(hc) != 0 {
				t.Fatalf("after a second exit held %v, counts %v", h, hc)
			}
			if st.Terminal() {
				return
			}
			if xs := e.claim("w3", 5); len(xs) != 1 || len(e.held()) != 1 || e.heldCounts()["k"] != "1" {
				t.Fatalf("the task queued again (%s): claimed %v, held %v %v", st, xs, e.held(), e.heldCounts())
			}
		})
	}
}

// Lowering a cap stops new admissions and never interrupts running tasks:
// they complete as usual, and admissions resume below the new cap.
func TestFlowLoweringACapKeepsRunningTasks(t *testing.T) {
	fc := FlowControl{PerKey: KeyLimits{Concurrency: 3}}
	e := newFlowEnv(t, fc)
	e.keyed("a", 10)
	xs := e.claim("w", 10)
	if len(xs) != 3 {
		t.Fatalf("claimed %d, want 3", len(xs))
	}
	fc.PerKey.Concurrency = 1
	e.setFlow(&fc)
	if got := e.claim("w", 10); len(got) != 0 {
		t.Fatalf("claimed %d with 3 running and the cap lowered to 1", len(got))
	}
	for i, x := range xs[:2] {
		if st := e.complete(x, Outcome{}); st != StateSucceeded {
			t.Fatalf("running task %d after the cap was lowered ended %s", i, st)
		}
		if got := e.claim("w", 10); len(got) != 0 {
			t.Fatalf("claimed %d with %d running, cap 1", len(got), 2-i)
		}
	}
	e.complete(xs[2], Outcome{})
	if got := e.claim("w", 10); len(got) != 1 {
		t.Fatalf("claimed %d with none running, cap 1", len(got))
	}
	// Raising it back lets the parked key run at once.
	fc.PerKey.Concurrency = 4
	e.setFlow(&fc)
	if got := e.claim("w", 10); len(got) != 3 {
		t.Fatalf("claimed %d after raising the cap to 4 with 1 running, want 3", len(got))
	}
}

// Enabling flow control on a queue with a stream backlog moves the backlog
// into the key lists, under the limits; removing it serves the lists without
// limits, then the queue is a plain one again.
func TestFlowEnableAndDisable(t *testing.T) {
	e := newEnv(t)
	for i := range 6 {
		e.mustSubmit(SubmitRequest{FlowKey: fmt.Sprintf("k%d", i%2), Priority: 5})
	}
	fc := FlowControl{PerKey: KeyLimits{Concurrency: 1}}
	e.setFlow(&fc)
	e.b.rateClock = e.clock
	xs := e.claim("w", 10)
	if got := e.keysOf(xs); len(got) != 2 || countOf(got, "k0") != 1 {
		t.Fatalf("after enabling: claimed %v, want one per key (cap 1)", got)
	}
	k := keysFor(e.q)
	if n, _ := e.rdb.LLen(ctx, k.flowList(5, "k0")).Result(); n != 2 {
		t.Fatalf("k0's list holds %d of the stream backlog, want 2", n)
	}
	if n, _ := e.rdb.Exists(ctx, k.flowMigrate()).Result(); n != 0 {
		t.Fatalf("the migration marker stays after the backlog moved")
	}
	e.setFlow(nil)
	e.mustSubmit(SubmitRequest{FlowKey: "k0", Priority: 5}) // to the stream again
	var got []Execution
	for range 3 {
		got = append(got, e.claim("w", 10)...)
	}
	if len(got) != 5 {
		t.Fatalf("after removing flow control: claimed %d, want the 4 listed and the new one", len(got))
	}
	if n, _ := e.rdb.Exists(ctx, k.flow()).Result(); n != 0 {
		t.Fatalf("the flow key stays after the lists drained")
	}
	for _, x := range append(xs, got...) {
		e.complete(x, Outcome{})
	}
	if h, hc := e.held(), e.heldCounts(); len(h) != 0 || len(hc) != 0 {
		t.Fatalf("slots left after every task ended: %v %v", h, hc)
	}
}

func TestFlowCancelPurgeAndListings(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 1}})
	ids := e.keyed("a", 3)
	ids = append(ids, e.keyed("b", 2, 8)...)
	if _, err := e.b.Cancel(ctx, e.q, ids[1]); err != nil {
		t.Fatal(err)
	}
	k := keysFor(e.q)
	if n, _ := e.rdb.LLen(ctx, k.flowList(5, "a")).Result(); n != 2 {
		t.Fatalf("a's list holds %d after a cancel, want 2", n)
	}
	run := e.claim("w", 10) // b's first (band 8), a's first
	if len(run) != 2 {
		t.Fatalf("claimed %d, want 2", len(run))
	}
	unfinished, err := e.b.unfinished(ctx, e.q)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(unfinished)
	want := []string{ids[0], ids[2], ids[3], ids[4]}
	slices.Sort(want)
	if !slices.Equal(unfinished, want) {
		t.Fatalf("unfinished %v, want %v", unfinished, want)
	}
	n, err := e.b.PurgeQueue(ctx, e.q)
	if err != nil || n != 2 {
		t.Fatalf("purge cancelled %d, %v; want the 2 queued", n, err)
	}
	for _, id := range []string{ids[2], ids[4]} {
		if st := e.task(id).State; st != StateCancelled {
			t.Fatalf("purged task %s is %s", id, st)
		}
	}
	m, err := e.b.QueueMetrics(ctx, e.q)
	if err != nil {
		t.Fatal(err)
	}
	if m.Flow.Admissible+m.Flow.Throttled != 0 || m.Flow.Held != 2 {
		t.Fatalf("after the purge: %+v", m.Flow)
	}
	if c, err := e.b.DeleteQueue(ctx, e.q); err != nil || c != 2 {
		t.Fatalf("delete queue cancelled %d, %v; want the 2 running", c, err)
	}
}

func TestFlowMetricsKeysAndWaitReasons(t *testing.T) {
	fc := FlowControl{MaxConcurrency: 10, Rate: &FlowRate{Limit: 100, Period: time.Second, Burst: 100},
		PerKey:    KeyLimits{Concurrency: 2},
		Overrides: map[string]KeyOverride{"slow": {KeyLimits: KeyLimits{Rate: &FlowRate{Limit: 1, Period: time.Minute, Burst: 1}}}}}
	e := newFlowEnv(t, fc)
	e.keyed("tenant-a", 5)
	e.keyed("b", 1)
	slow := e.keyed("slow", 3)
	xs := e.claim("w", 10) // tenant-a 2, b 1, slow 1
	if len(xs) != 4 {
		t.Fatalf("claimed %d, want 4", len(xs))
	}
	ids := e.keyed("tenant-a", 1)
	m, err := e.b.QueueMetrics(ctx, e.q)
	if err != nil {
		t.Fatal(err)
	}
	want := FlowMetrics{Enabled: true, Admissible: 0, Throttled: 6, Held: 4, ActiveKeys: 2, ParkedKeys: 2,
		LimitedBy: []FlowLimit{LimitKeyConcurrency, LimitKeyRate}}
	if d := cmp.Diff(want, m.Flow); d != "" {
		t.Errorf("flow metrics (-want +got):\n%s", d)
	}
	if m.Queued[5] != 6 {
		t.Errorf("queued in band 5: %d, want the 6 in key lists", m.Queued[5])
	}
	if r := e.task(ids[0]).WaitReason; r != "key tenant-a at concurrency 2/2" {
		t.Errorf("wait reason %q", r)
	}
	if r := e.task(slow[2]).WaitReason; !strings.HasPrefix(r, "key slow at rate limit 1/60s (next start in ") {
		t.Errorf("wait reason %q", r)
	}
	keys, err := e.b.FlowKeys(ctx, e.q, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []KeyFlow{{Key: "tenant-a", Queued: 4, Held: 2, Concurrency: 2, Weight: 1, Parked: LimitKeyConcurrency},
		{Key: "slow", Queued: 2, Held: 1, Concurrency: 2, Weight: 1, Parked: LimitKeyRate, EligibleAt: e.clock.Now().Add(time.Minute).UTC()}}
	if d := cmp.Diff(wantKeys, keys); d != "" {
		t.Errorf("flow keys (-want +got):\n%s", d)
	}
	for _, x := range xs {
		e.clock.Step(100 * time.Millisecond)
		e.complete(x, Outcome{})
	}
	m, _ = e.b.QueueMetrics(ctx, e.q)
	if m.Flow.MeanExec != 250*time.Millisecond || m.Flow.Admissible != 2 {
		t.Errorf("after completing: mean exec %v, admissible %d; want 250ms, tenant-a's 2", m.Flow.MeanExec, m.Flow.Admissible)
	}
}

// ReconcileFlowSlots gives back a slot whose task is not Running (here one
// whose hash was lost) and rebuilds the counts.
func TestFlowReconcileSlots(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 1}})
	e.keyed("a", 2)
	xs := e.claim("w", 5)
	if len(xs) != 1 {
		t.Fatalf("claimed %d", len(xs))
	}
	if err := e.rdb.HSet(ctx, keysFor(e.q).task(xs[0].TaskID), "state", "Failed").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := e.b.ReconcileFlowSlots(ctx, e.q); err != nil || n != 1 {
		t.Fatalf("reconcile gave back %d, %v; want 1", n, err)
	}
	if got := e.claim("w", 5); len(got) != 1 {
		t.Fatalf("claimed %d after the slot came back, want a's second", len(got))
	}
	if n, err := e.b.ReconcileFlowSlots(ctx, e.q); err != nil || n != 0 {
		t.Fatalf("reconcile of a sound queue gave back %d, %v", n, err)
	}
}

// A repair gives back any number of leaked slots (found by the per-key
// acceptance run, where 50,000 leaked slots failed "too many results to
// unpack").
func TestFlowReconcileManySlots(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 1}})
	const leaked = 20000
	held := make([]any, 0, 2*leaked)
	for i := range leaked {
		held = append(held, fmt.Sprintf("gone-%d", i), "a")
	}
	if err := e.rdb.HSet(ctx, keysFor(e.q).flowHeld(), held...).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := e.b.ReconcileFlowSlots(ctx, e.q); err != nil || n != leaked {
		t.Fatalf("reconcile gave back %d, %v; want %d", n, err, leaked)
	}
	if n := e.rdb.HLen(ctx, keysFor(e.q).flowHeld()).Val(); n != 0 {
		t.Fatalf("%d slots held after the repair", n)
	}
	e.keyed("a", 1)
	if got := e.claim("w", 5); len(got) != 1 {
		t.Fatalf("claimed %d of key a after the repair, want 1", len(got))
	}
}

// blockedClients is the number of clients blocked in Redis (INFO clients).
func (e *env) blockedClients() int {
	e.t.Helper()
	info, err := e.rdb.Info(ctx, "clients").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "blocked_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	e.t.Fatal("no blocked_clients in INFO clients")
	return 0
}

// waitBlocked waits until n clients are blocked in Redis.
func (e *env) waitBlocked(n int) {
	e.t.Helper()
	for e.blockedClients() != n {
		time.Sleep(time.Millisecond)
	}
}

// wakeTokens returns the wake stream's length and the ID its group
// delivered last.
func (e *env) wakeTokens() (int64, string) {
	e.t.Helper()
	k := keysFor(e.q)
	n, err := e.rdb.XLen(ctx, k.flowWake()).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	gs, err := e.rdb.XInfoGroups(ctx, k.flowWake()).Result()
	if err != nil || len(gs) != 1 {
		e.t.Fatalf("wake group: %v %v", gs, err)
	}
	return n, gs[0].LastDeliveredID
}

// Workers waiting on a limit sleep in Redis; a freed slot adds one wake
// token, which wakes one of them: it claims the task the slot admits, the
// other sleeps on.
func TestFlowFreedSlotWakesOneWaiter(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 1}})
	e.keyed("a", 2)
	x := e.claim("w0", 1)[0]
	type got struct {
		ss  []Started
		err error
	}
	done := make(chan got, 2)
	for _, w := range []string{"w1", "w2"} {
		go func() {
			ss, err := e.b.ReadStart(ctx, e.q, w, w, 1, time.Minute)
			done <- got{ss, err}
		}()
	}
	e.waitBlocked(2)
	before, _ := e.wakeTokens()
	e.complete(x, Outcome{})
	r := <-done
	if r.err != nil || len(r.ss) != 1 || !r.ss[0].Run {
		t.Fatalf("woken worker read %+v, %v", r.ss, r.err)
	}
	after, delivered := e.wakeTokens()
	if after != before+1 {
		t.Fatalf("the freed slot added %d wake tokens, want 1", after-before)
	}
	last, err := e.rdb.XRevRangeN(ctx, keysFor(e.q).flowWake(), "+", "-", 1).Result()
	if err != nil || len(last) != 1 || last[0].ID != delivered {
		t.Fatalf("the token %v was not the one read (%s)", last, delivered)
	}
	e.waitBlocked(1) // the other worker sleeps on
	e.mustSubmit(SubmitRequest{FlowKey: "b", Priority: 5})
	if r := <-done; r.err != nil || len(r.ss) != 1 || e.task(r.ss[0].TaskID).FlowKey != "b" {
		t.Fatalf("a submit to a new key did not wake the other worker: %+v, %v", r.ss, r.err)
	}
}

func TestFlowKeyValidation(t *testing.T) {
	e := newFlowEnv(t, FlowControl{})
	for _, k := range []string{"tenant a", strings.Repeat("k", MaxFlowKeyBytes+1), "caf\u00e9", "a\tb"} {
		_, err := e.submit(SubmitRequest{FlowKey: k})
		if be := wantCode(t, err, CodeInvalidTask); be.Field != "flow_key" {
			t.Errorf("flow key %q refused naming %q", k, be.Field)
		}
	}
	for _, k := range []string{"", "tenant-a", strings.Repeat("k", MaxFlowKeyBytes), "{x}:y/z"} {
		if ti := e.mustSubmit(SubmitRequest{FlowKey: k}); ti.FlowKey != k || e.task(ti.ID).FlowKey != k {
			t.Errorf("flow key %q stored as %q", k, e.task(ti.ID).FlowKey)
		}
	}
}

// fc_release gives a slot back once: a second release of the same task
// (the release paths are fenced, but a slot must not depend on it) leaves
// the key's other slot counted.
func TestFlowReleaseIsIdempotent(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 2}})
	e.keyed("k", 2)
	xs := e.claim("w", 2)
	if len(xs) != 2 {
		t.Fatalf("claimed %d", len(xs))
	}
	twice := flowScript(`fc_release({ARGV[2]}) fc_flush() fc_release({ARGV[2]}) return 1`)
	if err := twice.Run(ctx, e.rdb, []string{keysFor(e.q).flow()}, keysFor(e.q).prefix, xs[0].TaskID).Err(); err != nil {
		t.Fatal(err)
	}
	if h, hc := e.held(), e.heldCounts(); len(h) != 1 || hc["k"] != "1" {
		t.Fatalf("after releasing one task twice: held %v, counts %v; want the other's slot", h, hc)
	}
}

// maxDepth counts the tasks in key lists: a flow-controlled queue refuses
// as a plain one does.
func TestFlowMaxDepthCountsKeyLists(t *testing.T) {
	e := newFlowEnv(t, FlowControl{}, func(c *QueueConfig) { c.MaxDepth = 3 })
	e.keyed("a", 2)
	e.keyed("b", 1)
	_, err := e.submit(SubmitRequest{FlowKey: "c"})
	if be := wantCode(t, err, CodeQueueFull); be.Depth != 3 {
		t.Fatalf("refused at depth %d, want 3", be.Depth)
	}
	e.claim("w", 1)
	if _, err := e.submit(SubmitRequest{FlowKey: "c"}); CodeOf(err) != CodeQueueFull {
		t.Fatalf("a running task still counts: %v", err)
	}
}

// A crash redelivery runs at once (the task holds its slot) but is charged
// to the rate: the long-run rate holds.
func TestFlowCrashRedeliveryIsChargedToTheRate(t *testing.T) {
	e := newFlowEnv(t, FlowControl{Rate: &FlowRate{Limit: 1, Period: time.Minute, Burst: 1}})
	e.keyed("k", 2)
	if xs := e.claim("w1", 5); len(xs) != 1 {
		t.Fatalf("claimed %d, want the burst of 1", len(xs))
	}
	if sr := e.reclaimStart("w2"); !sr.Run {
		t.Fatalf("crash redelivery refused: %+v", sr)
	}
	e.clock.Step(time.Minute)
	if xs := e.claim("w3", 5); len(xs) != 0 {
		t.Fatalf("claimed %d a minute later: the redelivery was not charged", len(xs))
	}
	e.clock.Step(time.Minute)
	if xs := e.claim("w3", 5); len(xs) != 1 {
		t.Fatalf("claimed %d two minutes later, want 1", len(xs))
	}
}

// Many keys at their caps ahead of an admissible one: the claim goes on
// past them (window after window of the ready set) and admits it.
func TestFlowManyParkedKeysAheadOfAnAdmissibleOne(t *testing.T) {
	fc := FlowControl{PerKey: KeyLimits{Concurrency: 1}, Overrides: map[string]KeyOverride{}}
	for i := range 30 {
		fc.Overrides[fmt.Sprintf("a%02d", i)] = KeyOverride{Weight: MaxFlowWeight}
	}
	e := newFlowEnv(t, fc)
	// z ran once at weight 1: its next start tag is far behind the a-keys'.
	e.keyed("z", 1)
	e.complete(e.claim("w", 1)[0], Outcome{})
	e.keyed("z", 1)
	for i := range 30 {
		e.keyed(fmt.Sprintf("a%02d", i), 2)
	}
	if got := e.keysOf(e.claim("w", 30)); countOf(got, "z") != 0 {
		t.Fatalf("claimed %v, want the 30 a-keys first (weight 1000)", got)
	}
	// Every a-key is at its cap now, ahead of z in the ready set.
	if got := e.keysOf(e.claim("w", 1)); len(got) != 1 || got[0] != "z" {
		t.Fatalf("claimed %v behind 30 keys at their caps, want z", got)
	}
}
