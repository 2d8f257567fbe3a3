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
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// scenario is a feature scenario: its subtest name, the namespace of its
// Queue "q", and the test.
type scenario struct {
	name, ns string
	run      func(t *testing.T, e *env, ns string)
}

// The core scenarios, each on a namespace and Queue of its own. On the
// cluster, their Queues' hash tags ({ns/q}) fall on all three masters.
var scenarios = []scenario{
	{"EchoHundred", "e2e-echo", testEchoHundred},
	{"RetryAndDeadLetter", "e2e-deadletter", testRetryAndDeadLetter},
	{"DuplicateKey", "e2e-dup", testDuplicateKey},
	{"GitOpsReapply", "e2e-gitops", testGitOpsReapply},
	{"WorkerKilledMidTask", "e2e-crash", testWorkerKilledMidTask},
	{"APISubmitAndWait", "e2e-api", testAPISubmitAndWait},
}

// The feature scenarios run in parallel, on the single-node stack and on the
// cluster stack at once; TestResharding and TestFaultsOneMasterDown run on the
// cluster stack, every other test of the package on the single-node stack.
func TestFeatures(t *testing.T) {
	checkSpread(t, cluster)
	for _, e := range []*env{single, cluster} {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					sc.run(t, e, e.namespace(t, sc.ns))
				})
			}
		})
	}
}

// checkSpread fails unless the scenarios' Queues hash to slots on every
// master of e's cluster.
func checkSpread(t *testing.T, e *env) {
	t.Helper()
	cc, ok := e.rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("the %s stack's client is a %T, not a cluster client", e.name, e.rdb)
	}
	shards, err := cc.ClusterShards(t.Context()).Result()
	must(t, err)
	masters := map[string][]string{}
	for _, sc := range scenarios {
		slot, err := cc.ClusterKeySlot(t.Context(), broker.KeyPrefix(broker.QueueRef{Namespace: sc.ns, Name: "q"})).Result()
		must(t, err)
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start <= slot && slot <= r.End {
					node := fmt.Sprintf("%s:%d", sh.Nodes[0].IP, sh.Nodes[0].Port) // a node of the shard (one master each)
					masters[node] = append(masters[node], fmt.Sprintf("%s (slot %d)", sc.ns, slot))
				}
			}
		}
	}
	if len(masters) != len(shards) {
		t.Fatalf("the scenarios' Queues are on %d of %d masters: %v; rename a namespace", len(masters), len(shards), masters)
	}
	t.Logf("Queues per master on the cluster: %v", masters)
}

// 100 echo Tasks all succeed, each with a completed idempotency record.
func testEchoHundred(t *testing.T, e *env, ns string) {
	e.queue(t, ns, nil)
	var tasks []*dtqv1alpha1.Task
	for i := range 100 {
		tasks = append(tasks, newTask(fmt.Sprintf("echo-%03d", i), ns, "echo", "echo", map[string]int{"i": i}).
			Key(fmt.Sprintf("echo-%03d", i)).Obj())
	}
	start := time.Now()
	e.createAll(t, tasks)
	got := e.waitTerminal(t, ns, "echo", 100, 3*time.Minute)
	t.Logf("100 echo tasks terminal %v after the first create", time.Since(start).Round(time.Millisecond))
	for i := range 100 {
		task := got[fmt.Sprintf("echo-%03d", i)]
		st := task.Status
		idem := st.Idempotency
		if st.State != dtqv1alpha1.TaskSucceeded || st.Attempt != 1 || idem == nil ||
			idem.State != dtqv1alpha1.IdempotencyCompleted || idem.Duplicate || idem.TaskID != st.TaskID {
			t.Errorf("want Succeeded on attempt 1 with a completed, original idempotency record: %s", describe(task))
		}
		if want := fmt.Sprintf(`"i":%d`, i); !strings.Contains(st.Result, want) {
			t.Errorf("%s: result %q lacks %s", task.Name, st.Result, want)
		}
	}
}

// flaky (failTimes 2) succeeds on attempt 3; fail, a permanent error, is
// dead-lettered at once without retries.
func testRetryAndDeadLetter(t *testing.T, e *env, ns string) {
	e.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		s.Retry.BaseDelay = dur(200 * time.Millisecond)
		s.Retry.MaxDelay = dur(time.Second)
	})
	e.createAll(t, []*dtqv1alpha1.Task{
		newTask("flaky", ns, "retry", "flaky", map[string]int{"failTimes": 2}).MaxAttempts(5).Obj(),
		newTask("fail", ns, "retry", "fail", nil).MaxAttempts(3).Obj(),
	})
	got := e.waitTerminal(t, ns, "retry", 2, 2*time.Minute)
	if f := got["flaky"]; f.Status.State != dtqv1alpha1.TaskSucceeded || f.Status.Attempt != 3 {
		t.Errorf("flaky: want Succeeded on attempt 3: %s", describe(f))
	}
	if f := got["fail"]; f.Status.State != dtqv1alpha1.TaskDeadLettered || f.Status.Attempt != 1 ||
		!strings.Contains(f.Status.LastError, "permanent failure") {
		t.Errorf("fail: want DeadLettered after 1 attempt with the handler's error: %s", describe(f))
	}
}

