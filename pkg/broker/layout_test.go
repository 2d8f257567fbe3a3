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
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// oldLayoutTask writes a Queued task as the submit script wrote it before the
// packed immutable field (every field its own, stream entry, idempotency
// record), so an upgrade in place is tested against what Redis already holds.
func (e *env) oldLayoutTask(id, key string) {
	e.t.Helper()
	k := keysFor(e.q)
	now, nowtxt := e.b.now()
	msg, err := e.rdb.XAdd(ctx, redisXAdd{stream: k.stream(4), id: id}.args()).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, k.task(id), "id", id, "type", "legacy", "payload", `{"old":true}`, "prio", 4, "state", "Queued",
		"attempt", 1, "max_attempts", 1, "timeout_ms", 30000, "created_at", now, "ikey", key,
		"meta", `{"m":1}`, "trace", "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01", "msg", msg).Err(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.rdb.Set(ctx, k.idempotency(key), `{"task_id":"`+id+`","state":"processing","updated_at":"`+nowtxt+`"}`, 0).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// Hashes written by the layout before the packed immutable field stay
// readable by every reader: the API's view, start, complete (and exhaust's
// dead-letter entry, which names the type), cancel, a replay of the key, and
// the list.
func TestOldLayoutTasksStayReadable(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.DeadLetter = true })
	e.oldLayoutTask("old-1", "k1")
	e.oldLayoutTask("old-2", "k2")
	created := e.clock.Now().UTC().Truncate(time.Millisecond)

	want := TaskInfo{ID: "old-1", Queue: e.q, Type: "legacy", Payload: raw(`{"old":true}`), IdempotencyKey: "k1", Priority: 4,
		State: StateQueued, MaxAttempts: 1, Timeout: 30 * time.Second, CreatedAt: created, AvailableAt: created,
		Metadata: raw(`{"m":1}`), TraceParent: "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"}
	if d := cmp.Diff(want, e.task("old-1")); d != "" {
		t.Errorf("GetTask of an old-layout hash (-want +got):\n%s", d)
	}
	if _, err := e.b.Cancel(ctx, e.q, "old-2"); err != nil {
		t.Fatal(err)
	}
	if got := e.task("old-2").State; got != StateCancelled {
		t.Errorf("cancelled old-layout task is %s", got)
	}

	ss, err := e.b.ReadStart(ctx, e.q, "w", "w", 1, 0)
	if err != nil || len(ss) != 1 || !ss[0].Run || ss[0].Task.ID != "old-1" || ss[0].Task.Type != "legacy" {
		t.Fatalf("read-start of an old-layout task: %+v %v", ss, err)
	}
	x := Execution{Delivery: ss[0].Delivery, WorkerID: "w", Attempt: 1}
	if st := e.complete(x, Outcome{Err: "boom", Retryable: true}); st != StateDeadLettered {
		t.Fatalf("exhausted old-layout task is %s", st)
	}
	dls, err := e.b.DeadLetters(ctx, e.q, 10)
	if err != nil || len(dls) != 1 || dls[0].TaskID != "old-1" || dls[0].Type != "legacy" {
		t.Fatalf("dead letters %+v %v, want old-1 of type legacy", dls, err)
	}
	// A replay of the key returns the old task, read through the new submit.
	r, err := e.submit(SubmitRequest{IdempotencyKey: "k1"})
	if err != nil || !r.Duplicate || r.Task.ID != "old-1" || r.Task.Type != "legacy" || r.Task.State != StateDeadLettered {
		t.Fatalf("replay of an old task's key: %+v %v", r, err)
	}
	l, err := e.b.ListTasks(ctx, e.q, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range l.Tasks {
		if ti.Type != "legacy" || ti.CreatedAt.IsZero() {
			t.Errorf("listed old-layout task %+v", ti)
		}
	}
}

// A new task's hash keeps type, id, created_at, meta and trace as fields of
// their own, and a typical task's hash (a short type,
// payload and metadata, a traceparent) stays listpack-encoded: every value is
// under Redis's default hash-max-listpack-value (64 bytes); the same fields
// packed into one value were not.
func TestTaskHashStaysListpack(t *testing.T) {
	e := newEnv(t)
	const tp = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"
	res, errs, err := e.b.submitMany(ctx, e.q, []SubmitRequest{{Type: "email.send", Payload: raw(`{"to":"a@example.com"}`),
		Metadata: raw(`{"tenant":"acme"}`)}}, tp)
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs[0])
	}
	ti := res[0].Task
	tk := keysFor(e.q).task(ti.ID)
	h := e.rdb.HGetAll(ctx, tk).Val()
	want := map[string]string{"type": "email.send", "id": ti.ID, "created_at": strconv.FormatInt(ti.CreatedAt.UnixMilli(), 10),
		"meta": `{"tenant":"acme"}`, "trace": tp}
	for f, v := range want {
		if h[f] != v {
			t.Errorf("field %q = %q, want %q (hash %v)", f, h[f], v, h)
		}
	}
	if enc := e.rdb.ObjectEncoding(ctx, tk).Val(); enc != "listpack" {
		t.Errorf("OBJECT ENCODING of a typical task's hash = %q, want listpack (hash %v)", enc, h)
	}
	if got := e.task(ti.ID); got.Type != "email.send" || got.TraceParent != tp || string(got.Metadata) != `{"tenant":"acme"}` {
		t.Errorf("GetTask: %+v", got)
	}
}
