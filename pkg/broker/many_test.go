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
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// ReadEventsMany and PromoteDueMany answer every queue in the order asked,
// each with its own events and promotions only, on one node and on a
// three-master cluster; one queue's error stays that queue's, and a script
// flushed from the servers is loaded again.
func TestManyQueuesInOnePipeline(t *testing.T) {
	for name, start := range map[string]func(*testing.T) redis.UniversalClient{
		"single":  func(t *testing.T) redis.UniversalClient { return redistest.Start(t).Client() },
		"cluster": func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t, 3) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb := start(t)
			clk := newFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
			b := New(rdb, WithClock(clk))
			var qs []QueueRef
			var cursors []EventsCursor
			now, delayed := map[QueueRef]string{}, map[QueueRef]string{}
			for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
				q := QueueRef{Namespace: "ns", Name: n}
				if err := b.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
					t.Fatal(err)
				}
				r, err := b.Submit(ctx, q, SubmitRequest{Type: "t"})
				if err != nil {
					t.Fatal(err)
				}
				now[q] = r.Task.ID
				if r, err = b.Submit(ctx, q, SubmitRequest{Type: "t", NotBefore: clk.Now().Add(time.Minute)}); err != nil {
					t.Fatal(err)
				}
				delayed[q] = r.Task.ID
				qs = append(qs, q)
				cursors = append(cursors, EventsCursor{Queue: q})
			}
			unknown := QueueRef{Namespace: "ns", Name: "never-set-up"}
			broken := QueueRef{Namespace: "ns", Name: "broken"}
			if err := rdb.Set(ctx, keysFor(broken).events(), "not a stream", 0).Err(); err != nil {
				t.Fatal(err)
			}
			qs = append(qs, unknown, broken)
			cursors = append(cursors, EventsCursor{Queue: unknown}, EventsCursor{Queue: broken})

			replies := b.ReadEventsMany(ctx, cursors, 100)
			for i, c := range cursors {
				r := replies[i]
				switch c.Queue {
				case unknown:
					if r.Err != nil || len(r.Events) != 0 {
						t.Errorf("%s: %+v, want no events and no error", c.Queue, r)
					}
				case broken:
					if r.Err == nil {
						t.Errorf("%s: no error reading a string as a stream", c.Queue)
					}
				default:
					ids := map[string]bool{}
					for _, ev := range r.Events {
						ids[ev.TaskID] = true
					}
					if r.Err != nil || len(ids) != 2 || !ids[now[c.Queue]] || !ids[delayed[c.Queue]] {
						t.Errorf("%s: %+v, want the TaskQueued events of its two tasks only", c.Queue, r)
					}
					cursors[i].After = r.Events[len(r.Events)-1].ID
				}
			}
			for i, r := range b.ReadEventsMany(ctx, cursors[:6], 100) {
				if r.Err != nil || len(r.Events) != 0 {
					t.Errorf("%s after its last event: %+v, want nothing", cursors[i].Queue, r)
				}
			}

			due := clk.Now().Add(time.Minute)
			for i, p := range b.PromoteDueMany(ctx, qs[:7], 10) {
				want := due
				if qs[i] == unknown {
					want = time.Time{}
				}
				if p.Err != nil || p.Moved != 0 || !p.Next.Equal(want) {
					t.Errorf("%s before due: %+v, want nothing moved, next %v", qs[i], p, want)
				}
			}
			if err := flushScripts(rdb); err != nil {
				t.Fatal(err)
			}
			clk.Step(time.Minute)
			for i, p := range b.PromoteDueMany(ctx, qs[:6], 10) {
				if p.Err != nil || p.Moved != 1 || !p.Next.IsZero() {
					t.Errorf("%s when due, scripts flushed: %+v, want one moved and none next", qs[i], p)
				}
				if st := taskState(t, b, qs[i], delayed[qs[i]]); st != StateQueued {
					t.Errorf("%s: delayed task %s, want Queued", qs[i], st)
				}
			}
		})
	}
}

func taskState(t *testing.T, b *Broker, q QueueRef, id string) State {
	t.Helper()
	ti, err := b.GetTask(ctx, q, id)
	if err != nil {
		t.Fatal(err)
	}
	return ti.State
}

// flushScripts empties the script cache of every node (a restarted or
// failed-over Redis has none).
func flushScripts(rdb redis.UniversalClient) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.ScriptFlush(ctx).Err() })
	}
	return rdb.ScriptFlush(ctx).Err()
}
