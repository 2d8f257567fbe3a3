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
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Operation counts of the hot path: the Redis commands one operation costs,
// counted by the server (INFO commandstats, which counts the commands a
// script runs as well as the EVALSHA that ran it). They are deterministic, so
// they are budgets checked by a test, where times are not.
//
// Each budget is the count of the operation as it is today (the first values,
// 2026-12-01 before issue 24: submit one 23, batch of 32 148, start one 16,
// batch 109, complete one 12, batch 229, heartbeat 8). A change that
// adds a command fails TestOperationCounts with the per-command breakdown;
// raising a budget on purpose is an edit of one constant here, with the
// reason beside it. A change that removes commands lowers the constant.
const (
	// budgetSubmit: one Submit with an idempotency key into an empty queue.
	// 23 -> 22: SET NX GET claims the key or reads its record in one call.
	// 22 -> 21: one EXISTS of the index's oldest entries (index_new).
	budgetSubmit = 21
	// budgetSubmitBatch: SubmitMany of opBatch tasks with keys (one script call).
	// 148 -> 116: SET NX GET (one GET less per task).
	// 116 -> 114: the same.
	budgetSubmitBatch = 114
	// budgetStartOne: ReadStart delivering and starting one entry.
	budgetStartOne = 16
	// budgetStartBatch: ReadStart delivering and starting opBatch entries.
	// 109 -> 78: one TaskStarted events entry per call, not per task.
	budgetStartBatch = 78
	// budgetCompleteOne: one Complete (success, with a result).
	budgetCompleteOne = 12
	// budgetCompleteBatch: opBatch Completes coalesced into one script call.
	// 229 -> 198: one TaskSucceeded events entry per call, not per task.
	budgetCompleteBatch = 198
	// budgetCompleteNext: one CompleteNext (success, with a result) that
	// also starts the next entry: the commands of a complete and of a start
	// (12 + 16), in one round trip instead of two.
	budgetCompleteNext = 28
	// budgetHeartbeat: one heartbeat of a worker with one task in flight
	// (Heartbeat, then Touch of that execution). The heartbeat is a script
	// that reads the queue's layout record before it writes (evalsha, hget).
	budgetHeartbeat = 10
)

// opBatch is the size of the batched cases (the drain benchmark's slot count).
const opBatch = 32

// connectionSetup lists commands a client sends when it opens a connection;
// they are not the operation's (a pool may open one at any time).
var connectionSetup = map[string]bool{"hello": true, "client|setinfo": true, "ping": true, "info": true}

// commandCounts returns the calls per command of INFO commandstats.
func commandCounts(t *testing.T, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", l, err)
		}
		out[name] = n
	}
	return out
}

// countCommands runs op and returns the commands it cost, by command.
func countCommands(t *testing.T, rdb *redis.Client, op func()) map[string]int {
	t.Helper()
	before := commandCounts(t, rdb)
	op()
	after := commandCounts(t, rdb)
	delta := map[string]int{}
	for c, n := range after {
		if d := n - before[c]; d > 0 && !connectionSetup[c] {
			delta[c] = d
		}
	}
	return delta
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// breakdown is "evalsha 1, hset 1, ..." in command order.
func breakdown(m map[string]int) string {
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", c, m[c]))
	}
	return strings.Join(parts, ", ")
}

func TestOperationCounts(t *testing.T) {
	e := newEnv(t)
	const worker = hotWorker
	o := hotOps{t, e}
	submitKeyed, readStart, execOf, completeAll, submitMany := o.submitKeyed, o.readStart, o.exec, o.completeAll, o.submitMany
	// Warm up: every script loaded, every connection open, the task index
	// holding tasks, so each case below counts only its own operation.
	submitMany(0, 2)
	warm := readStart(2)
	if _, err := e.b.Touch(ctx, e.q, worker, []Execution{execOf(warm[0])}); err != nil {
		t.Fatal(err)
	}
	completeAll(warm)
	if err := e.b.Heartbeat(ctx, e.q, WorkerInfo{ID: worker}, time.Second); err != nil {
		t.Fatal(err)
	}
	key := 100

	var one, batch []Started
	cases := []struct {
		name   string
		budget int
		op     func()
	}{
		{"submit one", budgetSubmit, func() {
			if _, err := e.b.Submit(ctx, e.q, submitKeyed(key)); err != nil {
				t.Fatal(err)
			}
		}},
		{fmt.Sprintf("submit batch of %d", opBatch), budgetSubmitBatch, func() { submitMany(key+1, opBatch) }},
		{"start one", budgetStartOne, func() { one = readStart(1) }},
		{fmt.Sprintf("start batch of %d", opBatch), budgetStartBatch, func() { batch = readStart(opBatch) }},
		{"complete one", budgetCompleteOne, func() {
			if _, err := e.b.Complete(ctx, e.q, execOf(one[0]), Outcome{Result: raw(`{"ok":true}`)}); err != nil {
				t.Fatal(err)
			}
		}},
		{fmt.Sprintf("complete batch of %d", opBatch), budgetCompleteBatch, func() { completeAll(batch) }},
	}
	for _, c := range cases {
		check(t, c.name, c.budget, countCommands(t, e.rdb, c.op))
	}

	// A heartbeat with one task in flight.
	submitMany(key+1000, 1)
	x := execOf(readStart(1)[0])
	check(t, "heartbeat, one in flight", budgetHeartbeat, countCommands(t, e.rdb, func() {
		if err := e.b.Heartbeat(ctx, e.q, WorkerInfo{ID: worker, Concurrency: 1, Active: 1, StartedAt: time.Now()}, time.Second); err != nil {
			t.Fatal(err)
		}
		if lost, err := e.b.Touch(ctx, e.q, worker, []Execution{x}); err != nil || len(lost) != 0 {
			t.Fatalf("touch: lost %v, %v", lost, err)
		}
	}))

	// A completion that reads and starts the slot's next entry.
	submitMany(key+2000, 1)
	check(t, "complete one and start the next", budgetCompleteNext, countCommands(t, e.rdb, func() {
		_, next, err := e.b.CompleteNext(ctx, e.q, x, Outcome{Result: raw(`{"ok":true}`)}, worker)
		if err != nil || next == nil || next.Err != nil || !next.Run {
			t.Fatalf("complete-next: next %+v, %v", next, err)
		}
	}))
}

