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
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// TestNamespaceUserIsolation runs a worker's engine calls as namespace a's
// user against a real redis-server: everything on a's queue works, and a's
// user gets NOPERM on b's keys (directly and inside a script) and on the
// keyless commands that reach the whole server.
func TestNamespaceUserIsolation(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	acl := NewACL(admin)
	qa, qb := QueueRef{Namespace: "a", Name: "q"}, QueueRef{Namespace: "b", Name: "q"}
	for _, q := range []QueueRef{qa, qb} {
		if err := New(admin).EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
			t.Fatal(err)
		}
		if err := acl.SetNamespaceUser(ctx, q.Namespace, "pw-"+q.Namespace, nil); err != nil {
			t.Fatal(err)
		}
	}
	asA := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: NamespaceUser("a"), Password: "pw-a"})
	t.Cleanup(func() { _ = asA.Close() })
	b := New(asA)

	t.Run("own queue works end to end", func(t *testing.T) {
		if _, err := b.QueueConfig(ctx, qa); err != nil {
			t.Fatalf("QueueConfig: %v", err)
		}
		sub, err := b.Submit(ctx, qa, SubmitRequest{Type: "echo", IdempotencyKey: "k", Payload: raw(`{"x":1}`)})
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		if err := b.Heartbeat(ctx, qa, WorkerInfo{ID: "w1", Status: "ready", StartedAt: time.Now()}, time.Second); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		started, err := b.ReadStart(ctx, qa, "w1", "w1", 1, 0)
		if err != nil || len(started) != 1 || started[0].Err != nil || !started[0].Run {
			t.Fatalf("ReadStart: %+v %v", started, err)
		}
		x := Execution{Delivery: started[0].Delivery, WorkerID: "w1", Attempt: started[0].Task.Attempt}
		if lost, err := b.Touch(ctx, qa, "w1", []Execution{x}); err != nil || len(lost) != 0 {
			t.Fatalf("Touch: lost %v, %v", lost, err)
		}
		if _, err := b.CancelRequested(ctx, qa, []string{sub.Task.ID}); err != nil {
			t.Fatalf("CancelRequested: %v", err)
		}
		if _, err := b.Reclaim(ctx, qa, "w2", time.Hour, 10); err != nil {
			t.Fatalf("Reclaim: %v", err)
		}
		if st, err := b.Complete(ctx, qa, x, Outcome{Result: raw(`{"ok":true}`)}); err != nil || st != StateSucceeded {
			t.Fatalf("Complete: %v %v", st, err)
		}
		if _, _, err := b.PromoteDue(ctx, qa, 10); err != nil {
			t.Fatalf("PromoteDue: %v", err)
		}
		if err := b.RemoveConsumer(ctx, qa, "w1"); err != nil {
			t.Fatalf("RemoveConsumer: %v", err)
		}
		if err := asA.Set(ctx, AppKeyPrefix("a")+"mine", "1", 0).Err(); err != nil {
			t.Fatalf("app key: %v", err)
		}
	})

	t.Run("own flow-controlled queue works end to end", func(t *testing.T) {
		qf := QueueRef{Namespace: "a", Name: "flow"}
		cfg := DefaultQueueConfig()
		cfg.Flow = &FlowControl{Rate: &FlowRate{Limit: 100, Period: time.Second, Burst: 1}, MaxConcurrency: 2, PerKey: KeyLimits{Concurrency: 1}}
		if err := New(admin).EnsureQueue(ctx, qf, cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Submit(ctx, qf, SubmitRequest{Type: "echo", FlowKey: "tenant-a"}); err != nil {
			t.Fatalf("Submit: %v", err)
		}
		started, err := b.ReadStart(ctx, qf, "w1", "w1", 1, 0)
		if err != nil || len(started) != 1 || started[0].Err != nil || !started[0].Run {
			t.Fatalf("ReadStart: %+v %v", started, err)
		}
		x := Execution{Delivery: started[0].Delivery, WorkerID: "w1", Attempt: started[0].Task.Attempt}
		if st, err := b.Complete(ctx, qf, x, Outcome{}); err != nil || st != StateSucceeded {
			t.Fatalf("Complete: %v %v", st, err)
		}
		if _, err := b.Stats(ctx, qf); err != nil {
			t.Fatalf("Stats: %v", err)
		}
	})

	t.Run("other namespaces and the server are out of reach", func(t *testing.T) {
		for name, cmd := range map[string][]any{
			"b's queue config":    {"HGETALL", KeyPrefix(qb) + "config"},
			"b's app key":         {"SET", AppKeyPrefix("b") + "x", "1"},
			"a key of no tenant":  {"GET", "other"},
			"FLUSHALL":            {"FLUSHALL"},
			"FLUSHDB":             {"FLUSHDB"},
			"KEYS":                {"KEYS", "*"},
			"SCAN":                {"SCAN", "0"},
			"CONFIG GET":          {"CONFIG", "GET", "*"},
			"ACL LIST":            {"ACL", "LIST"},
			"SCRIPT FLUSH":        {"SCRIPT", "FLUSH"},
			"INFO":                {"INFO"},
			"script touching b's": {"EVAL", "return redis.call('HGETALL', KEYS[1])", "1", KeyPrefix(qb) + "config"},
			"script building b's": {"EVAL", "return redis.call('HGETALL', ARGV[1])", "0", KeyPrefix(qb) + "config"},
		} {
			err := asA.Do(ctx, cmd...).Err()
			// Commands answer NOPERM; a script's redis.call answers "can't access".
			if err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "can't access") {
				t.Errorf("%s: got %v, want a permission error", name, err)
			}
		}
		if _, err := b.Stats(ctx, qb); err == nil {
			t.Error("Stats of b's queue as a's user: no error")
		}
	})

	t.Run("rotation keeps the old password until it is dropped", func(t *testing.T) {
		if err := acl.SetNamespaceUser(ctx, "a", "pw-a2", []string{PasswordHash("pw-a")}); err != nil {
			t.Fatal(err)
		}
		hashes, err := acl.PasswordHashes(ctx, "a")
		if err != nil || !slices.Contains(hashes, PasswordHash("pw-a")) || !slices.Contains(hashes, PasswordHash("pw-a2")) {
			t.Fatalf("PasswordHashes = %v, %v", hashes, err)
		}
		login := func(pw string) error {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: NamespaceUser("a"), Password: pw})
			defer c.Close()
			return c.Ping(ctx).Err()
		}
		for _, pw := range []string{"pw-a", "pw-a2"} {
			if err := login(pw); err != nil {
				t.Errorf("log in with %s: %v", pw, err)
			}
		}
		if err := asA.Ping(ctx).Err(); err != nil {
			t.Errorf("a connection opened before the reset: %v", err)
		}
		if err := acl.SetNamespaceUser(ctx, "a", "pw-a2", nil); err != nil {
			t.Fatal(err)
		}
		if err := login("pw-a"); err == nil {
			t.Error("the dropped password still authenticates")
		}
	})

	t.Run("users are listed and deleted", func(t *testing.T) {
		got, err := acl.NamespaceUsers(ctx)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("NamespaceUsers = %v, %v", got, err)
		}
		if err := acl.DeleteNamespaceUser(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if h, err := acl.PasswordHashes(ctx, "b"); err != nil || h != nil {
			t.Fatalf("PasswordHashes after delete = %v, %v", h, err)
		}
	})
}

// On a server without CLIENT SETINFO (before Redis 7.2) ACL SETUSER with it
// is refused once per ACL, not once per namespace; on a newer one never.
func TestSetNamespaceUserTriesSetInfoOnce(t *testing.T) {
	admin := redistest.Start(t).Client()
	acl := NewACL(admin)
	for _, ns := range []string{"a", "b", "c"} {
		if err := acl.SetNamespaceUser(ctx, ns, "pw-"+ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cmdstat_acl\|setuser:calls=(\d+),.*failed_calls=(\d+)`).FindStringSubmatch(stats)
	if m == nil {
		t.Fatalf("no ACL SETUSER in INFO commandstats:\n%s", stats)
	}
	if m[2] != "0" && m[2] != "1" {
		t.Errorf("ACL SETUSER failed %s times of %s calls for three namespaces, want at most once", m[2], m[1])
	}
}
