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

package kubeauth_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/kubeauth"
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

// A kubeconfig's user and a rest.Config's user authenticate with their own
// token; a client certificate alone cannot.
func TestKubeconfigAndRESTConfig(t *testing.T) {
	srv := newTokenRecorder(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	write := func(user string) {
		t.Helper()
		cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://example.invalid'}}]\n" +
			"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: " + user + "}]\n"
		if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("{token: from-kubeconfig}")
	c, err := client.New(srv.URL, kubeauth.WithKubeconfig(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	list(t, c)
	if got := srv.last(); got != "from-kubeconfig" {
		t.Fatalf("kubeconfig token sent as %q", got)
	}
	write("{client-certificate-data: AAAA, client-key-data: AAAA}")
	if _, err := client.New(srv.URL, kubeauth.WithKubeconfig(kubeconfig)); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("a kubeconfig with a client certificate only: %v, want an error saying it has no token", err)
	}

	// A client-go configuration (a kubectl plugin's, with its flags
	// applied): its token, not its host.
	c, err = client.New(srv.URL, kubeauth.WithRESTConfig(&rest.Config{Host: "https://example.invalid", BearerToken: "from-rest-config"}))
	if err != nil {
		t.Fatal(err)
	}
	list(t, c)
	if got := srv.last(); got != "from-rest-config" {
		t.Fatalf("rest.Config token sent as %q", got)
	}
	certOnly := &rest.Config{Host: "https://example.invalid", TLSClientConfig: rest.TLSClientConfig{CertData: []byte("A"), KeyData: []byte("A")}}
	if _, err := client.New(srv.URL, kubeauth.WithRESTConfig(certOnly)); err == nil || !strings.Contains(err.Error(), "client certificate cannot authenticate") {
		t.Fatalf("a rest.Config with a client certificate only: %v, want an error saying it cannot authenticate", err)
	}
}
