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

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A sample holds the backlog and the totals as QueueMetrics reads them; the
// history keeps the newest samples, oldest first, and expires when no sample
// comes.
func TestHistory(t *testing.T) {
	e := newEnv(t)
	if got, err := e.b.History(ctx, e.q, time.Time{}, 10); err != nil || len(got) != 0 {
		t.Fatalf("history of a queue never sampled: %v %v", got, err)
	}
	e.mustSubmit(SubmitRequest{})                                        // succeeds
	e.mustSubmit(SubmitRequest{})                                        // dead-lettered
	e.mustSubmit(SubmitRequest{})                                        // retried
	e.mustSubmit(SubmitRequest{})                                        // in flight
	e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Hour)}) // scheduled
	e.mustSubmit(SubmitRequest{})                                        // queued
	d, _ := e.deliver("w")
	e.complete(d, Outcome{})
	d, _ = e.deliver("w")
	e.complete(d, Outcome{Err: "boom"})
	d, _ = e.deliver("w")
	e.complete(d, Outcome{Err: "blip", Retryable: true})
	e.deliver("w")

	before := time.Now().Add(-time.Second)
	if err := e.b.RecordHistory(ctx, e.q, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := e.b.History(ctx, e.q, time.Time{}, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("history after one sample: %v %v", got, err)
	}
	// The retried task waits in the schedule with the delayed one.
	want := HistorySample{Queued: 1, InFlight: 1, Scheduled: 2, DeadLettered: 1, Submitted: 6, Succeeded: 1, Failed: 1, Retries: 1}
	if d := cmp.Diff(want, got[0], cmpopts.IgnoreFields(HistorySample{}, "At")); d != "" {
		t.Errorf("sample (-want +got):\n%s", d)
	}
	if at := got[0].At; at.Before(before) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("sample time %v, want Redis's now", at)
	}

	for range 4 {
		time.Sleep(2 * time.Millisecond) // distinct stream times
		e.mustSubmit(SubmitRequest{})
		if err := e.b.RecordHistory(ctx, e.q, 3, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	got, err = e.b.History(ctx, e.q, time.Time{}, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("history of 5 samples kept at 3: %d samples, %v", len(got), err)
	}
	for i, s := range got {
		if s.Submitted != int64(8+i) || i > 0 && !s.At.After(got[i-1].At) {
			t.Errorf("sample %d: submitted %d at %v, want the newest three oldest first", i, s.Submitted, s.At)
		}
	}
	if newest, err := e.b.History(ctx, e.q, time.Time{}, 1); err != nil || len(newest) != 1 || newest[0] != got[2] {
		t.Errorf("limit 1: %v %v, want the newest", newest, err)
	}
	if after, err := e.b.History(ctx, e.q, got[0].At, 10); err != nil || !cmp.Equal(after, got[1:]) {
		t.Errorf("since the oldest: %v %v, want the two after it", after, err)
	}
	if ttl := e.rdb.PTTL(ctx, keysFor(e.q).history()).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("history TTL %v, want up to an hour", ttl)
	}

	// A sample of a queue deleted meanwhile is not written: no key is left.
	if _, err := e.b.DeleteQueue(ctx, e.q); err != nil {
		t.Fatal(err)
	}
	if err := e.b.RecordHistory(ctx, e.q, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := e.rdb.Exists(ctx, keysFor(e.q).history()).Val(); n != 0 {
		t.Errorf("a deleted queue's history was written again")
	}
}

// The default history (360 samples) of a busy queue stays small: a stream
// stores the field names once per node, so a sample costs its values.
func TestHistoryMemory(t *testing.T) {
	e := newEnv(t)
	for range 360 {
		e.mustSubmit(SubmitRequest{})
		if err := e.b.RecordHistory(ctx, e.q, 360, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.rdb.MemoryUsage(ctx, keysFor(e.q).history()).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("360 samples: %d bytes (%.1f per sample)", n, float64(n)/360)
	if n > 32<<10 {
		t.Errorf("360 samples take %d bytes, want at most 32 KiB", n)
	}
}
