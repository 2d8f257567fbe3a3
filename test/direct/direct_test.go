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

package direct_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/direct"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// rdb is the Redis of the tests and examples; queue shop/emails exists (with
// no worker), and api serves the same Redis over HTTP (auth off).
var (
	rdb *redis.Client
	api *httptest.Server
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
	b := broker.New(rdb)
	cfg := broker.DefaultQueueConfig()
	cfg.MaxPayloadBytes = 64
	if err := b.EnsureQueue(context.Background(), broker.QueueRef{Namespace: "shop", Name: "emails"}, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, err := httpapi.New(httpapi.Options{Broker: b, Auth: httpapi.NoAuth{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	api = httptest.NewServer(srv)
	defer api.Close()
	return m.Run()
}

// The direct producer and the HTTP API are one interface: a key used by one
// is the same logical task for the other, and every refusal has the same
// code, status and details.
func TestSameSemanticsAsTheAPI(t *testing.T) {
	ctx := t.Context()
	c, err := client.New(api.URL, client.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil)}))
	if err != nil {
		t.Fatal(err)
	}
	producers := map[string]client.Producer{"direct": direct.New(rdb).Queue("shop", "emails"), "http": c.Queue("shop", "emails")}
	first, err := producers["direct"].Submit(ctx, "send", map[string]int{"n": 1}, client.IdempotencyKey("k-direct"), client.FlowKey("tenant-a"))
	if err != nil || first.Duplicate || first.Status != client.StatusQueued || first.FlowKey != "tenant-a" {
		t.Fatalf("direct submit: %+v %v", first, err)
	}
	_, err = producers["http"].Submit(ctx, "send", nil, client.IdempotencyKey("k-direct"))
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeIdempotencyInProgress || e.TaskID != first.TaskID {
		t.Fatalf("http submit of the direct producer's key: %v, want IDEMPOTENCY_IN_PROGRESS naming %s", err, first.TaskID)
	}
	viaHTTP, err := producers["http"].Get(ctx, first.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	viaRedis, err := producers["direct"].Get(ctx, first.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(viaHTTP, viaRedis); diff != "" {
		t.Fatalf("the same task read both ways differs (-http +direct):\n%s", diff)
	}

	refusals := map[string]func(p client.Producer) error{
		"in progress": func(p client.Producer) error {
			_, err := p.Submit(ctx, "send", nil, client.IdempotencyKey("k-direct"))
			return err
		},
		"bad priority": func(p client.Producer) error { _, err := p.Submit(ctx, "send", nil, client.Priority(42)); return err },
		"bad flow key": func(p client.Producer) error { _, err := p.Submit(ctx, "send", nil, client.FlowKey("a b")); return err },
		"too large": func(p client.Producer) error {
			_, err := p.Submit(ctx, "send", map[string]string{"x": string(make([]byte, 100))})
			return err
		},
		"not found": func(p client.Producer) error { _, err := p.Get(ctx, "missing"); return err },
	}
	for name, refuse := range refusals {
		var got [2]*client.Error
		for i, via := range []string{"direct", "http"} {
			if !errors.As(refuse(producers[via]), &got[i]) {
				t.Fatalf("%s via %s: not a *client.Error", name, via)
			}
		}
		ignore := cmp.FilterPath(func(p cmp.Path) bool {
			last := p.Last().String()
			return last == ".RequestID" || last == ".Message" || last == ".Err"
		}, cmp.Ignore())
		asJSON := cmp.Transformer("json", func(d map[string]any) string { b, _ := json.Marshal(d); return string(b) })
		if diff := cmp.Diff(got[0], got[1], ignore, asJSON); diff != "" {
			t.Errorf("%s: errors differ (-direct +http):\n%s", name, diff)
		}
	}

	reqs := make([]client.SubmitRequest, 3)
	for i := range reqs {
		reqs[i], _ = client.NewSubmitRequest("send", nil, client.IdempotencyKey(fmt.Sprintf("batch-%d", i%2)))
	}
	reqs[2].TaskType = ""
	for _, via := range []string{"direct", "http"} {
		results, err := producers[via].SubmitBatch(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		var statuses []int
		for _, r := range results {
			statuses = append(statuses, r.Status)
		}
		want := []int{202, 202, 400}
		if via == "http" { // the direct producer's batch made the keys' tasks
			want = []int{409, 409, 400}
		}
		if diff := cmp.Diff(want, statuses); diff != "" {
			t.Errorf("batch via %s (-want +got):\n%s", via, diff)
		}
	}
}

// A cancelled or expired context keeps its identity through both producers,
// on every call.
func TestContextErrorsKeepIdentity(t *testing.T) {
	c, err := client.New(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	producers := map[string]client.Producer{"direct": direct.New(rdb).Queue("shop", "emails"), "http": c.Queue("shop", "emails")}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	req, _ := client.NewSubmitRequest("send", nil)
	for via, p := range producers {
		for ctx, want := range map[context.Context]error{cancelled: context.Canceled, expired: context.DeadlineExceeded} {
			calls := map[string]error{}
			_, calls["submit"] = p.Submit(ctx, "send", nil)
			_, calls["batch"] = p.SubmitBatch(ctx, []client.SubmitRequest{req})
			_, calls["get"] = p.Get(ctx, "t1")
			for call, err := range calls {
				if !errors.Is(err, want) {
					t.Errorf("%s %s: %v, want errors.Is %v", via, call, err, want)
				}
			}
		}
	}
}
