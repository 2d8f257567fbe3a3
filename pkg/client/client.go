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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// Client talks to one dtq HTTP API. It is safe for concurrent use and keeps
// its connections alive between calls.
type Client struct {
	base string
	hc   *http.Client // its transport adds the credentials (Transport)
}

// Option configures New.
type Option func(*options) error

type options struct {
	hc    *http.Client
	token TokenSource
	wrap  func(http.RoundTripper) (http.RoundTripper, error)
}

// WithToken authenticates with a fixed bearer token.
func WithToken(token string) Option {
	return func(o *options) error { o.token = staticToken(token); return nil }
}

// APITokenFile is where the docs' projected volume mounts a pod's
// ServiceAccount token for DefaultAudience (docs/api.md, "Token audiences").
const APITokenFile = "/var/run/secrets/dtq.dev/serviceaccount/token"

// ServiceAccountTokenFile is where Kubernetes mounts a pod's default
// ServiceAccount token, whose audience is the Kubernetes API server: the dtq
// API accepts it only when started with --token-audiences= (empty).
const ServiceAccountTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// WithTokenFile authenticates with the token in path, read again whenever
// the file changes (a projected ServiceAccount token, such as APITokenFile,
// is rotated in place).
func WithTokenFile(path string) Option {
	return func(o *options) error { o.token = &fileToken{path: path}; return nil }
}

// WithTokenSource authenticates with the tokens of src, asked for each
// request (package kubeauth's TokenRequest requests them from Kubernetes).
func WithTokenSource(src TokenSource) Option {
	return func(o *options) error { o.token = src; return nil }
}

// WithTransport authenticates with wrap, which wraps the client's transport
// (base) to add the credentials; New calls it once. Package kubeauth's
// WithKubeconfig and WithRESTConfig wrap it with client-go's authentication.
// A token option (WithToken, WithTokenFile, WithTokenSource) wins over it.
func WithTransport(wrap func(base http.RoundTripper) (http.RoundTripper, error)) Option {
	return func(o *options) error { o.wrap = wrap; return nil }
}

// WithHTTPClient sends requests with hc (for its TLS settings or proxy, say).
// Leave its Timeout at zero: event streams and Wait last long; bound each
// call with its context instead.
func WithHTTPClient(hc *http.Client) Option {
	return func(o *options) error { o.hc = hc; return nil }
}

// New returns a client of the API at baseURL (scheme, host and an optional
// path prefix, e.g. "https://dtq-api.dtq-system.svc").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q must be absolute (https://host[:port])", baseURL)
	}
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	hc := http.Client{}
	if o.hc != nil {
		hc = *o.hc
	}
	if hc.Transport, err = o.transport(hc.Transport); err != nil {
		return nil, err
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: &hc}, nil
}

func apply(opts []Option) (*options, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &o, nil
}

// Queue returns a handle on queue name of namespace; it makes no call.
func (c *Client) Queue(namespace, name string) *Queue {
	return &Queue{c: c, path: "/api/v1/namespaces/" + url.PathEscape(namespace) + "/queues/" + url.PathEscape(name)}
}

// Queues lists the namespace's queues with their stats.
func (c *Client) Queues(ctx context.Context, namespace string) ([]QueueStats, error) {
	var out QueueList
	err := c.do(ctx, http.MethodGet, "/api/v1/namespaces/"+url.PathEscape(namespace)+"/queues", nil, nil, &out)
	return out.Queues, err
}

// ServerVersion returns the versions the cluster reports (GET
// /api/v1/version).
func (c *Client) ServerVersion(ctx context.Context) (*ServerVersion, error) {
	var out ServerVersion
	if err := c.do(ctx, http.MethodGet, "/api/v1/version", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// do sends a request with a JSON body (when body is not nil) and decodes a
// 2xx answer into out (when not nil); any other answer is an *Error.
func (c *Client) do(ctx context.Context, method, path string, header http.Header, body, out any) error {
	resp, err := c.send(ctx, method, path, header, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: decode %s %s: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns a 2xx response (its body still to read),
// or the answer as an *Error.
func (c *Client) send(ctx context.Context, method, path string, header http.Header, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// The caller's trace context, when ctx carries a span: the API continues
	// it on submissions (docs/observability.md).
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, errorOf(resp)
}

// errorOf reads an error answer: its {code, message, details, request_id}
// body, or for a body that is not one (a proxy's page) the status alone.
func errorOf(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{}
	if json.Unmarshal(b, e) != nil || e.Code == "" {
		e = &Error{Message: strings.TrimSpace(string(b[:min(len(b), 200)]))}
		if e.Message == "" {
			e.Message = resp.Status
		}
	}
	e.StatusCode = resp.StatusCode
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("X-Request-ID")
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	e.fillFromDetails()
	return e
}

// asError returns err as *Error when it is one.
func asError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
