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
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// These tests of pkg/client run against the real API server (the
// operator's internal/httpapi, hence in the operator's module); they
// and the examples share one redis-server and one in-process API server (auth
// off: the end-to-end tests in test/e2e cover Kubernetes auth on the real
// API process). Queue shop/emails has a worker whose handlers
// are echo (returns its payload), fail (fails for good), sleep (sleeps
// the payload's seconds) and trace (returns its context's span context);
// queue shop/idle has none.
var (
	apiServer *httptest.Server
	engine    *broker.Broker
	rdb       *redis.Client
	// serverURL is the API's base URL in the examples.
	serverURL string
)

var (
	emails = broker.QueueRef{Namespace: "shop", Name: "emails"}
	idle   = broker.QueueRef{Namespace: "shop", Name: "idle"}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	addr, stop, err := redistest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	rdb = redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	engine = broker.New(rdb)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, q := range []broker.QueueRef{emails, idle} {
		cfg := broker.DefaultQueueConfig()
		cfg.DefaultMaxAttempts = 1
		if err := engine.EnsureQueue(ctx, q, cfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	api, err := httpapi.New(httpapi.Options{Broker: engine, Auth: httpapi.NoAuth{}, KeepAlive: 200 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	apiServer = httptest.NewServer(api)
	defer apiServer.Close()
	defer api.Stop()
	serverURL = apiServer.URL

	mux := worker.NewMux()
	mux.HandleFunc("echo", func(_ context.Context, t *worker.Task) (any, error) { return t.Payload, nil })
	mux.HandleFunc("fail", func(context.Context, *worker.Task) (any, error) {
		return nil, fmt.Errorf("%w: out of stock", worker.SkipRetry)
	})
	// trace returns the span context its context carries (TestTrace*).
	mux.HandleFunc("trace", func(ctx context.Context, _ *worker.Task) (any, error) {
		sc := trace.SpanContextFromContext(ctx)
		if !sc.IsValid() {
			return map[string]string{}, nil
		}
		return map[string]string{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}, nil
	})
	mux.HandleFunc("sleep", func(ctx context.Context, t *worker.Task) (any, error) {
		var p struct{ Seconds float64 }
		_ = json.Unmarshal(t.Payload, &p)
		select {
		case <-time.After(time.Duration(p.Seconds * float64(time.Second))):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	w, err := worker.NewServer(worker.Config{Redis: rdb, Namespace: emails.Namespace, Queue: emails.Name, Concurrency: 4,
		VisibilityTimeout: 5 * time.Second, HeartbeatInterval: time.Second, Logger: slog.New(slog.DiscardHandler)}, mux)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return code
}
