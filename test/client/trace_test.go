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

package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/tracing"
)

// The trace context of a submission through the HTTP API reaches the
// handler: the Go client sends the caller's span context as a traceparent
// header (single and batch submissions), and so may any HTTP caller; the API
// continues it, so the in-memory exporter collects dtq.submit (the API's,
// child of the caller's span), dtq.start (the handler's span) and
// dtq.complete, one chain in the caller's trace. Without a traceparent the
// handler runs without trace context and no span is made.
//
// The test sets the global TracerProvider of the test binary; no other test
// of the package submits with trace context.
func TestTraceThroughAPI(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	q := newClient(t).Queue(emails.Namespace, emails.Name)

	const parentID = "00f067aa0ba902b7"
	traced := func(traceID string) context.Context {
		return tracing.WithTraceParent(t.Context(), "00-"+traceID+"-"+parentID+"-01")
	}
	const viaClient, viaBatch, viaHeader = "4bf92f3577b34da6a3ce929d0e0e4736", "5bf92f3577b34da6a3ce929d0e0e4736", "6bf92f3577b34da6a3ce929d0e0e4736"

	task, err := q.Submit(traced(viaClient), "trace", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkTrace(t, exp, q, task.TaskID, viaClient, parentID)

	res, err := q.SubmitBatch(traced(viaBatch), []client.SubmitRequest{{TaskType: "trace"}})
	if err != nil || res[0].Err() != nil {
		t.Fatalf("batch: %+v %v", res, err)
	}
	checkTrace(t, exp, q, res[0].Task.TaskID, viaBatch, parentID)

	// Any HTTP caller: the traceparent header alone.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
		apiServer.URL+"/api/v1/namespaces/shop/queues/emails/tasks", strings.NewReader(`{"task_type":"trace"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+viaHeader+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var viaHTTP client.Task
	err = json.NewDecoder(resp.Body).Decode(&viaHTTP)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST with a traceparent: %s %v", resp.Status, err)
	}
	checkTrace(t, exp, q, viaHTTP.TaskID, viaHeader, parentID)

	// No trace context: no span, and the handler's context carries none.
	task, err = q.Submit(t.Context(), "trace", nil)
	if err != nil {
		t.Fatal(err)
	}
	done, err := q.Wait(t.Context(), task.TaskID)
	if err != nil || string(done.Result) != "{}" {
		t.Fatalf("untraced task: result %s, %v; want {}", done.Result, err)
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("an untraced submission made spans %v", spans)
	}
}

// checkTrace waits for task id, checks that its handler ran in trace traceID,
// that exp holds the three spans in a chain (dtq.submit the child of
// parentID, dtq.start of dtq.submit, dtq.complete of dtq.start), and resets
// exp.
func checkTrace(t *testing.T, exp *tracetest.InMemoryExporter, q *client.Queue, id, traceID, parentID string) {
	t.Helper()
	done, err := q.Wait(t.Context(), id)
	if err != nil || done.Status != client.StatusSucceeded {
		t.Fatalf("task %s: %+v %v", id, done, err)
	}
	var inHandler struct {
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	if err := json.Unmarshal(done.Result, &inHandler); err != nil || inHandler.TraceID != traceID {
		t.Fatalf("the handler ran in trace %q (result %s), want %s", inHandler.TraceID, done.Result, traceID)
	}
	// dtq.complete ends just after the completion is recorded, which Wait may see first.
	deadline := time.Now().Add(10 * time.Second)
	for len(exp.GetSpans()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() != traceID {
			t.Errorf("span %s is in trace %s, want %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
		spans[s.Name] = s
	}
	submit, start, complete := spans[tracing.SpanSubmit], spans[tracing.SpanStart], spans[tracing.SpanComplete]
	if len(exp.GetSpans()) != 3 || submit.Name == "" || start.Name == "" || complete.Name == "" {
		t.Fatalf("spans %v, want %s, %s and %s", exp.GetSpans(), tracing.SpanSubmit, tracing.SpanStart, tracing.SpanComplete)
	}
	for _, c := range []struct {
		child  tracetest.SpanStub
		parent string
	}{{submit, parentID}, {start, submit.SpanContext.SpanID().String()}, {complete, start.SpanContext.SpanID().String()}} {
		if got := c.child.Parent.SpanID().String(); got != c.parent {
			t.Errorf("span %s has parent %s, want %s", c.child.Name, got, c.parent)
		}
	}
	if inHandler.SpanID != start.SpanContext.SpanID().String() || submit.SpanKind != trace.SpanKindProducer {
		t.Errorf("the handler runs in span %s, want %s's %s; submit kind %v", inHandler.SpanID, tracing.SpanStart,
			start.SpanContext.SpanID(), submit.SpanKind)
	}
	exp.Reset()
}
