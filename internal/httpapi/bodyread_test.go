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

package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// tokenUsers authenticates a bearer token as the user of the same name and
// allows everything: enough to give requests identities in a unit test.
type tokenUsers struct{}

func (tokenUsers) Authorize(r *http.Request, _ Attributes) (string, error) {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), nil
}

// slowUsers is tokenUsers taking d to decide, as a slow TokenReview does.
type slowUsers struct{ d time.Duration }

func (a slowUsers) Authorize(r *http.Request, at Attributes) (string, error) {
	time.Sleep(a.d)
	return tokenUsers{}.Authorize(r, at)
}

func bodyServer(t *testing.T, o Options) (*Server, *httptest.Server) {
	t.Helper()
	o.Broker = broker.New(redistest.Start(t).Client())
	if err := o.Broker.EnsureQueue(t.Context(), broker.QueueRef{Namespace: "ns", Name: "q"}, broker.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	if o.Auth == nil {
		o.Auth = tokenUsers{}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// slowBody opens a connection that sends a batch request's headers, declaring
// a body of declared bytes, and the first bytes of the body, then stalls.
func slowBody(t *testing.T, addr, user string, declared int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_, err = fmt.Fprintf(c, "POST /api/v1/namespaces/ns/queues/q/tasks:batch HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"tasks\":[", user, declared)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waiting is how many body reads of user hold or wait for a slot.
func (s *Server) waiting(user string) int {
	s.bodySlots.mu.Lock()
	defer s.bodySlots.mu.Unlock()
	if sl := s.bodySlots.m[user]; sl != nil {
		return sl.users
	}
	return 0
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// 200 connections that declare 16 MB batch bodies and send a few bytes hold
// less than 32 MiB of the API's heap (its pod's limit is 256 Mi; reading into
// buffers of the declared size took 16 MB each), and the API keeps answering
// another client meanwhile.
func TestSlowBodiesHoldLittleMemory(t *testing.T) {
	s, srv := bodyServer(t, Options{BodyTimeout: time.Minute})
	addr := strings.TrimPrefix(srv.URL, "http://")
	before := heapInUse()
	const conns, declared = 200, 16_000_000
	for range conns {
		slowBody(t, addr, "slow", declared)
	}
	waitFor(t, func() bool { return s.waiting("slow") == conns }) // every request has reached its body read
	grown := int64(heapInUse()) - int64(before)
	t.Logf("heap in use grew by %.1f MiB with %d slow bodies", float64(grown)/(1<<20), conns)
	if grown > 32<<20 {
		t.Errorf("heap grew by %d MiB with %d slow bodies, want under 32 MiB", grown>>20, conns)
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/api/v1/namespaces/ns/queues/q/tasks",
		strings.NewReader(`{"task_type":"echo"}`))
	req.Header.Set("Authorization", "Bearer other")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var task client.Task
	_ = json.NewDecoder(resp.Body).Decode(&task)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || task.TaskID == "" {
		t.Fatalf("another client's submit during the slow bodies: %d", resp.StatusCode)
	}
}

// A body that does not arrive within BodyTimeout is 408 REQUEST_TIMEOUT; a
// request that waited that long for one of its client's slots is 429
// TOO_MANY_REQUESTS with Retry-After.
func TestBodyTimeoutAndSlots(t *testing.T) {
	s, srv := bodyServer(t, Options{BodyTimeout: 500 * time.Millisecond, MaxBodyReadsPerClient: 1})
	addr := strings.TrimPrefix(srv.URL, "http://")
	answer(t, slowBody(t, addr, "slow", 1000), http.StatusRequestTimeout, client.CodeRequestTimeout)

	release, err := s.bodySlots.acquire(t.Context(), "slow") // the client's one slot is busy
	if err != nil {
		t.Fatal(err)
	}
	answer(t, slowBody(t, addr, "slow", 1000), http.StatusTooManyRequests, client.CodeTooManyRequests)
	release()
	waitFor(t, func() bool { return s.waiting("slow") == 0 }) // the identity's entry is gone
}

// answer reads c's response and checks its status and error code (a 429
// must say when to retry); it reports whether the server closes c after it.
func answer(t *testing.T, c net.Conn, status int, code string) (closes bool) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var e client.Error
	_ = json.Unmarshal(body, &e)
	if resp.StatusCode != status || e.Code != code {
		t.Errorf("%d %s, want %d %s", resp.StatusCode, body, status, code)
	}
	if status == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	return resp.Close
}

// A batch that declares a body over the limit is 413 PAYLOAD_TOO_LARGE at
// once, before its body is read or waited for (it used to wait out the body
// deadline and get 408), and the connection closes.
func TestDeclaredLengthOverLimit(t *testing.T) {
	_, srv := bodyServer(t, Options{BodyTimeout: 5 * time.Second})
	start := time.Now()
	closes := answer(t, slowBody(t, strings.TrimPrefix(srv.URL, "http://"), "big", 900_000_000),
		http.StatusRequestEntityTooLarge, client.CodePayloadTooLarge)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("413 after %v, want it at once", took)
	}
	if !closes {
		t.Error("the connection stays open after a body left unread")
	}
}

// The body deadline starts once the request is authorized: a batch sent at
// once is served although TokenReview and SubjectAccessReview took longer
// than the deadline (it used to be 408).
func TestBodyDeadlineAfterAuthorization(t *testing.T) {
	_, srv := bodyServer(t, Options{BodyTimeout: 500 * time.Millisecond, Auth: slowUsers{d: time.Second}})
	body := strings.Repeat(`{"task_type":"echo","payload":{"pad":"`+strings.Repeat("x", 100)+`"}},`, 100)
	body = `{"tasks":[` + strings.TrimSuffix(body, ",") + `]}` // beyond the server's 4 KiB read buffer
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/api/v1/namespaces/ns/queues/q/tasks:batch",
		strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer slow-auth")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a batch sent at once, authorized in 1s with a 500ms body deadline: %d %s, want 200", resp.StatusCode, got)
	}
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in a minute")
		}
	}
}
