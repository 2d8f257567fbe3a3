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
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// bearerUsers authenticates a bearer token as the user of the same name and
// allows everything.
type bearerUsers struct{}

func (bearerUsers) Authorize(r *http.Request, _ httpapi.Attributes) (string, error) {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), nil
}

// streamAPI serves the API with o (its Broker and Registry set here, Auth
// NoAuth unless set) on a private redis-server with queue ns/q; every response
// is checked against the OpenAPI document.
func streamAPI(t *testing.T, o httpapi.Options) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	o.Broker = broker.New(redistest.Start(t).Client())
	if err := o.Broker.EnsureQueue(t.Context(), broker.QueueRef{Namespace: "ns", Name: "q"}, broker.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	if o.Auth == nil {
		o.Auth = httpapi.NoAuth{}
	}
	o.Registry = prometheus.NewRegistry()
	s, err := httpapi.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.Stop)
	return srv, o.Registry
}

func apiClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, append(opts, client.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil)}))...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// streamsEnded is how many events streams reg counts as answered 200 and done.
func streamsEnded(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "dtq_api_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == "events" && labels["code"] == "200" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A stream ends cleanly after MaxStreamLife (±10%), on a line naming where it
// stands, and closes its connection; the Go client's EventStream and Wait
// resume across such ends without losing or repeating an event.
func TestStreamsEndAfterMaxLifeAndResume(t *testing.T) {
	srv, reg := streamAPI(t, httpapi.Options{MaxStreamLife: 300 * time.Millisecond})
	q := apiClient(t, srv.URL).Queue("ns", "q")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, srv.URL+"/api/v1/namespaces/ns/queues/q/events?since=0", nil)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body) // returns when the stream ends
	_ = resp.Body.Close()
	if took := time.Since(start); err != nil || !resp.Close ||
		!regexp.MustCompile(`\nid: 0-0\n\n$`).Match(body) {
		t.Fatalf("a stream of MaxStreamLife 300ms: %q (%v) after %v, connection closed %v; want it to end on its position, id: 0-0",
			body, err, took, resp.Close)
	}

	s, err := q.Events(ctx, client.EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	submitted := make(chan string, 10)
	go func() {
		defer close(submitted)
		for range 10 { // over about a second: several stream ends
			task, err := q.Submit(ctx, "echo", nil)
			if err != nil {
				t.Error(err)
				return
			}
			submitted <- task.TaskID
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for id := range submitted {
		ev, err := s.Next()
		if err != nil || ev.Type != client.EventQueued || ev.TaskID != id {
			t.Fatalf("next event %+v (%v), want TaskQueued of %s", ev, err, id)
		}
	}

	task, err := q.Submit(ctx, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(time.Second, func() { _, _ = q.Cancel(ctx, task.TaskID) })
	got, err := q.Wait(ctx, task.TaskID) // its stream ends about three times meanwhile
	if err != nil || got.Status != client.StatusCancelled {
		t.Fatalf("Wait across stream ends: %+v, %v; want Cancelled", got, err)
	}
	if n := streamsEnded(t, reg); n < 4 {
		t.Errorf("%v streams ended, want at least 4 (one by hand, more under the EventStream and Wait)", n)
	}
}

// One client identity has at most MaxStreamsPerClient streams open: one more
// is 429 TOO_MANY_REQUESTS with Retry-After (client.ErrTooManyRequests);
// another identity is not affected, and a closed stream frees its slot.
func TestStreamsPerClientCapped(t *testing.T) {
	srv, _ := streamAPI(t, httpapi.Options{MaxStreamsPerClient: 2, Auth: bearerUsers{}})
	a := apiClient(t, srv.URL, client.WithToken("a")).Queue("ns", "q")
	b := apiClient(t, srv.URL, client.WithToken("b")).Queue("ns", "q")
	ctx := t.Context()
	var open []*client.EventStream
	for range 2 {
		s, err := a.Events(ctx, client.EventsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		open = append(open, s)
	}
	_, err := a.Events(ctx, client.EventsOptions{})
	var e *client.Error
	if !errors.Is(err, client.ErrTooManyRequests) || !errors.As(err, &e) || e.RetryAfter <= 0 {
		t.Fatalf("a third stream of one client: %v, want TOO_MANY_REQUESTS with Retry-After", err)
	}
	s, err := b.Events(ctx, client.EventsOptions{})
	if err != nil {
		t.Fatalf("another client's stream: %v", err)
	}
	_ = s.Close()

	_ = open[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := a.Events(ctx, client.EventsOptions{})
		if err == nil {
			_ = s.Close()
			break
		}
		if !errors.Is(err, client.ErrTooManyRequests) || time.Now().After(deadline) {
			t.Fatalf("a stream after one of the client's was closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
