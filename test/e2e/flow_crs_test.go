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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// Flow control through Queue and Task objects applied with kubectl on the
// dev stack, the reference worker's echo and sleep handlers doing the work.
// Each checker runs twice: on a Queue with the limit, where it must pass,
// and on the same Queue without flowControl, where it must fail, so a
// checker that cannot see the limit fails the suite.
func TestFlowControlCRs(t *testing.T) {
	t.Run("BadLimitRefused", testFlowCRBadLimit)
	for _, sc := range []struct {
		name, ns string
		run      func(t *testing.T, ns string, limited bool) error
	}{
		{"RateSpreadsBurst", "e2e-flow-rate", flowCRRate},
		{"MaxConcurrencyAcrossPods", "e2e-flow-maxc", flowCRMaxConcurrency},
		{"KeyCapDoesNotHoldBackAnotherKey", "e2e-flow-key", flowCRKeyCap},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			if err := sc.run(t, single.namespace(t, sc.ns), true); err != nil {
				t.Error(err)
			}
		})
		t.Run(sc.name+"WithoutFlowControl", func(t *testing.T) {
			t.Parallel()
			err := sc.run(t, single.namespace(t, sc.ns+"-off"), false)
			if err == nil {
				t.Fatal("the checker passed on a Queue without flowControl: it cannot see the limit")
			}
			t.Logf("without flowControl the checker fails, as it must: %v", err)
		})
	}
}

// testFlowCRBadLimit: kubectl apply of a Queue whose burst exceeds its
// limit is refused, naming the field, and creates nothing.
func testFlowCRBadLimit(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-flow-bad")
	r := kubectlApply(t, ns, flowQueueYAML(ns, 1, 1, "{rateLimit: {limit: 10, period: 1s, burst: 50}}"))
	want(t, "apply a Queue with burst 50 over limit 10", r, 1, `^$`, `spec\.flowControl\.rateLimit\.burst: .*burst must not exceed limit`)
	r = kubectlApply(t, ns, flowQueueYAML(ns, 1, 1, "{perKey: {concurrency: 0}}"))
	want(t, "apply a Queue with perKey.concurrency 0", r, 1, `^$`, `spec\.flowControl\.perKey\.concurrency`)
	want(t, "get the refused Queue", kubectl(t, ns, "get", "queues.dtq.dev", "q"), 1, `^$`, `NotFound`)
}

// flowCRRate: 16 echo Tasks applied at once on one worker with 4 slots and
// rateLimit {limit: 4, period: 1s, burst: 2}: from the tasks' own start
// times, no window of length t holds more than 2 + 4t starts, so the burst
// is spread over at least 3.5 s.
func flowCRRate(t *testing.T, ns string, limited bool) error {
	const n, limit, burst, period = 16, 4, 2, time.Second
	flow := ""
	if limited {
		flow = fmt.Sprintf("{rateLimit: {limit: %d, period: %v, burst: %d}}", limit, period, burst)
	}
	api := applyFlowQueue(t, ns, 4, 1, flow)
	var docs []string
	for i := range n {
		docs = append(docs, flowTaskYAML(ns, fmt.Sprintf("echo-%02d", i), "echo", "", "{i: "+fmt.Sprint(i)+"}"))
	}
	want(t, "apply the Tasks", kubectlApply(t, ns, docs...), 0, `created`, `^$`)
	runs := flowRuns(t, api, single.waitTerminal(t, ns, "flow", n, 3*time.Minute))
	starts := make([]time.Time, len(runs))
	for i, r := range runs {
		starts[i] = r.start
	}
	t.Logf("%d starts from %s to %s", n, starts[0].Format(time.StampMilli), starts[n-1].Format(time.StampMilli))
	return rateCheck(starts, limit, burst, period)
}

