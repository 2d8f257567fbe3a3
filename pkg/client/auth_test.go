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

package client_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dtq-dev/dtq/pkg/client"
)

// tokenRecorder is an API stand-in that records the bearer token of each
// request and answers an empty queue list.
type tokenRecorder struct {
	*httptest.Server
	mu     sync.Mutex
	tokens []string
}

func newTokenRecorder(t *testing.T) *tokenRecorder {
	r := &tokenRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.tokens = append(r.tokens, strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"queues":[]}`))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *tokenRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tokens[len(r.tokens)-1]
}

func list(t *testing.T, c *client.Client) {
	t.Helper()
	if _, err := c.Queues(t.Context(), "ns"); err != nil {
		t.Fatal(err)
	}
}

func TestTokenSources(t *testing.T) {
	srv := newTokenRecorder(t)
	c, err := client.New(srv.URL, client.WithToken("static"))
	if err != nil {
		t.Fatal(err)
	}
	list(t, c)
	if got := srv.last(); got != "static" {
		t.Fatalf("static token sent as %q", got)
	}

	// A projected token is replaced in place by the kubelet: the next request
	// carries the new one.
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = client.New(srv.URL, client.WithTokenFile(file))
	if err != nil {
		t.Fatal(err)
	}
	list(t, c)
	if got := srv.last(); got != "first" {
		t.Fatalf("token file sent as %q", got)
	}
	if err := os.WriteFile(file, []byte("rotated-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	list(t, c)
	if got := srv.last(); got != "rotated-token" {
		t.Fatalf("rotated token sent as %q", got)
	}
}
