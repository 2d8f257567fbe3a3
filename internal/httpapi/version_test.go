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
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// recordingAuth allows every request and records what it was asked.
type recordingAuth struct{ asked []httpapi.Attributes }

func (a *recordingAuth) Authorize(_ *http.Request, at httpapi.Attributes) (string, error) {
	a.asked = append(a.asked, at)
	return "alice", nil
}

// GET /api/v1/version answers the replica's own build, the managers' and
// API replicas' records and the workers of the listed queues, counted per
// build, after asking for get on the non-resource URL /api/v1/version.
func TestVersion(t *testing.T) {
	ctx := t.Context()
	b := broker.New(redistest.Start(t).Client())
	q1, q2 := broker.QueueRef{Namespace: "a", Name: "q"}, broker.QueueRef{Namespace: "b", Name: "q"}
	for _, w := range []struct {
		q broker.QueueRef
		w broker.WorkerInfo
	}{
		{q1, broker.WorkerInfo{ID: "w1", Version: "0.2.0", Commit: "new"}},
		{q1, broker.WorkerInfo{ID: "w2", Version: "0.1.0", Commit: "old"}},
		{q2, broker.WorkerInfo{ID: "w3", Version: "0.2.0", Commit: "new"}},
		{q2, broker.WorkerInfo{ID: "w4"}}, // older than 0.1.0
	} {
		must(t, b.Heartbeat(ctx, w.q, w.w, time.Minute))
	}
	for _, c := range []broker.Component{
		{Component: broker.ComponentManager, Pod: "m1", Version: "0.1.0", Commit: "old"},
		{Component: broker.ComponentManager, Pod: "m2", Version: "0.2.0", Commit: "new"},
		{Component: broker.ComponentAPI, Pod: "a1", Version: "0.2.0", Commit: "new"},
		{Component: broker.ComponentAPI, Pod: "a2", Version: "0.2.0", Commit: "new"},
	} {
		must(t, b.RecordComponent(ctx, c))
	}
	get := func(queues func(context.Context) ([]broker.QueueRef, error)) (client.ServerVersion, *recordingAuth) {
		t.Helper()
		auth := &recordingAuth{}
		s, err := httpapi.New(httpapi.Options{Broker: b, Auth: auth, Queues: queues})
		must(t, err)
		srv := httptest.NewServer(s)
		defer srv.Close()
		resp, err := (&http.Client{Transport: apitest.Transport(t, nil)}).Get(srv.URL + httpapi.VersionPath)
		must(t, err)
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", httpapi.VersionPath, resp.StatusCode)
		}
		var v client.ServerVersion
		must(t, json.NewDecoder(resp.Body).Decode(&v))
		return v, auth
	}

	got, auth := get(func(context.Context) ([]broker.QueueRef, error) { return []broker.QueueRef{q1, q2}, nil })
	want := client.ServerVersion{
		Version:  version.Version,
		Commit:   version.Commit,
		APIs:     []client.BuildCount{{Version: "0.2.0", Commit: "new", Count: 2}},
		Managers: []client.BuildCount{{Version: "0.1.0", Commit: "old", Count: 1}, {Version: "0.2.0", Commit: "new", Count: 1}},
		Workers: []client.BuildCount{{Version: "0.2.0", Commit: "new", Count: 2},
			{Version: "", Commit: "", Count: 1}, {Version: "0.1.0", Commit: "old", Count: 1}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d := cmp.Diff([]httpapi.Attributes{{Verb: "get", Path: httpapi.VersionPath}}, auth.asked); d != "" {
		t.Errorf("authorization asked (-want +got):\n%s", d)
	}

	got, _ = get(nil)
	if len(got.Workers) != 0 || len(got.Managers) != 2 {
		t.Errorf("without Options.Queues: %+v, want no workers and the managers", got)
	}
}
