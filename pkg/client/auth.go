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

package client

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// tokenSource yields the bearer token of a request.
type tokenSource interface{ token() (string, error) }

type staticToken string

func (t staticToken) token() (string, error) { return string(t), nil }

// fileToken reads a token file, again whenever its size or modification time
// changes, so a rotated projected ServiceAccount token is picked up on the
// next request.
type fileToken struct {
	path string

	mu    sync.Mutex
	mod   time.Time
	size  int64
	value string
}

func (f *fileToken) token() (string, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("client: token file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.value != "" && st.ModTime().Equal(f.mod) && st.Size() == f.size {
		return f.value, nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return "", fmt.Errorf("client: token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("client: token file %s is empty", f.path)
	}
	f.value, f.mod, f.size = tok, st.ModTime(), st.Size()
	return tok, nil
}

// kubeconfigConfig loads the kubeconfig's current context (path, or the
// default loading rules when path is empty).
func kubeconfigConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("client: kubeconfig: %w", err)
	}
	return cfg, nil
}

// KubeconfigTransport returns base (http.DefaultTransport when nil) wrapped
// by client-go's authentication for the current user of the kubeconfig at
// path, or of the default rules when path is empty (token, token file re-read
// by client-go, exec or auth-provider plugin): every request without an
// Authorization header gets the user's bearer token. It fails when the user
// has no way to a token (a client certificate cannot authenticate to the API).
func KubeconfigTransport(path string, base http.RoundTripper) (http.RoundTripper, error) {
	cfg, err := kubeconfigConfig(path)
	if err != nil {
		return nil, err
	}
	return RESTConfigTransport(cfg, base)
}

// restConfigClient returns hc with its transport wrapped by
// RESTConfigTransport.
func restConfigClient(cfg *rest.Config, hc *http.Client) (*http.Client, error) {
	rt, err := RESTConfigTransport(cfg, hc.Transport)
	if err != nil {
		return nil, err
	}
	out := *hc
	out.Transport = rt
	return &out, nil
}

// RESTConfigTransport wraps base (http.DefaultTransport when nil) with
// client-go's authentication for cfg's user, as KubeconfigTransport does for a
// kubeconfig file.
func RESTConfigTransport(cfg *rest.Config, base http.RoundTripper) (http.RoundTripper, error) {
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil {
		return nil, errors.New("client: the kubeconfig's user has no token (a client certificate cannot authenticate to the dtq API)")
	}
	if base == nil {
		base = http.DefaultTransport
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, base)
	if err != nil {
		return nil, fmt.Errorf("client: kubeconfig credentials: %w", err)
	}
	return rt, nil
}
