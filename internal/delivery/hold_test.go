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

// Holds: tasks the sidecar keeps without the app running them (a wrong
// route, a refused or lost connection, a Retry-After) cost no attempt, and
// the pod reads nothing new meanwhile.

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// A wrong route never costs an attempt, along the user's path: a task held
// on 404s goes back uncounted at its deadline, again and again (the pod
// holds its reads meanwhile), until a pod with the right route (the fix,
// rolled out) runs it as attempt 1.
func TestNotFoundHeldTaskGoesBackUncounted(t *testing.T) {
	t.Parallel()
	wrong := newApp()
	wrong.routeOK.Store(false)
	srvWrong := httptest.NewServer(wrong)
	defer srvWrong.Close()
	old := startSidecar(t, srvWrong.URL+"/wrong", workertest.Options{Concurrency: 2})
	id := old.submit(t, map[string]string{"mode": "ok"}, workertest.SubmitOptions{MaxAttempts: 1, Timeout: time.Second})
	time.Sleep(3500 * time.Millisecond) // three deadlines
	if ti := old.get(t, id); ti.State != broker.StateQueued || ti.Attempt != 1 {
		t.Fatalf("held on a wrong route past its deadline: %s attempt %d error %q, want Queued attempt 1 (handed back uncounted)", ti.State, ti.Attempt, ti.LastError)
	}
	right := newApp()
	srvRight := httptest.NewServer(right)
	defer srvRight.Close()
	fixed := startSidecarOn(t, old.rdb, srvRight.URL+"/tasks", old.o)
	if ti := fixed.wait(t, id); ti.State != broker.StateSucceeded || ti.Attempt != 1 || right.callsOf(id) != 1 {
		t.Fatalf("on the pod with the right route: %s attempt %d error %q, %d calls; want Succeeded on attempt 1", ti.State, ti.Attempt, ti.LastError, right.callsOf(id))
	}
}

// A connection lost on a resend after a 404 (the old pod's app stopping as
// the fixed route rolls out) costs no attempt: the route was missing a
// moment ago, so the app did not run the task; it is sent again once the
// app is ready.
func TestLostResendAfterNotFoundIsUncounted(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	url := rawApp(t, func(r *http.Request) string {
		switch n.Add(1) {
		case 1:
			return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
		case 2:
			return "" // reset
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"
	})
	s := startSidecar(t, url+"/tasks", workertest.Options{Concurrency: 1})
	id := s.submit(t, map[string]string{}, workertest.SubmitOptions{MaxAttempts: 1, Timeout: time.Minute})
	if ti := s.wait(t, id); ti.State != broker.StateSucceeded || ti.Attempt != 1 || n.Load() != 3 {
		t.Fatalf("404, reset, 200: %s attempt %d error %q after %d requests; want Succeeded on attempt 1 after 3", ti.State, ti.Attempt, ti.LastError, n.Load())
	}
}

// A Retry-After holds the pod's reads: a pod told to wait leases no tasks
// it would not send (its peers run them), and its worker record says why.
func TestRetryAfterHoldsReads(t *testing.T) {
	t.Parallel()
	app := newApp()
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL, workertest.Options{Concurrency: 2})
	throttled := s.submit(t, map[string]any{"mode": "throttle-long"}, workertest.SubmitOptions{Timeout: 5 * time.Minute})
	for app.callsOf(throttled) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	b := broker.New(s.rdb)
	q := broker.QueueRef{Namespace: s.o.Namespace, Name: s.o.Queue}
	deadline := time.Now().Add(waitFor)
	for {
		ws, err := b.Workers(context.Background(), q)
		if err == nil && len(ws) == 1 && ws[0].Status == StatusThrottled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers %+v (%v), want one %s", ws, err, StatusThrottled)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(1200 * time.Millisecond) // a read blocking when the hold began ends (the SDK's readBlock)
	next := s.submit(t, map[string]any{"mode": "ok"}, workertest.SubmitOptions{})
	time.Sleep(time.Second)
	if ti := s.get(t, next); ti.State != broker.StateQueued {
		t.Fatalf("a task submitted while the pod waits out a Retry-After is %s, want Queued (not leased)", ti.State)
	}
}

// rawConnReset closes c with a reset (SO_LINGER 0), as an app process that
// exits with a connection unanswered.
func rawConnReset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
