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

package worker

// Spans of a task that carries trace context (package tracing): dtq.start
// from the task's start to its handler's return, which the handler's context
// carries, then dtq.complete around recording the outcome. A task without
// trace context gets no-op spans.

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/tracing"
)

// startSpan returns a context carrying the dtq.start span of ti, a child of
// its submission's span.
func (s *Server) startSpan(ti broker.TaskInfo) (context.Context, trace.Span) {
	ctx := context.Background()
	if ti.TraceParent == "" {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracing.Tracer(s.cfg.TracerProvider).Start(tracing.WithTraceParent(ctx, ti.TraceParent), tracing.SpanStart,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "dtq"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", s.qname),
			attribute.String("messaging.message.id", ti.ID),
			attribute.String("dtq.task.type", ti.Type),
			attribute.Int("dtq.task.attempt", ti.Attempt),
			attribute.String("dtq.worker.id", s.cfg.WorkerID),
		))
}

// endStartSpan ends dtq.start with the handler's outcome.
func endStartSpan(span trace.Span, out broker.Outcome) {
	if out.Err != "" && span.IsRecording() {
		span.SetAttributes(attribute.String("dtq.error.class", out.ErrorClass))
		span.SetStatus(codes.Error, out.Err)
	}
	span.End()
}

// endCompleteSpan ends dtq.complete with the state the task moved to, or err.
func endCompleteSpan(span trace.Span, state broker.State, err error) {
	if span.IsRecording() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(attribute.String("dtq.task.state", string(state)))
		}
	}
	span.End()
}

// completeSpan starts dtq.complete under ctx's dtq.start; no-op without one.
func (s *Server) completeSpan(ctx context.Context) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracing.Tracer(s.cfg.TracerProvider).Start(ctx, tracing.SpanComplete)
}
