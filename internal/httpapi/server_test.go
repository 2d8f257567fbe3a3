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
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// newAPI serves the API without auth on a private redis-server with queue ns/q.
func newAPI(t *testing.T) *httptest.Server {
	t.Helper()
	srv, _ := newAPIWithBroker(t)
	return srv
}

// newAPIWithBroker is newAPI that also returns the engine it serves.
func newAPIWithBroker(t *testing.T) (*httptest.Server, *broker.Broker) {
	t.Helper()
	b := broker.New(redistest.Start(t).Client())
	if err := b.EnsureQueue(t.Context(), broker.QueueRef{Namespace: "ns", Name: "q"}, broker.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	s, err := httpapi.New(httpapi.Options{Broker: b, Auth: httpapi.NoAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, b
}

// ?idempotency_key= answers the key's task alone, or none for an unknown key,
// as the OpenAPI document says.
func TestListTasksByIdempotencyKey(t *testing.T) {
	srv := newAPI(t)
	hc := &http.Client{Transport: apitest.Transport(t, nil)}
	tasks := srv.URL + "/api/v1/namespaces/ns/queues/q/tasks"
	var want client.Task
	for _, key := range []string{"k1", "k2"} {
		resp, err := hc.Post(tasks, "application/json", strings.NewReader(`{"task_type":"echo","payload":{"a":1},"idempotency_key":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if key == "k1" {
			must(t, json.NewDecoder(resp.Body).Decode(&want))
		}
		_ = resp.Body.Close()
	}
	list := func(query string) client.TaskList {
		t.Helper()
		resp, err := hc.Get(tasks + "?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET tasks?%s: %d", query, resp.StatusCode)
		}
		var l client.TaskList
		must(t, json.NewDecoder(resp.Body).Decode(&l))
		return l
	}
	if l := list("idempotency_key=k1"); l.Count != 1 || l.Tasks[0].TaskID != want.TaskID || l.Tasks[0].Payload != nil {
		t.Errorf("key k1: %+v, want task %s alone, without payload", l, want.TaskID)
	}
	if l := list("idempotency_key=nope"); l.Count != 0 || len(l.Tasks) != 0 {
		t.Errorf("unknown key: %+v, want no task", l)
	}
	if l := list("limit=10"); l.Count != 2 {
		t.Errorf("without a key: %d tasks, want 2", l.Count)
	}
}

// The console's assets are served under /ui/ without auth, with a policy that
// keeps the page on its own origin; /ui redirects to /ui/.
func TestConsoleIsMounted(t *testing.T) {
	srv := newAPI(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(srv.URL + "/ui")
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d to %q, want a redirect to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for path, typ := range map[string]string{"/ui/": "text/html", "/ui/console.js": "text/javascript", "/ui/console.css": "text/css"} {
		resp, err := http.Get(srv.URL + path)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), typ) || len(body) == 0 {
			t.Errorf("%s: %d %q, want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), typ)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
