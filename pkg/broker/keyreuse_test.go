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
	"bytes"
	"fmt"
	"sync"
	"testing"
)

func TestFingerprint(t *testing.T) {
	fp := func(typ, payload string) string {
		t.Helper()
		s, err := fingerprint(typ, []byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := fp("email", `{"to":"a@example.com","n":1,"tags":["x","y"],"o":{"b":2,"a":1.5}}`)
	same := map[string]string{
		"keys reordered, spaced": "{ \"tags\": [\"x\", \"y\"], \"n\": 1, \"o\": {\"a\": 1.5, \"b\": 2}, \"to\": \"a@example.com\" }",
		"numbers by value":       `{"to":"a@example.com","n":1.0,"tags":["x","y"],"o":{"b":2e0,"a":15e-1}}`,
		"escapes by value":       `{"to":"a\u0040example.com","n":1,"tags":["x","y"],"o":{"b":2,"a":1.5}}`,
	}
	for name, p := range same {
		if got := fp("email", p); got != base {
			t.Errorf("%s: %s, want %s", name, got, base)
		}
	}
	differ := map[string][2]string{
		"another value": {"email", `{"to":"b@example.com","n":1,"tags":["x","y"],"o":{"b":2,"a":1.5}}`},
		"array order":   {"email", `{"to":"a@example.com","n":1,"tags":["y","x"],"o":{"b":2,"a":1.5}}`},
		"another type":  {"sms", `{"to":"a@example.com","n":1,"tags":["x","y"],"o":{"b":2,"a":1.5}}`},
		"number text":   {"email", `{"to":"a@example.com","n":"1","tags":["x","y"],"o":{"b":2,"a":1.5}}`},
	}
	for name, c := range differ {
		if got := fp(c[0], c[1]); got == base {
			t.Errorf("%s: same fingerprint as the original", name)
		}
	}
	if fp("ab", `{}`) == fp("a", `{"b":1}`) || fp("", ``) != fp("", `{}`) {
		t.Error("type and payload are not told apart, or an empty payload is not {}")
	}
}

// TestKeyReuseReplay: on a queue that replays mismatches (the default), every
// answer for a used key is the seed's, with whether the request matched.
func TestKeyReuseReplay(t *testing.T) {
	e := newEnv(t)
	orig := e.mustSubmit(SubmitRequest{IdempotencyKey: "k", Payload: raw(`{"a":1,"b":[1,2]}`)})
	busy := func(payload string) *Error {
		t.Helper()
		_, err := e.submit(SubmitRequest{IdempotencyKey: "k", Payload: raw(payload)})
		be := wantCode(t, err, CodeIdempotencyInProgress)
		if be.TaskID != orig.ID || be.RequestMatches == nil {
			t.Fatalf("in progress: %+v, want task %s with a match", be, orig.ID)
		}
		return be
	}
	if be := busy(`{ "b": [1, 2], "a": 1.0 }`); !*be.RequestMatches {
		t.Fatal("the same request did not match")
	}
	if be := busy(`{"a":2}`); *be.RequestMatches {
		t.Fatal("another payload matched")
	}
	d, _ := e.deliver("c")
	e.complete(d, Outcome{Result: raw(`{"ok":1}`)})
	for payload, want := range map[string]bool{`{"b":[1,2],"a":1}`: true, `{"a":2}`: false} {
		r, err := e.submit(SubmitRequest{IdempotencyKey: "k", Payload: raw(payload)})
		if err != nil || !r.Duplicate || r.Task.ID != orig.ID || r.RequestMatches == nil || *r.RequestMatches != want {
			t.Fatalf("%s: %+v %v, want a replay of %s with request_matches %v", payload, r, err, orig.ID, want)
		}
	}
	if _, err := e.submit(SubmitRequest{Type: "other", IdempotencyKey: "k", Payload: raw(`{"a":1,"b":[1,2]}`)}); err != nil {
		t.Fatalf("another type was refused on a replaying queue: %v", err)
	}
	if st, _ := e.b.Stats(ctx, e.q); st.Depth != 0 {
		t.Fatalf("a mismatch queued work: %+v", st)
	}
}

// TestKeyReuseReject: on a queue that rejects mismatches, a different request
// is refused naming the key's task and writes nothing, in progress and after
// the end; the same request still gets the seed's answers.
func TestKeyReuseReject(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.OnMismatch = MismatchReject })
	orig := e.mustSubmit(SubmitRequest{IdempotencyKey: "k", Payload: raw(`{"a":1}`)})
	rejected := func() {
		t.Helper()
		_, err := e.submit(SubmitRequest{IdempotencyKey: "k", Payload: raw(`{"a":2}`)})
		if be := wantCode(t, err, CodeIdempotencyKeyMismatch); be.TaskID != orig.ID {
			t.Fatalf("mismatch names %q, want %s", be.TaskID, orig.ID)
		}
	}
	rejected()
	_, err := e.submit(SubmitRequest{IdempotencyKey: "k", Payload: raw(`{"a":1}`)})
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.RequestMatches == nil || !*be.RequestMatches {
		t.Fatalf("the same request in progress: %+v", be)
	}
	d, _ := e.deliver("c")
	e.complete(d, Outcome{})
	rejected()
	if r, err := e.submit(SubmitRequest{IdempotencyKey: "k", Payload: raw(`{"a":1}`)}); err != nil || !r.Duplicate || !*r.RequestMatches {
		t.Fatalf("the same request after the end: %+v %v, want a matching replay", r, err)
	}
	if rec := e.record("k"); rec.TaskID != orig.ID || rec.State != IdempotencyCompleted {
		t.Fatalf("record changed: %+v", rec)
	}
	m, err := e.b.QueueMetrics(ctx, e.q)
	if err != nil || m.Counters.Refused[CodeIdempotencyKeyMismatch] != 2 || m.Counters.Accepted != 1 {
		t.Fatalf("counts %+v %v, want 2 refused as mismatches and 1 accepted", m.Counters, err)
	}
}

