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

package e2e

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf on /v1/traces) that
// keeps the spans it gets, for the tests to read.
type otlpReceiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []receivedSpan
}

// receivedSpan is one span as exported, IDs in hex.
type receivedSpan struct {
	Service, Name             string
	TraceID, SpanID, ParentID string
}

func startOTLPReceiver() *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	return r
}

// URL is the endpoint to set as OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *otlpReceiver) URL() string { return r.srv.URL }

func (r *otlpReceiver) Close() { r.srv.Close() }

func (r *otlpReceiver) export(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var in coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &in)
	}
	if req.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "want an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range in.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{Service: service, Name: s.GetName(),
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId())})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// trace returns the spans of one trace by name.
func (r *otlpReceiver) trace(traceID string) map[string]receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]receivedSpan{}
	for _, s := range r.spans {
		if s.TraceID == traceID {
			out[s.Name] = s
		}
	}
	return out
}

// traceSpans returns every span of one trace.
func (r *otlpReceiver) traceSpans(traceID string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}
