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
	"regexp"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/dtq-dev/dtq/pkg/client"
)

// render prints v for -o output and returns stdout.
func render(t *testing.T, v apiView, output string) string {
	t.Helper()
	var out bytes.Buffer
	c := &cli{streams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}}
	if err := v.print(c, output, "none"); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func wantMatch(t *testing.T, what, got, pattern string) {
	t.Helper()
	if !regexp.MustCompile(pattern).MatchString(got) {
		t.Errorf("%s:\n%s\nwant a match of %s", what, got, pattern)
	}
}

// The flow table: the key "" and a key without a cap print <none>; a parked
// key its reason, and -o wide when a rate-parked key may start.
func TestFlowView(t *testing.T) {
	now := time.Now()
	at := now.Add(90 * time.Second)
	f := &client.QueueFlow{Namespace: "ns", Queue: "q",
		Flow: &client.FlowStats{Admissible: 2, Throttled: 7, Held: 3, ActiveKeys: 3, ParkedKeys: 2,
			LimitedBy: []client.FlowLimit{client.LimitKeyConcurrency, client.LimitKeyRate}, MeanExecSeconds: 0.25},
		Keys: []client.KeyFlow{
			{Key: "tenant-a", Queued: 5, Held: 3, Concurrency: 3, Weight: 5, Parked: client.LimitKeyConcurrency},
			{Key: "tenant-b", Queued: 2, Weight: 1, Parked: client.LimitKeyRate, EligibleAt: &at},
			{Key: "", Queued: 2, Weight: 1},
		}}
	wantMatch(t, "summary", flowSummary(f.Flow),
		`^2 admissible, 7 throttled, 3 running \(held slots\); 3 keys with work, 2 parked; limited by KeyConcurrency,KeyRateLimit; mean execution 250ms$`)
	wantMatch(t, "table", render(t, flowView(f, now), ""), `^KEY +QUEUED +HELD +CONCURRENCY +WEIGHT +PARKED\n`+
		`tenant-a +5 +3 +3 +5 +KeyConcurrency\n`+
		`tenant-b +2 +0 +<none> +1 +KeyRateLimit\n`+
		`<none> +2 +0 +<none> +1 +<none>\n$`)
	wantMatch(t, "wide", render(t, flowView(f, now), "wide"), `PARKED +ELIGIBLE IN\n.*KeyConcurrency +<none>\n.*KeyRateLimit +90s\n`)
	wantMatch(t, "name", render(t, flowView(f, now), "name"), `^tenant-a\ntenant-b\n\n$`)
	wantMatch(t, "json", render(t, flowView(f, now), "json"), `"limited_by": \[\s*"KeyConcurrency",\s*"KeyRateLimit"\s*\]`)
	if got := flowSummary(&client.FlowStats{LimitedBy: []client.FlowLimit{}}); got !=
		"0 admissible, 0 throttled, 0 running (held slots); 0 keys with work, 0 parked; limited by <none>" {
		t.Errorf("summary with nothing binding: %q", got)
	}
}

// queue stats adds the flow columns when a queue shown has flow control
// (<none> for the others), and only then.
func TestQueueStatsFlowColumns(t *testing.T) {
	plain := client.QueueStats{Queue: "plain", DepthByPriority: make([]int64, 10)}
	flow := client.QueueStats{Queue: "flow", Queued: 9, DepthByPriority: make([]int64, 10),
		Flow: &client.FlowStats{Admissible: 2, Throttled: 7, LimitedBy: []client.FlowLimit{client.LimitRate}}}
	wantMatch(t, "without flow control", render(t, queueStatsView([]client.QueueStats{plain}), ""),
		`^QUEUE +PAUSED +DEPTH +QUEUED +IN FLIGHT +SCHEDULED +DEAD +WORKERS\nplain +false +0 +0 +0 +0 +0 +0\n$`)
	wantMatch(t, "with flow control", render(t, queueStatsView([]client.QueueStats{plain, flow}), ""),
		`^QUEUE +PAUSED +DEPTH +QUEUED +IN FLIGHT +SCHEDULED +DEAD +WORKERS +ADMISSIBLE +THROTTLED +LIMITED BY\n`+
			`plain +false +0 +0 +0 +0 +0 +0 +<none> +<none> +<none>\n`+
			`flow +false +0 +9 +0 +0 +0 +0 +2 +7 +RateLimit\n$`)
}

// A task's flow key and wait reason are wide columns; the wait reason shows
// in the narrow table too when get shows a task that waits on a limit.
func TestTaskFlowColumns(t *testing.T) {
	tasks := []client.Task{{TaskID: "t1", Queue: "q", TaskType: "echo", Status: client.StatusQueued, FlowKey: "tenant-a",
		WaitReason: "key tenant-a at concurrency 3/3"}}
	v := apiTaskView(nil, tasks)
	wantMatch(t, "narrow", render(t, v, ""), `^TASK ID +QUEUE +TYPE +STATE +ATTEMPT +AGE\n`)
	wantMatch(t, "wide", render(t, v, "wide"), `KEY +FLOW KEY +PREVIOUS ATTEMPTS +WORKER +ERROR +PROGRESS +WAIT REASON\n`+
		`t1 .* tenant-a +0 .* key tenant-a at concurrency 3/3\n$`)
	wantMatch(t, "narrow with the wait reason", render(t, v.withWaitReason(), ""),
		`^TASK ID +QUEUE +TYPE +STATE +ATTEMPT +AGE +WAIT REASON\nt1 +q +echo +Queued +0 +\S+ +key tenant-a at concurrency 3/3\n$`)
	wantMatch(t, "the view keeps its columns", render(t, v, ""), `AGE\n`)
}
