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
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// replicaQueue ensures queue name with ReplicaAcks n and a timeout of 1 s (a
// loaded machine can take 200 ms for a replica on loopback to acknowledge).
func replicaQueue(t *testing.T, b *Broker, name string, n int) QueueRef {
	t.Helper()
	q := QueueRef{Namespace: "ns", Name: name}
	cfg := DefaultQueueConfig()
	cfg.ReplicaAcks, cfg.ReplicaAckTimeout = n, time.Second
	if err := b.EnsureQueue(ctx, q, cfg); err != nil {
		t.Fatal(err)
	}
	return q
}

// On a queue with ReplicaAcks 1 a submission and a completion return once
// the replica has them. With the replica gone each fails with
// ErrNotReplicated (WAIT cannot confirm even a replay); the failed one is on
// the master all the same, and once the replica is back a retry with its key
// finds it, and a retried completion returns the state it recorded.
func TestReplicaAck(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, 1, 1)
	b := New(s.Master.Client())
	q := replicaQueue(t, b, "q", 1)
	replica := s.Replicas[0].Client()
	r, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := replica.Exists(ctx, keysFor(q).task(r.Task.ID)).Result(); err != nil || n != 1 {
		t.Fatalf("the acknowledged task is not on the replica: %d %v", n, err)
	}
	ds, err := b.Read(ctx, q, "w", 1, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("read: %v %v", ds, err)
	}
	sr, err := b.Start(ctx, q, "w", ds[0])
	if err != nil || !sr.Run {
		t.Fatalf("start: %+v %v", sr, err)
	}
	x := Execution{Delivery: ds[0], WorkerID: "w", Attempt: sr.Task.Attempt}
	if st, err := b.Complete(ctx, q, x, Outcome{Result: []byte(`{"ok":true}`)}); err != nil || st != StateSucceeded {
		t.Fatalf("complete: %v %v", st, err)
	}
	if st, err := replica.HGet(ctx, keysFor(q).task(r.Task.ID), "state").Result(); err != nil || st != string(StateSucceeded) {
		t.Fatalf("the acknowledged completion is not on the replica: state %q %v", st, err)
	}

	r3, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k3"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err = b.Read(ctx, q, "w", 1, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("read: %v %v", ds, err)
	}
	if sr, err = b.Start(ctx, q, "w", ds[0]); err != nil || !sr.Run {
		t.Fatalf("start: %+v %v", sr, err)
	}
	x = Execution{Delivery: ds[0], WorkerID: "w", Attempt: sr.Task.Attempt}

	s.Replicas[0].Kill()
	for range 2 {
		if _, err = b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k2"}); !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("submit with the replica down: %v, want ErrNotReplicated", err)
		}
	}
	if _, err = b.Complete(ctx, q, x, Outcome{}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("complete with the replica down: %v, want ErrNotReplicated", err)
	}
	s.Replicas[0].Restart()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k2"})
		if !errors.Is(err, ErrNotReplicated) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the replica resyncs
	}
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.TaskID == "" {
		t.Fatalf("retry: %v, want the in-progress task of the first try", err)
	}
	if st, err := b.Complete(ctx, q, x, Outcome{}); err != nil || st != StateSucceeded {
		t.Fatalf("retried complete: %v %v, want the recorded Succeeded", st, err)
	}
	if st, err := replica.HGet(ctx, keysFor(q).task(r3.Task.ID), "state").Result(); err != nil || st != string(StateSucceeded) {
		t.Fatalf("the completion is not on the replica after the retry: state %q %v", st, err)
	}
}

