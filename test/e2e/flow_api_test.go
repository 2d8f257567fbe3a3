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
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// keyCap1 is a flowControl whose every key runs one task at a time.
func keyCap1(s *dtqv1alpha1.QueueSpec) {
	s.FlowControl = &dtqv1alpha1.FlowControl{PerKey: &dtqv1alpha1.KeyLimits{Concurrency: ptr.To[int32](1)}}
}

// oneWorker runs the queue on one pod with two slots.
func oneWorker(s *dtqv1alpha1.QueueSpec) {
	s.Concurrency = 2
	s.Scaling.MinReplicas = ptr.To[int32](1)
	s.Scaling.MaxReplicas = 1
}

// keyCapCheck checks a run of one key capped at one task at a time (capped)
// beside one task of another key: the capped key's executions never overlap,
// and the other key's task started before any of the capped key's tasks
// ended, so the capped key's backlog did not hold it back. A task still
// running has no end.
func keyCapCheck(capped []dtqclient.Task, other dtqclient.Task) error {
	var errs []error
	started := slices.DeleteFunc(slices.Clone(capped), func(t dtqclient.Task) bool { return t.Execution.StartedAt == nil })
	slices.SortFunc(started, func(a, b dtqclient.Task) int { return a.Execution.StartedAt.Compare(*b.Execution.StartedAt) })
	for i := 1; i < len(started); i++ {
		prev, next := started[i-1].Execution, started[i].Execution
		if prev.FinishedAt == nil || next.StartedAt.Before(*prev.FinishedAt) {
			errs = append(errs, fmt.Errorf("tasks %s and %s of the capped key ran at once", started[i-1].TaskID, started[i].TaskID))
		}
	}
	if other.Execution.StartedAt == nil {
		return errors.Join(append(errs, fmt.Errorf("the other key's task %s never started", other.TaskID))...)
	}
	for _, t := range capped {
		if end := t.Execution.FinishedAt; end != nil && !other.Execution.StartedAt.Before(*end) {
			errs = append(errs, fmt.Errorf("the other key's task started at %s, after task %s of the capped key ended (%s): it waited behind that key",
				other.Execution.StartedAt.Format(time.StampMilli), t.TaskID, end.Format(time.StampMilli)))
		}
	}
	return errors.Join(errs...)
}

// capRun is the submission of TestFlowControlAPI: three tasks of key
// tenant-a (a long sleep, a short one, an echo) then an echo of tenant-b,
// in one batch over the HTTP API.
type capRun struct {
	q     *dtqclient.Queue
	a     [3]*dtqclient.Task
	b     *dtqclient.Task
	plain *dtqclient.Task // an echo without a flow key
}

func submitCapRun(t *testing.T, q *dtqclient.Queue) *capRun {
	t.Helper()
	var reqs []dtqclient.SubmitRequest
	for _, r := range []struct {
		typ, key string
		payload  any
	}{
		{demo.Sleep, "tenant-a", demo.SleepPayload{Seconds: demo.MaxSleep.Seconds()}},
		{demo.Sleep, "tenant-a", demo.SleepPayload{Seconds: 1}},
		{demo.Echo, "tenant-a", nil},
		{demo.Echo, "tenant-b", nil},
		{demo.Echo, "", nil},
	} {
		req, err := dtqclient.NewSubmitRequest(r.typ, r.payload, dtqclient.FlowKey(r.key), dtqclient.MaxAttempts(1))
		must(t, err)
		reqs = append(reqs, req)
	}
	res, err := q.SubmitBatch(t.Context(), reqs)
	must(t, err)
	run := &capRun{q: q}
	for i, r := range res {
		if r.Err() != nil {
			t.Fatalf("batch item %d: %v", i, r.Err())
		}
		if r.Task.FlowKey != reqs[i].FlowKey {
			t.Errorf("batch item %d: flow_key %q, want %q echoed", i, r.Task.FlowKey, reqs[i].FlowKey)
		}
	}
	run.a = [3]*dtqclient.Task{res[0].Task, res[1].Task, res[2].Task}
	run.b, run.plain = res[3].Task, res[4].Task
	return run
}

