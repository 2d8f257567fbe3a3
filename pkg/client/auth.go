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
	"context"
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

// DefaultAudience is the token audience the dtq API requires unless it is
// started with other --token-audiences.
const DefaultAudience = "dtq-api"

// ErrNotServiceAccount is WithTokenRequest's error for a user who is not a
// ServiceAccount (a person with a client certificate or an OIDC token) and
// so cannot request tokens for itself: give a token of a ServiceAccount
// (`kubectl create token SA --audience dtq-api`), or name one.
var ErrNotServiceAccount = errors.New("client: not a ServiceAccount")

// tokenSource yields the bearer token of a request.
type tokenSource interface {
	token(ctx context.Context) (string, error)
}

type staticToken string

func (t staticToken) token(context.Context) (string, error) { return string(t), nil }

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

func (f *fileToken) token(context.Context) (string, error) {
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

// Transport returns base (http.DefaultTransport when nil) wrapped with the
// credentials of opts (WithToken, WithTokenFile, WithTokenRequest,
// WithKubeconfig or WithRESTConfig), which New's clients send too: every
// request without an Authorization header gets the bearer token. For a proxy
// in front of the API (kubectl dtq ui) or an HTTP client of your own.
func Transport(base http.RoundTripper, opts ...Option) (http.RoundTripper, error) {
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	return o.transport(base)
}

// transport wraps base with the options' credentials: a token source, else a
// kubeconfig's or rest.Config's user; none leaves base as it is.
func (o *options) transport(base http.RoundTripper) (http.RoundTripper, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	if o.token != nil {
		return &bearerTransport{src: o.token, base: base}, nil
	}
	cfg := o.restConfig
	if o.kubeconfig != nil {
		var err error
		if cfg, err = kubeconfigConfig(*o.kubeconfig); err != nil {
			return nil, err
		}
	}
	if cfg == nil {
		return base, nil
	}
	return RESTConfigTransport(cfg, base)
}

// bearerTransport sets the token of src on each request that has no
// Authorization header. A source that can forget a token (WithTokenRequest's)
// forgets one the API answered 401, as client-go's exec credentials do.
type bearerTransport struct {
	src  tokenSource
	base http.RoundTripper
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") != "" {
		return b.base.RoundTrip(r)
	}
	tok, err := b.src.token(r.Context())
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.base.RoundTrip(r)
	if f, ok := b.src.(interface{ forget(string) }); ok && err == nil && resp.StatusCode == http.StatusUnauthorized {
		f.forget(tok) // refused before its time (revoked, say): the next request gets a new one
	}
	return resp, err
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
