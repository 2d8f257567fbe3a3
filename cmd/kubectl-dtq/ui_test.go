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

package main

import (
	"bufio"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/dtq-dev/dtq/pkg/client"
)

// The proxy swaps its session secret for the API verbs' token, forwards
// any other request unchanged, and passes an events stream through as it
// comes.
func TestUIProxy(t *testing.T) {
	seen := make(chan string, 10)
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Path + " " + r.Header.Get("Authorization")
		if strings.HasSuffix(r.URL.Path, "/events") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("id: 1-0:0\ndata: {}\n\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done() // a stream stays open
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	defer api.Close()

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://kubernetes.invalid"}}]
users: [{name: u, user: {token: kube-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The API serves TLS with a certificate of its own CA: the proxy trusts
	// it as --api-ca-file says, for requests with the session secret and
	// without.
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	// The credentials of the API verbs, as runUI builds them; here
	// --api-audience= (the kubeconfig's own token).
	c := &cli{kube: genericclioptions.NewConfigFlags(false), api: apiFlags{caFile: caFile}}
	*c.kube.KubeConfig = kubeconfig
	plain, err := c.apiTransport()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.apiCredentials()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := client.Transport(plain, opts...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newUIProxy(api.URL, creds, plain)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()

	get := func(path, auth string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, front.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct{ auth, want string }{
		{"Bearer " + p.secret, "/q Bearer kube-token"},
		{"", "/q "},
		{"Bearer someone-elses", "/q Bearer someone-elses"},
	} {
		resp := get("/q", c.auth)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("sent with %q: %s through the proxy", c.auth, resp.Status)
		}
		if got := <-seen; got != c.want {
			t.Errorf("sent with %q: the API saw %q, want %q", c.auth, got, c.want)
		}
	}

	resp := get("/events", "Bearer "+p.secret)
	defer func() { _ = resp.Body.Close() }()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "id: 1-0:0\n" {
		t.Fatalf("events through the proxy: %q %v, want the first event while the stream is open", line, err)
	}
	if got := <-seen; got != "/events Bearer kube-token" {
		t.Errorf("events stream: the API saw %q", got)
	}
}

func TestUIProxyNeedsAnAbsoluteURL(t *testing.T) {
	if _, err := newUIProxy("127.0.0.1:8080", http.DefaultTransport, http.DefaultTransport); err == nil {
		t.Error("a URL without a scheme was accepted")
	}
}
