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
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Script work of the hot path (issue 38): what each script call makes Redis
// do beyond the count of its commands (TestOperationCounts). Most of a
// script's Redis CPU is not its commands but the machinery of redis.call
// around them: every argument converted from Lua to a Redis string, the
// command looked up, the reply converted back to Lua. So the budgets are the
// quantities that drive that cost, read from MONITOR, which shows every
// command a script runs (source "lua") with all its arguments:
//
//   - scripts: EVALSHA calls; reqArgs, reqBytes: their arguments (the command
//     name, SHA, key count, keys and ARGV), in number and bytes;
//   - replyBytes: the script replies' size as RESP2 (from go-redis's reply
//     values, re-encoded);
//   - calls: the redis.call()s the scripts run; callArgs, callBytes: their
//     arguments (the command name included), in number and bytes.
//
// Left out, because MONITOR does not show them: the replies read back into
// Lua, and which arguments were Lua numbers (formatted by Redis) rather than
// strings (a number and its text look the same).
//
// The quantities are the same on every machine: the clock is the fake one of
// newEnv, task IDs are random but 32 hex digits each, and the stream entry
// IDs are made deterministic by moving the streams' last ID ahead of real
// time (XSETID), so each XADD's ID is the stream's last one with the
// sequence plus one, whatever the time (with real-time IDs the sequence,
// and so the bytes, vary from run to run).
//
// Each budget is the operation as it is today (first values 2026-12-03, main
// at 3654891, Redis 7.0.15). A change that adds work fails TestScriptWork
// with the work by command; raising a budget on purpose is an edit of one
// number here, with the reason beside it. A change that saves work lowers it.
// 2026-12-04: every script call declares the queue's slot guard last
// (keys.guarded), +1 request argument and +21 request bytes per call.
var scriptWorkBudgets = map[string]scriptWork{
	// Submit with an idempotency key into an empty queue. The HSET of the
	// task hash is 26 of the 98 arguments, the ten XLENs of the depth gate 20.
	// 59 -> 41 reply bytes, 21 -> 20 calls: a new item's answer is one
	// string; the index's oldest entries are checked with one EXISTS.
	"submit one": {scripts: 1, reqArgs: 23, reqBytes: 589, replyBytes: 41, calls: 20, callArgs: 97, callBytes: 1113},
	// SubmitMany of opBatch tasks with keys (one script call): per task 3.6
	// calls, 41.9 arguments, 536 bytes (HSET 26 arguments, SET 5, XADD 7).
	// 1393 -> 817 reply bytes, 115 -> 113 calls: the same.
	"submit batch": {scripts: 1, reqArgs: 116, reqBytes: 7502, replyBytes: 817, calls: 113, callArgs: 1338, callBytes: 17154},
	// ReadStart delivering and starting one entry.
	// 307 -> 275 reply bytes: an entry that runs is one string.
	"start one": {scripts: 1, reqArgs: 24, reqBytes: 368, replyBytes: 275, calls: 15, callArgs: 61, callBytes: 638},
	// ReadStart delivering and starting opBatch entries: per task 2.4 calls,
	// 15.5 arguments, 228 bytes; the reply carries each task packed
	// (pack_task), 260 bytes a task. 9355 -> 8331 reply bytes: the same.
	"start batch": {scripts: 1, reqArgs: 24, reqBytes: 369, replyBytes: 8331, calls: 77, callArgs: 495, callBytes: 7301},
	// One Complete (success, with a result).
	// 23 -> 19 reply bytes: the new state is a string, not a table.
	"complete one": {scripts: 1, reqArgs: 13, reqBytes: 288, replyBytes: 19, calls: 11, callArgs: 69, callBytes: 864},
	// opBatch Completes coalesced into one script call: per task 6.2 calls,
	// 37.0 arguments, 594 bytes (two SETs, HMGET, GET, HSET, PEXPIRE).
	// 613 -> 485 reply bytes: each new state a string.
	"complete batch": {scripts: 1, reqArgs: 106, reqBytes: 4593, replyBytes: 485, calls: 197, callArgs: 1185, callBytes: 19023},
	// One CompleteNext (success, with a result) that also starts the next
	// entry: a complete and a start, two script calls in one round trip.
	// 332 -> 296 reply bytes: the started entry and the new state are strings.
	"complete next": {scripts: 2, reqArgs: 37, reqBytes: 657, replyBytes: 296, calls: 26, callArgs: 130, callBytes: 1507},
}