// Two Tasks with one key: the counter runs once; the second Task is marked a
// duplicate of the first and mirrors its outcome.
func testDuplicateKey(t *testing.T, e *env, ns string) {
	e.queue(t, ns, nil)
	payload := map[string]any{"name": "e2e-dup-order-7", "holdSeconds": 1}
	e.createAll(t, []*dtqv1alpha1.Task{newTask("order-7", ns, "dup", "counter", payload).Key("order-7").Obj()})
	// The second Task comes once the first owns the key: created together, either
	// could be reconciled first (both may wait for the new Queue), and then the
	// other one is the duplicate.
	must(t, poll(t.Context(), time.Minute, func() error {
		got, err := e.listTasks(t.Context(), ns, "dup")
		if err != nil {
			return err
		}
		if first := got["order-7"]; first == nil || first.Status.TaskID == "" {
			return fmt.Errorf("order-7 not submitted yet")
		}
		return nil
	}))
	e.createAll(t, []*dtqv1alpha1.Task{newTask("order-7-again", ns, "dup", "counter", payload).Key("order-7").Obj()})
	got := e.waitTerminal(t, ns, "dup", 2, 2*time.Minute)
	first, second := got["order-7"], got["order-7-again"]
	if first.Status.State != dtqv1alpha1.TaskSucceeded || first.Status.Idempotency == nil || first.Status.Idempotency.Duplicate {
		t.Errorf("first: want Succeeded, not a duplicate: %s", describe(first))
	}
	if s := second.Status; s.State != dtqv1alpha1.TaskSucceeded || s.Idempotency == nil || !s.Idempotency.Duplicate ||
		s.Idempotency.TaskID != first.Status.TaskID {
		t.Errorf("second: want Succeeded as a duplicate of %s: %s", first.Status.TaskID, describe(second))
	}
	if !strings.Contains(first.Status.Result, `"value":1`) {
		t.Errorf("first: result %q, want value 1", first.Status.Result)
	}
	if n := e.counter(t, ns, "e2e-dup-order-7"); n != 1 {
		t.Errorf("counter = %d, want 1 (one execution)", n)
	}
}

const gitopsManifests = `
apiVersion: dtq.dev/v1alpha1
kind: Task
metadata: {name: invoice-1, namespace: e2e-gitops, labels: {e2e.dtq.dev/scenario: gitops}}
spec: {queue: q, type: counter, idempotencyKey: invoice-1, payload: {name: e2e-gitops-invoice-1}}
---
apiVersion: dtq.dev/v1alpha1
kind: Task
metadata: {name: invoice-2, namespace: e2e-gitops, labels: {e2e.dtq.dev/scenario: gitops}}
spec: {queue: q, type: counter, idempotencyKey: invoice-2, payload: {name: e2e-gitops-invoice-2}}
---
apiVersion: dtq.dev/v1alpha1
kind: Task
metadata: {name: invoice-3, namespace: e2e-gitops, labels: {e2e.dtq.dev/scenario: gitops}}
spec: {queue: q, type: counter, idempotencyKey: invoice-3, payload: {name: e2e-gitops-invoice-3}}
---
apiVersion: dtq.dev/v1alpha1
kind: Task
metadata: {name: report, namespace: e2e-gitops, labels: {e2e.dtq.dev/scenario: gitops}}
spec: {queue: q, type: flaky, idempotencyKey: report-2026-11, maxAttempts: 3, payload: {failTimes: 1}}
`

// GitOps re-apply: delete every Task and apply the same manifests again:
// the new Tasks replay the first run's outcome and nothing runs again.
func testGitOpsReapply(t *testing.T, e *env, ns string) {
	e.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) { s.Retry.BaseDelay = dur(200 * time.Millisecond) })
	objs, err := devstack.DecodeManifests([]byte(gitopsManifests))
	must(t, err)
	apply := func() { must(t, devstack.Apply(t.Context(), e.stack.Client, objs)) }
	apply()
	first := e.waitTerminal(t, ns, "gitops", len(objs), 2*time.Minute)
	for _, task := range first {
		if task.Status.State != dtqv1alpha1.TaskSucceeded {
			t.Fatalf("first run: want Succeeded: %s", describe(task))
		}
	}

	must(t, e.stack.Client.DeleteAllOf(t.Context(), &dtqv1alpha1.Task{}, client.InNamespace(ns),
		client.MatchingLabels{scenarioLabel: "gitops"}))
	must(t, poll(t.Context(), time.Minute, func() error {
		left, err := e.listTasks(t.Context(), ns, "gitops")
		if err == nil && len(left) > 0 {
			err = fmt.Errorf("%d tasks left after delete", len(left))
		}
		return err
	}))
	apply()
	second := e.waitTerminal(t, ns, "gitops", len(objs), 2*time.Minute)
	for name, task := range second {
		orig := first[name]
		s := task.Status
		if s.State != dtqv1alpha1.TaskSucceeded || s.Idempotency == nil || !s.Idempotency.Duplicate ||
			s.Idempotency.TaskID != orig.Status.TaskID || s.Result != orig.Status.Result {
			t.Errorf("re-applied %s: want a Succeeded duplicate of task %s with its result %q: %s",
				name, orig.Status.TaskID, orig.Status.Result, describe(task))
		}
	}
	for i := 1; i <= 3; i++ {
		if n := e.counter(t, ns, fmt.Sprintf("e2e-gitops-invoice-%d", i)); n != 1 {
			t.Errorf("counter invoice-%d = %d, want 1", i, n)
		}
	}
}

