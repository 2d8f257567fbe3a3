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
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/rediscluster"
)

// moveSlot prepares the move of the slot of key to another master
// (rediscluster.SlotMove).
func moveSlot(t *testing.T, cc *redis.ClusterClient, key string) *rediscluster.SlotMove {
	t.Helper()
	m, err := rediscluster.NewSlotMove(ctx, cc, int(cc.ClusterKeySlot(ctx, key).Val()))
	must(t, err)
	t.Cleanup(m.Close)
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A script that finds some of the keys it touches moved to another node
// fails at the first of them, its earlier writes kept. The promotion of a
// delayed task takes it out of the schedule before it reads the task: with
// the task moved and the schedule not, it would lose the task. Every script
// call declares the queue's slot guard (keys.guarded), so while the slot
// migrates Redis refuses the call before it runs, and the task is promoted
// once the slot has moved.
func TestScriptsWaitForAMigratingSlot(t *testing.T) {
	cc := redistest.StartCluster(t, 3)
	clk := newFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	b := New(cc, WithClock(clk))
	q := QueueRef{Namespace: "ns", Name: "moving"}
	if err := b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	r, err := b.Submit(ctx, q, SubmitRequest{Type: "t", IdempotencyKey: "k", NotBefore: clk.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	k := keysFor(q)
	m := moveSlot(t, cc, k.prefix)
	must(t, m.Begin(ctx))
	must(t, m.Migrate(ctx, k.task(r.Task.ID))) // the task and the band streams first, the schedule later
	must(t, m.Migrate(ctx, k.streams()...))
	clk.Step(2 * time.Minute)
	for _, call := range []struct {
		name string
		run  func() error
	}{
		{"PromoteDue", func() error { _, _, err := b.PromoteDue(ctx, q, 10); return err }},
		{"Cancel", func() error { _, err := b.Cancel(ctx, q, r.Task.ID); return err }},
		{"Submit", func() error { _, err := b.Submit(ctx, q, SubmitRequest{Type: "t"}); return err }},
	} {
		if err := call.run(); err == nil || !strings.Contains(err.Error(), "TRYAGAIN") {
			t.Errorf("%s while the slot migrates: %v; want TRYAGAIN (refused before the script runs)", call.name, err)
		}
	}

	must(t, m.Finish(ctx, 100, 0))
	if n, _, err := b.PromoteDue(ctx, q, 10); err != nil || n != 1 {
		t.Fatalf("PromoteDue after the move: moved %d, %v; want the task (it was lost if it left the schedule while the slot migrated)", n, err)
	}
	ss, err := b.ReadStart(ctx, q, "w", "w", 5, 0)
	if err != nil || len(ss) != 1 || ss[0].TaskID != r.Task.ID || !ss[0].Run {
		t.Fatalf("ReadStart after the move: %+v, %v; want task %s to run", ss, err, r.Task.ID)
	}
}

// TestLiveResharding moves a busy queue's slot to another master while a
// producer submits keyed tasks (a third of them delayed by 200 ms, so the
// promotion of due tasks runs throughout) and two workers drain them, the keys moved
// task hashes and records first (the order in which scripts that read a
// task would find it gone). Every accepted task must run exactly once (the
// count is the handler's own, not dtq's) and end Succeeded; the calls the
// move refuses are retried as any caller retries a Redis error.
func TestLiveResharding(t *testing.T) {
	cc := redistest.StartCluster(t, 3)
	b := New(cc)
	q := QueueRef{Namespace: "ns", Name: "hot"}
	cfg := DefaultQueueConfig()
	cfg.MaxDepth = 1 << 30
	if err := b.EnsureQueue(ctx, q, cfg); err != nil {
		t.Fatal(err)
	}
	const tasks = 3000
	var (
		mu       sync.Mutex
		accepted = map[string]string{} // idempotency key -> task ID
		runs     = map[string]int{}    // task ID -> executions, counted by the handler
		refused  atomic.Int64
		wg       sync.WaitGroup
	)
	const reclaimIdle = 10 * time.Second
	var reclaimed atomic.Int64 // runs of reclaimed entries
	// Every failed call is retried, as the manager, the API's clients and
	// the workers retry; the ones the move should cause are counted apart
	// from the others, which are logged.
	var others atomic.Int64
	failed := func(what string, err error) {
		for _, p := range []string{"TRYAGAIN", "ASK", "MOVED"} {
			if strings.Contains(err.Error(), p) {
				refused.Add(1)
				return
			}
		}
		if others.Add(1) <= 5 {
			t.Logf("%s: %v", what, err)
		}
	}
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the producer: each key until it is accepted
		defer wg.Done()
		for i := range tasks {
			key := fmt.Sprintf("k-%d", i)
			req := SubmitRequest{Type: "t", IdempotencyKey: key}
			if i%3 == 0 { // through the schedule
				req.NotBefore = time.Now().Add(200 * time.Millisecond)
			}
			for {
				r, err := b.Submit(ctx, q, req)
				if err == nil {
					mu.Lock()
					accepted[key] = r.Task.ID
					mu.Unlock()
					break
				}
				failed("submit", err)
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	wg.Add(1)
	go func() { // the manager's promotion of due tasks
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, _, err := b.PromoteDue(ctx, q, 100); err != nil {
				failed("promote", err)
			}
		}
	}()
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("w%d", w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ss, err := b.ReadStart(ctx, q, name, name, 8, 20*time.Millisecond)
				if err == nil && len(ss) == 0 {
					// An entry left pending (a call whose reply was lost):
					// taken back as a crashed worker's would be, once idle
					// for reclaimIdle. A completion refused while the keys
					// are split between the nodes (seconds on a busy machine)
					// must not count as a crash: that would be the test's
					// visibility timeout running out, a redelivery the
					// contract allows, not a fault of the move.
					var ds []Delivery
					if ds, err = b.Reclaim(ctx, q, name, reclaimIdle, 8); err == nil {
						for _, d := range ds {
							sr, serr := b.Start(ctx, q, name, d)
							if serr != nil {
								err = serr
								break
							}
							if sr.Run {
								reclaimed.Add(1)
							}
							ss = append(ss, Started{Delivery: d, StartResult: sr})
						}
					}
				}
				if err != nil {
					failed("read", err)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				for _, s := range ss {
					if s.Err != nil || !s.Run {
						continue
					}
					mu.Lock()
					runs[s.Task.ID]++
					mu.Unlock()
					x := Execution{Delivery: s.Delivery, WorkerID: name, Attempt: s.Task.Attempt}
					for {
						_, err := b.Complete(ctx, q, x, Outcome{})
						var be *Error
						if err == nil || errors.As(err, &be) { // done, or the engine's answer (the lease was lost)
							break
						}
						failed("complete", err)
						time.Sleep(5 * time.Millisecond)
					}
				}
			}
		}()
	}

	time.Sleep(500 * time.Millisecond) // a backlog and tasks in flight
	k := keysFor(q)
	m := moveSlot(t, cc, k.prefix)
	must(t, m.Begin(ctx))
	moved := 0
	for {
		all, err := m.Left(ctx, 100000)
		must(t, err)
		if len(all) == 0 {
			break
		}
		var batch []string
		for _, key := range all {
			if strings.Contains(key, ":"+sufTask) || strings.Contains(key, ":"+sufIdempotency) || strings.Contains(key, ":"+sufResult) {
				batch = append(batch, key)
			}
		}
		if len(batch) == 0 {
			batch = all
		}
		batch = batch[:min(5, len(batch))]
		must(t, m.Migrate(ctx, batch...))
		moved += len(batch)
		time.Sleep(2 * time.Millisecond)
	}
	must(t, m.Finish(ctx, 100, 0))

	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		done := len(accepted) == tasks && len(runs) >= tasks
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // a task run twice would show in runs now
	close(stop)
	wg.Wait()

	lost, twice, notDone := 0, 0, map[State]int{}
	for _, id := range accepted {
		switch runs[id] {
		case 0:
			lost++
		case 1:
		default:
			twice++
		}
		ti, err := b.GetTask(ctx, q, id)
		if err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		if ti.State != StateSucceeded {
			notDone[ti.State]++
		}
	}
	t.Logf("%d keys moved, %d calls refused while the slot moved, %d other errors; %d accepted, %d lost, %d ran twice (%d runs of reclaimed entries), not Succeeded: %v",
		moved, refused.Load(), others.Load(), len(accepted), lost, twice, reclaimed.Load(), notDone)
	if len(accepted) != tasks || lost > 0 || twice > 0 || len(notDone) > 0 {
		t.Errorf("after the move: %d of %d accepted, %d lost, %d ran twice, not Succeeded %v; want every task run once and Succeeded",
			len(accepted), tasks, lost, twice, notDone)
	}
}