// Bytes written: one keyed task's hash (payload {"n":1}) after submit and
// after success, as the bytes of its field names and values (exact), and as
// MEMORY USAGE (what Redis allocated for it, key and object included, as the
// allocator rounds it: jemalloc, Redis's default; it moves in steps, so a
// few bytes more may not show there).
const (
	// budgetTaskBytesQueued: 12 fields.
	budgetTaskBytesQueued  = 186
	budgetTaskMemoryQueued = 360
	// budgetTaskBytesSucceeded: 15 fields (started_at, worker_id,
	// finished_at added; the payload emptied).
	budgetTaskBytesSucceeded  = 240
	budgetTaskMemorySucceeded = 424
)

// scriptWork is the work of the script calls of one operation.
type scriptWork struct {
	scripts, reqArgs, reqBytes, replyBytes, calls, callArgs, callBytes int
}

func (w scriptWork) fields() []struct {
	name string
	n    int
} {
	return []struct {
		name string
		n    int
	}{
		{"scripts", w.scripts}, {"reqArgs", w.reqArgs}, {"reqBytes", w.reqBytes}, {"replyBytes", w.replyBytes},
		{"calls", w.calls}, {"callArgs", w.callArgs}, {"callBytes", w.callBytes},
	}
}

// monitored is one command of the MONITOR feed.
type monitored struct {
	lua  bool // run by a script
	argv []string
}

// monitor is a connection in MONITOR mode.
type monitor struct {
	t    *testing.T
	conn net.Conn
	rd   *bufio.Reader
	mark int
}

func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	m := &monitor{t: t, conn: conn, rd: bufio.NewReader(conn)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if l := m.line(); l != "+OK" {
		t.Fatalf("MONITOR: %q", l)
	}
	return m
}

func (m *monitor) line() string {
	m.t.Helper()
	// Not a timed assertion: a bound on a hang (a marker that never comes).
	if err := m.conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		m.t.Fatal(err)
	}
	l, err := m.rd.ReadString('\n')
	if err != nil {
		m.t.Fatalf("monitor: %v", err)
	}
	return strings.TrimSuffix(l, "\r\n")
}

// record runs op and returns the commands Redis ran meanwhile: rdb sends an
// ECHO marker before and after op, and the feed, which is in the order
// Redis ran the commands, is read from one marker to the other.
func (m *monitor) record(rdb *redis.Client, op func()) []monitored {
	m.t.Helper()
	m.mark++
	begin, end := fmt.Sprintf("work-begin-%d", m.mark), fmt.Sprintf("work-end-%d", m.mark)
	if err := rdb.Echo(ctx, begin).Err(); err != nil {
		m.t.Fatal(err)
	}
	for !m.isMark(m.next(), begin) {
	}
	op()
	if err := rdb.Echo(ctx, end).Err(); err != nil {
		m.t.Fatal(err)
	}
	var out []monitored
	for c := m.next(); !m.isMark(c, end); c = m.next() {
		out = append(out, c)
	}
	return out
}

func (m *monitor) isMark(c monitored, mark string) bool {
	return len(c.argv) == 2 && strings.EqualFold(c.argv[0], "echo") && c.argv[1] == mark
}

// next parses a feed line: +<time> [<db> <client or "lua">] "arg" "arg" ...
func (m *monitor) next() monitored {
	m.t.Helper()
	l := m.line()
	_, rest, ok := strings.Cut(l, " [")
	src, args, ok2 := strings.Cut(rest, "] ")
	if !ok || !ok2 {
		m.t.Fatalf("monitor line %q", l)
	}
	argv, err := unquoteArgs(args)
	if err != nil || len(argv) == 0 {
		m.t.Fatalf("monitor line %q: %v", l, err)
	}
	return monitored{lua: strings.HasSuffix(src, " lua"), argv: argv}
}

// unquoteArgs splits MONITOR's arguments, each quoted as sdscatrepr quotes
// them: \\, \", \n, \r, \t, \a, \b and \xHH escapes.
func unquoteArgs(s string) ([]string, error) {
	var out []string
	for s != "" {
		if s[0] != '"' {
			return nil, fmt.Errorf("at %q: no opening quote", s)
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' {
				b.WriteByte(s[i])
				continue
			}
			i++
			if i == len(s) {
				return nil, fmt.Errorf("trailing backslash")
			}
			switch c := s[i]; c {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return nil, fmt.Errorf("short \\x escape")
				}
				v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return nil, err
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(c)
			}
		}
		if i == len(s) {
			return nil, fmt.Errorf("no closing quote")
		}
		out = append(out, b.String())
		s = strings.TrimPrefix(s[i+1:], " ")
	}
	return out, nil
}

// replySizes is a go-redis hook that adds up the RESP2 size of the script
// replies the client reads.
type replySizes struct{ bytes int }

func (h *replySizes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replySizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.add(cmd)
		return err
	}
}

func (h *replySizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.add(c)
		}
		return err
	}
}

