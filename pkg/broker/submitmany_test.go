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

package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// SubmitMany keeps request order across its script calls of 128: a key
// repeated in a later call gets IN_PROGRESS naming the first, an invalid
// request fails alone, and the depth gate counts what was admitted before.
func TestSubmitManyKeepsOrder(t *testing.T) {
	e := newEnv(t, func(c *QueueConfig) { c.MaxDepth = 250 })
	reqs := make([]SubmitRequest, 300)
	for i := range reqs {
		reqs[i] = SubmitRequest{Type: "demo", IdempotencyKey: fmt.Sprintf("k%d", i)}
	}
	reqs[200].IdempotencyKey = "k3" // in the second script call, repeats item 3
	reqs[10].Priority = 42          // invalid
	res, errs, err := e.b.SubmitMany(ctx, e.q, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		switch {
		case i == 10:
			wantCode(t, errs[i], CodeInvalidTask)
		case i == 200:
			if be := wantCode(t, errs[i], CodeIdempotencyInProgress); be.TaskID != res[3].Task.ID {
				t.Fatalf("item 200 names %s, want item 3's %s", be.TaskID, res[3].Task.ID)
			}
		case i >= 252: // 250 admitted: items 0..251 less the two refused above
			wantCode(t, errs[i], CodeQueueFull)
		default:
			if errs[i] != nil || res[i].Duplicate || res[i].Task.State != StateQueued {
				t.Fatalf("item %d: %+v %v", i, res[i], errs[i])
			}
		}
	}
	if _, _, err := e.b.SubmitMany(ctx, QueueRef{Namespace: "ns", Name: "none"}, reqs[:1]); CodeOf(err) != CodeQueueNotFound {
		t.Fatalf("unknown queue: %v", err)
	}
}

// When the answer of a script call is lost after Redis ran it (the
// connection drops), SubmitMany finds the call's tasks and answers them as
// submitted; the later requests are NOT_SUBMITTED, wrapping the failure.
func TestSubmitManyFindsTasksOfALostAnswer(t *testing.T) {
	e := newEnv(t)
	reset := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	e.rdb.AddHook(&redistest.ScriptHook{After: 1, Result: func(redis.Cmder) error { return reset }})
	reqs := make([]SubmitRequest, 300)
	for i := range reqs {
		reqs[i] = SubmitRequest{Type: "demo"}
	}
	res, errs, err := e.b.SubmitMany(ctx, e.q, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		switch {
		case i < 256:
			if errs[i] != nil || res[i].Task.ID == "" || res[i].Task.State != StateQueued {
				t.Fatalf("item %d: %+v %v, want submitted", i, res[i], errs[i])
			}
		case CodeOf(errs[i]) != CodeNotSubmitted || !errors.Is(errs[i], reset):
			t.Fatalf("item %d: %v, want NOT_SUBMITTED wrapping the reset", i, errs[i])
		}
	}
	if n, _ := e.rdb.ZCard(ctx, keysFor(e.q).taskIndex()).Result(); n != 256 {
		t.Errorf("%d tasks in the index, want 256", n)
	}
}

// A context cancelled between two script calls leaves the later requests
// NOT_SUBMITTED, wrapping context.Canceled; the first call's tasks stand.
func TestSubmitManyStopsAtACancelledContext(t *testing.T) {
	e := newEnv(t)
	cctx, cancel := context.WithCancel(ctx)
	e.rdb.AddHook(&redistest.ScriptHook{Result: func(redis.Cmder) error { cancel(); return nil }})
	reqs := make([]SubmitRequest, 200)
	for i := range reqs {
		reqs[i] = SubmitRequest{Type: "demo"}
	}
	res, errs, err := e.b.SubmitMany(cctx, e.q, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		switch {
		case i < 128:
			if errs[i] != nil || res[i].Task.ID == "" {
				t.Fatalf("item %d: %v, want submitted", i, errs[i])
			}
		case CodeOf(errs[i]) != CodeNotSubmitted || !errors.Is(errs[i], context.Canceled):
			t.Fatalf("item %d: %v, want NOT_SUBMITTED wrapping context.Canceled", i, errs[i])
		}
	}
}