// flowCRMaxConcurrency: 12 one-second sleeps on two worker pods of 2 slots
// each under maxConcurrency 3: from the tasks' own execution times, never
// more than 3 run at once, and both pods ran some.
func flowCRMaxConcurrency(t *testing.T, ns string, limited bool) error {
	const n, maxConcurrency = 12, 3
	flow := ""
	if limited {
		flow = fmt.Sprintf("{maxConcurrency: %d}", maxConcurrency)
	}
	api := applyFlowQueue(t, ns, 2, 2, flow)
	var docs []string
	for i := range n {
		docs = append(docs, flowTaskYAML(ns, fmt.Sprintf("sleep-%02d", i), "sleep", "", "{seconds: 1}"))
	}
	want(t, "apply the Tasks", kubectlApply(t, ns, docs...), 0, `created`, `^$`)
	tasks := single.waitTerminal(t, ns, "flow", n, 3*time.Minute)
	workers := map[string]int{}
	for _, task := range tasks {
		workers[task.Status.WorkerID]++
	}
	if len(workers) < 2 {
		t.Errorf("tasks ran on %v, want both worker pods", workers)
	}
	runs := flowRuns(t, api, tasks)
	if most := maxOverlap(runs); most > maxConcurrency {
		return fmt.Errorf("%d tasks ran at once across the pods %v, more than maxConcurrency %d", most, workers, maxConcurrency)
	}
	return nil
}

// flowCRKeyCap: on one worker with 2 slots and a per-key cap of 1, three
// sleeps of tenant-a (10 s, then 1 s twice), then an echo of tenant-b.
// tenant-a's tasks
// never overlap, and tenant-b's starts while tenant-a's first still runs:
// the capped key does not hold it back. While tenant-a's tasks wait, the
// Queue's status names the binding limit (FlowLimited, status.flow, the
// Limited By column of kubectl get -o wide) and a waiting Task says why
// it waits.
func flowCRKeyCap(t *testing.T, ns string, limited bool) error {
	flow := ""
	if limited {
		flow = "{perKey: {concurrency: 1}}"
	}
	api := applyFlowQueue(t, ns, 2, 1, flow)
	var docs []string
	for i, seconds := range []int{10, 1, 1} {
		docs = append(docs, flowTaskYAML(ns, fmt.Sprintf("a-%d", i), "sleep", "tenant-a", fmt.Sprintf("{seconds: %d}", seconds)))
	}
	want(t, "apply tenant-a's Tasks", kubectlApply(t, ns, docs...), 0, `created`, `^$`)
	first := &dtqv1alpha1.Task{}
	must(t, poll(t.Context(), time.Minute, func() error {
		must(t, single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "a-0"}, first))
		if first.Status.State != dtqv1alpha1.TaskRunning {
			return fmt.Errorf("a-0 is %s, want Running", first.Status.State)
		}
		return nil
	}))
	want(t, "apply tenant-b's Task", kubectlApply(t, ns, flowTaskYAML(ns, "b-0", "echo", "tenant-b", "{}")), 0, `created`, `^$`)
	if limited {
		flowCRStatusNamesKeyCap(t, ns)
	}
	tasks := single.waitTerminal(t, ns, "flow", 4, 3*time.Minute)
	runs := flowRuns(t, api, tasks)
	var a []flowRun
	var b flowRun
	for _, r := range runs {
		if r.key == "tenant-b" {
			b = r
		} else {
			a = append(a, r)
		}
	}
	var errs []error
	if most := maxOverlap(a); most > 1 {
		errs = append(errs, fmt.Errorf("%d tasks of tenant-a ran at once, over its cap of 1", most))
	}
	if firstEnd := a[0].end; !b.start.Before(firstEnd) {
		errs = append(errs, fmt.Errorf("tenant-b's task started at %s, after tenant-a's first ended (%s): it waited behind tenant-a",
			b.start.Format(time.StampMilli), firstEnd.Format(time.StampMilli)))
	}
	return errors.Join(errs...)
}

// flowSeries are the manager's flow control series, which
// flowCRStatusNamesKeyCap checks (TestMetricsAfterBurst's queue has no flow
// control).
var flowSeries = []string{"dtq_queue_flow_admissible_tasks", "dtq_queue_flow_throttled_tasks", "dtq_queue_flow_held_slots",
	"dtq_queue_flow_active_keys", "dtq_queue_flow_parked_keys", "dtq_queue_flow_limited"}

