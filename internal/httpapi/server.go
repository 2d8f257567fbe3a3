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

// Package httpapi is dtq's HTTP API (DESIGN section 6): submission, reads and
// administration of tasks, queues and dead letters, and a Server-Sent Events
// stream of a queue's lifecycle events, on the engine (pkg/broker). It
// holds no state of its own, so every replica serves every request. Requests
// are authorised by Kubernetes (TokenReview and SubjectAccessReview on the
// RBAC of the dtq.dev resources, see routes.go) unless auth is turned off.
// cmd/api serves it.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// Options configures a Server.
type Options struct {
	// Broker runs every engine call except the events streams' blocking reads.
	Broker *broker.Broker
	// Events runs the blocking reads that wake the events streams, one Redis
	// connection per watched queue; give it a client of its own so watchers
	// never take the request path's connections. Nil: Broker.
	Events *broker.Broker
	// Auth decides every request but /healthz, /readyz and /openapi.json.
	Auth Authorizer
	// PauseQueue sets spec.paused of the Queue resource q (KubernetesPauser).
	// Without it pause and resume set only the engine's flag, which the Queue
	// controller resets to spec.paused at its next reconcile.
	PauseQueue func(ctx context.Context, q broker.QueueRef, paused bool) error
	// Schedules reads the TaskSchedules listed by GET
	// /api/v1/namespaces/{ns}/schedules, with the API's own identity (which
	// needs list on taskschedules.dtq.dev). Nil: that route is not served.
	Schedules ctrlclient.Reader
	// Queues lists every Queue of the cluster, for GET /api/v1/version's count
	// of workers per version (KubernetesQueues). Nil: no workers are counted.
	Queues func(ctx context.Context) ([]broker.QueueRef, error)
	// Ready is /readyz's check (a Redis ping); nil: always ready.
	Ready func(context.Context) error
	// Log receives failures (5xx) and denied requests; nil discards.
	Log *slog.Logger
	// Registry holds the API's metrics, served at /metrics; nil: a new one.
	Registry *prometheus.Registry
	// KeepAlive is the interval of the events streams' keep-alive comments
	// (15s); a stream whose client takes more than twice that to accept a
	// write ends.
	KeepAlive time.Duration
	// MaxStreamLife is how long an events stream lasts, ±10% (30m); then it
	// ends cleanly and its client resumes with Last-Event-ID.
	MaxStreamLife time.Duration
	// MaxStreamsPerClient is how many events streams one client identity
	// has open at once (1000); more are 429 TOO_MANY_REQUESTS.
	MaxStreamsPerClient int
	// MaxBodyBytes limits a submission's body (2 MiB: a Queue's payload limit
	// is at most 1 MiB); MaxBatchBodyBytes a batch's (16 MiB).
	MaxBodyBytes, MaxBatchBodyBytes int64
	// RequestTimeout bounds every request but the events stream (30s).
	RequestTimeout time.Duration
	// BodyTimeout is how long a request's body may take to arrive once the
	// request is authorized (10s); MaxBodyReadsPerClient how many bodies of one client
	// identity are read at once (8). See bodyread.go.
	BodyTimeout           time.Duration
	MaxBodyReadsPerClient int
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	opts    Options
	b       *broker.Broker
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler // the mux behind the request ID and the error bodies of unmatched paths
	hubs    *hubs
	metrics *metrics
	// bodySlots bounds each client's concurrent body reads (bodyread.go),
	// streamSlots its events streams (events.go).
	bodySlots, streamSlots *clientSlots
}

// New returns a Server with every route of routes.go registered.
func New(o Options) (*Server, error) {
	if o.Broker == nil || o.Auth == nil {
		return nil, errors.New("httpapi: Broker and Auth are required")
	}
	if o.Events == nil {
		o.Events = o.Broker
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.MaxStreamLife <= 0 {
		o.MaxStreamLife = 30 * time.Minute
	}
	if o.MaxStreamsPerClient <= 0 {
		o.MaxStreamsPerClient = 1000
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 2 << 20
	}
	if o.MaxBatchBodyBytes <= 0 {
		o.MaxBatchBodyBytes = 16 << 20
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 10 * time.Second
	}
	if o.MaxBodyReadsPerClient <= 0 {
		o.MaxBodyReadsPerClient = 8
	}
	m, err := newMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, b: o.Broker, log: o.Log, mux: http.NewServeMux(), hubs: newHubs(o.Events, o.Log), metrics: m,
		bodySlots: newClientSlots(o.MaxBodyReadsPerClient), streamSlots: newClientSlots(o.MaxStreamsPerClient)}
	s.register()
	s.handler = withRequestID(s.withBodyDeadline(http.HandlerFunc(s.route)))
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// route runs the mux. A path no route matches gets an error body, 404
// NOT_FOUND or 405 METHOD_NOT_ALLOWED, like every other error.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if h, pattern := s.mux.Handler(r); pattern == "" {
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			s.writeError(w, r, &client.Error{StatusCode: rec.status, Code: client.CodeMethodNotAllowed,
				Message: r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		s.writeError(w, r, &client.Error{StatusCode: http.StatusNotFound, Code: client.CodeNotFound,
			Message: "no such path: " + r.URL.Path})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// statusRecorder keeps the status and headers of the mux's own not-found and
// method-not-allowed answers, and drops their plain-text bodies.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.status = code }

// Stop ends the events streams (each client reconnects, to another replica
// or to this one once restarted, and resumes after its last event).
func (s *Server) Stop() { s.hubs.stop() }