func (h *replySizes) add(cmd redis.Cmder) {
	// An interface, not *redis.Cmd: the broker wraps some (noRetry).
	if c, ok := cmd.(interface{ Result() (any, error) }); ok && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
		if v, err := c.Result(); err == nil || errors.Is(err, redis.Nil) {
			h.bytes += respSize(v)
		}
	}
}

// respSize is the size of v encoded in RESP2.
func respSize(v any) int {
	bulk := func(n int) int { return 1 + len(strconv.Itoa(n)) + 2 + n + 2 }
	switch v := v.(type) {
	case nil:
		return len("$-1\r\n")
	case string:
		return bulk(len(v))
	case int64:
		return 1 + len(strconv.FormatInt(v, 10)) + 2
	case []any:
		n := 1 + len(strconv.Itoa(len(v))) + 2
		for _, e := range v {
			n += respSize(e)
		}
		return n
	case redis.Error:
		return 1 + len(v.Error()) + 2
	default:
		panic(fmt.Sprintf("respSize: %T", v))
	}
}

// commandWork is the work of the script calls in cmds, in total and by
// command ("evalsha", or the command a script ran).
func commandWork(cmds []monitored) (scriptWork, map[string]scriptWork) {
	by := map[string]scriptWork{}
	for _, c := range cmds {
		name := strings.ToLower(c.argv[0])
		w := by[name]
		n := 0
		for _, a := range c.argv {
			n += len(a)
		}
		switch {
		case c.lua:
			w.calls++
			w.callArgs += len(c.argv)
			w.callBytes += n
		case name == "evalsha" || name == "eval":
			w.scripts++
			w.reqArgs += len(c.argv)
			w.reqBytes += n
		default:
			continue // not a script's work (TestOperationCounts counts it)
		}
		by[name] = w
	}
	var total scriptWork
	for _, w := range by {
		total = scriptWork{total.scripts + w.scripts, total.reqArgs + w.reqArgs, total.reqBytes + w.reqBytes, 0,
			total.calls + w.calls, total.callArgs + w.callArgs, total.callBytes + w.callBytes}
	}
	return total, by
}

// workBreakdown is "evalsha 1: 115 args 7481 bytes; hset 32: 832 args 7578
// bytes; ..." (calls, arguments, bytes) in command order.
func workBreakdown(by map[string]scriptWork) string {
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(by)) {
		w := by[c]
		if w.scripts > 0 {
			parts = append(parts, fmt.Sprintf("%s %d: %d args %d bytes", c, w.scripts, w.reqArgs, w.reqBytes))
		} else {
			parts = append(parts, fmt.Sprintf("%s %d: %d args %d bytes", c, w.calls, w.callArgs, w.callBytes))
		}
	}
	return strings.Join(parts, "; ")
}

