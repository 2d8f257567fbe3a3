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

package broker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/pkg/tracing"
)

// startSubmitSpan starts the dtq.submit span of a submission whose context
// carries a span (see package tracing); otherwise, and for a submission that
// names the ID of a task that exists (a retry with the same ID, or the
// operator submitting a Task again whose status it had not written yet: it
// submits nothing), it returns ctx and a span that records nothing. That
// check costs a round trip, paid only by traced submissions with a chosen ID.
func (b *Broker) startSubmitSpan(ctx context.Context, q QueueRef, req SubmitRequest, chosenID bool) (context.Context, trace.Span) {
	noSpan := trace.SpanFromContext(context.Background()) // records nothing
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, noSpan
	}
	if chosenID {
		if n, err := b.rdb.Exists(ctx, keysFor(q).task(req.ID)).Result(); err == nil && n == 1 {
			return ctx, noSpan
		}
	}
	return tracing.Tracer(b.tracerProvider).Start(ctx, tracing.SpanSubmit, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "dtq"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", q.String()),
			attribute.String("dtq.task.type", req.Type),
		))
}

// startBatchSpan starts the dtq.submit span of a SubmitMany call of n
// requests whose context carries a span (one span for the batch: each new
// task of it is its child); otherwise it returns ctx and a span that records
// nothing.
func (b *Broker) startBatchSpan(ctx context.Context, q QueueRef, n int) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return tracing.Tracer(b.tracerProvider).Start(ctx, tracing.SpanSubmit, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "dtq"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", q.String()),
			attribute.Int("messaging.batch.message_count", n),
		))
}

// endBatchSpan records a SubmitMany call's failure (a Redis error) on span and
// ends it.
func endBatchSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// endSubmitSpan records the submission's answer on span and ends it.
func endSubmitSpan(span trace.Span, res SubmitResult, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		span.SetAttributes(attribute.String("dtq.error.code", string(CodeOf(err))))
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("messaging.message.id", res.Task.ID), attribute.Bool("dtq.duplicate", res.Duplicate))
	}
	span.End()
}
