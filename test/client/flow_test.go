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

	"github.com/google/go-cmp/cmp"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// FlowKey refuses a bad key with INVALID_TASK naming flow_key; Flow of a
// queue without flow control has no flow and no keys, and refuses a top
// out of range.
func TestFlowWithoutFlowControl(t *testing.T) {
	ctx := t.Context()
	q := newClient(t).Queue("shop", "idle")
	e := wantError(t, errOf(q.Submit(ctx, "send", nil, client.FlowKey("tenant a"))), client.ErrInvalidTask, http.StatusBadRequest)
	if e.Details["field"] != "flow_key" {
		t.Fatalf("a flow key with a space: field %v, want flow_key", e.Details["field"])
	}
	f, err := q.Flow(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&client.QueueFlow{Namespace: "shop", Queue: "idle", Keys: []client.KeyFlow{}}, f); d != "" {
		t.Errorf("flow (-want +got):\n%s", d)
	}
	wantError(t, errOf2(q.Flow(ctx, client.MaxFlowTop+1)), client.ErrInvalidRequest, http.StatusBadRequest)
	wantError(t, errOf2(newClient(t).Queue("shop", "nope").Flow(ctx, 1)), client.ErrQueueNotFound, http.StatusNotFound)
}

// On a flow-controlled queue FlowKey's key comes back in the task, Get and
// Flow, whose top bounds the keys.
func TestFlowKeyAndFlow(t *testing.T) {
	ctx := t.Context()
	q := ensureQueue(t, "flowing", func(c *broker.QueueConfig) {
		c.Flow = &broker.FlowControl{PerKey: broker.KeyLimits{Concurrency: 2}}
	})
	for _, k := range []string{"tenant-a", "tenant-a", "tenant-b"} {
		task, err := q.Submit(ctx, "send", nil, client.FlowKey(k))
		if err != nil || task.FlowKey != k {
			t.Fatalf("submit with flow key %s: %+v %v", k, task, err)
		}
		if got, err := q.Get(ctx, task.TaskID); err != nil || got.FlowKey != k || got.WaitReason == "" {
			t.Fatalf("get: %+v %v, want flow key %s and a wait reason", got, err, k)
		}
	}
	f, err := q.Flow(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f.Flow == nil || f.Flow.Admissible != 3 || len(f.Keys) != 1 || f.Keys[0].Key != "tenant-a" || f.Keys[0].Queued != 2 ||
		f.Keys[0].Concurrency != 2 {
		t.Errorf("flow, top 1: %+v %+v, want 3 admissible and tenant-a's 2 queued tasks alone", f.Flow, f.Keys)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Flow == nil || st.Flow.Admissible != 3 {
		t.Errorf("stats: %+v %v, want the flow metrics", st, err)
	}
}

func errOf2(_ *client.QueueFlow, err error) error { return err }
