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
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestWorkersReportVersions: a worker's heartbeat records its build, Workers
// reads it back, and WorkersOf reads the workers of several queues at once
// (a queue without workers adds none).
func TestWorkersReportVersions(t *testing.T) {
	e := newEnv(t)
	other := QueueRef{Namespace: "ns2", Name: "q"}
	empty := QueueRef{Namespace: "ns3", Name: "q"}
	for _, w := range []struct {
		q QueueRef
		w WorkerInfo
	}{
		{e.q, WorkerInfo{ID: "a", Status: "ready", Version: "0.2.0", Commit: "c2"}},
		{e.q, WorkerInfo{ID: "b", Status: "ready", Version: "0.1.0", Commit: "c1"}},
		{other, WorkerInfo{ID: "c", Status: "busy"}}, // a worker older than 0.1.0: no version
	} {
		if err := e.b.Heartbeat(ctx, w.q, w.w, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := e.b.Workers(ctx, e.q)
	if err != nil {
		t.Fatal(err)
	}
	builds := func(ws []WorkerInfo) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.ID+"="+w.Version+"/"+w.Commit)
		}
		slices.Sort(out)
		return out
	}
	if d := cmp.Diff([]string{"a=0.2.0/c2", "b=0.1.0/c1"}, builds(ws)); d != "" {
		t.Fatalf("Workers (-want +got):\n%s", d)
	}
	all, err := e.b.WorkersOf(ctx, []QueueRef{e.q, other, empty})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a=0.2.0/c2", "b=0.1.0/c1", "c=/"}, builds(all)); d != "" {
		t.Fatalf("WorkersOf (-want +got):\n%s", d)
	}
}

// TestComponents: records are listed until they are older than
// ComponentsMaxAge, then dropped from the hash; RemoveComponent deletes one.
func TestComponents(t *testing.T) {
	e := newEnv(t)
	m1 := Component{Component: "manager", Pod: "m1", Version: "0.1.0", Commit: "c1"}
	m2 := Component{Component: "manager", Pod: "m2", Version: "0.2.0", Commit: "c2"}
	api := Component{Component: "api", Pod: "a1", Version: "0.2.0", Commit: "c2"}
	names := func() []string {
		t.Helper()
		cs, err := e.b.Components(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.field()+"="+c.Version)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []Component{m1, m2} {
		if err := e.b.RecordComponent(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Step(ComponentsMaxAge / 2)
	if err := e.b.RecordComponent(ctx, api); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"api/a1=0.2.0", "manager/m1=0.1.0", "manager/m2=0.2.0"}, names()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if err := e.b.RecordComponent(ctx, m2); err != nil { // m2 refreshes, m1 does not
		t.Fatal(err)
	}
	e.clock.Step(ComponentsMaxAge/2 + time.Millisecond)
	if d := cmp.Diff([]string{"api/a1=0.2.0", "manager/m2=0.2.0"}, names()); d != "" {
		t.Fatalf("after m1's record aged (-want +got):\n%s", d)
	}
	if e.rdb.HExists(ctx, componentsKey, m1.field()).Val() {
		t.Fatal("the aged record is still in the hash")
	}
	if err := e.b.RemoveComponent(ctx, api); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"manager/m2=0.2.0"}, names()); d != "" {
		t.Fatalf("after RemoveComponent (-want +got):\n%s", d)
	}
}
