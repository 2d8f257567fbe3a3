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
	"testing"
	"time"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// A Queue with spec.durability.replicaAcks 1 on the single stack's Redis,
// which has no replica: a submission through the API is 503 NOT_REPLICATED
// with Retry-After 1, and the task it wrote on the master exists. Once
// `kubectl patch` sets replicaAcks to 0, a retry with the same key answers
// that task (the queue is paused, so it is still in progress), never a second
// one.
func TestAPIDurability(t *testing.T) {
	ns := single.namespace(t, "api-durability")
	apiQueue(t, ns, "durable", func(s *dtqv1alpha1.QueueSpec) {
		s.Paused = true
		s.Durability = dtqv1alpha1.QueueDurability{ReplicaAcks: 1, ReplicaAckTimeout: dur(50 * time.Millisecond)}
	})
	tok := adminToken(t)
	tasks := queuePath(ns, "durable") + "/tasks"
	r := call(t, tok, http.MethodPost, tasks, `{"task_type":"echo","idempotency_key":"k"}`)
	expect(t, "a submission no replica acknowledged", r, http.StatusServiceUnavailable, dtqclient.CodeNotReplicated)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("NOT_REPLICATED without Retry-After 1: %v", r.header)
	}

	want(t, "kubectl patch durability.replicaAcks 0",
		kubectl(t, ns, "patch", "queues.dtq.dev/durable", "--type=merge", "-p", `{"spec":{"durability":{"replicaAcks":0}}}`), 0, "patched", "")
	must(t, poll(t.Context(), 30*time.Second, func() error { // the API re-reads the queue's setting every 5 s
		if r = call(t, tok, http.MethodPost, tasks, `{"task_type":"echo","idempotency_key":"k"}`); r.status != http.StatusConflict {
			return fmt.Errorf("retry with the key: %v", r)
		}
		return nil
	}))
	expect(t, "the retry finds the refused submission's task", r, http.StatusConflict, dtqclient.CodeIdempotencyInProgress)
	id := r.apiError(t).Details["task_id"]
	var list dtqclient.TaskList
	r = call(t, tok, http.MethodGet, tasks, nil)
	expect(t, "list", r, http.StatusOK, "")
	r.decode(t, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != id {
		t.Fatalf("tasks after the retry: %v, want only %v, the task of key k", r, id)
	}
}
