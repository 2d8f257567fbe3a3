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
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// markTaskScript sets field m2 of a task hash that still exists (a plain
// HSET would bring back a hash that expired meanwhile).
var markTaskScript = redis.NewScript(`
if redis.call("EXISTS", KEYS[1]) == 1 then redis.call("HSET", KEYS[1], "m2", "1") end
return 0
`)

// testMigration is a layout 1 -> 2 step for tests: it marks a global key and
// every task hash of a queue, one script per hash, while workers run. It
// counts its runs per queue in queueRuns, and calls midway (when not nil)
// after it has marked 50 hashes of a queue.
func testMigration(queueRuns *sync.Map, midway func()) Migration {
	return Migration{
		To:   2,
		Name: "test: mark every task",
		Global: func(ctx context.Context, rdb redis.UniversalClient) error {
			return rdb.Set(ctx, "dtq:test-migrated", "1", 0).Err()
		},
		Queue: func(ctx context.Context, rdb redis.UniversalClient, q QueueRef) error {
			if queueRuns != nil {
				n, _ := queueRuns.LoadOrStore(q, new(int))
				*n.(*int)++
			}
			iter := rdb.Scan(ctx, 0, globEscape(KeyPrefix(q))+sufTask+"*", 100).Iterator()
			for marked := 0; iter.Next(ctx); marked++ {
				if marked == 50 && midway != nil {
					midway()
				}
				if err := markTaskScript.Run(ctx, rdb, []string{iter.Val()}).Err(); err != nil {
					return err
				}
			}
			return iter.Err()
		},
	}
}

// A step 1 -> 2 runs while workers that read layout 2 drain the queue:
// every task runs once and succeeds, every task hash is migrated, and the
// records end at 2, so a worker reading only layout 1 is refused. The
// workers stop at a quarter of the tasks until the queue's step begins, and
// the step waits half-way through the hashes until they have run half of
// the tasks: the two overlap on every run.
func TestMigrateWhileWorkersDrain(t *testing.T) {
	e := newEnv(t)
	const tasks = 400
	for range tasks / 100 {
		reqs := make([]SubmitRequest, 100)
		for i := range reqs {
			reqs[i] = SubmitRequest{Type: "demo", Payload: raw(`{}`)}
		}
		if _, errs, err := e.b.SubmitMany(ctx, e.q, reqs); err != nil || errors.Join(errs...) != nil {
			t.Fatal(err, errors.Join(errs...))
		}
	}

	var mu sync.Mutex
	runs := map[string]int{}
	done := 0
	quarter, half := make(chan struct{}), make(chan struct{})
	migrating := make(chan struct{}) // closed when the queue's step begins
	drainCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, id := range []string{"w1", "w2"} {
		b := New(e.rdb, WithClock(e.clock), WithLayouts(1, 2))
		if err := b.Heartbeat(ctx, e.q, WorkerInfo{ID: id, Status: "ready"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for drainCtx.Err() == nil {
				mu.Lock()
				wait := done >= tasks/4
				mu.Unlock()
				if wait {
					<-migrating
				}
				ss, err := b.ReadStart(drainCtx, e.q, id, id, 4, 10*time.Millisecond)
				if err != nil {
					if drainCtx.Err() == nil {
						t.Errorf("%s: read-start: %v", id, err)
					}
					return
				}
				for _, s := range ss {
					x := Execution{Delivery: s.Delivery, WorkerID: id, Attempt: s.Task.Attempt}
					st, err := b.Complete(ctx, e.q, x, Outcome{Result: raw(`{}`)})
					if err != nil || st != StateSucceeded {
						t.Errorf("%s: complete %s: %s, %v", id, s.TaskID, st, err)
					}
					mu.Lock()
					runs[s.TaskID]++
					switch done++; done {
					case tasks / 4:
						close(quarter)
					case tasks / 2:
						close(half)
					}
					if done == tasks {
						stop()
					}
					mu.Unlock()
				}
			}
		})
	}

	<-quarter
	queueRuns := &sync.Map{}
	missing := QueueRef{Namespace: "ns", Name: "never-created"}
	step := testMigration(queueRuns, func() { <-half })
	queueStep := step.Queue
	step.Queue = func(ctx context.Context, rdb redis.UniversalClient, q QueueRef) error {
		if q == e.q {
			close(migrating)
		}
		return queueStep(ctx, rdb, q)
	}
	st, err := New(e.rdb, WithClock(e.clock), WithLayouts(1, 2)).Migrate(ctx, []Migration{step}, []QueueRef{e.q, missing})
	if err != nil || st.Migrated != 2 || len(st.Waiting) != 0 {
		t.Fatalf("Migrate = %+v, %v; want migrated to 2, nothing waiting", st, err)
	}
	wg.Wait()

	if len(runs) != tasks {
		t.Errorf("%d distinct tasks ran, want %d", len(runs), tasks)
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("task %s ran %d times", id, n)
		}
	}
	l, err := e.b.ListTasks(ctx, e.q, ListOptions{Limit: tasks + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tasks) != tasks {
		t.Errorf("%d tasks listed, want %d", len(l.Tasks), tasks)
	}
	for _, ti := range l.Tasks {
		if ti.State != StateSucceeded {
			t.Errorf("task %s is %s", ti.ID, ti.State)
		}
		if e.rdb.HGet(ctx, keysFor(e.q).task(ti.ID), "m2").Val() != "1" {
			t.Errorf("task %s was not migrated", ti.ID)
		}
	}
	if n, _ := queueRuns.Load(e.q); n == nil || *n.(*int) != 1 {
		t.Errorf("the queue step ran %v times on %s, want once", n, e.q)
	}
	if n, _ := queueRuns.Load(missing); n != nil {
		t.Errorf("the queue step ran on a queue EnsureQueue never created")
	}
	if e.rdb.Get(ctx, "dtq:test-migrated").Val() != "1" {
		t.Error("the global step did not run")
	}
	if g, _ := e.b.ReadLayout(ctx); g != (GlobalLayout{Layout: 2, Migrated: 2}) {
		t.Errorf("global record %+v, want layout 2 migrated 2", g)
	}
	if n, _ := e.b.QueueLayout(ctx, e.q); n != 2 {
		t.Errorf("queue record %d, want 2", n)
	}
	if err := New(e.rdb, WithLayouts(1, 1)).Heartbeat(ctx, e.q, WorkerInfo{ID: "old"}, time.Minute); !errors.Is(err, ErrLayoutUnknown) {
		t.Errorf("heartbeat of a layout-1 worker after the migration: %v; want a LayoutError", err)
	}

	// Run again: nothing left to do, nothing run twice.
	if st, err := New(e.rdb, WithLayouts(1, 2)).Migrate(ctx, []Migration{testMigration(queueRuns, nil)}, []QueueRef{e.q}); err != nil || st.Migrated != 2 {
		t.Fatalf("second Migrate = %+v, %v", st, err)
	}
	if n, _ := queueRuns.Load(e.q); *n.(*int) != 1 {
		t.Errorf("the queue step ran again after the migration was done")
	}
}

