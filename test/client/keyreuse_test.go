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

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// TestSubmitKeyReuse: the answers for a reused idempotency key say whether
// the request matched (in progress and replay), and a Queue that rejects
// mismatches answers 422 IDEMPOTENCY_KEY_MISMATCH, singly and per batch item.
func TestSubmitKeyReuse(t *testing.T) {
	ctx := t.Context()
	key := client.IdempotencyKey("reused")
	for _, onMismatch := range []broker.OnMismatch{broker.MismatchReplay, broker.MismatchReject} {
		q := ensureQueue(t, "reuse-"+string(onMismatch), func(c *broker.QueueConfig) { c.OnMismatch = onMismatch })
		first, err := q.Submit(ctx, "send", map[string]any{"order": 1, "to": "a"}, key)
		if err != nil || first.RequestMatches != nil {
			t.Fatalf("%s: first: %+v %v", onMismatch, first, err)
		}
		_, err = q.Submit(ctx, "send", map[string]any{"to": "a", "order": 1.0}, key)
		if e := wantError(t, err, client.ErrIdempotencyInProgress, http.StatusConflict); e.RequestMatches == nil || !*e.RequestMatches {
			t.Fatalf("%s: the same request in progress: %+v", onMismatch, e)
		}
		other := map[string]any{"order": 2, "to": "a"}
		_, err = q.Submit(ctx, "send", other, key)
		if onMismatch == broker.MismatchReject {
			if e := wantError(t, err, client.ErrIdempotencyKeyMismatch, http.StatusUnprocessableEntity); e.TaskID != first.TaskID {
				t.Fatalf("mismatch names %q, want %s", e.TaskID, first.TaskID)
			}
		} else if e := wantError(t, err, client.ErrIdempotencyInProgress, http.StatusConflict); e.RequestMatches == nil || *e.RequestMatches {
			t.Fatalf("replay: another request in progress: %+v", e)
		}
		if _, err := q.Cancel(ctx, first.TaskID); err != nil { // the record is failed: later submissions replay
			t.Fatal(err)
		}
		same, err := q.Submit(ctx, "send", map[string]any{"order": 1, "to": "a"}, key)
		if err != nil || !same.Duplicate || same.TaskID != first.TaskID || same.RequestMatches == nil || !*same.RequestMatches {
			t.Fatalf("%s: the same request replayed: %+v %v", onMismatch, same, err)
		}
		sameReq, _ := client.NewSubmitRequest("send", map[string]any{"order": 1, "to": "a"}, key)
		otherReq, _ := client.NewSubmitRequest("send", other, key)
		res, err := q.SubmitBatch(ctx, []client.SubmitRequest{sameReq, otherReq})
		if err != nil || res[0].Status != http.StatusOK || !*res[0].Task.RequestMatches {
			t.Fatalf("%s: batch: %+v %v", onMismatch, res, err)
		}
		switch onMismatch {
		case broker.MismatchReject:
			if res[1].Status != http.StatusUnprocessableEntity || res[1].Error.Code != client.CodeIdempotencyKeyMismatch ||
				res[1].Error.Details["task_id"] != first.TaskID {
				t.Fatalf("batch item of another request: %+v", res[1])
			}
		default:
			if res[1].Status != http.StatusOK || res[1].Task.TaskID != first.TaskID || *res[1].Task.RequestMatches {
				t.Fatalf("batch item of another request: %+v", res[1])
			}
		}
	}
}