// flowCRStatusNamesKeyCap checks, while tenant-a's tasks wait on their
// key's cap, that the Queue's status, the manager's metrics and kubectl get -o wide name the limit
// and that a waiting Task says why it waits.
func flowCRStatusNamesKeyCap(t *testing.T, ns string) {
	t.Helper()
	must(t, poll(t.Context(), time.Minute, func() error {
		q := &dtqv1alpha1.Queue{}
		if err := single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "q"}, q); err != nil {
			return err
		}
		c := meta.FindStatusCondition(q.Status.Conditions, dtqv1alpha1.QueueFlowLimited)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(dtqv1alpha1.LimitKeyConcurrency) ||
			q.Status.Flow == nil || len(q.Status.Flow.LimitedBy) == 0 || q.Status.Flow.LimitedBy[0] != dtqv1alpha1.LimitKeyConcurrency {
			return fmt.Errorf("FlowLimited %+v, status.flow %+v; want True, KeyConcurrency", c, q.Status.Flow)
		}
		t.Logf("FlowLimited while tenant-a waits: %s: %s", c.Reason, c.Message)
		return nil
	}))
	// The manager's metrics say the same: a-0 holds tenant-a's one slot, a-1
	// and a-2 wait on it.
	must(t, poll(t.Context(), time.Minute, func() error {
		got := map[string]float64{}
		for k, v := range scrapeSeries(t, single.stack.ManagerMetricsURL(), ns) {
			if slices.Contains(flowSeries, seriesName(k)) {
				got[k] = v
			}
		}
		want := map[string]float64{
			"dtq_queue_flow_held_slots{queue=q}": 1, "dtq_queue_flow_parked_keys{queue=q}": 1, "dtq_queue_flow_active_keys{queue=q}": 1,
			"dtq_queue_flow_throttled_tasks{queue=q}": 2, "dtq_queue_flow_admissible_tasks{queue=q}": 0,
			"dtq_queue_flow_limited{limit=KeyConcurrency,queue=q}": 1, "dtq_queue_flow_limited{limit=KeyRateLimit,queue=q}": 0,
			"dtq_queue_flow_limited{limit=MaxConcurrency,queue=q}": 0, "dtq_queue_flow_limited{limit=RateLimit,queue=q}": 0,
		}
		return diffSeries(want, got, "\x00")
	}))
	want(t, "kubectl get queue -o wide", kubectl(t, ns, "get", "queues.dtq.dev", "q", "-o", "wide"), 0,
		`(?s)LIMITED BY.*\nq .* KeyConcurrency `, `^$`)
	must(t, poll(t.Context(), time.Minute, func() error {
		task := &dtqv1alpha1.Task{}
		if err := single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "a-2"}, task); err != nil {
			return err
		}
		if task.Status.State != dtqv1alpha1.TaskQueued || !strings.Contains(task.Status.WaitReason, "tenant-a") {
			return fmt.Errorf("a-2 is %s, waitReason %q; want Queued, waiting on tenant-a", task.Status.State, task.Status.WaitReason)
		}
		t.Logf("a-2 waits: %q", task.Status.WaitReason)
		return nil
	}))
}

// applyFlowQueue applies Queue <ns>/q with kubectl, with concurrency slots
// per worker, replicas workers and flowControl flow ("" for none), waits
// until its workers are ready, and returns the queue's HTTP API client.
func applyFlowQueue(t *testing.T, ns string, concurrency, replicas int, flow string) *dtqclient.Queue {
	t.Helper()
	want(t, "apply the Queue", kubectlApply(t, ns, flowQueueYAML(ns, concurrency, replicas, flow)), 0, `queue.dtq.dev/q created`, `^$`)
	q := &dtqv1alpha1.Queue{}
	must(t, single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "q"}, q))
	single.deleteQueueAtCleanup(t, q)
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		if n := readyWorkers(single, ns); n < replicas {
			return fmt.Errorf("%d of %d workers of %s ready", n, replicas, ns)
		}
		return nil
	}))
	return apiClient(t, adminToken(t)).Queue(ns, "q")
}