// A step waits for a queue whose workers read an older layout, having
// raised the global record (so older managers and APIs stop) but neither
// that queue's record nor "migrated"; it finishes once they are gone.
func TestMigrateWaitsForOlderWorkers(t *testing.T) {
	e := newEnv(t)
	other := QueueRef{Namespace: "ns", Name: "other"}
	if err := e.b.EnsureQueue(ctx, other, DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	if err := New(e.rdb, WithLayouts(1, 1)).Heartbeat(ctx, e.q, WorkerInfo{ID: "old"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.mustSubmit(SubmitRequest{})
	queueRuns := &sync.Map{}
	b := New(e.rdb, WithLayouts(1, 2))
	st, err := b.Migrate(ctx, []Migration{testMigration(queueRuns, nil)}, []QueueRef{e.q, other})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(MigrationStatus{Migrated: 1, Waiting: map[QueueRef][]string{e.q: {"old"}}}, st); d != "" {
		t.Fatalf("Migrate beside an old worker (-want +got):\n%s", d)
	}
	if g, _ := e.b.ReadLayout(ctx); g != (GlobalLayout{Layout: 2, Migrated: 1}) {
		t.Errorf("global record %+v, want layout 2 migrated 1", g)
	}
	if n, _ := e.b.QueueLayout(ctx, e.q); n != 1 {
		t.Errorf("the waiting queue's record is %d, want 1", n)
	}
	if n, _ := e.b.QueueLayout(ctx, other); n != 2 {
		t.Errorf("the other queue's record is %d, want 2", n)
	}
	if n, _ := queueRuns.Load(e.q); n != nil {
		t.Error("the queue step ran beside a worker that reads only layout 1")
	}

	e.rdb.Del(ctx, keysFor(e.q).worker("old"))
	if st, err := b.Migrate(ctx, []Migration{testMigration(queueRuns, nil)}, []QueueRef{e.q, other}); err != nil || st.Migrated != 2 || len(st.Waiting) != 0 {
		t.Fatalf("Migrate after the old worker left = %+v, %v", st, err)
	}
	if n, _ := e.b.QueueLayout(ctx, e.q); n != 2 {
		t.Errorf("queue record %d, want 2", n)
	}
}

// Steps that do not follow on from the record, or go beyond what the build
// reads, are refused; no steps (this build's list) is no write.
func TestMigrateRefusesBadSteps(t *testing.T) {
	e := newEnv(t)
	before := e.dirty()
	if st, err := e.b.Migrate(ctx, Migrations(), []QueueRef{e.q}); err != nil || st.Migrated != 1 {
		t.Fatalf("Migrate of this build's steps = %+v, %v; want layout 1", st, err)
	}
	if after := e.dirty(); after != before {
		t.Errorf("Migrate with nothing to do wrote to Redis (changes %s -> %s)", before, after)
	}
	for name, tc := range map[string]struct {
		b     *Broker
		steps []Migration
	}{
		"gap":              {New(e.rdb, WithLayouts(1, 3)), []Migration{{To: 3, Name: "skips 2"}}},
		"beyond the build": {e.b, []Migration{{To: MaxLayout + 1, Name: "needs a layout this build does not read"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := tc.b.Migrate(ctx, tc.steps, []QueueRef{e.q}); err == nil {
				t.Error("Migrate ran the step")
			}
			if g, _ := e.b.ReadLayout(ctx); g != (GlobalLayout{Layout: 1, Migrated: 1}) {
				t.Errorf("global record %+v after a refused step", g)
			}
		})
	}
}
