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
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
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
		if !g.probe(t.Context()) {
			t.Fatalf("probe %d: not ready", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if opened != 1 {
		t.Errorf("10 probes opened %d connections to the app, want 1", opened)
	}
}