// wait returns the task once it has ended, failing the test after three
// minutes.
func (r *capRun) wait(t *testing.T, task *dtqclient.Task) dtqclient.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	got, err := r.q.Wait(ctx, task.TaskID)
	if err != nil {
		now, _ := r.q.Get(t.Context(), task.TaskID)
		t.Fatalf("wait for task %s of key %q: %v (now %+v)", task.TaskID, task.FlowKey, err, now)
	}
	return *got
}

func (r *capRun) get(t *testing.T, task *dtqclient.Task) dtqclient.Task {
	t.Helper()
	got, err := r.q.Get(t.Context(), task.TaskID)
	must(t, err)
	return *got
}

// Flow control through the HTTP API, kubectl dtq and the console on the dev
// stack: tasks submitted with flow_key to a Queue whose keys run one task at
// a time. The long task of tenant-a holds its key's slot; tenant-b's task and
// one without a key run meanwhile on the pod's other slot, while tenant-a's
// next tasks wait, which kubectl dtq flow, queue stats, get and the console
// show with the reason. The same run on a Queue without flowControl fails
// the checker (tenant-a's tasks overlap, tenant-b waits behind them).
func TestFlowControlAPI(t *testing.T) {
	t.Run("PerKeyCap", testFlowPerKeyCap)
	t.Run("WithoutFlowControl", testFlowCheckerWithoutFlowControl)
	t.Run("PythonHandler", testFlowPythonHandler)
}

