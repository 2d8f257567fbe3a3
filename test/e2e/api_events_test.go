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
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// An events client that reconnects with Last-Event-ID across restarts of the
// API process (SIGTERM, then SIGKILL) receives every event exactly once, in
// order: the IDs it got are exactly those of the queue's events stream in
// Redis after its start, batch entries of several tasks included. Tasks are
// submitted through the engine meanwhile (the API is down at times) and run
// by the queue's worker.
func TestAPIEventsAcrossRestarts(t *testing.T) {
	ns := single.namespace(t, "api-events")
	apiQueue(t, ns, "q", func(s *dtqv1alpha1.QueueSpec) { s.Concurrency = 8 })
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	stream, err := apiClient(t, adminToken(t)).Queue(ns, "q").Events(ctx, dtqclient.EventsOptions{})
	must(t, err)
	defer stream.Close()
	start := stream.LastEventID()

	engine := broker.New(single.rdb)
	ref := broker.QueueRef{Namespace: ns, Name: "q"}
	var ids []string
	submit := func(round int) {
		reqs := make([]broker.SubmitRequest, 20)
		for i := range reqs {
			reqs[i] = broker.SubmitRequest{Type: "echo", Payload: []byte(fmt.Sprintf(`{"round":%d,"i":%d}`, round, i))}
		}
		res, errs, err := engine.SubmitMany(ctx, ref, reqs)
		must(t, err)
		for i, r := range res {
			must(t, errs[i])
			ids = append(ids, r.Task.ID)
		}
	}

	var got []string
	finished := map[string]bool{}
	// read takes events until n more tasks have succeeded.
	read := func(n int) {
		t.Helper()
		for want := len(finished) + n; len(finished) < want; {
			ev, err := stream.Next()
			if err != nil {
				t.Fatalf("after %d events: %v", len(got), err)
			}
			got = append(got, ev.EventID)
			if ev.Type == dtqclient.EventSucceeded {
				finished[ev.TaskID] = true
			}
		}
	}
	submit(0)
	read(10) // mid-stream, likely inside the batch's work
	must(t, single.stack.RestartAPI(ctx, syscall.SIGTERM))
	submit(1)
	read(15)
	must(t, single.stack.RestartAPI(ctx, syscall.SIGKILL))
	submit(2)
	read(len(ids) - len(finished))

	// Every event of the stream after start, as the API numbers them.
	var want []string
	after := start
	for {
		evs, err := engine.ReadEvents(ctx, ref, after, 100, 0)
		must(t, err)
		if len(evs) == 0 {
			break
		}
		for i, ev := range evs {
			idx := 0
			if i > 0 && evs[i-1].ID == ev.ID {
				idx = indexOf(want[len(want)-1]) + 1
			}
			want = append(want, ev.ID+":"+strconv.Itoa(idx))
		}
		after = evs[len(evs)-1].ID
	}
	// The last event of all is the last task's success, which read waited for.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events received (+) differ from the stream (-):\n%s", diff)
	}
	if len(finished) != len(ids) {
		t.Fatalf("%d of %d tasks seen succeeding", len(finished), len(ids))
	}
	t.Logf("%d events over two API restarts, each once", len(got))
}

func indexOf(eventID string) int {
	for i := len(eventID) - 1; i >= 0; i-- {
		if eventID[i] == ':' {
			n, _ := strconv.Atoi(eventID[i+1:])
			return n
		}
	}
	return 0
}
