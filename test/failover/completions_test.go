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

package failover

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/tracing"
)

// completions is a span processor that learns, from the worker SDK's own
// spans, which tasks' completions a worker saw acknowledged: a dtq.complete
// span (the child of the run's dtq.start, which names the task) that ended
// without an error status. The worker ends it with an error when Complete
// failed, NOT_REPLICATED included.
type completions struct {
	mu    sync.Mutex
	runs  map[trace.SpanID]string // dtq.start span -> its task ID
	acked map[string]bool         // task IDs
}

// completed serves every run of the process: task IDs are unique.
var completed = &completions{runs: map[trace.SpanID]string{}, acked: map[string]bool{}}

var recordOnce sync.Once

// recordCompletions installs completed as the global tracer provider's
// processor, once.
func recordCompletions() {
	recordOnce.Do(func() { otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(completed))) })
}

// traced returns ctx carrying a sampled span context: tasks submitted under
// it carry a traceparent, without which the worker makes no spans.
func traced(ctx context.Context) context.Context {
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xd7, 1}, SpanID: trace.SpanID{0xd7, 1}, TraceFlags: trace.FlagsSampled, Remote: true}))
}

func (c *completions) acknowledged(taskID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked[taskID]
}

func (c *completions) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *completions) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s.Name() {
	case tracing.SpanStart: // it ends before its dtq.complete starts
		for _, a := range s.Attributes() {
			if a.Key == "messaging.message.id" {
				c.runs[s.SpanContext().SpanID()] = a.Value.AsString()
			}
		}
	case tracing.SpanComplete:
		parent := s.Parent().SpanID()
		if id, ok := c.runs[parent]; ok && s.Status().Code != codes.Error {
			c.acked[id] = true
		}
		delete(c.runs, parent)
	}
}

func (c *completions) Shutdown(context.Context) error   { return nil }
func (c *completions) ForceFlush(context.Context) error { return nil }

// lostFinished counts only completions seen acknowledged, and reports a
// planted loss of a task hash, of an idempotency record, and a record set
// back to processing (what a failover to a stale replica does), and nothing
// on an intact queue.
func TestLostFinishedReportsPlantedLoss(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t)
	rdb := srv.Client()
	eng := broker.New(rdb)
	ref := broker.QueueRef{Namespace: ns, Name: q}
	if err := eng.EnsureQueue(ctx, ref, broker.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	acked := map[string]string{}
	for _, key := range []string{"k0", "k1", "k2", "k3", "never-completed"} {
		r, err := eng.Submit(ctx, ref, broker.SubmitRequest{Type: "job", IdempotencyKey: key})
		if err != nil {
			t.Fatal(err)
		}
		acked[key] = r.Task.ID
	}
	ds, err := eng.Read(ctx, ref, "w", 4, 0)
	if err != nil || len(ds) != 4 {
		t.Fatalf("read: %v %v", ds, err)
	}
	done := map[string]bool{}
	for _, d := range ds {
		sr, err := eng.Start(ctx, ref, "w", d)
		if err != nil || !sr.Run {
			t.Fatalf("start: %+v %v", sr, err)
		}
		if _, err := eng.Complete(ctx, ref, broker.Execution{Delivery: d, WorkerID: "w", Attempt: sr.Task.Attempt}, broker.Outcome{}); err != nil {
			t.Fatal(err)
		}
		done[d.TaskID] = true
	}
	isDone := func(id string) bool { return done[id] }
	check := func(want []string) {
		t.Helper()
		finished, lost, err := lostFinished(ctx, eng, ref, acked, isDone)
		if err != nil || finished != 4 || !slices.Equal(lost, want) {
			t.Fatalf("lostFinished: %d finished, lost %v (%v); want 4 finished, lost %v", finished, lost, err, want)
		}
	}
	check(nil)

	del := func(pattern string) {
		t.Helper()
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys %s: %v %v", pattern, keys, err)
		}
		if err := rdb.Del(ctx, keys[0]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	del("*:task:" + acked["k1"])
	del("*idempotency:k2")
	rec, err := eng.Idempotency(ctx, ref, "k3")
	if err != nil {
		t.Fatal(err)
	}
	rec.State = broker.IdempotencyProcessing
	keys, err := rdb.Keys(ctx, "*idempotency:k3").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	b, _ := json.Marshal(rec)
	if err := rdb.Set(ctx, keys[0], b, 0).Err(); err != nil {
		t.Fatal(err)
	}
	check([]string{"k1", "k2", "k3"})
}
