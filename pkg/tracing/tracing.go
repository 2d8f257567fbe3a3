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

// Package tracing carries W3C trace context through dtq and names its spans
// (docs/observability.md). A submission whose context carries a span (an HTTP
// request with a traceparent header, a Go client call, a Task CR with the
// dtq.dev/traceparent annotation) gets a dtq.submit span, and the task
// stores that span's traceparent in Redis; the worker that runs it starts
// dtq.start (the handler's context carries it) and dtq.complete from it. A
// submission without trace context stores none and starts no span.
//
// Spans go to the TracerProvider the caller passes (worker.Config,
// broker.WithTracerProvider, direct.WithTracerProvider), by default to the
// global one, which stays OpenTelemetry's no-op provider unless the program
// sets another: then a span costs a context value. The package depends on
// OpenTelemetry's API only; the operator's binaries install an OTLP exporter
// (internal/otelsetup). Trace context travels as a W3C traceparent whatever
// the global propagator: it is part of dtq's protocol (the API's request
// header, the task's field in Redis).
package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Span names.
const (
	SpanSubmit   = "dtq.submit"   // producer: the submission, in the submitter
	SpanStart    = "dtq.start"    // consumer: a worker runs the task, from its start to the handler's return
	SpanComplete = "dtq.complete" // the worker records the outcome
)

// propagator is W3C trace context, whatever global propagator a binary set.
var propagator propagation.TraceContext

// Tracer returns dtq's tracer from tp, or from the current global provider
// when tp is nil (a tracer taken once from the global would stay with the
// first provider ever set).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer("github.com/dtq-dev/dtq")
}

// TraceParent returns the W3C traceparent header value of ctx's span, or ""
// when ctx carries no valid span context.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c.Get("traceparent")
}

// WithTraceParent returns ctx carrying the remote span context of traceparent
// (a W3C traceparent value); ctx itself when it is empty or malformed.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// FromHeader returns ctx carrying the remote span context of h's W3C
// traceparent (and tracestate) header; ctx itself when there is none or it is
// malformed. The HTTP API reads submissions' trace context with it.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}
