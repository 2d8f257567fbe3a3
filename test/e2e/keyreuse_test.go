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
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// TestIdempotencyKeyReuse runs a key reused for another request along the
// user's paths, on a Queue of each spec.idempotency.onMismatch applied with
// kubectl: over the HTTP API (the same request replays with request_matches
// true; another one replays with false under Replay, gets 422 under Reject),
// a Task applied with the key of an API submission (its payload, re-encoded
// by the API server, matches the API's bytes by value), then two Task
// manifests with one key and different payloads, the first re-applied
// unchanged at the end.
func TestIdempotencyKeyReuse(t *testing.T) {
	for _, policy := range []dtqv1alpha1.IdempotencyMismatchPolicy{dtqv1alpha1.IdempotencyMismatchReplay, dtqv1alpha1.IdempotencyMismatchReject} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			testKeyReuse(t, policy)
		})
	}
}

func testKeyReuse(t *testing.T, policy dtqv1alpha1.IdempotencyMismatchPolicy) {
	ns := single.namespace(t, "e2e-keyreuse-"+strings.ToLower(string(policy)))
	want(t, "apply the Queue", kubectlApply(t, ns, fmt.Sprintf(`apiVersion: dtq.dev/v1alpha1
kind: Queue
metadata: {name: q, namespace: %s}
spec:
  scaling: {minReplicas: 1, maxReplicas: 1}
  idempotency: {onMismatch: %s}
`, ns, policy)), 0, `queue.dtq.dev/q created`, `^$`)
	q := &dtqv1alpha1.Queue{}
	must(t, single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "q"}, q))
	single.deleteQueueAtCleanup(t, q)
	tok := adminToken(t)
	tasks := queuePath(ns, "q") + "/tasks"
	must(t, poll(t.Context(), time.Minute, func() error {
		if r := call(t, tok, http.MethodGet, queuePath(ns, "q"), nil); r.status != http.StatusOK {
			return fmt.Errorf("queue %s/q: %v", ns, r)
		}
		return nil
	}))

	submit := func(payload string) apiResponse {
		return call(t, tok, http.MethodPost, tasks, `{"task_type":"`+demo.Echo+`","payload":`+payload+`}`, "Idempotency-Key", "order-1")
	}
	r := submit(`{"order":1,"to":"a"}`)
	expect(t, "first submission", r, http.StatusAccepted, "")
	var first dtqclient.Task
	r.decode(t, &first)
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		var got dtqclient.Task
		if r := call(t, tok, http.MethodGet, tasks+"/"+first.TaskID, nil); r.status != http.StatusOK {
			return fmt.Errorf("get %s: %v", first.TaskID, r)
		} else if r.decode(t, &got); got.Status != dtqclient.StatusSucceeded {
			return fmt.Errorf("task %s is %s", first.TaskID, got.Status)
		}
		return nil
	}))

	replay := func(what, payload string, matches bool) {
		t.Helper()
		r := submit(payload)
		expect(t, what, r, http.StatusOK, "")
		var got dtqclient.Task
		r.decode(t, &got)
		if !got.Duplicate || got.TaskID != first.TaskID || got.RequestMatches == nil || *got.RequestMatches != matches {
			t.Fatalf("%s: %v, want a replay of %s with request_matches %v", what, r, first.TaskID, matches)
		}
	}
	replay("the same request, keys reordered and spaced", `{ "to": "a", "order": 1.0 }`, true)
	if policy == dtqv1alpha1.IdempotencyMismatchReplay {
		replay("another payload", `{"order":2,"to":"a"}`, false)
	} else {
		r := submit(`{"order":2,"to":"a"}`)
		expect(t, "another payload", r, http.StatusUnprocessableEntity, dtqclient.CodeIdempotencyKeyMismatch)
		if e := r.apiError(t); e.Details["task_id"] != first.TaskID {
			t.Fatalf("422 names %v, want %s", e.Details["task_id"], first.TaskID)
		}
	}

	cli := dtq(t, ns, "submit", "--via-api", "--queue", "q", "--type", demo.Echo, "--key", "order-1", "--payload", `{"order":3,"to":"a"}`)
	if policy == dtqv1alpha1.IdempotencyMismatchReplay {
		want(t, "kubectl dtq submit --via-api, another payload", cli, 0,
			`^`+first.TaskID+` is a duplicate of the key's task \(Succeeded\), which was submitted with another type or payload`, `^$`)
	} else {
		want(t, "kubectl dtq submit --via-api, another payload", cli, 1, `^$`, `IDEMPOTENCY_KEY_MISMATCH: idempotency key "order-1" belongs to task `+first.TaskID)
	}

	taskYAML := func(name, key, payload string) string {
		return fmt.Sprintf(`apiVersion: dtq.dev/v1alpha1
kind: Task
metadata: {name: %s, namespace: %s}
spec: {queue: q, type: %s, idempotencyKey: %s, payload: %s}
`, name, ns, demo.Echo, key, payload)
	}
	task := func(name string) *dtqv1alpha1.Task {
		got := &dtqv1alpha1.Task{}
		must(t, single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, got))
		return got
	}
	matches := func(name string, want bool) *dtqv1alpha1.Task {
		t.Helper()
		got := task(name)
		if i := got.Status.Idempotency; i == nil || i.RequestMatches == nil || *i.RequestMatches != want {
			t.Fatalf("Task %s: %s, want requestMatches %v", name, describe(got), want)
		}
		return got
	}

	// A Task with the API submission's key and its payload in YAML.
	want(t, "apply a Task with the API's key", kubectlApply(t, ns, taskYAML("api-twin", "order-1", "{to: a, order: 1}")), 0, `created`, `^$`)
	want(t, "wait api-twin", dtq(t, ns, "wait", "api-twin", "--timeout", "2m"), 0, `Succeeded`, `^$`)
	matches("api-twin", true)

	// Two manifests with one key and different payloads.
	firstYAML := taskYAML("first", "order-2", "{to: b, order: 1}")
	want(t, "apply first", kubectlApply(t, ns, firstYAML), 0, `task.dtq.dev/first created`, `^$`)
	want(t, "wait first", dtq(t, ns, "wait", "first", "--timeout", "2m"), 0, `Succeeded`, `^$`)
	owner := string(task("first").UID)
	want(t, "apply second", kubectlApply(t, ns, taskYAML("second", "order-2", "{to: b, order: 2}")), 0, `task.dtq.dev/second created`, `^$`)
	if policy == dtqv1alpha1.IdempotencyMismatchReplay {
		want(t, "wait second", dtq(t, ns, "wait", "second", "--timeout", "2m"), 0, `Succeeded`,
			`Warning: task second replays task `+owner+`, whose idempotency key "order-2" it shares but whose type or payload differ`)
		got := matches("second", false)
		if c := meta.FindStatusCondition(got.Status.Conditions, dtqv1alpha1.TaskRequestMismatch); c == nil || c.Reason != dtqv1alpha1.ReasonReplayed {
			t.Fatalf("Task second: %s, want condition RequestMismatch reason Replayed", describe(got))
		}
	} else {
		want(t, "wait second", dtq(t, ns, "wait", "second", "--timeout", "2m"), 2, `^$`,
			`task second ended Failed: Idempotency key "order-2" belongs to task `+owner+`, submitted with another type or payload; the Queue rejects such reuse`)
		got := matches("second", false)
		if c := meta.FindStatusCondition(got.Status.Conditions, dtqv1alpha1.TaskSubmitted); c == nil || c.Reason != dtqv1alpha1.ReasonIdempotencyKeyMismatch {
			t.Fatalf("Task second: %s, want Submitted False with reason IdempotencyKeyMismatch", describe(got))
		}
	}
	want(t, "get -o wide", dtq(t, ns, "get", "second", "-o", "wide"), 0, `REQUEST MATCHES[\s\S]*\nsecond .* false `, `^$`)

	// The first manifest re-applied unchanged (a GitOps sync after a delete).
	want(t, "delete first", kubectl(t, ns, "delete", "task", "first", "--wait"), 0, `deleted`, `^$`)
	want(t, "re-apply first", kubectlApply(t, ns, firstYAML), 0, `task.dtq.dev/first created`, `^$`)
	want(t, "wait first again", dtq(t, ns, "wait", "first", "--timeout", "2m"), 0, `Succeeded`, `^$`)
	got := matches("first", true)
	if i := got.Status.Idempotency; !i.Duplicate || i.TaskID != owner ||
		meta.FindStatusCondition(got.Status.Conditions, dtqv1alpha1.TaskRequestMismatch) != nil {
		t.Fatalf("re-applied first: %s, want a clean replay of %s", describe(got), owner)
	}

	// One task per key in Redis: the API's and the first manifest's.
	var list dtqclient.TaskList
	r = call(t, tok, http.MethodGet, tasks, nil)
	expect(t, "list", r, http.StatusOK, "")
	if r.decode(t, &list); list.Count != 2 {
		t.Fatalf("the queue holds %d tasks, want 2: %v", list.Count, r)
	}
}
