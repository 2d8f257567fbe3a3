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

package client_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// A Queue that requires a replica's acknowledgement, on a Redis without
// replicas: each submission is 503 NOT_REPLICATED with Retry-After, and the
// task it wrote on the master exists (the docs tell the client to retry with
// the same idempotency key).
func TestSubmitNotReplicated(t *testing.T) {
	q := ensureQueue(t, "durable", func(c *broker.QueueConfig) { c.ReplicaAcks, c.ReplicaAckTimeout = 1, 20*time.Millisecond })
	e := wantError(t, errOf(q.Submit(t.Context(), "send", nil, client.IdempotencyKey("nr"))), client.ErrNotReplicated,
		http.StatusServiceUnavailable)
	if e.RetryAfter != time.Second {
		t.Fatalf("not replicated: retry after %v, want 1s", e.RetryAfter)
	}
	if rec, err := engine.Idempotency(t.Context(), broker.QueueRef{Namespace: "shop", Name: "durable"}, "nr"); err != nil || rec.TaskID == "" {
		t.Fatalf("the task of the refused submission is not on the master: %+v %v", rec, err)
	}
}