// check fails when got costs more than budget commands, and says when it
// costs fewer (the budget should come down with the change that saved them).
func check(t *testing.T, name string, budget int, got map[string]int) {
	t.Helper()
	n := total(got)
	switch {
	case n > budget:
		t.Errorf("%s: %d Redis commands, budget %d (+%d): %s", name, n, budget, n-budget, breakdown(got))
	case n < budget:
		t.Errorf("%s: %d Redis commands, budget %d: lower the budget to %d: %s", name, n, budget, n, breakdown(got))
	default:
		t.Logf("%s: %d Redis commands: %s", name, n, breakdown(got))
	}
}

// Flow-controlled queues have budgets of their own (issue 35): a queue with
// per-key caps that do not bind (1000), weighted fairness, and opBatch keys,
// the benchmark's shape. The plain budgets above are unchanged by flow
// control. First values, 2026-12-03: the whole life of a task in batches of
// opBatch costs (121 + 145 + 204) / 32 = 14.7 commands with flow control,
// (114 + 78 + 198) / 32 = 12.2 without.
const (
	// flowBudgetSubmitNewKey: one Submit whose key had no queued task: an
	// RPUSH instead of the XADD, the list count, and the key made ready
	// (its parking, its finish tag, the band's virtual time, ZADD NX) and a
	// wake token; 21 without flow control. 29 -> 28: one EXISTS of the task
	// index's oldest entries (index_new).
	flowBudgetSubmitNewKey = 28
	// flowBudgetSubmitBatchNewKeys: opBatch Submits to opBatch keys that had
	// no queued task: the keys are made ready per band, not per key (one
	// HMGET, ZMSCORE and ZADD); 114 without flow control. 123 -> 121: the same.
	flowBudgetSubmitBatchNewKeys = 121
	// flowBudgetSubmitBatchBusyKeys: opBatch Submits to keys with queued
	// tasks: an RPUSH each instead of the XADD, plus the list count read and
	// written once. 148 -> 116: the task index's trim asks one EXISTS of its
	// 33 oldest entries, not one each.
	flowBudgetSubmitBatchBusyKeys = 116
	// flowBudgetStartOne: ReadStart admitting one task: MGET of the paused and
	// flow keys, a window of each band's ready set (bands 9..5
	// here), LPOP, HGETALL, XADD to the band stream and XREADGROUP, the start's
	// HSET, then the slot, counts and virtual time written once, and one LLEN
	// (a claim that filled its count wakes the next worker only when work is
	// left); 16 without. A queue with a rate adds the clock (TIME), one with
	// per-key rates the rate-parked keys due (ZRANGEBYSCORE).
	flowBudgetStartOne = 21
	// flowBudgetStartBatch: ReadStart admitting opBatch tasks of opBatch keys:
	// LPOP, HGETALL, XADD and HSET per task, the rest per call; 78 without.
	flowBudgetStartBatch = 145
	// flowBudgetCompleteOne: one Complete: the slot given back (HMGET and HDEL
	// of fc:held, HMGET and HDEL of the key's count) and the execution time
	// (two HINCRBY); 12 without.
	flowBudgetCompleteOne = 18
	// flowBudgetCompleteBatch: opBatch Completes in one script call: the same
	// six commands per call; 198 without.
	flowBudgetCompleteBatch = 204
	// flowBudgetCompleteNext: one CompleteNext admitting the next task: a
	// flow complete and a flow start (18 + 21); 28 without.
	flowBudgetCompleteNext = 39
)

