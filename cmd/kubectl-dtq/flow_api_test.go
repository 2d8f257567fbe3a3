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

package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// apiServer serves the HTTP API (auth off) on a private redis-server and
// returns its URL and engine.
func apiServer(t *testing.T) (string, *broker.Broker) {
	t.Helper()
	b := broker.New(redistest.Start(t).Client())
	s, err := httpapi.New(httpapi.Options{Broker: b, Auth: httpapi.NoAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL, b
}

// runCLI runs kubectl-dtq in this process against the API at url in
// namespace ns and returns its output and error.
func runCLI(t *testing.T, url, ns string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(append([]string{"--api-url", url, "--api-token", "t", "-n", ns}, args...))
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// The flow verbs through the real API: flow of a queue without flow
// control says so; submit --via-api --flow-key sends the key, and the API's
// refusal of a bad one is the command's error.
func TestFlowVerbsWithoutFlowControl(t *testing.T) {
	url, b := apiServer(t)
	if err := b.EnsureQueue(t.Context(), broker.QueueRef{Namespace: "ns", Name: "q"}, broker.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, url, "ns", "flow", "q")
	if err != nil || out != "" || errOut != "Queue ns/q has no flow control (spec.flowControl).\n" {
		t.Errorf("flow of a queue without flow control: %q %q %v", out, errOut, err)
	}
	out, _, err = runCLI(t, url, "ns", "flow", "q", "-o", "json")
	wantMatch(t, "flow -o json", out, `^\{\s*"namespace": "ns",\s*"queue": "q",\s*"keys": \[\]\s*\}\n$`)
	if err != nil {
		t.Error(err)
	}
	if _, _, err := runCLI(t, url, "ns", "flow", "nope"); err == nil || !strings.Contains(err.Error(), "QUEUE_NOT_FOUND") {
		t.Errorf("flow of an unknown queue: %v, want QUEUE_NOT_FOUND", err)
	}
	for _, top := range []string{"0", "501"} {
		if _, _, err := runCLI(t, url, "ns", "flow", "q", "--top", top); err == nil || err.Error() != "--top must be 1..500" {
			t.Errorf("flow --top %s: %v, want --top must be 1..500", top, err)
		}
	}
	_, _, err = runCLI(t, url, "ns", "submit", "--via-api", "--queue", "q", "--type", "echo", "--flow-key", "tenant a")
	if err == nil || !strings.Contains(err.Error(), "INVALID_TASK: flow key must be") {
		t.Errorf("submit --flow-key 'tenant a': %v, want INVALID_TASK naming flow_key", err)
	}
	out, _, err = runCLI(t, url, "ns", "queue", "stats", "q")
	wantMatch(t, "queue stats without flow control", out, `^QUEUE +PAUSED +DEPTH +QUEUED +IN FLIGHT +SCHEDULED +DEAD +WORKERS\nq +false `)
	if err != nil {
		t.Error(err)
	}
}

// On a flow-controlled queue whose keys run one task at a time, after a
// worker took tenant-a's first task: submit --flow-key sends the key (get
// -o wide shows it), flow lists the keys under the summary, queue stats has
// the flow columns, and get shows why a task waits.
func TestFlowVerbs(t *testing.T) {
	url, b := apiServer(t)
	q := broker.QueueRef{Namespace: "ns", Name: "q"}
	cfg := broker.DefaultQueueConfig()
	cfg.Flow = &broker.FlowControl{PerKey: broker.KeyLimits{Concurrency: 1}}
	if err := b.EnsureQueue(t.Context(), q, cfg); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		out, _, err := runCLI(t, url, "ns", "submit", "--via-api", "--queue", "q", "--type", "echo", "--flow-key", "tenant-a", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	out, _, err := runCLI(t, url, "ns", "get", "--via-api", "--queue", "q", ids[0], "-o", "wide")
	wantMatch(t, "get -o wide", out, `FLOW KEY .* WAIT REASON\n`+ids[0]+` .* tenant-a .* next of key tenant-a, .*\n$`)
	if err != nil {
		t.Fatal(err)
	}
	if ss, err := b.ReadStart(t.Context(), q, "w", "w", 2, 0); err != nil || len(ss) != 1 {
		t.Fatalf("claim: %d started, %v; want tenant-a's first", len(ss), err)
	}
	out, _, err = runCLI(t, url, "ns", "flow", "q")
	wantMatch(t, "flow", out, `^0 admissible, 2 throttled, 1 running \(held slots\); 1 key with work, 1 parked; limited by KeyConcurrency\n`+
		`KEY +QUEUED +HELD +CONCURRENCY +WEIGHT +PARKED\ntenant-a +2 +1 +1 +1 +KeyConcurrency\n$`)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, url, "ns", "queue", "stats")
	wantMatch(t, "queue stats", out, `ADMISSIBLE +THROTTLED +LIMITED BY\nq +false .* 0 +2 +KeyConcurrency\n$`)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, url, "ns", "get", "--via-api", "--queue", "q", ids[1], ids[2])
	wantMatch(t, "get", out, `^TASK ID +QUEUE +TYPE +STATE +ATTEMPT +AGE +WAIT REASON\n`+
		ids[1]+` +q +echo +Queued +0 +\S+ +key tenant-a at concurrency 1/1\n`+
		ids[2]+` +q +echo +Queued +0 +\S+ +key tenant-a at concurrency 1/1\n$`)
	if err != nil {
		t.Fatal(err)
	}
}