// flowQueueYAML is Queue <ns>/q as a user writes it, its scaling fixed at
// replicas workers.
func flowQueueYAML(ns string, concurrency, replicas int, flow string) string {
	s := fmt.Sprintf(`apiVersion: dtq.dev/v1alpha1
kind: Queue
metadata: {name: q, namespace: %s}
spec:
  concurrency: %d
  scaling: {minReplicas: %d, maxReplicas: %d}
`, ns, concurrency, replicas, replicas)
	if flow != "" {
		s += "  flowControl: " + flow + "\n"
	}
	return s
}

// flowTaskYAML is a Task of Queue q labelled for waitTerminal, with the
// flow key given ("" for none).
func flowTaskYAML(ns, name, typ, key, payload string) string {
	s := fmt.Sprintf(`apiVersion: dtq.dev/v1alpha1
kind: Task
metadata: {name: %s, namespace: %s, labels: {%s: flow}}
spec: {queue: q, type: %s, maxAttempts: 1, payload: %s`, name, ns, scenarioLabel, typ, payload)
	if key != "" {
		s += ", flowKey: " + key
	}
	return s + "}\n"
}

// kubectlApply writes docs as one YAML stream and runs kubectl apply -f on it.
func kubectlApply(t *testing.T, ns string, docs ...string) result {
	t.Helper()
	path := filepath.Join(t.TempDir(), "objects.yaml")
	must(t, os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600))
	return kubectl(t, ns, "apply", "-f", path)
}

// flowRun is one task's execution, from the engine's record through the
// HTTP API (millisecond times; a Task's status has seconds only).
type flowRun struct {
	name, key  string
	start, end time.Time
}

// flowRuns reads the execution of each of tasks, which must have
// succeeded, oldest start first.
func flowRuns(t *testing.T, api *dtqclient.Queue, tasks map[string]*dtqv1alpha1.Task) []flowRun {
	t.Helper()
	var runs []flowRun
	for name, task := range tasks {
		if task.Status.State != dtqv1alpha1.TaskSucceeded {
			t.Fatalf("want every Task Succeeded: %s", describe(task))
		}
		got, err := api.Get(t.Context(), task.Status.TaskID)
		must(t, err)
		if got.Execution.StartedAt == nil || got.Execution.FinishedAt == nil {
			t.Fatalf("task %s (%s): no execution times: %+v", name, got.TaskID, got.Execution)
		}
		runs = append(runs, flowRun{name: name, key: task.Spec.FlowKey, start: *got.Execution.StartedAt, end: *got.Execution.FinishedAt})
	}
	slices.SortFunc(runs, func(a, b flowRun) int { return a.start.Compare(b.start) })
	return runs
}

// rateCheck fails when some window of the sorted starts holds more than
// burst + t*limit/period starts, t its length (the generic cell rate
// algorithm's bound). A rate-limited start is recorded with the clock the
// limit admitted it by (the Redis server's), to the millisecond, so each
// window is taken a millisecond longer. Without flow control the 16 starts
// fall within milliseconds and the check fails.
func rateCheck(starts []time.Time, limit, burst int, period time.Duration) error {
	for i := range starts {
		for j := i + burst; j < len(starts); j++ {
			t := starts[j].Sub(starts[i]) + time.Millisecond
			if allowed := burst + int(int64(t)*int64(limit)/int64(period)); j-i+1 > allowed {
				return fmt.Errorf("%d starts within %v (from %s), more than %d + %v x %d/%v = %d",
					j-i+1, t, starts[i].Format(time.StampMilli), burst, t, limit, period, allowed)
			}
		}
	}
	return nil
}

// maxOverlap is the most runs executing at one moment (a run ending when
// another starts does not overlap it).
func maxOverlap(runs []flowRun) int {
	most := 0
	for _, r := range runs {
		n := 0
		for _, o := range runs {
			if !o.start.After(r.start) && o.end.After(r.start) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}
