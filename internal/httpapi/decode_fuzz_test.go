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

package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/apiconv"
)

// The request decoders answer any body with a task or a documented 4xx:
// never a panic, a 5xx or an undocumented code. `make test` runs each for a
// bounded time (make fuzz).

var submitSeeds = []string{
	`{"task_type":"echo","payload":{"a":1},"idempotency_key":"k","priority":9,"max_attempts":3,"timeout_ms":1000}`,
	`{"task_type":"echo","delay_seconds":1.5,"ttl_seconds":60,"metadata":{"m":"v"}}`,
	`{"task_type":"echo","not_before":"2026-12-01T00:00:00Z"}`,
	`{"task_type":"echo","not_before":"yesterday"}`, `{"task_type":1}`, `{"nope":1}`, `{}`, ``, `{"task_type":"a"} {}`,
	`{"task_type":"echo","priority":42}`, `{"task_type":"echo","delay_seconds":-1}`, `[`, `{"payload":[1,2]}`,
	`{"task_type":"echo","flow_key":"tenant-a"}`, `{"task_type":"echo","flow_key":"a b"}`, `{"task_type":"echo","flow_key":7}`,
}

// fuzzServer is a Server whose broker is never reached (decoding fails or
// stops before Redis).
func fuzzServer(f *testing.F) *Server {
	s, err := New(Options{Broker: broker.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})), Auth: NoAuth{},
		MaxBodyBytes: 4 << 10, MaxBatchBodyBytes: 16 << 10})
	if err != nil {
		f.Fatal(err)
	}
	return s
}

// decodeAnswer decodes body as the endpoint does and checks the error.
func decodeAnswer(t *testing.T, s *Server, body []byte, limit int64, v any) bool {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	err := s.decodeBody(httptest.NewRecorder(), r, limit, client.CodeInvalidTask, v)
	if err == nil {
		return true
	}
	documented(t, err, len(body))
	return false
}

func documented(t *testing.T, err error, n int) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%d-byte body: %v is not a *client.Error", n, err)
	}
	switch {
	case ce.StatusCode == http.StatusBadRequest && ce.Code == client.CodeInvalidTask:
	case ce.StatusCode == http.StatusBadRequest && ce.Code == client.CodeInvalidRequest:
	case ce.StatusCode == http.StatusRequestEntityTooLarge && ce.Code == client.CodePayloadTooLarge:
	default:
		t.Fatalf("%d-byte body: %d %s %q, want a documented 400 or 413", n, ce.StatusCode, ce.Code, ce.Message)
	}
}

func FuzzDecodeSubmit(f *testing.F) {
	for _, s := range submitSeeds {
		f.Add([]byte(s))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var b submitBody
		if !decodeAnswer(t, s, body, s.opts.MaxBodyBytes, &b) {
			return
		}
		if _, err := apiconv.Submission(b.request(), "", time.Now()); err != nil {
			documented(t, err, len(body))
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	for _, s := range submitSeeds {
		f.Add([]byte(`{"tasks":[` + s + `,` + s + `]}`))
	}
	f.Add([]byte(`{"tasks":[]}`))
	f.Add([]byte(`{"tasks":{}}`))
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var b batchBody
		if !decodeAnswer(t, s, body, s.opts.MaxBatchBodyBytes, &b) {
			return
		}
		reqs := make([]client.SubmitRequest, len(b.Tasks))
		for i, item := range b.Tasks {
			reqs[i] = item.request()
		}
		results, err := apiconv.Batch(reqs, time.Now(), func(sub []broker.SubmitRequest) ([]broker.SubmitResult, []error, error) {
			return make([]broker.SubmitResult, len(sub)), make([]error, len(sub)), nil
		})
		if err != nil || len(results) != len(reqs) {
			t.Fatalf("batch of %d: %d results, %v", len(reqs), len(results), err)
		}
		for _, r := range results {
			if r.Error != nil {
				documented(t, r.Error, len(body))
			}
		}
	})
}