func testFlowPerKeyCap(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-flow-api")
	apiReadyQueue(t, ns, func(s *dtqv1alpha1.QueueSpec) { oneWorker(s); keyCap1(s) })
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		if n := readyWorkers(single, ns); n < 1 {
			return fmt.Errorf("no ready worker in %s yet", ns)
		}
		return nil
	}))
	tok := adminToken(t)
	run := submitCapRun(t, apiClient(t, tok).Queue(ns, "q"))
	a0, a1 := run.a[0].TaskID, run.a[1].TaskID

	// tenant-b and the keyless task end while tenant-a's first task holds its slot.
	for _, task := range []*dtqclient.Task{run.b, run.plain} {
		if got := run.wait(t, task); got.Status != dtqclient.StatusSucceeded || got.FlowKey != task.FlowKey {
			t.Fatalf("task of key %q: %s flow_key %q, want Succeeded with its key", task.FlowKey, got.Status, got.FlowKey)
		}
	}
	if got := run.get(t, run.a[0]); got.Status != dtqclient.StatusRunning {
		t.Fatalf("tenant-a's first task: %s, want Running", got.Status)
	}

	// Its next tasks wait on the key's cap, and every view says so.
	var waiting dtqclient.Task
	must(t, poll(t.Context(), time.Minute, func() error {
		if waiting = run.get(t, run.a[1]); waiting.Status != dtqclient.StatusQueued || !strings.Contains(waiting.WaitReason, "tenant-a") {
			return fmt.Errorf("tenant-a's second task: %s, wait_reason %q; want Queued, waiting on tenant-a", waiting.Status, waiting.WaitReason)
		}
		return nil
	}))
	t.Logf("wait_reason of a task behind its key's cap: %q", waiting.WaitReason)
	must(t, poll(t.Context(), time.Minute, func() error {
		if r := dtq(t, ns, "flow", "q"); r.code != 0 ||
			!matches(`(?m)^0 admissible, 2 throttled, 1 running \(held slots\); 1 key with work, 1 parked; limited by KeyConcurrency`, r.stdout) ||
			!matches(`(?m)^KEY +QUEUED +HELD +CONCURRENCY +WEIGHT +PARKED\ntenant-a +2 +1 +1 +1 +KeyConcurrency$`, r.stdout) {
			return fmt.Errorf("kubectl dtq flow q: %s", r)
		}
		return nil
	}))
	want(t, "flow -o json", dtq(t, ns, "flow", "q", "--top", "1", "-o", "json"), 0, `"key": "tenant-a"`, `^$`)
	want(t, "flow --top 0", dtq(t, ns, "flow", "q", "--top", "0"), 1, `^$`, `--top must be 1\.\.500`)
	want(t, "queue stats", dtq(t, ns, "queue", "stats", "q"), 0,
		`^QUEUE +PAUSED +DEPTH +QUEUED +IN FLIGHT +SCHEDULED +DEAD +WORKERS +ADMISSIBLE +THROTTLED +LIMITED BY\nq +false .* 0 +2 +KeyConcurrency\n$`, `^$`)
	want(t, "get --via-api", dtq(t, ns, "get", "--via-api", "--queue", "q", a1), 0,
		`^TASK ID +QUEUE +TYPE +STATE +ATTEMPT +AGE +WAIT REASON\n`+a1+` +q +sleep +Queued +0 +\S+ +.*tenant-a.*\n$`, `^$`)
	want(t, "get --via-api -o wide", dtq(t, ns, "get", "--via-api", "--queue", "q", a0, "-o", "wide"), 0, `FLOW KEY .*\n`+a0+` .* tenant-a `, `^$`)
	want(t, "submit --via-api --flow-key", dtq(t, ns, "submit", "--via-api", "--queue", "q", "--type", demo.Echo, "--flow-key", "tenant a"), 1,
		`^$`, `INVALID_TASK: flow key must be`)

	t.Run("Console", func(t *testing.T) {
		tab := startBrowser(t)
		login(t, tab, tok, ns)
		key := `#flow tr[data-key="tenant-a"] `
		step(t, tab, "the queue's flow control and keys",
			chromedp.Navigate(single.stack.APIURL+"/ui/#/queue/q"),
			waitText(`#flow-summary [data-field="throttled"]`, "2"),
			waitText(`#flow-summary [data-field="limited_by"]`, "KeyConcurrency"),
			waitText(key+`td[data-field="held"]`, "1"),
			waitText(key+`td[data-field="queued"]`, "2"),
			waitText(key+`td[data-field="parked"]`, "KeyConcurrency"))
		screenshot(t, tab, "queue-flow")
		step(t, tab, "the overview's throttled count",
			chromedp.Navigate(single.stack.APIURL+"/ui/#/queues"),
			waitText(`tr[data-queue="q"] [data-field="throttled"]`, " (2 throttled)"))
		step(t, tab, "a waiting task's flow key and reason",
			chromedp.Navigate(single.stack.APIURL+"/ui/#/task/q/"+a1),
			waitText(`dd[data-field="flow key"]`, "tenant-a"),
			waitText(`dd[data-field="wait reason"]`, waiting.WaitReason))
	})

	// Cancelling the long task frees the key's slot: the others run in turn.
	_, err := run.q.Cancel(t.Context(), a0)
	if !errors.Is(err, dtqclient.ErrCancelRequested) {
		t.Fatalf("cancel the running task: %v, want CANCEL_REQUESTED", err)
	}
	var capped []dtqclient.Task
	for _, task := range run.a {
		capped = append(capped, run.wait(t, task))
	}
	if err := keyCapCheck(capped, run.get(t, run.b)); err != nil {
		t.Error(err)
	}
	if capped[1].Status != dtqclient.StatusSucceeded || capped[2].Status != dtqclient.StatusSucceeded {
		t.Errorf("tenant-a's later tasks: %s and %s, want Succeeded", capped[1].Status, capped[2].Status)
	}

	// A Task object's flow key, from kubectl dtq submit, filters list.
	name := strings.TrimSpace(dtq(t, ns, "submit", "--queue", "q", "--type", demo.Echo, "--flow-key", "tenant-c", "-o", "name").stdout)
	want(t, "list --flow-key", dtq(t, ns, "list", "--flow-key", "tenant-c", "-o", "name"), 0, `^`+name+`\n$`, `^$`)
	want(t, "list --flow-key, another key", dtq(t, ns, "list", "--flow-key", "tenant-a", "-o", "name"), 0, `^$`, `^$`)
}

