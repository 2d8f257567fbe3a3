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
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// slowScript holds Redis for ARGV[1] microseconds.
var slowScript = redis.NewScript(`
local t = redis.call("TIME")
local till = t[1] * 1000000 + t[2] + tonumber(ARGV[1])
repeat t = redis.call("TIME") until t[1] * 1000000 + t[2] >= till
return 1`)

// behindSlowScript runs call on rdb while another client's script holds
// srv for 1.5 s, longer than rdb's ReadTimeout: rdb's reply comes too late,
// go-redis may send the call again on another of rdb's connections, and
// Redis runs every send once the slow script ends. It returns call's error
// once those sends have run.
func behindSlowScript(t *testing.T, srv *redistest.Server, rdb *redis.Client, call func() error) error {
	t.Helper()
	// Connections ready in the pool: a send on a new connection would wait
	// for its handshake, which the slow script holds up too.
	conns := make([]*redis.Conn, 4)
	for i := range conns {
		conns[i] = rdb.Conn()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	done := make(chan error, 1)
	go func() { done <- slowScript.Run(ctx, srv.Client(), nil, 1500000).Err() }()
	time.Sleep(100 * time.Millisecond)
	err := call()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the sends queued behind the slow script run
	return err
}

// shortTimeout returns a client of srv that reads replies under 100 ms.
func shortTimeout(t *testing.T, srv *redistest.Server) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// A plain script call whose reply comes after the ReadTimeout is sent again
// (four sends run); runOnce's call runs once, and its caller gets the
// timeout.
func TestRunOnceIsNotSentAgain(t *testing.T) {
	srv := redistest.Start(t)
	rdb := shortTimeout(t, srv)
	incr := redis.NewScript(`return redis.call("INCR", KEYS[1])`)
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	err := behindSlowScript(t, srv, rdb, func() error { return incr.Run(ctx, rdb, []string{"n"}).Err() })
	if n, _ := srv.Client().GetDel(ctx, "n").Int(); n < 2 {
		t.Fatalf("a plain call ran %d times (%v): the test did not make go-redis send it again", n, err)
	}
	err = behindSlowScript(t, srv, rdb, func() error { return runOnce(ctx, rdb, incr, []string{"n"}).Err() })
	if n, _ := srv.Client().Get(ctx, "n").Int(); n != 1 || err == nil {
		t.Fatalf("runOnce ran %d times, error %v; want once and the timeout", n, err)
	}
}

// A lone Submit whose reply comes after the ReadTimeout (Redis busy) is sent
// again by go-redis; every send runs, and the task is still one task with
// one stream entry, queued once.
func TestSubmitPastReadTimeout(t *testing.T) {
	srv := redistest.Start(t)
	rdb := shortTimeout(t, srv)
	b := New(rdb)
	q := QueueRef{Namespace: "ns", Name: "q"}
	if err := b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(ctx, q, SubmitRequest{Type: "t"}); err != nil { // loads the script
		t.Fatal(err)
	}
	if err := slowScript.Load(ctx, srv.Client()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	err := behindSlowScript(t, srv, rdb, func() error { _, err := b.Submit(ctx, q, SubmitRequest{Type: "t"}); return err })
	calls := commandCounts(t, srv.Client())["evalsha"] - 1 // the slow script's
	if calls < 2 {
		t.Fatalf("the submit script ran %d times (%v): the test did not make go-redis send it again", calls, err)
	}
	m, merr := b.QueueMetrics(ctx, q)
	if merr != nil {
		t.Fatal(merr)
	}
	var entries int64
	for _, n := range m.Queued {
		entries += n
	}
	if m.Counters.Accepted != 2 || entries != 2 {
		t.Errorf("the submit script ran %d times; %d tasks accepted, %d entries queued, want 2 and 2 (one before, one now)",
			calls, m.Counters.Accepted, entries)
	}
}

// A ReadStart whose reply comes after the ReadTimeout is not sent again: a
// second send would start further tasks while those the first started wait
// for the visibility timeout (and then count an attempt). The caller gets
// the timeout, and one entry is pending.
func TestReadStartPastReadTimeout(t *testing.T) {
	srv := redistest.Start(t)
	b := New(shortTimeout(t, srv))
	q := QueueRef{Namespace: "ns", Name: "q"}
	if err := b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := b.Submit(ctx, q, SubmitRequest{Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := readStartScript.Load(ctx, srv.Client()).Err(); err != nil {
		t.Fatal(err)
	}
	err := behindSlowScript(t, srv, b.rdb.(*redis.Client), func() error {
		_, err := b.ReadStart(ctx, q, "w", "w", 1, 0)
		return err
	})
	pending := pendingEntries(t, srv, q)
	if pending != 1 || err == nil {
		t.Fatalf("%d entries pending after a read of one (error %v), want 1 and the timeout", pending, err)
	}
}

// CompleteNext's pipeline (the completion and the read of the next entry)
// whose reply comes after the ReadTimeout is not sent again either.
func TestCompleteNextPastReadTimeout(t *testing.T) {
	srv := redistest.Start(t)
	b := New(shortTimeout(t, srv))
	q := QueueRef{Namespace: "ns", Name: "q"}
	if err := b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := b.Submit(ctx, q, SubmitRequest{Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	ss, err := b.ReadStart(ctx, q, "w", "w", 1, 0)
	if err != nil || len(ss) != 1 || !ss[0].Run {
		t.Fatalf("read start: %v %v", ss, err)
	}
	if err := completeBatchScript.Load(ctx, srv.Client()).Err(); err != nil {
		t.Fatal(err)
	}
	x := Execution{Delivery: ss[0].Delivery, WorkerID: "w", Attempt: ss[0].Task.Attempt}
	err = behindSlowScript(t, srv, b.rdb.(*redis.Client), func() error {
		_, _, err := b.CompleteNext(ctx, q, x, Outcome{}, "w")
		return err
	})
	pending := pendingEntries(t, srv, q)
	if pending != 1 || err == nil {
		t.Fatalf("%d entries pending after a completion that reads one (error %v), want 1 and the timeout", pending, err)
	}
}

// pendingEntries counts q's entries read and not yet acknowledged.
func pendingEntries(t *testing.T, srv *redistest.Server, q QueueRef) int64 {
	t.Helper()
	var n int64
	for _, s := range keysFor(q).streams() {
		p, err := srv.Client().XPending(ctx, s, group).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += p.Count
	}
	return n
}
