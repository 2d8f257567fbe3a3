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
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// getQueueOnly allows get on queue ns/q alone, and records what it was asked.
type getQueueOnly struct{ asked []httpapi.Attributes }

func (g *getQueueOnly) Authorize(_ *http.Request, a httpapi.Attributes) (string, error) {
	g.asked = append(g.asked, a)
	if a.Verb == "get" && a.Resource == "queues" && a.Subresource == "" && a.Name == "q" {
		return "bob", nil
	}
	return "bob", &client.Error{StatusCode: http.StatusForbidden, Code: client.CodeForbidden, Message: "no"}
}

// GET history answers the samples the manager recorded, oldest first, under
// the authorisation of the queue's stats (get queues, the queue named); its
// since and limit narrow them, and bad values get INVALID_REQUEST.
func TestQueueHistory(t *testing.T) {
	b := broker.New(redistest.Start(t).Client())
	ref := broker.QueueRef{Namespace: "ns", Name: "q"}
	must(t, b.EnsureQueue(t.Context(), ref, broker.DefaultQueueConfig()))
	must(t, b.EnsureQueue(t.Context(), broker.QueueRef{Namespace: "ns", Name: "other"}, broker.DefaultQueueConfig()))
	auth := &getQueueOnly{}
	s, err := httpapi.New(httpapi.Options{Broker: b, Auth: auth})
	must(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: apitest.Transport(t, nil)}
	get := func(path string, wantStatus int, out any) {
		t.Helper()
		resp, err := hc.Get(srv.URL + path)
		must(t, err)
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != wantStatus {
			t.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, wantStatus)
		}
		must(t, json.NewDecoder(resp.Body).Decode(out))
	}
	const path = "/api/v1/namespaces/ns/queues/q/history"

	var h client.QueueHistory
	get(path, http.StatusOK, &h)
	if h.Namespace != "ns" || h.Queue != "q" || h.Samples == nil || len(h.Samples) != 0 {
		t.Fatalf("history before any sample: %+v, want an empty list", h)
	}
	for i := range 3 {
		_, err := b.Submit(t.Context(), ref, broker.SubmitRequest{Type: "echo"})
		must(t, err)
		must(t, b.RecordHistory(t.Context(), ref, 10, time.Hour))
		if i < 2 {
			time.Sleep(2 * time.Millisecond) // distinct sample times
		}
	}
	get(path, http.StatusOK, &h)
	if len(h.Samples) != 3 {
		t.Fatalf("%d samples, want 3", len(h.Samples))
	}
	for i, smp := range h.Samples {
		want := client.HistorySample{Time: smp.Time, Queued: int64(i + 1), Submitted: int64(i + 1)}
		if d := cmp.Diff(want, smp); d != "" {
			t.Errorf("sample %d (-want +got):\n%s", i, d)
		}
	}
	if d := cmp.Diff([]httpapi.Attributes{{Verb: "get", Namespace: "ns", Resource: "queues", Name: "q"}}, auth.asked[:1]); d != "" {
		t.Errorf("authorised (-want +got):\n%s", d)
	}

	var newer client.QueueHistory
	get(path+"?since="+url.QueryEscape(h.Samples[0].Time.Format(time.RFC3339Nano)), http.StatusOK, &newer)
	if len(newer.Samples) != 2 || newer.Samples[0].Submitted != 2 {
		t.Errorf("since the first sample: %+v, want the two after it", newer.Samples)
	}
	get(path+"?limit=1", http.StatusOK, &newer)
	if len(newer.Samples) != 1 || newer.Samples[0].Submitted != 3 {
		t.Errorf("limit 1: %+v, want the newest", newer.Samples)
	}
	var e client.Error
	for _, q := range []string{"since=yesterday", "limit=0", "limit=10001"} {
		get(path+"?"+q, http.StatusBadRequest, &e)
		if e.Code != client.CodeInvalidRequest {
			t.Errorf("%s: %s, want INVALID_REQUEST", q, e.Code)
		}
	}
	get("/api/v1/namespaces/ns/queues/other/history", http.StatusForbidden, &e) // another queue's stats
	s2, err := httpapi.New(httpapi.Options{Broker: b, Auth: httpapi.NoAuth{}})
	must(t, err)
	srv2 := httptest.NewServer(s2)
	t.Cleanup(srv2.Close)
	resp, err := hc.Get(srv2.URL + "/api/v1/namespaces/ns/queues/nope/history")
	must(t, err)
	must(t, json.NewDecoder(resp.Body).Decode(&e))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || e.Code != client.CodeQueueNotFound {
		t.Errorf("unknown queue: %d %s, want 404 QUEUE_NOT_FOUND", resp.StatusCode, e.Code)
	}
}
