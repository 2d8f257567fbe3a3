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
	"testing"

	"github.com/dtq-dev/dtq/pkg/tracing"
)

// What tracing adds to a Submit whose caller carries no trace context (the
// default: no OTLP endpoint, no traceparent): no span is started and no
// traceparent stored. Run with -benchmem; the figure is in docs/observability.md.
func BenchmarkSubmitTracingOff(b *testing.B) {
	q, req := QueueRef{Namespace: "ns", Name: "q"}, SubmitRequest{Type: "demo"}
	ctx, br := context.Background(), New(nil)
	for b.Loop() {
		c, span := br.startSubmitSpan(ctx, q, req, true)
		if tracing.TraceParent(c) != "" {
			b.Fatal("a traceparent without trace context")
		}
		endSubmitSpan(span, SubmitResult{}, nil)
	}
}