// TestKeyReuseOlderRecords: a task submitted by a release without
// fingerprints (no fp field), or a queue configured by one (no idem_mismatch
// field), behave as before: nothing to compare, nothing refused.
func TestKeyReuseOlderRecords(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.OnMismatch = MismatchReject })
	orig := e.mustSubmit(SubmitRequest{IdempotencyKey: "old", Payload: raw(`{"a":1}`)})
	e.rdb.HDel(ctx, keysFor(e.q).task(orig.ID), "fp")
	_, err := e.submit(SubmitRequest{IdempotencyKey: "old", Payload: raw(`{"a":2}`)})
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.TaskID != orig.ID || be.RequestMatches != nil {
		t.Fatalf("a task without a fingerprint: %+v, want in progress without a match", be)
	}

	e.mustSubmit(SubmitRequest{IdempotencyKey: "k", Payload: raw(`{"a":1}`)})
	e.rdb.HDel(ctx, keysFor(e.q).config(), cfgOnMismatch)
	_, err = e.submit(SubmitRequest{IdempotencyKey: "k", Payload: raw(`{"a":2}`)})
	if be := wantCode(t, err, CodeIdempotencyInProgress); be.RequestMatches == nil || *be.RequestMatches {
		t.Fatalf("a queue config without idem_mismatch: %+v, want in progress, not matching", be)
	}
	if cfg, err := e.b.QueueConfig(ctx, e.q); err != nil || cfg.OnMismatch != MismatchReplay {
		t.Fatalf("config without the field reads %q %v, want replay", cfg.OnMismatch, err)
	}
}

// TestKeyReuseBatchPerItem: a batch answers each item as if alone.
func TestKeyReuseBatchPerItem(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.OnMismatch = MismatchReject })
	res, errs, err := e.b.SubmitMany(ctx, e.q, []SubmitRequest{
		{Type: "demo", IdempotencyKey: "k", Payload: raw(`{"a":1}`)},
		{Type: "demo", IdempotencyKey: "k", Payload: raw(`{"a":2}`)},
		{Type: "demo", IdempotencyKey: "k", Payload: raw(`{"a":1}`)},
	})
	if err != nil || errs[0] != nil {
		t.Fatalf("first item: %v %v", err, errs)
	}
	if be := wantCode(t, errs[1], CodeIdempotencyKeyMismatch); be.TaskID != res[0].Task.ID {
		t.Fatalf("second item names %s, want %s", be.TaskID, res[0].Task.ID)
	}
	if be := wantCode(t, errs[2], CodeIdempotencyInProgress); be.RequestMatches == nil || !*be.RequestMatches {
		t.Fatalf("third item: %+v, want in progress and matching", be)
	}
}

// TestKeyReuseConcurrentReject: 200 concurrent submissions of one key, half
// with another payload, on a rejecting queue: exactly one task, and every
// other answer is in progress of that task (the winner's payload) or a
// mismatch naming it (the other payload).
func TestKeyReuseConcurrentReject(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.OnMismatch = MismatchReject })
	const n = 200
	payloads := [2]string{`{"order":1}`, `{"order":2}`}
	res := make([]SubmitResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res[i], errs[i] = e.b.Submit(ctx, e.q, SubmitRequest{Type: "demo", IdempotencyKey: "k", Payload: raw(payloads[i%2])})
		})
	}
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] == nil && !res[i].Duplicate {
			if winner >= 0 {
				t.Fatalf("two new tasks: %s and %s", res[winner].Task.ID, res[i].Task.ID)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no new task: %v", errs[0])
	}
	id := res[winner].Task.ID
	for i := range n {
		if i == winner {
			continue
		}
		want := CodeIdempotencyInProgress
		if i%2 != winner%2 {
			want = CodeIdempotencyKeyMismatch
		}
		if be := wantCode(t, errs[i], want); be.TaskID != id {
			t.Fatalf("answer %d names %s, want %s", i, be.TaskID, id)
		}
	}
	tasks, _ := e.rdb.Keys(ctx, keysFor(e.q).task("*")).Result()
	if st, _ := e.b.Stats(ctx, e.q); len(tasks) != 1 || st.Depth != 1 {
		t.Fatalf("task hashes %v, depth %d: want exactly one task", tasks, st.Depth)
	}
	fmt.Fprintf(t.Output(), "winner %d (payload %s)\n", winner, payloads[winner%2])
}

// BenchmarkFingerprint is the Go-side cost a keyed submission adds: the
// canonical JSON of its payload and its hash.
func BenchmarkFingerprint(b *testing.B) {
	small := []byte(`{"order_id":"ord-10442","customer":"c-77","amount":1999,"currency":"EUR","items":[{"sku":"a-1","qty":2},{"sku":"b-7","qty":1}]}`)
	var large bytes.Buffer
	large.WriteString(`{"rows":[`)
	for i := range 1000 {
		if i > 0 {
			large.WriteByte(',')
		}
		fmt.Fprintf(&large, `{"id":%d,"name":"row-%d","score":%d.5,"tags":["x","y"]}`, i, i, i)
	}
	large.WriteString(`]}`)
	for _, p := range []struct {
		name    string
		payload []byte
	}{{"small", small}, {"64KiB", large.Bytes()}} {
		b.Run(p.name, func(b *testing.B) {
			b.SetBytes(int64(len(p.payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fingerprint("demo", p.payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