func TestFlowOperationCounts(t *testing.T) {
	e := newFlowEnv(t, FlowControl{PerKey: KeyLimits{Concurrency: 1000}})
	const worker = "w1"
	req := func(i int) SubmitRequest {
		return SubmitRequest{Type: "demo", Payload: raw(`{"n":1}`), IdempotencyKey: fmt.Sprintf("key-%d", i),
			FlowKey: fmt.Sprintf("tenant-%d", i%opBatch), Priority: 5}
	}
	submitMany := func(from, n int) {
		t.Helper()
		reqs := make([]SubmitRequest, n)
		for i := range reqs {
			reqs[i] = req(from + i)
		}
		if _, errs, err := e.b.SubmitMany(ctx, e.q, reqs); err != nil || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
			t.Fatalf("submit many: %v %v", err, errs)
		}
	}
	readStart := func(n int) []Execution {
		t.Helper()
		xs := e.claim(worker, n)
		if len(xs) != n {
			t.Fatalf("read-start %d: %d", n, len(xs))
		}
		return xs
	}
	completeAll := func(xs []Execution) {
		t.Helper()
		items := make([]completeItem, len(xs))
		for i, x := range xs {
			items[i] = completeItem{x: x, kind: "ok", result: []byte(`{"ok":true}`), retryable: "0"}
		}
		if _, errs, err := e.b.completeBatch(ctx, e.q, items); err != nil || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
			t.Fatalf("complete: %v %v", err, errs)
		}
	}
	// Warm up as TestOperationCounts does.
	submitMany(0, 2)
	warm := readStart(2)
	completeAll(warm)
	e.clock.Step(time.Second)

	var one, batch []Execution
	cases := []struct {
		name   string
		budget int
		op     func()
	}{
		{"flow submit one, new key", flowBudgetSubmitNewKey, func() {
			if _, err := e.b.Submit(ctx, e.q, req(100)); err != nil {
				t.Fatal(err)
			}
		}},
		{fmt.Sprintf("flow submit batch of %d, new keys", opBatch), flowBudgetSubmitBatchNewKeys, func() { submitMany(101, opBatch) }},
		{fmt.Sprintf("flow submit batch of %d, busy keys", opBatch), flowBudgetSubmitBatchBusyKeys, func() { submitMany(201, opBatch) }},
		{"flow start one", flowBudgetStartOne, func() { one = readStart(1) }},
		{fmt.Sprintf("flow start batch of %d", opBatch), flowBudgetStartBatch, func() { batch = readStart(opBatch) }},
		{"flow complete one", flowBudgetCompleteOne, func() { e.complete(one[0], Outcome{Result: raw(`{"ok":true}`)}) }},
		{fmt.Sprintf("flow complete batch of %d", opBatch), flowBudgetCompleteBatch, func() { completeAll(batch) }},
	}
	for _, c := range cases {
		check(t, c.name, c.budget, countCommands(t, e.rdb, c.op))
	}
	x := readStart(1)[0]
	check(t, "flow complete one and start the next", flowBudgetCompleteNext, countCommands(t, e.rdb, func() {
		_, next, err := e.b.CompleteNext(ctx, e.q, x, Outcome{Result: raw(`{"ok":true}`)}, worker)
		if err != nil || next == nil || next.Err != nil || !next.Run {
			t.Fatalf("complete-next: next %+v, %v", next, err)
		}
	}))
}

// hotWorker is the worker of TestOperationCounts and TestScriptWork.
const hotWorker = "w1"

// hotOps are the hot path's operations as TestOperationCounts and
// TestScriptWork run them: keyed submits, read-and-start, completions.
type hotOps struct {
	t *testing.T
	e *env
}

func (o hotOps) submitKeyed(i int) SubmitRequest {
	return SubmitRequest{Type: "demo", Payload: raw(`{"n":1}`), IdempotencyKey: fmt.Sprintf("key-%d", i)}
}

func (o hotOps) readStart(n int) []Started {
	o.t.Helper()
	ss, err := o.e.b.ReadStart(ctx, o.e.q, hotWorker, hotWorker, n, 0)
	if err != nil || len(ss) != n {
		o.t.Fatalf("read-start %d: %d entries, %v", n, len(ss), err)
	}
	for _, s := range ss {
		if s.Err != nil || !s.Run {
			o.t.Fatalf("read-start: %+v", s)
		}
	}
	return ss
}

func (o hotOps) exec(s Started) Execution {
	return Execution{Delivery: s.Delivery, WorkerID: hotWorker, Attempt: s.Task.Attempt}
}

func (o hotOps) completeAll(ss []Started) {
	o.t.Helper()
	items := make([]completeItem, len(ss))
	for i, s := range ss {
		items[i] = completeItem{x: o.exec(s), kind: "ok", result: []byte(`{"ok":true}`), retryable: "0"}
	}
	if _, errs, err := o.e.b.completeBatch(ctx, o.e.q, items); err != nil || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		o.t.Fatalf("complete: %v %v", err, errs)
	}
}

func (o hotOps) submitMany(from, n int) {
	o.t.Helper()
	reqs := make([]SubmitRequest, n)
	for i := range reqs {
		reqs[i] = o.submitKeyed(from + i)
	}
	if _, errs, err := o.e.b.SubmitMany(ctx, o.e.q, reqs); err != nil || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		o.t.Fatalf("submit many: %v %v", err, errs)
	}
}
