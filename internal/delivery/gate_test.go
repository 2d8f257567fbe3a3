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

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The readiness probe reads each answer and keeps one connection to the app.
// A probe that closed an answer unread would open a connection per probe and
// reset each under the app, which logs the reset (the Python example printed
// a traceback in make dev's app log).
func TestReadinessProbeKeepsItsConnection(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	opened := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	g := newGate(Config{HandlerURL: srv.URL + "/tasks", ReadyURL: srv.URL + "/healthz"}, slog.New(slog.DiscardHandler))
	for i := range 10 {
		if ok, why := g.probe(t.Context()); !ok {
			t.Fatalf("probe %d: not ready: %s", i, why)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if opened != 1 {
		t.Errorf("10 probes opened %d connections to the app, want 1", opened)
	}
}

// A readiness path that redirects (to a login page elsewhere, say) counts as
// ready, as the kubelet counts a redirect off the host, and the check never
// follows it off the pod.
func TestReadinessProbeDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
		http.Error(w, "log in first", http.StatusUnauthorized)
	}))
	t.Cleanup(elsewhere.Close)
	app := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/login", http.StatusFound))
	t.Cleanup(app.Close)
	g := newGate(Config{HandlerURL: app.URL + "/tasks", ReadyURL: app.URL + "/healthz"}, slog.New(slog.DiscardHandler))
	if ok, why := g.probe(t.Context()); !ok || followed.Load() != 0 {
		t.Errorf("a readiness path answering 302: ready %v (%s), the redirect followed %d times; want ready, never followed", ok, why, followed.Load())
	}
}

// The sidecar says why delivery is held, once per reason (not once per
// check), and that it resumed: a readiness path answering 501 is named with
// its code.
func TestHoldIsLogged(t *testing.T) {
	t.Parallel()
	var code atomic.Int32
	code.Store(http.StatusNotImplemented)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(code.Load()))
	}))
	t.Cleanup(app.Close)
	var logs lockedBuffer
	g := newGate(Config{HandlerURL: app.URL + "/tasks", ReadyURL: app.URL + "/healthz"}, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); g.run(ctx) }()
	time.Sleep(1500 * time.Millisecond) // several checks, every probeNotReady
	code.Store(http.StatusOK)
	for !g.ready.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "Delivery held") || !strings.Contains(lines[0], "status=app-not-ready") ||
		!strings.Contains(lines[0], "/healthz answered 501") || !strings.Contains(lines[1], "Delivering to the app") {
		t.Errorf("log:\n%s\nwant one line naming the hold (app-not-ready, the check answered 501), then one saying delivery resumed", logs.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
