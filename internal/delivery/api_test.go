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
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// apiCall sends body to the sidecar API at base+path with the secret.
func apiCall(t *testing.T, base, secret, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set(HeaderToken, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Run without a Logger (a library caller's zero Config) serves the API: a
// Redis error is logged to the default logger and answered 503, not a panic
// that drops the connection.
func TestAPIWithoutLogger(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	o := workertest.Options{Namespace: "default", Queue: workertest.NewQueueName()}
	workertest.EnsureQueue(t, rdb, o)
	apiAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Run(ctx, worker.Config{Redis: rdb, Namespace: o.Namespace, Queue: o.Queue},
			Config{HandlerURL: "http://" + freeAddr(t) + "/", APIAddr: apiAddr, Token: "secret"})
	}()
	t.Cleanup(func() { cancel(); <-done })
	srv.Kill()
	for deadline := time.Now().Add(waitFor); ; { // until the API listens
		c, err := net.Dial("tcp", apiAddr)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := apiCall(t, "http://"+apiAddr, "secret", "/v1/operations/claim", `{"key":"k"}`); code != http.StatusServiceUnavailable || !strings.Contains(body, "UNAVAILABLE") {
		t.Fatalf("claim with Redis down and no Logger: %d %s, want 503 UNAVAILABLE", code, body)
	}
}

// An operation's leaseMs and ttlMs are bounded (24 h, 30 days): a larger
// value is refused, not wrapped around to a 100 ms lease or a decades-long
// lock.
func TestOperationBounds(t *testing.T) {
	t.Parallel()
	app := newApp()
	srv := httptest.NewServer(app)
	defer srv.Close()
	s := startSidecar(t, srv.URL, workertest.Options{})
	s.wait(t, s.submit(t, map[string]string{"mode": "ok"}, workertest.SubmitOptions{}))
	token, _ := app.token.Load().(string)
	for _, tc := range []struct{ path, body, code string }{
		{"/v1/operations/claim", `{"key":"k","leaseMs":10000000000000}`, "INVALID_LEASE"},
		{"/v1/operations/claim", `{"key":"k","leaseMs":86400001}`, "INVALID_LEASE"},
		{"/v1/operations/renew", `{"key":"k","token":"x","leaseMs":10000000000000}`, "INVALID_LEASE"},
		{"/v1/operations/finish", `{"key":"k","token":"x","ttlMs":10000000000000}`, "INVALID_TTL"},
	} {
		if code, body := apiCall(t, s.apiURL, token, tc.path, tc.body); code != http.StatusBadRequest || !strings.Contains(body, tc.code) {
			t.Errorf("%s %s: %d %s, want 400 %s", tc.path, tc.body, code, body, tc.code)
		}
	}
	if code, body := apiCall(t, s.apiURL, token, "/v1/operations/claim", `{"key":"k","leaseMs":86400000}`); code != http.StatusOK || !strings.Contains(body, "acquired") {
		t.Errorf("claim with a 24 h lease: %d %s, want acquired", code, body)
	}
}

// The API's port taken (the app listening on 8081, or another hostNetwork
// pod's sidecar on the node) stops the sidecar with an error that says whose
// port it is.
func TestAPIPortTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rdb := redistest.Start(t).Client()
	o := workertest.Options{Namespace: "default", Queue: workertest.NewQueueName()}
	err = Run(t.Context(), worker.Config{Redis: rdb, Namespace: o.Namespace, Queue: o.Queue, Logger: slog.New(slog.DiscardHandler)},
		Config{HandlerURL: "http://" + freeAddr(t) + "/", APIAddr: ln.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "hostNetwork") {
		t.Fatalf("Run with the API's port taken: %v, want address already in use, naming hostNetwork", err)
	}
}
