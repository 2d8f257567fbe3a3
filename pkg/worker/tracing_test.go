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

package worker_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/tracing"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// A task submitted with a traceparent runs in a handler whose context carries
// the same trace: the submitter's span -> dtq.submit -> dtq.start (the
// handler's span) -> dtq.complete, all exported. Submitting the same ID
// again makes no span; a task submitted without trace context stores none and
// makes no span.
//
// The test sets the global TracerProvider for the test binary; no other test
// submits with trace context, so no other spans reach its exporter.
func TestTraceFromSubmitToHandler(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	rdb := redistest.Start(t).Client()
	mux := worker.NewMux()
	handled := make(chan trace.SpanContext, 2)
	mux.HandleFunc("traced", func(ctx context.Context, _ *worker.Task) (any, error) {
		handled <- trace.SpanContextFromContext(ctx)
		return nil, nil
	})
	h := workertest.StartServer(t, rdb, mux, workertest.Options{})
	b := broker.New(rdb)

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := tracing.WithTraceParent(t.Context(), "00-"+traceID+"-"+parentID+"-01")
	res, err := b.Submit(ctx, qref(h), broker.SubmitRequest{Type: "traced"})
	if err != nil {
		t.Fatal(err)
	}
	if st := h.Wait(res.Task.ID, waitFor); st.State != "Succeeded" {
		t.Fatalf("task %s", st.State)
	}
	inHandler := <-handled
	if inHandler.TraceID().String() != traceID {
		t.Fatalf("the handler's context carries trace %s, want %s", inHandler.TraceID(), traceID)
	}
	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
	}
	submit, start, complete := spans[tracing.SpanSubmit], spans[tracing.SpanStart], spans[tracing.SpanComplete]
	if len(spans) != 3 || submit.Name == "" || start.Name == "" || complete.Name == "" {
		t.Fatalf("spans %v, want %s, %s and %s", exp.GetSpans(), tracing.SpanSubmit, tracing.SpanStart, tracing.SpanComplete)
	}
	for _, s := range []tracetest.SpanStub{submit, start, complete} {
		if s.SpanContext.TraceID().String() != traceID {
			t.Errorf("span %s is in trace %s, want %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
	}
	for _, c := range []struct {
		child  tracetest.SpanStub
		parent string
	}{{submit, parentID}, {start, submit.SpanContext.SpanID().String()}, {complete, start.SpanContext.SpanID().String()}} {
		if got := c.child.Parent.SpanID().String(); got != c.parent {
			t.Errorf("span %s has parent %s, want %s", c.child.Name, got, c.parent)
		}
	}
	if inHandler.SpanID() != start.SpanContext.SpanID() {
		t.Errorf("the handler runs in span %s, want %s's %s", inHandler.SpanID(), tracing.SpanStart, start.SpanContext.SpanID())
	}
	if submit.SpanKind != trace.SpanKindProducer || start.SpanKind != trace.SpanKindConsumer {
		t.Errorf("span kinds: submit %v, start %v", submit.SpanKind, start.SpanKind)
	}

	// Submitting the same ID again submits nothing and starts no span.
	if again, err := b.Submit(ctx, qref(h), broker.SubmitRequest{ID: res.Task.ID, Type: "traced"}); err != nil || !again.Duplicate {
		t.Fatalf("the same ID again: %+v %v", again, err)
	}
	if n := len(exp.GetSpans()); n != 3 {
		t.Errorf("%d spans after submitting the same ID again, want still 3", n)
	}

	exp.Reset()
	res, err = b.Submit(t.Context(), qref(h), broker.SubmitRequest{Type: "traced"})
	if err != nil {
		t.Fatal(err)
	}
	h.Wait(res.Task.ID, waitFor)
	if sc := <-handled; sc.IsValid() {
		t.Errorf("a task without trace context runs in span %v", sc)
	}
	if ti, _ := b.GetTask(t.Context(), qref(h), res.Task.ID); ti.TraceParent != "" || len(exp.GetSpans()) != 0 {
		t.Errorf("without trace context: stored traceparent %q, spans %v", ti.TraceParent, exp.GetSpans())
	}
}

// The spans go to the TracerProvider the caller passes (worker.Config,
// broker.WithTracerProvider), not to the global one.
func TestTracerProviderFromConfig(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	rdb := redistest.Start(t).Client()
	mux := worker.NewMux()
	mux.HandleFunc("traced", func(context.Context, *worker.Task) (any, error) { return nil, nil })
	h := workertest.StartServer(t, rdb, mux, workertest.Options{TracerProvider: tp})
	b := broker.New(rdb, broker.WithTracerProvider(tp))

	ctx := tracing.WithTraceParent(t.Context(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	res, err := b.Submit(ctx, qref(h), broker.SubmitRequest{Type: "traced"})
	if err != nil {
		t.Fatal(err)
	}
	if st := h.Wait(res.Task.ID, waitFor); st.State != "Succeeded" {
		t.Fatalf("task %s", st.State)
	}
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if want := []string{tracing.SpanComplete, tracing.SpanStart, tracing.SpanSubmit}; !slices.Equal(names, want) {
		t.Fatalf("the given provider's spans %v, want %v", names, want)
	}
}