func TestScriptWork(t *testing.T) {
	e := newEnv(t)
	replies := &replySizes{}
	e.rdb.AddHook(replies)
	mon := startMonitor(t, e.rdb.Options().Addr)
	const worker = hotWorker
	k := keysFor(e.q)
	o := hotOps{t, e}
	submitKeyed, readStart, execOf, completeAll, submitMany := o.submitKeyed, o.readStart, o.exec, o.completeAll, o.submitMany
	// Stream entry IDs ahead of real time, so each XADD's ID is the last
	// one's sequence plus one (see above).
	for _, s := range k.streams() {
		if err := e.rdb.Do(ctx, "XSETID", s, "4102444800000-0").Err(); err != nil {
			t.Fatalf("xsetid %s: %v", s, err)
		}
	}
	// Warm up as TestOperationCounts does: every script loaded, every
	// connection open, the task index holding tasks.
	submitMany(0, 2)
	completeAll(readStart(2))
	key := 100

	var one, batch []Started
	var next Execution
	cases := []struct {
		name  string
		n     int    // tasks
		setup func() // optional, not recorded
		op    func()
	}{
		{"submit one", 1, nil, func() {
			if _, err := e.b.Submit(ctx, e.q, submitKeyed(key)); err != nil {
				t.Fatal(err)
			}
		}},
		{"submit batch", opBatch, nil, func() { submitMany(key+1, opBatch) }},
		{"start one", 1, nil, func() { one = readStart(1) }},
		{"start batch", opBatch, nil, func() { batch = readStart(opBatch) }},
		{"complete one", 1, nil, func() {
			if _, err := e.b.Complete(ctx, e.q, execOf(one[0]), Outcome{Result: raw(`{"ok":true}`)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"complete batch", opBatch, nil, func() { completeAll(batch) }},
		{"complete next", 1, func() {
			submitMany(key+2000, 2)
			next = execOf(readStart(1)[0])
		}, func() {
			_, started, err := e.b.CompleteNext(ctx, e.q, next, Outcome{Result: raw(`{"ok":true}`)}, worker)
			if err != nil || started == nil || started.Err != nil || !started.Run {
				t.Fatalf("complete-next: next %+v, %v", started, err)
			}
		}},
	}
	for _, c := range cases {
		if c.setup != nil {
			c.setup()
		}
		replies.bytes = 0
		cmds := mon.record(e.rdb, c.op)
		checkWork(t, c.name, c.n, cmds, replies.bytes)
	}

	// Bytes written: one task's hash queued, then succeeded.
	res, err := e.b.Submit(ctx, e.q, submitKeyed(key+3000))
	if err != nil {
		t.Fatal(err)
	}
	tk := k.task(res.Task.ID)
	checkTaskBytes(t, "task hash queued", e.rdb, tk, budgetTaskBytesQueued, budgetTaskMemoryQueued)
	e.complete(execOf(readStart(1)[0]), Outcome{Result: raw(`{"ok":true}`)})
	checkTaskBytes(t, "task hash succeeded", e.rdb, tk, budgetTaskBytesSucceeded, budgetTaskMemorySucceeded)
}

// checkWork fails when the script work of one operation (n tasks) differs
// from its budget, with the work by command.
func checkWork(t *testing.T, name string, n int, cmds []monitored, replyBytes int) {
	t.Helper()
	got, by := commandWork(cmds)
	got.replyBytes = replyBytes
	budget := scriptWorkBudgets[name]
	var msgs []string
	for i, g := range got.fields() {
		b := budget.fields()[i].n
		switch {
		case g.n > b:
			msgs = append(msgs, fmt.Sprintf("%s %d, budget %d (+%d)", g.name, g.n, b, g.n-b))
		case g.n < b:
			msgs = append(msgs, fmt.Sprintf("%s %d, budget %d: lower the budget to %d", g.name, g.n, b, g.n))
		}
	}
	perTask := fmt.Sprintf("per task: %.1f calls, %.1f call args, %.0f call bytes, %.0f request bytes, %.0f reply bytes",
		float64(got.calls)/float64(n), float64(got.callArgs)/float64(n), float64(got.callBytes)/float64(n),
		float64(got.reqBytes)/float64(n), float64(got.replyBytes)/float64(n))
	if len(msgs) > 0 {
		t.Errorf("%s: %s\n  got %+v\n  %s\n  by command: %s", name, strings.Join(msgs, ", "), got, perTask, workBreakdown(by))
		return
	}
	t.Logf("%s: %+v; %s; by command: %s", name, got, perTask, workBreakdown(by))
}

// checkTaskBytes fails when the task hash at key differs from its budgets:
// the bytes of its field names and values, and its MEMORY USAGE; it names
// each field's bytes.
func checkTaskBytes(t *testing.T, name string, rdb *redis.Client, key string, budgetBytes, budgetMemory int) {
	t.Helper()
	h, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var parts []string
	for _, f := range slices.Sorted(maps.Keys(h)) {
		n += len(f) + len(h[f])
		parts = append(parts, fmt.Sprintf("%s %d", f, len(f)+len(h[f])))
	}
	fields := strings.Join(parts, ", ")
	var msgs []string
	for _, c := range []struct {
		what        string
		got, budget int
	}{{"field bytes", n, budgetBytes}, {"MEMORY USAGE", int(mem), budgetMemory}} {
		switch {
		case c.got > c.budget:
			msgs = append(msgs, fmt.Sprintf("%s %d, budget %d (+%d)", c.what, c.got, c.budget, c.got-c.budget))
		case c.got < c.budget:
			msgs = append(msgs, fmt.Sprintf("%s %d, budget %d: lower the budget to %d", c.what, c.got, c.budget, c.got))
		}
	}
	if len(msgs) > 0 {
		t.Errorf("%s: %s; %d fields (name and value bytes): %s", name, strings.Join(msgs, ", "), len(h), fields)
		return
	}
	t.Logf("%s: %d field bytes, MEMORY USAGE %d; %d fields: %s", name, n, mem, len(h), fields)
}

func TestUnquoteArgs(t *testing.T) {
	for in, want := range map[string][]string{
		`"evalsha" "a b"`:                 {"evalsha", "a b"},
		`"\x00\x01\xff" "q\"\\" "\r\n\t"`: {"\x00\x01\xff", `q"\`, "\r\n\t"},
		`""`:                              {""},
	} {
		got, err := unquoteArgs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("unquoteArgs(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`"open`, `bare`, `"\x0"`} {
		if got, err := unquoteArgs(in); err == nil {
			t.Errorf("unquoteArgs(%s) = %q, want an error", in, got)
		}
	}
}
