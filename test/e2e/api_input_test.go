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

package e2e

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// Bad input gets its documented 4xx, names the field at fault, and writes
// nothing to Redis: every key of the queue (and of the unknown queue) is
// byte for byte what it was before. The queue runs no worker (scaled to
// zero with nothing to do) so nothing else writes to it meanwhile.
func TestAPIBadInput(t *testing.T) {
	ns := single.namespace(t, "api-bad-input")
	apiQueue(t, ns, "q", func(s *dtqv1alpha1.QueueSpec) { s.Scaling.MinReplicas = ptr.To[int32](0) })
	tok := adminToken(t)
	path := queuePath(ns, "q") + "/tasks"
	before := queueKeys(t, ns, "q")
	ten := `{"task_type":"echo","payload":{"x":"` + strings.Repeat("x", 10<<20) + `"}}`
	for _, c := range []struct {
		what, path, body string
		header           []string
		status           int
		code, field      string
	}{
		{"malformed JSON", path, `{"task_type":"echo",`, nil, 400, dtqclient.CodeInvalidTask, ""},
		{"not an object", path, `["echo"]`, nil, 400, dtqclient.CodeInvalidTask, ""},
		{"empty body", path, ``, nil, 400, dtqclient.CodeInvalidTask, ""},
		{"trailing data", path, `{"task_type":"echo"} {}`, nil, 400, dtqclient.CodeInvalidTask, ""},
		{"wrong type: task_type", path, `{"task_type":5}`, nil, 400, dtqclient.CodeInvalidTask, "task_type"},
		{"wrong type: priority", path, `{"task_type":"echo","priority":"high"}`, nil, 400, dtqclient.CodeInvalidTask, "priority"},
		{"wrong type: not_before", path, `{"task_type":"echo","not_before":5}`, nil, 400, dtqclient.CodeInvalidTask, "not_before"},
		{"wrong type: payload", path, `{"task_type":"echo","payload":[1]}`, nil, 400, dtqclient.CodeInvalidTask, "payload"},
		{"unknown field", path, `{"task_type":"echo","colour":"red"}`, nil, 400, dtqclient.CodeInvalidTask, "colour"},
		{"10 MB body", path, ten, nil, 413, dtqclient.CodePayloadTooLarge, ""},
		{"300-byte key in the body", path, `{"task_type":"echo","idempotency_key":"` + strings.Repeat("k", 300) + `"}`, nil, 400, dtqclient.CodeInvalidTask, "idempotency_key"},
		{"300-byte key in the header", path, `{"task_type":"echo"}`, []string{"Idempotency-Key", strings.Repeat("k", 300)}, 400, dtqclient.CodeInvalidTask, "idempotency_key"},
		{"priority 42", path, `{"task_type":"echo","priority":42}`, nil, 400, dtqclient.CodeInvalidTask, "priority"},
		{"negative delay", path, `{"task_type":"echo","delay_seconds":-5}`, nil, 400, dtqclient.CodeInvalidTask, "delay_seconds"},
		{"129-byte flow key", path, `{"task_type":"echo","flow_key":"` + strings.Repeat("k", 129) + `"}`, nil, 400, dtqclient.CodeInvalidTask, "flow_key"},
		{"flow key with a space", path, `{"task_type":"echo","flow_key":"tenant a"}`, nil, 400, dtqclient.CodeInvalidTask, "flow_key"},
		{"missing task_type", path, `{"payload":{}}`, nil, 400, dtqclient.CodeInvalidTask, "task_type"},
		{"unknown queue", queuePath(ns, "nope") + "/tasks", `{"task_type":"echo"}`, nil, 404, dtqclient.CodeQueueNotFound, ""},
		{"batch of 1001", path + ":batch", `{"tasks":[` + strings.Repeat(`{"task_type":"echo"},`, 1000) + `{"task_type":"echo"}]}`, nil, 400, dtqclient.CodeInvalidRequest, "tasks"},
		{"batch, wrong type", path + ":batch", `{"tasks":[{"task_type":"echo","max_attempts":"x"}]}`, nil, 400, dtqclient.CodeInvalidTask, "tasks.max_attempts"},
	} {
		r := call(t, tok, "POST", c.path, c.body, c.header...)
		if r.status != c.status {
			t.Errorf("%s: %v, want %d %s", c.what, r, c.status, c.code)
			continue
		}
		e := r.apiError(t)
		if e.Code != c.code || c.field != "" && e.Details["field"] != c.field {
			t.Errorf("%s: %v, want code %s naming field %q", c.what, r, c.code, c.field)
		}
	}
	after := queueKeys(t, ns, "q")
	if !maps.EqualFunc(before, after, func(a, b string) bool { return a == b }) {
		t.Fatalf("bad input changed Redis: keys before %v, after %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	if n := len(queueKeys(t, ns, "nope")); n != 0 {
		t.Fatalf("the unknown queue has %d keys", n)
	}
}

// queueKeys returns every key of queue ns/name with its DUMP, but its
// history, which the manager's sampler appends to on its own timer (a CI run
// saw the first sample land between the two reads).
func queueKeys(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	q := broker.QueueRef{Namespace: ns, Name: name}
	history := broker.HistoryKey(q)
	iter := single.rdb.Scan(ctx, 0, broker.KeyPrefix(q)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if iter.Val() == history {
			continue
		}
		v, err := single.rdb.Dump(ctx, iter.Val()).Result()
		must(t, err)
		out[iter.Val()] = v
	}
	must(t, iter.Err())
	if len(out) > 0 && out[broker.KeyPrefix(broker.QueueRef{Namespace: ns, Name: name})+"config"] == "" {
		t.Fatalf("queue %s/%s has keys but no config", ns, name)
	}
	return out
}

// 200 concurrent submissions of one key: exactly one creates the task (202),
// every other gets 409 naming it or a 200 replay of it.
func TestAPIConcurrentSubmitsOfOneKey(t *testing.T) {
	ns := single.namespace(t, "api-concurrent")
	apiQueue(t, ns, "q", nil)
	tok := adminToken(t)
	path := queuePath(ns, "q") + "/tasks"
	const n = 200
	results := make([]apiResponse, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = call(t, tok, "POST", path, `{"task_type":"echo","payload":{"i":1}}`, "Idempotency-Key", "one-key")
		})
	}
	close(start)
	wg.Wait()
	counts := map[int]int{}
	var winner string
	for _, r := range results {
		counts[r.status]++
		if r.status == http.StatusAccepted {
			var task dtqclient.Task
			r.decode(t, &task)
			winner = task.TaskID
		}
	}
	if counts[http.StatusAccepted] != 1 || counts[http.StatusAccepted]+counts[http.StatusConflict]+counts[http.StatusOK] != n {
		t.Fatalf("statuses %v, want one 202 and the rest 409 or 200", counts)
	}
	for _, r := range results {
		var id string
		switch r.status {
		case http.StatusConflict:
			e := r.apiError(t)
			if e.Code != dtqclient.CodeIdempotencyInProgress {
				t.Fatalf("409 with code %s", e.Code)
			}
			id, _ = e.Details["task_id"].(string)
		case http.StatusOK:
			var task dtqclient.Task
			r.decode(t, &task)
			if !task.Duplicate {
				t.Fatalf("200 without duplicate: %v", r)
			}
			id = task.TaskID
		default:
			continue
		}
		if id != winner {
			t.Fatalf("an answer names task %s, the new task is %s: %v", id, winner, r)
		}
	}
	t.Logf("statuses: %v", counts)
	if page, err := apiClient(t, tok).Queue(ns, "q").List(context.Background(), dtqclient.ListOptions{}); err != nil || page.Count != 1 {
		t.Fatalf("the queue holds %v tasks (%v), want 1", page, err)
	}
}
