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
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func (e *env) metrics() QueueMetrics {
	e.t.Helper()
	m, err := e.b.QueueMetrics(ctx, e.q)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// Every path that counts, once each, then the backlog by state: the counters
// and gauges equal what was done.
func TestQueueMetricsCountEachOutcome(t *testing.T) {
	const visibility = 100 * time.Millisecond
	e := newEnv(t, func(c *QueueConfig) {
		c.MaxDepth, c.MaxPayloadBytes, c.VisibilityTimeout = 6, 64, visibility // the gate counts the schedule too
	})
	if m := e.metrics(); !cmp.Equal(m, QueueMetrics{Counters: Counters{Refused: map[Code]int64{}, Finished: map[State]int64{}}}) {
		t.Fatalf("a fresh queue: %+v", m)
	}
	a := e.mustSubmit(SubmitRequest{IdempotencyKey: "a", Priority: 7})
	_, err := e.submit(SubmitRequest{IdempotencyKey: "a"})
	wantCode(t, err, CodeIdempotencyInProgress)
	if r, err := e.submit(SubmitRequest{ID: a.ID}); err != nil || !r.Duplicate {
		t.Fatalf("same ID: %+v %v", r, err) // submits nothing: not counted
	}
	_, err = e.submit(SubmitRequest{Payload: raw(`{"x":"` + strings.Repeat("y", 80) + `"}`)})
	wantCode(t, err, CodePayloadTooLarge)
	e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Hour)})
	c := e.mustSubmit(SubmitRequest{Priority: 2})
	if _, err := e.b.Cancel(ctx, e.q, c.ID); err != nil {
		t.Fatal(err)
	}
	d, _ := e.deliver("w")
	e.complete(d, Outcome{})
	if r, err := e.submit(SubmitRequest{IdempotencyKey: "a"}); err != nil || !r.Duplicate {
		t.Fatalf("replay: %+v %v", r, err)
	}
	e.mustSubmit(SubmitRequest{})
	d, _ = e.deliver("w")
	e.complete(d, Outcome{Err: "boom"}) // permanent: dead-lettered
	e.mustSubmit(SubmitRequest{})
	d, _ = e.deliver("w")
	e.complete(d, Outcome{Err: "blip", Retryable: true})
	x := e.mustSubmit(SubmitRequest{ExpiresAt: e.clock.Now().Add(time.Second)})
	e.clock.Step(2 * time.Second)
	ds, err := e.b.Read(ctx, e.q, "w", 1, 0)
	if err != nil || len(ds) != 1 || ds[0].TaskID != x.ID {
		t.Fatalf("read %v %v", ds, err)
	}
	if sr, err := e.b.Start(ctx, e.q, "w", ds[0]); err != nil || sr.Reason != "expired" {
		t.Fatalf("start of an expired task: %+v %v", sr, err)
	}
	e.mustSubmit(SubmitRequest{})
	e.deliver("dead") // its worker dies
	time.Sleep(2 * visibility)
	ds, err = e.b.Reclaim(ctx, e.q, "peer", visibility, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("reclaim: %v %v", ds, err)
	}
	if sr, err := e.b.Start(ctx, e.q, "peer", ds[0]); err != nil || !sr.Run {
		t.Fatalf("start of the reclaimed entry: %+v %v", sr, err)
	}
	before := time.Now().Add(-time.Millisecond) // stream IDs are the server's milliseconds
	for _, p := range []int{9, 9, 0} {
		e.mustSubmit(SubmitRequest{Priority: p})
	}
	_, err = e.submit(SubmitRequest{})
	wantCode(t, err, CodeQueueFull)
	if err := e.b.Pause(ctx, e.q); err != nil {
		t.Fatal(err)
	}

	got := e.metrics()
	want := QueueMetrics{
		Queued:       [Bands]int64{0: 1, 9: 2},
		Lengths:      [Bands]int64{0: 2, 9: 2}, // band 0 holds the reclaimed task too
		InFlight:     1,                        // the reclaimed task
		Scheduled:    2,                        // the delayed task and the retry
		DeadLettered: 1,
		Paused:       true,
		OldestQueued: got.OldestQueued,
		Counters: Counters{
			Accepted: 10, Duplicates: 1, Retries: 1, Redeliveries: 1,
			Refused:  map[Code]int64{CodeIdempotencyInProgress: 1, CodePayloadTooLarge: 1, CodeQueueFull: 1},
			Finished: map[State]int64{StateSucceeded: 1, StateDeadLettered: 1, StateCancelled: 1, StateExpired: 1},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("metrics (-want +got):\n%s", diff)
	}
	// The oldest undelivered entry is the first of p9, until it is delivered.
	p9 := e.rdb.XRange(ctx, keysFor(e.q).stream(9), "-", "+").Val()
	if len(p9) != 2 || !got.OldestQueued.Equal(entryTime(p9[0].ID)) || got.OldestQueued.Before(before) {
		t.Fatalf("oldest queued %v, p9 entries %v (submitted after %v)", got.OldestQueued, p9, before)
	}
	if err := e.b.Resume(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	if ds, err := e.b.Read(ctx, e.q, "w", 1, 0); err != nil || len(ds) != 1 || ds[0].MessageID != p9[0].ID {
		t.Fatalf("read %v %v", ds, err)
	}
	got = e.metrics()
	if got.Queued[9] != 1 || got.InFlight != 2 || !got.OldestQueued.Equal(entryTime(p9[1].ID)) {
		t.Fatalf("after delivering the oldest: queued p9 %d, in flight %d, oldest %v (want %s)", got.Queued[9], got.InFlight, got.OldestQueued, p9[1].ID)
	}
}

// A batch adds one count per item, whatever the mix, and concurrent batches
// add up exactly.
func TestQueueMetricsCountBatches(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.MaxDepth = 3; c.MaxPayloadBytes = 64 })
	big := `{"x":"` + strings.Repeat("y", 80) + `"}`
	_, _, err := e.b.submitBatch(ctx, e.q, []submitItem{
		batchItem("", "k1", "{}"),    // new
		batchItem("", "k1", "{}"),    // busy
		batchItem("", "", big),       // too large
		batchItem("f", "", "{}"),     // new
		batchItem("f", "", "{}"),     // same ID: not counted
		batchItem("", "", "{}"),      // new (depth 3)
		batchItem("", "k2", "{}"),    // full
		batchItem("", "k1", `{"a"}`), // busy (invalid JSON is the Go side's check)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Counters{Accepted: 3, Refused: map[Code]int64{CodeIdempotencyInProgress: 2, CodePayloadTooLarge: 1, CodeQueueFull: 1},
		Finished: map[State]int64{}}
	if diff := cmp.Diff(want, e.metrics().Counters); diff != "" {
		t.Fatalf("counters (-want +got):\n%s", diff)
	}

	e2 := newEnv(t)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			if _, err := e2.b.Submit(ctx, e2.q, SubmitRequest{Type: "demo", IdempotencyKey: "k" + string(rune('a'+i%3))}); err != nil &&
				CodeOf(err) != CodeIdempotencyInProgress {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	c := e2.metrics().Counters
	if c.Accepted != 3 || c.Refused[CodeIdempotencyInProgress] != 297 {
		t.Fatalf("300 submits of 3 keys: %+v", c)
	}
}