// The checker fails the same run on a Queue without flowControl: both of
// tenant-a's sleeps start at once on the pod's two slots, and tenant-b's
// task waits for one of them to end.
func testFlowCheckerWithoutFlowControl(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-flow-off")
	apiReadyQueue(t, ns, oneWorker)
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		if n := readyWorkers(single, ns); n < 1 {
			return fmt.Errorf("no ready worker in %s yet", ns)
		}
		return nil
	}))
	run := submitCapRun(t, apiClient(t, adminToken(t)).Queue(ns, "q"))
	b := run.wait(t, run.b)
	capped := []dtqclient.Task{run.get(t, run.a[0]), run.wait(t, run.a[1])}
	err := keyCapCheck(capped, b)
	t.Logf("without flow control: %v", err)
	if err == nil {
		t.Errorf("the checker passed a run without flow control: %+v, %+v", capped, b)
	}
	if got := dtq(t, ns, "flow", "q"); got.code != 0 || !strings.Contains(got.stderr, "has no flow control") {
		t.Errorf("kubectl dtq flow of a queue without flow control: %s", got)
	}
	_, _ = run.q.Cancel(t.Context(), run.a[0].TaskID)
}

// The same through the Python HTTP handler example: each task's result
// echoes the flow key the sidecar passed in Dtq-Flow-Key, and tenant-b's
// task runs while tenant-a's first (20 s, within the queue's 30 s task
// timeout) holds its key's slot.
func testFlowPythonHandler(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-flow-http")
	pythonQueue(t, ns, t.TempDir(), 1, keyCap1)
	q := apiClient(t, adminToken(t)).Queue(ns, "q")
	var tasks []*dtqclient.Task
	for _, r := range []struct {
		key     string
		payload map[string]any
	}{
		{"tenant-a", map[string]any{"sleep": 20}},
		{"tenant-a", map[string]any{"name": "a"}},
		{"tenant-b", map[string]any{"name": "b"}},
		{"", map[string]any{"name": "none"}},
	} {
		task, err := q.Submit(t.Context(), "greet", r.payload, dtqclient.FlowKey(r.key), dtqclient.MaxAttempts(1))
		must(t, err)
		tasks = append(tasks, task)
	}
	run := &capRun{q: q}
	for _, task := range tasks[2:] {
		got := run.wait(t, task)
		var res map[string]any
		_ = json.Unmarshal(got.Result, &res)
		if got.Status != dtqclient.StatusSucceeded || res["flow_key"] != task.FlowKey {
			t.Errorf("task of key %q: %s, result %s; want Succeeded, its flow key echoed", task.FlowKey, got.Status, got.Result)
		}
	}
	if got := run.get(t, tasks[1]); got.Status != dtqclient.StatusQueued || !strings.Contains(got.WaitReason, "tenant-a") {
		t.Errorf("tenant-a's second task while its first runs: %s, wait_reason %q; want Queued, waiting on tenant-a", got.Status, got.WaitReason)
	}
	first, second := run.wait(t, tasks[0]), run.wait(t, tasks[1])
	var res map[string]any
	_ = json.Unmarshal(second.Result, &res)
	if second.Status != dtqclient.StatusSucceeded || res["flow_key"] != "tenant-a" {
		t.Errorf("tenant-a's second task: %s, result %s; want Succeeded with flow_key tenant-a", second.Status, second.Result)
	}
	if err := keyCapCheck([]dtqclient.Task{first, second}, run.get(t, tasks[2])); err != nil {
		t.Error(err)
	}
}

func matches(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