// A replay writes nothing itself, yet is answered only once the replicas have
// what it answers with. With the replica paused (connected, lagging) a
// submission and a completion fail with ErrNotReplicated, and so do their
// retries through another client (another API replica or worker: new
// connections, none of which wrote the originals), until the replica has
// caught up; then the retries answer with what the originals wrote.
func TestReplicaAckOfAReplay(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, 1, 1)
	b := New(s.Master.Client())
	q := replicaQueue(t, b, "q", 1)
	if _, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "run"}); err != nil {
		t.Fatal(err)
	}
	ds, err := b.Read(ctx, q, "w", 1, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("read: %v %v", ds, err)
	}
	sr, err := b.Start(ctx, q, "w", ds[0])
	if err != nil || !sr.Run {
		t.Fatalf("start: %+v %v", sr, err)
	}
	x := Execution{Delivery: ds[0], WorkerID: "w", Attempt: sr.Task.Attempt}

	replica := s.Replicas[0]
	replica.Pause()
	paused := true
	t.Cleanup(func() {
		if paused {
			replica.Resume()
		}
	})
	if _, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k"}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("submit with the replica paused: %v, want ErrNotReplicated", err)
	}
	if _, err := b.Complete(ctx, q, x, Outcome{}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("complete with the replica paused: %v, want ErrNotReplicated", err)
	}
	other := New(redis.NewClient(&redis.Options{Addr: s.Master.Addr}))
	if _, err := other.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k"}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("replayed submission with the replica paused: %v, want ErrNotReplicated", err)
	}
	if _, err := other.Complete(ctx, q, x, Outcome{}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("replayed completion with the replica paused: %v, want ErrNotReplicated", err)
	}

	replica.Resume()
	paused = false
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = other.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k"})
		if !errors.Is(err, ErrNotReplicated) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.TaskID == "" {
		t.Fatalf("replay after the catch-up: %v, want the in-progress task", err)
	}
	if st, err := other.Complete(ctx, q, x, Outcome{}); err != nil || st != StateSucceeded {
		t.Fatalf("replayed completion after the catch-up: %v %v, want the recorded Succeeded", st, err)
	}
}

// A replicaAckTimeout longer than the client's ReadTimeout (the CRD allows
// 30 s, go-redis reads under 5 s by default; here 3 s and 1 s) with the
// replica stopped: the submission waits the whole timeout and fails with
// ErrNotReplicated, and its task runs once. The executions are counted by
// the test's own worker loop, which logs each task it runs. (Pipelined
// with the script, WAIT was read under the ReadTimeout: go-redis re-sent
// script and WAIT after each timed-out read, each re-send queued the task
// again, and the caller got an i/o timeout.)
func TestReplicaAckLongerThanReadTimeout(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, 1, 1)
	rdb := redis.NewClient(&redis.Options{Addr: s.Master.Addr, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	b := New(rdb)
	q := QueueRef{Namespace: "ns", Name: "q"}
	cfg := DefaultQueueConfig()
	cfg.ReplicaAcks, cfg.ReplicaAckTimeout = 1, 3*time.Second
	if err := b.EnsureQueue(ctx, q, cfg); err != nil {
		t.Fatal(err)
	}
	s.Replicas[0].Kill()

	var mu sync.Mutex
	var ran []string // the execution log: one task ID per execution
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // a worker, on a client of its own with the default timeouts
		defer close(done)
		w := New(redis.NewClient(&redis.Options{Addr: s.Master.Addr}))
		for wctx.Err() == nil {
			ss, err := w.ReadStart(wctx, q, "w", "w", 1, 100*time.Millisecond)
			if err != nil {
				continue
			}
			for _, st := range ss {
				if !st.Run {
					continue
				}
				mu.Lock()
				ran = append(ran, st.Task.ID)
				mu.Unlock()
				// NOT_REPLICATED after 3 s: the completion is on the master all the same.
				_, _ = w.Complete(ctx, q, Execution{Delivery: st.Delivery, WorkerID: "w", Attempt: st.Task.Attempt}, Outcome{})
			}
		}
	}()

	start := time.Now()
	_, err := b.Submit(ctx, q, SubmitRequest{Type: "t"})
	took := time.Since(start)
	time.Sleep(2 * time.Second) // a re-sent submission would queue the task again meanwhile
	stop()
	<-done
	if !errors.Is(err, ErrNotReplicated) {
		t.Errorf("submit with the replica stopped: %v after %v, want ErrNotReplicated", err, took)
	}
	if took < cfg.ReplicaAckTimeout-500*time.Millisecond { // Redis's timer may end a little early
		t.Errorf("submit answered after %v, want about the whole replicaAckTimeout (%v)", took, cfg.ReplicaAckTimeout)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 {
		t.Errorf("the task ran %d times (%v), want once", len(ran), ran)
	}
}

// A process picks up a change of the queue's ReplicaAcks within ackRefresh:
// with no replica running, a submission succeeds while the queue asks for
// none, fails once the changed config has been re-read, and succeeds again
// after the queue is switched back.
func TestReplicaAckFollowsQueueConfig(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := newFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	b := New(srv.Client(), WithClock(clk))
	q := replicaQueue(t, b, "q", 0)
	submit := func() error { _, err := b.Submit(ctx, q, SubmitRequest{Type: "t"}); return err }
	if err := submit(); err != nil {
		t.Fatal(err)
	}
	replicaQueue(t, b, "q", 1)
	if err := submit(); err != nil {
		t.Fatalf("before the refresh: %v, want the setting read before", err)
	}
	clk.Step(ackRefresh)
	if err := submit(); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("after the refresh: %v, want ErrNotReplicated", err)
	}
	replicaQueue(t, b, "q", 0)
	clk.Step(ackRefresh)
	if err := submit(); err != nil {
		t.Fatalf("switched back: %v", err)
	}
}

