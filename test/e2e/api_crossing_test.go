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
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// A key used by a Task CR and by the HTTP API on the same Queue is one
// logical task, in both orders: the API answers with the CR's task (409 while
// it runs, a 200 replay once done), and a CR created after an API submission
// mirrors the API's task. The counter handler counts each logical task once.
// The payload, sent as JSON by the Go client and as a Task's spec.payload,
// is the same request both ways (request_matches, requestMatches).
func TestOneLogicalTaskAcrossInterfaces(t *testing.T) {
	ns := single.namespace(t, "api-crossing")
	apiQueue(t, ns, "q", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	q := apiClient(t, adminToken(t)).Queue(ns, "q")

	t.Run("CR first", func(t *testing.T) {
		payload := demo.CounterPayload{Name: ns + "-cr-first", HoldSeconds: 3}
		task := newTask("cr-first", ns, "crossing", demo.Counter, payload).Key("cr-first").Obj()
		must(t, single.stack.Client.Create(ctx, task))
		var taskID string
		must(t, poll(ctx, 30*time.Second, func() error {
			var got dtqv1alpha1.Task
			if err := single.stack.Client.Get(ctx, client.ObjectKeyFromObject(task), &got); err != nil {
				return err
			}
			if taskID = got.Status.TaskID; taskID == "" {
				return errors.New("the Task CR is not submitted yet")
			}
			return nil
		}))
		// While it runs (or, on a slow machine, once done) the key is the CR's task.
		early, err := q.Submit(ctx, demo.Counter, payload, dtqclient.IdempotencyKey("cr-first"))
		var e *dtqclient.Error
		if !(errors.As(err, &e) && e.Code == dtqclient.CodeIdempotencyInProgress && e.TaskID == taskID) &&
			!(err == nil && early.Duplicate && early.TaskID == taskID) {
			t.Fatalf("API submission of the CR's key: %+v %v, want IDEMPOTENCY_IN_PROGRESS naming %s", early, err, taskID)
		}
		single.waitTerminal(t, ns, "crossing", 1, time.Minute)
		replay, err := q.Submit(ctx, demo.Counter, payload, dtqclient.IdempotencyKey("cr-first"))
		if err != nil || !replay.Duplicate || replay.TaskID != taskID || replay.Status != dtqclient.StatusSucceeded ||
			replay.RequestMatches == nil || !*replay.RequestMatches {
			t.Fatalf("API submission of the CR's key once done: %+v %v, want a replay of %s, the request matching", replay, err, taskID)
		}
		if n := single.counter(t, ns, payload.Name); n != 1 {
			t.Fatalf("the counter ran %d times", n)
		}
	})

	t.Run("API first", func(t *testing.T) {
		payload := demo.CounterPayload{Name: ns + "-api-first", HoldSeconds: 2}
		sub, err := q.Submit(ctx, demo.Counter, payload, dtqclient.IdempotencyKey("api-first"))
		must(t, err)
		task := newTask("api-first", ns, "crossing-api", demo.Counter, payload).Key("api-first").Obj()
		must(t, single.stack.Client.Create(ctx, task))
		got := single.waitTerminal(t, ns, "crossing-api", 1, time.Minute)["api-first"]
		st := got.Status
		if st.State != dtqv1alpha1.TaskSucceeded || st.Idempotency == nil || !st.Idempotency.Duplicate ||
			st.Idempotency.TaskID != sub.TaskID || st.Idempotency.RequestMatches == nil || !*st.Idempotency.RequestMatches {
			t.Fatalf("the CR does not mirror the API's task %s: %s", sub.TaskID, describe(got))
		}
		done, err := q.Get(ctx, sub.TaskID)
		must(t, err)
		if string(done.Result) != st.Result {
			t.Fatalf("CR result %s, API task result %s", st.Result, done.Result)
		}
		if n := single.counter(t, ns, payload.Name); n != 1 {
			t.Fatalf("the counter ran %d times", n)
		}
	})
}
