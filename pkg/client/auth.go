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
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultAudience is the token audience the dtq API requires unless it is
// started with other --token-audiences.
const DefaultAudience = "dtq-api"

// TokenSource yields the bearer token of each request (WithTokenSource). A
// source that also has a method Forget(token string) is told of a token the
// API answered 401 to, so that it can get another for the next request
// (package kubeauth's TokenRequest does).
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

type staticToken string

func (t staticToken) Token(context.Context) (string, error) { return string(t), nil }

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

func (f *fileToken) Token(context.Context) (string, error) {
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

// Transport returns base (http.DefaultTransport when nil) wrapped with the
// credentials of opts (WithToken, WithTokenFile, WithTokenSource or
// WithTransport, such as package kubeauth's options), which New's clients
// send too: every
// request without an Authorization header gets the bearer token. For a proxy
// in front of the API (kubectl dtq ui) or an HTTP client of your own.
func Transport(base http.RoundTripper, opts ...Option) (http.RoundTripper, error) {
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	return o.transport(base)
}

// transport wraps base with the options' credentials: a token source, else
// WithTransport's wrapper; none leaves base as it is.
func (o *options) transport(base http.RoundTripper) (http.RoundTripper, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	if o.token != nil {
		return &bearerTransport{src: o.token, base: base}, nil
	}
	if o.wrap == nil {
		return base, nil
	}
	return o.wrap(base)
}

// bearerTransport sets the token of src on each request that has no
// Authorization header. A source that can forget a token (kubeauth's
// TokenRequest) forgets one the API answered 401, as client-go's exec
// credentials do.
type bearerTransport struct {
	src  TokenSource
	base http.RoundTripper
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") != "" {
		return b.base.RoundTrip(r)
	}
	tok, err := b.src.Token(r.Context())
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.base.RoundTrip(r)
	if f, ok := b.src.(interface{ Forget(string) }); ok && err == nil && resp.StatusCode == http.StatusUnauthorized {
		f.Forget(tok) // refused before its time (revoked, say): the next request gets a new one
	}
	return resp, err
}