// On a cluster WAIT runs on the master of the queue's slot: with no replicas,
// zero are enough and one is not.
func TestReplicaAckOnCluster(t *testing.T) {
	t.Parallel()
	cc := redistest.StartCluster(t, 3)
	b := New(cc)
	for n, want := range map[int]error{0: nil, 1: ErrNotReplicated} {
		for _, name := range []string{"a", "b", "c", "d"} {
			q := replicaQueue(t, b, name+strconv.Itoa(n), n)
			if _, err := b.Submit(ctx, q, SubmitRequest{Type: "t"}); !errors.Is(err, want) {
				t.Fatalf("%s with %d replicas required: %v, want %v", q, n, err, want)
			}
		}
	}
}

// BenchmarkReplicaAck pairs a queue with ReplicaAcks 0 and one with 1 on the
// same master with one replica (loopback): a serial Submit, 64 concurrent
// Submits (batched, so one WAIT serves a batch), and a serial task's whole
// cycle (Submit, Read, Start, Complete: two WAITs with ReplicaAcks 1; the
// Read may return an earlier sub-benchmark's task).
//
//	go -C pkg test ./broker -run '^$' -bench ReplicaAck -count 3
func BenchmarkReplicaAck(b *testing.B) {
	s := redistest.StartSentinel(b, 1, 1)
	eng := New(s.Master.Client())
	for _, n := range []int{0, 1} {
		q := QueueRef{Namespace: "ns", Name: "q" + strconv.Itoa(n)}
		cfg := DefaultQueueConfig()
		cfg.MaxDepth, cfg.ReplicaAcks = 1<<40, n
		if err := eng.EnsureQueue(ctx, q, cfg); err != nil {
			b.Fatal(err)
		}
		name := "replicaAcks=" + strconv.Itoa(n)
		b.Run("submit/"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := eng.Submit(ctx, q, SubmitRequest{Type: "t"}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("submit-parallel-64/"+name, func(b *testing.B) {
			b.SetParallelism(32) // 64 goroutines on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := eng.Submit(ctx, q, SubmitRequest{Type: "t"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run("cycle/"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := eng.Submit(ctx, q, SubmitRequest{Type: "t"}); err != nil {
					b.Fatal(err)
				}
				ds, err := eng.Read(ctx, q, "w", 1, 0)
				if err != nil || len(ds) != 1 {
					b.Fatalf("read: %v %v", ds, err)
				}
				sr, err := eng.Start(ctx, q, "w", ds[0])
				if err != nil || !sr.Run {
					b.Fatalf("start: %+v %v", sr, err)
				}
				if _, err := eng.Complete(ctx, q, Execution{Delivery: ds[0], WorkerID: "w", Attempt: sr.Task.Attempt}, Outcome{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
