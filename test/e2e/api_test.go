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
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// Every endpoint answers every documented status, through the real API
// process with Kubernetes auth on (as cluster-admin here; TestAPIAuth covers
// RBAC). Queue "q" has a worker running the demo handlers; queue "held" is
// paused, holds at most 3 tasks of at most 64 bytes of payload.
func TestAPIEndpoints(t *testing.T) {
	ns := single.namespace(t, "api-endpoints")
	apiQueue(t, ns, "q", nil)
	apiQueue(t, ns, "held", func(s *dtqv1alpha1.QueueSpec) { s.Paused = true; s.MaxDepth = 3; s.MaxPayloadBytes = 64 })
	tok := adminToken(t)
	q, held := queuePath(ns, "q"), queuePath(ns, "held")
	c := apiClient(t, tok)

	t.Run("submit", func(t *testing.T) {
		r := call(t, tok, "POST", held+"/tasks", `{"task_type":"echo","payload":{"a":1},"idempotency_key":"body-key"}`, "Idempotency-Key", "header-key")
		expect(t, "new task", r, http.StatusAccepted, "")
		var first dtqclient.Task
		r.decode(t, &first)
		if first.IdempotencyKey != "header-key" || first.Duplicate || first.Status != dtqclient.StatusQueued {
			t.Fatalf("the header's key must win over the body's: %v", r)
		}
		r = call(t, tok, "POST", held+"/tasks", `{"task_type":"echo","idempotency_key":"header-key"}`)
		expect(t, "same key, in flight", r, http.StatusConflict, dtqclient.CodeIdempotencyInProgress)
		if e := r.apiError(t); e.Details["task_id"] != first.TaskID {
			t.Fatalf("in progress names %v, want %s", e.Details["task_id"], first.TaskID)
		}
		r = call(t, tok, "POST", held+"/tasks", `{"task_type":"echo","payload":{"x":"`+strings.Repeat("x", 100)+`"}}`)
		expect(t, "payload over the queue's limit", r, http.StatusRequestEntityTooLarge, dtqclient.CodePayloadTooLarge)
		expect(t, "second task", call(t, tok, "POST", held+"/tasks", `{"task_type":"echo","idempotency_key":"body-key"}`), http.StatusAccepted, "")
		expect(t, "third task", call(t, tok, "POST", held+"/tasks", `{"task_type":"echo"}`), http.StatusAccepted, "")
		r = call(t, tok, "POST", held+"/tasks", `{"task_type":"echo"}`)
		expect(t, "full queue", r, http.StatusTooManyRequests, dtqclient.CodeQueueFull)
		if r.header.Get("Retry-After") != "5" {
			t.Fatalf("QUEUE_FULL without Retry-After: %v", r.header)
		}
		// A replay is answered before the depth gate.
		expect(t, "in flight, full queue", call(t, tok, "POST", held+"/tasks", `{"task_type":"echo"}`, "Idempotency-Key", "header-key"),
			http.StatusConflict, dtqclient.CodeIdempotencyInProgress)
		expect(t, "invalid", call(t, tok, "POST", held+"/tasks", `{"task_type":"echo","priority":10}`), http.StatusBadRequest, dtqclient.CodeInvalidTask)
		expect(t, "unknown queue", call(t, tok, "POST", queuePath(ns, "nope")+"/tasks", `{"task_type":"echo"}`), http.StatusNotFound, dtqclient.CodeQueueNotFound)

		done, err := c.Queue(ns, "q").Submit(t.Context(), "echo", map[string]int{"n": 1}, dtqclient.IdempotencyKey("replayed"))
		must(t, err)
		_, err = c.Queue(ns, "q").Wait(t.Context(), done.TaskID)
		must(t, err)
		r = call(t, tok, "POST", q+"/tasks", `{"task_type":"echo"}`, "Idempotency-Key", "replayed")
		expect(t, "replay of a finished task", r, http.StatusOK, "")
		var replay dtqclient.Task
		r.decode(t, &replay)
		if !replay.Duplicate || replay.TaskID != done.TaskID || string(replay.Result) != `{"n":1}` {
			t.Fatalf("replay: %v", r)
		}
	})

	t.Run("batch", func(t *testing.T) {
		r := call(t, tok, "POST", q+"/tasks:batch", `{"tasks":[{"task_type":"echo","idempotency_key":"b1"},{"task_type":"echo","idempotency_key":"b1"},{"task_type":"echo","priority":-1}]}`)
		expect(t, "batch", r, http.StatusOK, "")
		var br dtqclient.BatchResponse
		r.decode(t, &br)
		if len(br.Results) != 3 || br.Results[0].Status != 202 || br.Results[2].Status != 400 ||
			br.Results[1].Status != 409 && !(br.Results[1].Status == 200 && br.Results[1].Task.TaskID == br.Results[0].Task.TaskID) {
			t.Fatalf("batch results: %v", r)
		}
		expect(t, "batch with the key header", call(t, tok, "POST", q+"/tasks:batch", `{"tasks":[{"task_type":"echo"}]}`, "Idempotency-Key", "k"),
			http.StatusBadRequest, dtqclient.CodeInvalidRequest)
		expect(t, "empty batch", call(t, tok, "POST", q+"/tasks:batch", `{"tasks":[]}`), http.StatusBadRequest, dtqclient.CodeInvalidRequest)
		expect(t, "batch to an unknown queue", call(t, tok, "POST", queuePath(ns, "nope")+"/tasks:batch", `{"tasks":[{"task_type":"echo"}]}`),
			http.StatusNotFound, dtqclient.CodeQueueNotFound)
	})

	t.Run("tasks", func(t *testing.T) {
		expect(t, "list", call(t, tok, "GET", held+"/tasks?status=queued&limit=2", nil), http.StatusOK, "")
		expect(t, "list, bad status", call(t, tok, "GET", held+"/tasks?status=nope", nil), http.StatusBadRequest, dtqclient.CodeInvalidRequest)
		expect(t, "list, bad limit", call(t, tok, "GET", held+"/tasks?limit=501", nil), http.StatusBadRequest, dtqclient.CodeInvalidRequest)
		expect(t, "get unknown", call(t, tok, "GET", q+"/tasks/nope", nil), http.StatusNotFound, dtqclient.CodeTaskNotFound)

		page, err := c.Queue(ns, "held").List(t.Context(), dtqclient.ListOptions{Limit: 1})
		must(t, err)
		id := page.Tasks[0].TaskID
		expect(t, "get", call(t, tok, "GET", held+"/tasks/"+id, nil), http.StatusOK, "")
		expect(t, "cancel queued", call(t, tok, "POST", held+"/tasks/"+id+"/cancel", nil), http.StatusAccepted, "")
		// A cancel in the millisecond that cancelled the task is taken for that
		// call sent again and answered 202 again (docs/redis.md): wait it out.
		time.Sleep(2 * time.Millisecond)
		expect(t, "cancel finished", call(t, tok, "POST", held+"/tasks/"+id+"/cancel", nil), http.StatusGone, dtqclient.CodeTaskTerminal)
		expect(t, "cancel unknown", call(t, tok, "POST", held+"/tasks/nope/cancel", nil), http.StatusNotFound, dtqclient.CodeTaskNotFound)

		sleeping, err := c.Queue(ns, "q").Submit(t.Context(), "sleep", map[string]int{"seconds": 60})
		must(t, err)
		must(t, poll(t.Context(), 30*time.Second, func() error {
			got, err := c.Queue(ns, "q").Get(t.Context(), sleeping.TaskID)
			if err == nil && got.Status != dtqclient.StatusRunning {
				err = fmt.Errorf("task %s is %s, want Running", got.TaskID, got.Status)
			}
			return err
		}))
		expect(t, "cancel running", call(t, tok, "POST", q+"/tasks/"+sleeping.TaskID+"/cancel", nil), http.StatusConflict, dtqclient.CodeCancelRequested)
		if got, err := c.Queue(ns, "q").Wait(t.Context(), sleeping.TaskID); err != nil || got.Status != dtqclient.StatusCancelled {
			t.Fatalf("cancelled running task: %+v %v", got, err)
		}
	})

	t.Run("queues", func(t *testing.T) {
		r := call(t, tok, "GET", "/api/v1/namespaces/"+ns+"/queues", nil)
		expect(t, "list queues", r, http.StatusOK, "")
		var ql dtqclient.QueueList
		r.decode(t, &ql)
		if len(ql.Queues) != 2 {
			t.Fatalf("queues of %s: %v", ns, r)
		}
		expect(t, "stats", call(t, tok, "GET", q, nil), http.StatusOK, "")
		expect(t, "stats of an unknown queue", call(t, tok, "GET", queuePath(ns, "nope"), nil), http.StatusNotFound, dtqclient.CodeQueueNotFound)
		r = call(t, tok, "GET", q+"/workers", nil)
		expect(t, "workers", r, http.StatusOK, "")
		var wl dtqclient.WorkerList
		r.decode(t, &wl)
		if len(wl.Workers) == 0 {
			t.Fatalf("no live workers: %v", r)
		}
		expect(t, "workers of an unknown queue", call(t, tok, "GET", queuePath(ns, "nope")+"/workers", nil), http.StatusNotFound, dtqclient.CodeQueueNotFound)

		// Pause and resume set the Queue's spec.paused, which the controller keeps.
		expect(t, "pause", call(t, tok, "POST", q+"/pause", nil), http.StatusOK, "")
		queueSpecPaused(t, ns, "q", true)
		expect(t, "resume", call(t, tok, "POST", q+"/resume", nil), http.StatusOK, "")
		queueSpecPaused(t, ns, "q", false)
		expect(t, "pause an unknown queue", call(t, tok, "POST", queuePath(ns, "nope")+"/pause", nil), http.StatusNotFound, dtqclient.CodeQueueNotFound)
	})

	t.Run("dead letters", func(t *testing.T) {
		dq := c.Queue(ns, "q")
		failed, err := dq.Submit(t.Context(), "fail", nil, dtqclient.IdempotencyKey("dead"))
		must(t, err)
		if failed, err = dq.Wait(t.Context(), failed.TaskID); err != nil || failed.Status != dtqclient.StatusDeadLettered {
			t.Fatalf("fail task: %+v %v", failed, err)
		}
		expect(t, "list", call(t, tok, "GET", q+"/dead-letter?limit=10", nil), http.StatusOK, "")
		expect(t, "list of an unknown queue", call(t, tok, "GET", queuePath(ns, "nope")+"/dead-letter", nil), http.StatusNotFound, dtqclient.CodeQueueNotFound)
		expect(t, "get", call(t, tok, "GET", q+"/dead-letter/"+failed.TaskID, nil), http.StatusOK, "")
		// Paused, so the requeued task waits and its key is seen in progress.
		expect(t, "pause", call(t, tok, "POST", q+"/pause", nil), http.StatusOK, "")
		r := call(t, tok, "POST", q+"/dead-letter/"+failed.TaskID+"/requeue", nil)
		expect(t, "requeue", r, http.StatusOK, "")
		var requeued dtqclient.Task
		r.decode(t, &requeued)
		if requeued.Attempt != 1 || requeued.PreviousAttempts != 1 {
			t.Fatalf("requeued: %v", r)
		}
		expect(t, "submit its key after the requeue", call(t, tok, "POST", q+"/tasks", `{"task_type":"fail","idempotency_key":"dead"}`),
			http.StatusConflict, dtqclient.CodeIdempotencyInProgress)
		expect(t, "resume", call(t, tok, "POST", q+"/resume", nil), http.StatusOK, "")
		if _, err := dq.Wait(t.Context(), failed.TaskID); err != nil {
			t.Fatal(err)
		}
		ok, err := dq.Submit(t.Context(), "echo", nil)
		must(t, err)
		_, err = dq.Wait(t.Context(), ok.TaskID)
		must(t, err)
		expect(t, "requeue a succeeded task", call(t, tok, "POST", q+"/dead-letter/"+ok.TaskID+"/requeue", nil), http.StatusConflict, dtqclient.CodeTaskConflict)
		expect(t, "requeue an unknown task", call(t, tok, "POST", q+"/dead-letter/nope/requeue", nil), http.StatusNotFound, dtqclient.CodeTaskNotFound)
		expect(t, "get a task that is not dead-lettered", call(t, tok, "GET", q+"/dead-letter/"+ok.TaskID, nil), http.StatusNotFound, dtqclient.CodeDLQEntryNotFound)
		expect(t, "discard", call(t, tok, "POST", q+"/dead-letter/"+failed.TaskID+"/discard", nil), http.StatusOK, "")
		expect(t, "discard again", call(t, tok, "POST", q+"/dead-letter/"+failed.TaskID+"/discard", nil), http.StatusNotFound, dtqclient.CodeDLQEntryNotFound)
		expect(t, "purge", call(t, tok, "POST", q+"/dead-letter/purge", nil), http.StatusOK, "")
	})

	t.Run("events", func(t *testing.T) {
		expect(t, "bad Last-Event-ID", call(t, tok, "GET", q+"/events", nil, "Last-Event-ID", "yesterday"), http.StatusBadRequest, dtqclient.CodeInvalidRequest)
		expect(t, "unknown queue", call(t, tok, "GET", queuePath(ns, "nope")+"/events", nil), http.StatusNotFound, dtqclient.CodeQueueNotFound)
		s, err := c.Queue(ns, "q").Events(t.Context(), dtqclient.EventsOptions{Since: "0"}) // a 200 stream, validated by the transport
		must(t, err)
		defer s.Close()
		if ev, err := s.Next(); err != nil || ev.EventID == "" {
			t.Fatalf("first event: %+v %v", ev, err)
		}
	})

	t.Run("operations", func(t *testing.T) {
		expect(t, "healthz", call(t, "", "GET", "/healthz", nil), http.StatusOK, "")
		expect(t, "readyz", call(t, "", "GET", "/readyz", nil), http.StatusOK, "")
		expect(t, "openapi.json", call(t, "", "GET", "/openapi.json", nil), http.StatusOK, "")
		expect(t, "metrics", call(t, tok, "GET", "/metrics", nil), http.StatusOK, "")
		expect(t, "metrics without a token", call(t, "", "GET", "/metrics", nil), http.StatusUnauthorized, dtqclient.CodeUnauthorized)
		expect(t, "no such path", call(t, tok, "GET", "/api/v2/nothing", nil), http.StatusNotFound, dtqclient.CodeNotFound)
		expect(t, "wrong method", call(t, tok, "DELETE", q+"/tasks", nil), http.StatusMethodNotAllowed, dtqclient.CodeMethodNotAllowed)
		must(t, single.stack.WithRedisStopped(t.Context(), func() error {
			expect(t, "readyz without Redis", call(t, "", "GET", "/readyz", nil), http.StatusServiceUnavailable, dtqclient.CodeRedisUnavailable)
			expect(t, "healthz without Redis", call(t, "", "GET", "/healthz", nil), http.StatusOK, "")
			expect(t, "submit without Redis", call(t, tok, "POST", q+"/tasks", `{"task_type":"echo"}`), http.StatusServiceUnavailable, dtqclient.CodeRedisUnavailable)
			return nil
		}))
		must(t, poll(t.Context(), 30*time.Second, func() error {
			if r := call(t, "", "GET", "/readyz", nil); r.status != http.StatusOK {
				return fmt.Errorf("readyz after Redis came back: %v", r)
			}
			return nil
		}))
	})
}

func queueSpecPaused(t *testing.T, ns, name string, want bool) {
	t.Helper()
	var q dtqv1alpha1.Queue
	must(t, single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &q))
	if q.Spec.Paused != want {
		t.Fatalf("Queue %s/%s spec.paused = %t, want %t", ns, name, q.Spec.Paused, want)
	}
}
