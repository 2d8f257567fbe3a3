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

package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// do sends a request through a client that checks every answer against the
// OpenAPI document, and decodes the answer into out.
func do(t *testing.T, method, url, body string, wantStatus int, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	must(t, err)
	resp, err := (&http.Client{Transport: apitest.Transport(t, nil)}).Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s: %d, want %d", method, url, resp.StatusCode, wantStatus)
	}
	must(t, json.NewDecoder(resp.Body).Decode(out))
}

// badFlowKeys are flow keys the API refuses: too long, a space, a control
// character, a byte beyond ASCII.
var badFlowKeys = []string{strings.Repeat("k", broker.MaxFlowKeyBytes+1), "tenant a", "tenant\x01", "m\u00fcller"}

// A submission's flow_key is at most MaxFlowKeyBytes of visible ASCII,
// echoed in the task; a bad one is 400 INVALID_TASK naming the field, alone
// and as a batch item (the batch's other items are submitted); nothing of a
// refused task is written.
func TestSubmitFlowKeyValidation(t *testing.T) {
	srv, b := newAPIWithBroker(t)
	tasks := srv.URL + "/api/v1/namespaces/ns/queues/q/tasks"
	for _, k := range badFlowKeys {
		body, _ := json.Marshal(client.SubmitRequest{TaskType: "echo", FlowKey: k})
		var e client.Error
		do(t, http.MethodPost, tasks, string(body), http.StatusBadRequest, &e)
		if e.Code != client.CodeInvalidTask || e.Details["field"] != "flow_key" {
			t.Errorf("flow_key %q: %s %v, want INVALID_TASK naming flow_key", k, e.Code, e.Details)
		}
	}
	var ok client.Task
	do(t, http.MethodPost, tasks, `{"task_type":"echo","flow_key":"`+strings.Repeat("k", broker.MaxFlowKeyBytes)+`"}`, http.StatusAccepted, &ok)
	if ok.FlowKey != strings.Repeat("k", broker.MaxFlowKeyBytes) {
		t.Errorf("a %d-byte flow key answered flow_key %q, want it echoed", broker.MaxFlowKeyBytes, ok.FlowKey)
	}

	batch, _ := json.Marshal(client.BatchRequest{Tasks: []client.SubmitRequest{
		{TaskType: "echo", FlowKey: "tenant-a"}, {TaskType: "echo", FlowKey: "tenant a"}, {TaskType: "echo"}}})
	var res client.BatchResponse
	do(t, http.MethodPost, tasks+":batch", string(batch), http.StatusOK, &res)
	if len(res.Results) != 3 || res.Results[0].Status != http.StatusAccepted || res.Results[2].Status != http.StatusAccepted {
		t.Fatalf("batch: %+v, want items 0 and 2 submitted", res.Results)
	}
	if e := res.Results[1].Error; res.Results[1].Status != http.StatusBadRequest || e == nil ||
		e.Code != client.CodeInvalidTask || e.Details["field"] != "flow_key" {
		t.Errorf("batch item with a space in its flow key: %+v, want 400 INVALID_TASK naming flow_key", res.Results[1])
	}
	m, err := b.QueueMetrics(t.Context(), broker.QueueRef{Namespace: "ns", Name: "q"})
	must(t, err)
	if m.Counters.Accepted != 3 {
		t.Errorf("%d tasks submitted, want 3 (the refused ones not written)", m.Counters.Accepted)
	}
}