// SIGKILL of the worker process running a task: the stand-in restarts it, the
// task is reclaimed after the visibility timeout and succeeds on attempt 2.
func testWorkerKilledMidTask(t *testing.T, e *env, ns string) {
	e.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		s.VisibilityTimeout = dur(2 * time.Second)
		s.HeartbeatInterval = dur(500 * time.Millisecond)
		s.Scaling.MinReplicas = ptr.To[int32](1)
		s.Scaling.MaxReplicas = 1
	})
	// Wait for the worker first, so the task starts at once.
	must(t, poll(t.Context(), time.Minute, func() error {
		for _, p := range e.stack.Pods() {
			if p.Namespace == ns && p.Ready {
				return nil
			}
		}
		return fmt.Errorf("no ready worker in %s: %+v", ns, e.stack.Pods())
	}))
	e.createAll(t, []*dtqv1alpha1.Task{newTask("slow", ns, "crash", "sleep", map[string]int{"seconds": 6}).MaxAttempts(3).Obj()})

	var running dtqv1alpha1.Task
	must(t, poll(t.Context(), time.Minute, func() error {
		if err := e.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "slow"}, &running); err != nil {
			return err
		}
		if running.Status.State != dtqv1alpha1.TaskRunning || running.Status.WorkerID == "" {
			return fmt.Errorf("not running yet: %s", describe(&running))
		}
		return nil
	}))
	// The worker ID is the pod name (POD_NAME).
	must(t, e.stack.SignalPod(ns, running.Status.WorkerID, syscall.SIGKILL))
	t.Logf("SIGKILLed worker %s running task %s (attempt %d)", running.Status.WorkerID, running.Status.TaskID, running.Status.Attempt)

	got := e.waitTerminal(t, ns, "crash", 1, 2*time.Minute)["slow"]
	if got.Status.State != dtqv1alpha1.TaskSucceeded || got.Status.Attempt != 2 {
		t.Errorf("want Succeeded on attempt 2 after the crash: %s", describe(got))
	}
	for _, p := range e.stack.Pods() {
		if p.Namespace == ns && p.Name == running.Status.WorkerID && p.Restarts < 1 {
			t.Errorf("pod %s: %d restarts, want the killed process restarted", p.Name, p.Restarts)
		}
	}
}

// A task submitted over the stack's HTTP API (pkg/client, the admin token) with
// a key runs once; Wait follows the queue's events stream (the API's blocking
// read of it) until the task has finished; the key replays the same task; the
// task index lists it.
func testAPISubmitAndWait(t *testing.T, e *env, ns string) {
	e.queue(t, ns, nil)
	tok, err := e.stack.APIToken(t.Context(), devstack.AdminNamespace, devstack.AdminServiceAccount, time.Hour)
	must(t, err)
	c, err := dtqclient.New(e.stack.APIURL, dtqclient.WithToken(tok),
		dtqclient.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil)}))
	must(t, err)
	q := c.Queue(ns, "q")
	must(t, poll(t.Context(), 30*time.Second, func() error { _, err := q.Stats(t.Context()); return err }))

	payload := map[string]any{"name": "e2e-api-1", "holdSeconds": 0.5}
	first, err := q.Submit(t.Context(), "counter", payload, dtqclient.IdempotencyKey("api-1"))
	must(t, err)
	done, err := q.Wait(t.Context(), first.TaskID)
	must(t, err)
	if done.Status != dtqclient.StatusSucceeded {
		t.Fatalf("task %s: %+v, want Succeeded", first.TaskID, done)
	}
	again, err := q.Submit(t.Context(), "counter", payload, dtqclient.IdempotencyKey("api-1"))
	must(t, err)
	if !again.Duplicate || again.TaskID != first.TaskID {
		t.Errorf("the key again: %+v, want a duplicate of %s", again, first.TaskID)
	}
	list, err := q.List(t.Context(), dtqclient.ListOptions{})
	must(t, err)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != first.TaskID {
		t.Errorf("list: %+v, want task %s only", list.Tasks, first.TaskID)
	}
	if n := e.counter(t, ns, "e2e-api-1"); n != 1 {
		t.Errorf("counter %d, want 1", n)
	}
}
