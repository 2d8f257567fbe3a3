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
// Spans go to the global OpenTelemetry TracerProvider. Setup installs an OTLP
// exporter when the standard OTEL_EXPORTER_OTLP_* variables name an endpoint;
// otherwise the global provider stays OpenTelemetry's no-op one: no exporter,
// no goroutine, and a span costs a context value.
package tracing

import (
	"context"
	"net/http"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
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

// Tracer returns dtq's tracer from the current global provider (a tracer
// taken once would stay with the first provider ever set).
func Tracer() trace.Tracer { return otel.Tracer("github.com/dtq-dev/dtq") }

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

// ToHeader sets h's traceparent (and tracestate) header to ctx's span
// context; it sets nothing when ctx carries no valid span context.
func ToHeader(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Setup installs, when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, a global TracerProvider that
// batches spans to that endpoint over OTLP/HTTP (the exporter reads the other
// OTEL_EXPORTER_OTLP_* variables; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// override service as usual) and the W3C propagator. Otherwise it does nothing.
// shutdown flushes the spans not yet exported.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, err
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		res, _ = resource.Merge(res, env)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp.Shutdown, nil
}
