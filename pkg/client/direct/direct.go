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

// Package direct is a producer for trusted Go services in the cluster that
// want no HTTP hop: it submits to dtq's Redis with the engine's own scripts,
// which the HTTP API runs too, so a submission means exactly the same
// (validation, idempotency, depth gate, the same client types and *client.Error
// codes with their HTTP status). It bypasses Kubernetes authorisation:
// whoever holds the Redis credentials may submit to any queue they reach, so
// give it only to services you trust (and a Redis ACL user limited to their
// queues' keys where that matters).
//
//	rdb, _ := redisconn.FromEnv().Client()
//	q := direct.New(rdb).Queue("shop", "emails")
//	t, err := q.Submit(ctx, "send_receipt", payload, client.IdempotencyKey("receipt-42"))
package direct

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/apiconv"
)

// Producer submits to the queues of one Redis. Share one per process: it
// coalesces concurrent submissions to a queue into one script call.
type Producer struct{ b *broker.Broker }

// Option configures a Producer.
type Option func(*[]broker.Option)

// WithTracerProvider sets the provider of the submissions' dtq.submit spans
// (package tracing); by default the OpenTelemetry global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *[]broker.Option) { *o = append(*o, broker.WithTracerProvider(tp)) }
}

// New returns a Producer on rdb (pkg/redisconn builds it from the DTQ_REDIS_*
// variables).
func New(rdb redis.UniversalClient, opts ...Option) *Producer {
	var bopts []broker.Option
	for _, o := range opts {
		o(&bopts)
	}
	return &Producer{b: broker.New(rdb, bopts...)}
}

// Queue returns a handle on queue name of namespace; it makes no call.
func (p *Producer) Queue(namespace, name string) *Queue {
	return &Queue{b: p.b, q: broker.QueueRef{Namespace: namespace, Name: name}}
}

// Queue submits to and reads one queue.
type Queue struct {
	b *broker.Broker
	q broker.QueueRef
}

var _ client.Producer = (*Queue)(nil)

// Submit is client.Queue.Submit without the HTTP hop.
func (q *Queue) Submit(ctx context.Context, taskType string, payload any, opts ...client.SubmitOption) (*client.Task, error) {
	r, err := client.NewSubmitRequest(taskType, payload, opts...)
	if err != nil {
		return nil, err
	}
	req, err := apiconv.Submission(r, "", time.Now())
	if err != nil {
		return nil, err
	}
	res, err := q.b.Submit(ctx, q.q, req)
	if err != nil {
		return nil, apiconv.Error(apiconv.WithContext(ctx, err))
	}
	t := apiconv.Submitted(res)
	return &t, nil
}

// SubmitBatch is client.Queue.SubmitBatch without the HTTP hop: each request
// gets exactly the answer a single submission would get at its place, with
// no limit on the number of requests.
func (q *Queue) SubmitBatch(ctx context.Context, reqs []client.SubmitRequest) ([]client.BatchResult, error) {
	out, err := apiconv.Batch(reqs, time.Now(), func(sub []broker.SubmitRequest) ([]broker.SubmitResult, []error, error) {
		return q.b.SubmitMany(ctx, q.q, sub)
	})
	if err != nil {
		return nil, apiconv.Error(apiconv.WithContext(ctx, err))
	}
	return out, nil
}

// Get is client.Queue.Get without the HTTP hop.
func (q *Queue) Get(ctx context.Context, id string) (*client.Task, error) {
	ti, err := q.b.GetTask(ctx, q.q, id)
	if err != nil {
		return nil, apiconv.Error(apiconv.WithContext(ctx, err))
	}
	t := apiconv.Task(ti, false)
	return &t, nil
}
