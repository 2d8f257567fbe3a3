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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

func TestFlowConfigRoundTrip(t *testing.T) {
	fc := FlowControl{
		Rate: &FlowRate{Limit: 200, Period: time.Second, Burst: 20}, MaxConcurrency: 400,
		PerKey:   KeyLimits{Concurrency: 3, Rate: &FlowRate{Limit: 10, Period: 1500 * time.Millisecond, Burst: 1}},
		Fairness: FairnessFIFO,
		Overrides: map[string]KeyOverride{"gold": {Weight: 5, KeyLimits: KeyLimits{Concurrency: 10}},
			"": {Weight: 2, KeyLimits: KeyLimits{Rate: &FlowRate{Limit: 1, Period: time.Minute, Burst: 1}}}},
	}
	e := newFlowEnv(t, fc)
	got, err := e.b.QueueConfig(ctx, e.q)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&fc, got.Flow); d != "" {
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