// GET .../flow is authorised as the queue's stats (get queues, the queue
// named); ?top= is 1..500; an unknown queue is 404; a queue without flow
// control answers no flow and no keys, and its stats carry no flow either.
func TestQueueFlowEndpoint(t *testing.T) {
	b := broker.New(redistest.Start(t).Client())
	for _, name := range []string{"q", "other"} {
		must(t, b.EnsureQueue(t.Context(), broker.QueueRef{Namespace: "ns", Name: name}, broker.DefaultQueueConfig()))
	}
	auth := &getQueueOnly{}
	s, err := httpapi.New(httpapi.Options{Broker: b, Auth: auth})
	must(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	const path = "/api/v1/namespaces/ns/queues/q/flow"

	var f client.QueueFlow
	do(t, http.MethodGet, srv.URL+path, "", http.StatusOK, &f)
	if d := cmp.Diff(client.QueueFlow{Namespace: "ns", Queue: "q", Keys: []client.KeyFlow{}}, f); d != "" {
		t.Errorf("flow of a queue without flow control (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]httpapi.Attributes{{Verb: "get", Namespace: "ns", Resource: "queues", Name: "q"}}, auth.asked); d != "" {
		t.Errorf("authorised (-want +got):\n%s", d)
	}
	var st client.QueueStats
	do(t, http.MethodGet, srv.URL+"/api/v1/namespaces/ns/queues/q", "", http.StatusOK, &st)
	if st.Flow != nil {
		t.Errorf("stats of a queue without flow control carry flow %+v", st.Flow)
	}
	var e client.Error
	for _, q := range []string{"top=0", "top=501", "top=many"} {
		do(t, http.MethodGet, srv.URL+path+"?"+q, "", http.StatusBadRequest, &e)
		if e.Code != client.CodeInvalidRequest || e.Details["field"] != "top" {
			t.Errorf("%s: %s %v, want INVALID_REQUEST naming top", q, e.Code, e.Details)
		}
	}
	do(t, http.MethodGet, srv.URL+"/api/v1/namespaces/ns/queues/other/flow", "", http.StatusForbidden, &e)
	do(t, http.MethodGet, srv.URL+"/api/v1/namespaces/ns/queues/nope/flow", "", http.StatusForbidden, &e)
	open := httptest.NewServer(must2(httpapi.New(httpapi.Options{Broker: b, Auth: httpapi.NoAuth{}})))
	t.Cleanup(open.Close)
	do(t, http.MethodGet, open.URL+"/api/v1/namespaces/ns/queues/nope/flow", "", http.StatusNotFound, &e)
	if e.Code != client.CodeQueueNotFound {
		t.Errorf("unknown queue: %s, want QUEUE_NOT_FOUND", e.Code)
	}
}

// The flow endpoint of a flow-controlled queue whose keys run one task at a
// time: submissions with flow_key (alone and in a batch) echo it; after a
// worker took tenant-a's first task and tenant-b's, tenant-a's others wait,
// which the flow metrics (in the stats too), the keys (busiest first, top
// of them) and the waiting task's view say; a running task has no reason.
func TestQueueFlowOfAFlowControlledQueue(t *testing.T) {
	srv, b := newAPIWithBroker(t)
	q := broker.QueueRef{Namespace: "ns", Name: "fq"}
	cfg := broker.DefaultQueueConfig()
	cfg.Flow = &broker.FlowControl{PerKey: broker.KeyLimits{Concurrency: 1}}
	must(t, b.EnsureQueue(t.Context(), q, cfg))
	base := srv.URL + "/api/v1/namespaces/ns/queues/fq"

	var a [3]client.Task
	do(t, http.MethodPost, base+"/tasks", `{"task_type":"echo","flow_key":"tenant-a"}`, http.StatusAccepted, &a[0])
	batch := `{"tasks":[{"task_type":"echo","flow_key":"tenant-a"},{"task_type":"echo","flow_key":"tenant-a"},{"task_type":"echo","flow_key":"tenant-b"}]}`
	var res client.BatchResponse
	do(t, http.MethodPost, base+"/tasks:batch", batch, http.StatusOK, &res)
	for i, want := range []string{"tenant-a", "tenant-a", "tenant-b"} {
		if r := res.Results[i]; r.Task == nil || r.Task.FlowKey != want {
			t.Fatalf("batch item %d: %+v, want a task with flow_key %s", i, r, want)
		}
	}
	a[1], a[2] = *res.Results[0].Task, *res.Results[1].Task
	var got client.Task
	do(t, http.MethodGet, base+"/tasks/"+a[0].TaskID, "", http.StatusOK, &got)
	if got.FlowKey != "tenant-a" || got.WaitReason == "" {
		t.Errorf("a queued keyed task before any claim: flow_key %q, wait_reason %q; want tenant-a and a reason", got.FlowKey, got.WaitReason)
	}

	ss, err := b.ReadStart(t.Context(), q, "w", "w", 4, 0)
	must(t, err)
	if len(ss) != 2 {
		t.Fatalf("a claim of 4 started %d tasks, want 2 (tenant-a's first, tenant-b's)", len(ss))
	}
	do(t, http.MethodGet, base+"/tasks/"+a[1].TaskID, "", http.StatusOK, &got)
	if got.Status != client.StatusQueued || got.WaitReason != "key tenant-a at concurrency 1/1" {
		t.Errorf("tenant-a's second task: %s, wait_reason %q; want Queued, key tenant-a at concurrency 1/1", got.Status, got.WaitReason)
	}
	got = client.Task{}
	do(t, http.MethodGet, base+"/tasks/"+ss[0].Task.ID, "", http.StatusOK, &got)
	if got.Status != client.StatusRunning || got.WaitReason != "" {
		t.Errorf("a running task: %s, wait_reason %q; want Running, none", got.Status, got.WaitReason)
	}

	// tenant-b, at its cap with nothing queued, is parked too.
	wantFlow := &client.FlowStats{Throttled: 2, Held: 2, ActiveKeys: 1, ParkedKeys: 2,
		LimitedBy: []client.FlowLimit{client.LimitKeyConcurrency}}
	var f client.QueueFlow
	do(t, http.MethodGet, base+"/flow", "", http.StatusOK, &f)
	if d := cmp.Diff(client.QueueFlow{Namespace: "ns", Queue: "fq", Flow: wantFlow, Keys: []client.KeyFlow{
		{Key: "tenant-a", Queued: 2, Held: 1, Concurrency: 1, Weight: 1, Parked: client.LimitKeyConcurrency},
		{Key: "tenant-b", Held: 1, Concurrency: 1, Weight: 1, Parked: client.LimitKeyConcurrency},
	}}, f); d != "" {
		t.Errorf("flow (-want +got):\n%s", d)
	}
	do(t, http.MethodGet, base+"/flow?top=1", "", http.StatusOK, &f)
	if len(f.Keys) != 1 || f.Keys[0].Key != "tenant-a" {
		t.Errorf("top 1: %+v, want tenant-a alone", f.Keys)
	}
	var st client.QueueStats
	do(t, http.MethodGet, base, "", http.StatusOK, &st)
	if d := cmp.Diff(wantFlow, st.Flow); d != "" {
		t.Errorf("stats' flow (-want +got):\n%s", d)
	}
}

func must2[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
