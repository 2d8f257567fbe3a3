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

package delivery

// The forwarder's own HTTP/1.1 client against net/http servers that answer
// in every shape HTTP allows, close idle connections, or get a task whose
// fields cannot be headers.

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// shapes answers by the payload's "shape"; it counts the connections that
// carried requests (the readiness gate's connects carry none).
func shapes(t *testing.T, idle time.Duration) (*httptest.Server, func() int) {
	var mu sync.Mutex
	conns := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		var p struct{ Shape string }
		_ = json.NewDecoder(r.Body).Decode(&p)
		switch p.Shape {
		case "chunked":
			_, _ = w.Write([]byte(`{"part":`))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(`1}`))
		case "early-hints":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = w.Write([]byte(`{"hinted":true}`))
		case "close":
			w.Header().Set("Connection", "close")
			_, _ = w.Write([]byte(`{"closed":true}`))
		default:
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	srv.Config.IdleTimeout = idle
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
}

func TestAnswerShapes(t *testing.T) {
	t.Parallel()
	srv, _ := shapes(t, time.Minute)
	s := startSidecar(t, srv.URL+"/", workertest.Options{Concurrency: 1})
	for shape, want := range map[string]string{"chunked": `{"part":1}`, "early-hints": `{"hinted":true}`, "close": `{"closed":true}`, "plain": `{"ok":true}`} {
		for i := range 2 { // the second goes over the connection the first left, or a new one
			ti := s.wait(t, s.submit(t, map[string]string{"shape": shape}, workertest.SubmitOptions{MaxAttempts: 3}))
			if ti.State != broker.StateSucceeded || ti.Attempt != 1 || string(ti.Result) != want {
				t.Errorf("%s #%d: %s attempt %d result %s error %q; want succeeded on attempt 1 with %s", shape, i, ti.State, ti.Attempt, ti.Result, ti.LastError, want)
			}
		}
	}
}

// Tasks one after another share one keep-alive connection, and a connection
// the app closed while idle is never used: the next task is sent on a new
// one without costing an attempt.
func TestKeepAliveAndIdleClose(t *testing.T) {
	t.Parallel()
	srv, conns := shapes(t, 200*time.Millisecond)
	s := startSidecar(t, srv.URL+"/", workertest.Options{Concurrency: 1})
	for i := range 10 {
		if ti := s.wait(t, s.submit(t, map[string]string{}, workertest.SubmitOptions{MaxAttempts: 3})); ti.State != broker.StateSucceeded || ti.Attempt != 1 {
			t.Fatalf("task %d: %s attempt %d error %q", i, ti.State, ti.Attempt, ti.LastError)
		}
	}
	if n := conns(); n != 1 {
		t.Errorf("10 sequential tasks opened %d connections, want 1 (keep-alive)", n)
	}
	time.Sleep(500 * time.Millisecond) // the app closes the idle connection
	for i := range 3 {
		if ti := s.wait(t, s.submit(t, map[string]string{}, workertest.SubmitOptions{MaxAttempts: 3})); ti.State != broker.StateSucceeded || ti.Attempt != 1 {
			t.Fatalf("after the idle close, task %d: %s attempt %d error %q; want attempt 1", i, ti.State, ti.Attempt, ti.LastError)
		}
	}
	if n := conns(); n != 2 {
		t.Errorf("%d connections after the app closed the idle one, want 2", n)
	}
}

// A type with a line break cannot be an HTTP header: the task is dead
// lettered on its first attempt with a message saying so, not retried.
func TestTaskFieldNotAHeader(t *testing.T) {
	t.Parallel()
	srv, conns := shapes(t, time.Minute)
	s := startSidecar(t, srv.URL+"/", workertest.Options{})
	id := workertest.Submit(t, s.rdb, s.o, "bad\r\nX-Injected: 1", map[string]string{}, workertest.SubmitOptions{MaxAttempts: 3})
	ti := s.wait(t, id)
	if ti.State != broker.StateDeadLettered || ti.Attempt != 1 || !strings.Contains(ti.LastError, "cannot be delivered over HTTP: header Dtq-Task-Type") {
		t.Errorf("%s attempt %d error %q; want dead-lettered on attempt 1 naming the header", ti.State, ti.Attempt, ti.LastError)
	}
	if n := conns(); n != 0 {
		t.Errorf("%d connections opened for an undeliverable task", n)
	}
}

// rawApp is an HTTP/1.1 app written on a bare socket, so a test can answer
// as real servers sometimes do and net/http's server never does. answer
// gets each request (its body unread) and returns the bytes to write, or ""
// to reset the connection unanswered (the app died mid-request). A
// request it cannot parse (a body left unread prefixing the next request
// line) gets 400 and the connection is closed, as Python's
// BaseHTTPRequestHandler does.
func rawApp(t *testing.T, answer func(r *http.Request) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 16\r\n\r\nbad request line")
						return
					}
					a := answer(r)
					if a == "" {
						rawConnReset(c)
						return
					}
					if _, err := io.WriteString(c, a); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// An app that answers an error before reading the request's body (Python's
// BaseHTTPRequestHandler answering a wrong route) leaves the body in the
// connection. The sidecar does not reuse a connection after an answer other
// than a 2xx, so the 404 hold's resend reaches the app as a request, not
// as the old body glued to it (which the Python example answered 501, and
// this app 400, costing the held task an attempt or its life).
func TestErrorAnswerClosesItsConnection(t *testing.T) {
	t.Parallel()
	var routeOK atomic.Bool
	url := rawApp(t, func(r *http.Request) string {
		if !routeOK.Load() {
			return "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nno route\n"
		}
		_, _ = io.Copy(io.Discard, r.Body)
		return "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"
	})
	s := startSidecar(t, url+"/tasks", workertest.Options{Concurrency: 1})
	id := s.submit(t, map[string]string{"mode": "ok"}, workertest.SubmitOptions{MaxAttempts: 3, Timeout: time.Minute})
	for s.get(t, id).State != broker.StateRunning {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2*notFoundRetry + time.Second) // two resends
	if ti := s.get(t, id); ti.State != broker.StateRunning || ti.Attempt != 1 {
		t.Fatalf("held on a 404: %s attempt %d error %q, want Running attempt 1", ti.State, ti.Attempt, ti.LastError)
	}
	routeOK.Store(true)
	if ti := s.wait(t, id); ti.State != broker.StateSucceeded || ti.Attempt != 1 {
		t.Fatalf("after the route answers: %s attempt %d error %q, want Succeeded on attempt 1", ti.State, ti.Attempt, ti.LastError)
	}
}

// An app that writes a byte past its answer's Content-Length leaves it in
// the connection's buffer: the connection is not reused, so the next task
// does not read it as the start of its answer.
func TestBytesPastTheAnswerAreNotReused(t *testing.T) {
	t.Parallel()
	url := rawApp(t, func(r *http.Request) string {
		_, _ = io.Copy(io.Discard, r.Body)
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}x"
	})
	s := startSidecar(t, url+"/", workertest.Options{Concurrency: 1})
	for i := range 3 {
		if ti := s.wait(t, s.submit(t, map[string]string{}, workertest.SubmitOptions{MaxAttempts: 1})); ti.State != broker.StateSucceeded {
			t.Fatalf("task %d: %s attempt %d error %q, want Succeeded", i, ti.State, ti.Attempt, ti.LastError)
		}
	}
}
