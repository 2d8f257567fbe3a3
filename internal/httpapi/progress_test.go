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
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// A running attempt's progress shows in the task view (execution.progress)
// and as a TaskProgress event, with its value, in the task's event stream.
func TestProgressInTaskAndEvents(t *testing.T) {
	srv, b := newAPIWithBroker(t)
	hc := &http.Client{Transport: apitest.Transport(t, nil)}
	tasks := srv.URL + "/api/v1/namespaces/ns/queues/q/tasks"
	resp, err := hc.Post(tasks, "application/json", strings.NewReader(`{"task_type":"echo"}`))
	must(t, err)
	var sub client.Task
	must(t, json.NewDecoder(resp.Body).Decode(&sub))
	_ = resp.Body.Close()

	q := broker.QueueRef{Namespace: "ns", Name: "q"}
	ss, err := b.ReadStart(t.Context(), q, "w", "w", 1, 0)
	if err != nil || len(ss) != 1 || !ss[0].Run {
		t.Fatalf("start: %+v %v", ss, err)
	}
	x := broker.Execution{Delivery: ss[0].Delivery, WorkerID: "w", Attempt: ss[0].Task.Attempt}
	must(t, b.Progress(t.Context(), q, x, []byte(`{"done":2,"of":3}`)))

	resp, err = hc.Get(tasks + "/" + sub.TaskID)
	must(t, err)
	var got client.Task
	must(t, json.NewDecoder(resp.Body).Decode(&got))
	_ = resp.Body.Close()
	if string(got.Execution.Progress) != `{"done":2,"of":3}` || got.Execution.ProgressAt == nil {
		t.Fatalf("task view execution %+v, want progress {\"done\":2,\"of\":3} with its time", got.Execution)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/ns/queues/q/events?since=0&task_id="+sub.TaskID, nil)
	resp, err = hc.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev client.Event
		must(t, json.Unmarshal([]byte(data), &ev))
		if ev.Type == client.EventProgress {
			if ev.TaskID != sub.TaskID || ev.Attempt != 1 || string(ev.Progress) != `{"done":2,"of":3}` {
				t.Fatalf("progress event %s", data)
			}
			return
		}
	}
	t.Fatal("the task's event stream ended without its TaskProgress event")
}
