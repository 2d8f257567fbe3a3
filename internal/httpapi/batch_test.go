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

package httpapi_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// apiPassword is the Redis password of the API's ACL user in these tests; no
// answer or log line may hold it.
const apiPassword = "planted-s3cret"

// A batch whose second script call Redis refuses (the API's ACL user loses
// its scripting commands between the calls) answers per item: the first
// call's 128 tasks 202, every other NOT_SUBMITTED with the cause REDIS_ERROR
// (500, not a retryable 503); Redis's NOPERM text is in the server's log, not
// in the answer, and the password in neither. Once the ACL is restored, a
// keyless retry of the failed items creates each missing task once.
func TestBatchAnswersPerItemAfterAPartialCommit(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	ctx := t.Context()
	must(t, admin.Do(ctx, "ACL", "SETUSER", "api", "on", ">"+apiPassword, "~*", "&*", "+@all").Err())
	rdb := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: "api", Password: apiPassword})
	t.Cleanup(func() { _ = rdb.Close() })
	b := broker.New(rdb)
	q := broker.QueueRef{Namespace: "ns", Name: "q"}
	must(t, b.EnsureQueue(ctx, q, broker.DefaultQueueConfig()))
	fault := &redistest.ScriptHook{After: 1, Before: func() {
		must(t, admin.Do(ctx, "ACL", "SETUSER", "api", "-@scripting").Err())
	}}
	rdb.AddHook(fault)
	var logs bytes.Buffer
	s, err := httpapi.New(httpapi.Options{Broker: b, Auth: httpapi.NoAuth{}, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	must(t, err)
	api := httptest.NewServer(s)
	t.Cleanup(api.Close)
	c, err := client.New(api.URL, client.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil)}))
	must(t, err)
	queue := c.Queue("ns", "q")

	const n = 300 // script calls of 128, 128, 44
	reqs := make([]client.SubmitRequest, n)
	for i := range reqs {
		reqs[i], err = client.NewSubmitRequest(fmt.Sprintf("job-%d", i), nil)
		must(t, err)
	}
	results, err := queue.SubmitBatch(ctx, reqs)
	must(t, err)
	var retry []client.SubmitRequest
	for i, r := range results {
		if i < 128 {
			if r.Status != http.StatusAccepted || r.Task == nil {
				t.Fatalf("item %d of the first call: %d %v, want 202", i, r.Status, r.Err())
			}
			continue
		}
		if !errors.Is(r.Err(), client.ErrNotSubmitted) || r.Status != http.StatusInternalServerError ||
			r.Error.Details["cause"] != client.CodeRedisError {
			t.Fatalf("item %d: %d %v %v, want 500 NOT_SUBMITTED caused by REDIS_ERROR", i, r.Status, r.Err(), r.Error.Details)
		}
		retry = append(retry, reqs[i])
	}
	if strings.Contains(logs.String(), apiPassword) || !strings.Contains(logs.String(), "NOPERM") {
		t.Errorf("server log holds the password or lacks Redis's NOPERM reply:\n%s", logs.String())
	}

	// A single submission Redis refuses is 500 REDIS_ERROR with no Redis text.
	_, err = queue.Submit(ctx, "single", nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != client.CodeRedisError || ce.StatusCode != http.StatusInternalServerError ||
		strings.Contains(ce.Message, "NOPERM") || strings.Contains(ce.Message, apiPassword) {
		t.Fatalf("submit under NOPERM: %v, want 500 REDIS_ERROR without Redis's text", err)
	}

	must(t, admin.Do(ctx, "ACL", "SETUSER", "api", "+@scripting").Err())
	again, err := queue.SubmitBatch(ctx, retry)
	must(t, err)
	for i, r := range again {
		if r.Status != http.StatusAccepted {
			t.Fatalf("retry item %d: %d %v", i, r.Status, r.Err())
		}
	}
	types := map[string]int{}
	for cont := ""; ; {
		page, err := b.ListTasks(ctx, q, broker.ListOptions{Limit: broker.MaxListLimit, Continue: cont})
		must(t, err)
		for _, task := range page.Tasks {
			types[task.Type]++
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	for i := range n {
		if got := types[fmt.Sprintf("job-%d", i)]; got != 1 {
			t.Errorf("job-%d: %d tasks, want 1", i, got)
		}
	}
	if len(types) != n {
		t.Errorf("%d task types, want %d", len(types), n)
	}
}
