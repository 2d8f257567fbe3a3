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
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/chaoscheck"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// httpVisibility is the HTTP handler Queues' visibility timeout: short, so a
// task "three times longer" is quick to run.
const httpVisibility = 2 * time.Second

// pythonQueue creates Queue <ns>/q from the Python example's manifest
// (examples/http-handlers/python/queue.yaml), with short timeouts for the
// tests, the handler's logs in dir, and then mutate applied. It waits for
// ready workers.
func pythonQueue(t *testing.T, ns, dir string, replicas int32, mutate ...func(*dtqv1alpha1.QueueSpec)) *dtqv1alpha1.Queue {
	t.Helper()
	objs, err := devstack.LoadManifests(filepath.Join(envtestutil.RepoRoot(), "examples", "http-handlers", "python"))
	must(t, err)
	var example dtqv1alpha1.Queue
	for _, o := range objs {
		if o.GetKind() == "Queue" {
			must(t, runtimeConvert(o.Object, &example))
		}
	}
	if example.Spec.Handler == nil {
		t.Fatal("the Python example's queue.yaml holds no Queue with a handler")
	}
	q := single.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		*s = example.Spec
		s.VisibilityTimeout = dur(httpVisibility)
		s.HeartbeatInterval = dur(400 * time.Millisecond)
		s.TaskTimeout = dur(30 * time.Second)
		s.Retry.BaseDelay = dur(200 * time.Millisecond)
		s.Retry.MaxDelay = dur(2 * time.Second)
		s.Retry.MaxAttempts = chaosAttempts
		s.Scaling.MinReplicas = ptr.To(replicas)
		s.Scaling.MaxReplicas = replicas
		c := &s.WorkerTemplate.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "EXEC_LOG", Value: filepath.Join(dir, "exec.log")},
			corev1.EnvVar{Name: "RECEIPT_LOG", Value: filepath.Join(dir, "receipts.log")})
		for _, m := range mutate {
			m(s)
		}
	})
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		if n := readyWorkers(single, ns); n < int(replicas) {
			return fmt.Errorf("%d ready HTTP handler pods in %s, want %d", n, ns, replicas)
		}
		return nil
	}))
	return q
}

func runtimeConvert(obj map[string]any, into any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// The Python example end to end: Queue and Tasks through kubectl and the
// API server, and tasks through the HTTP API with an Idempotency-Key.
func TestHTTPHandlerPython(t *testing.T) {
	ns := single.namespace(t, "e2e-http")
	dir := t.TempDir()
	pythonQueue(t, ns, dir, 1)

	task := func(name string, payload any) *dtqv1alpha1.Task {
		return newTask(name, ns, "http", "greet", payload).MaxAttempts(3).Obj()
	}
	tasks := []*dtqv1alpha1.Task{
		task("ok", map[string]string{"name": "Ada"}),
		task("fail-once", map[string]bool{"fail_first_attempt": true}),
		task("reject", map[string]string{"reject": "name must not be empty"}),
		newTask("slow-first", ns, "http", "greet", map[string]float64{"sleep_first_attempt": 6}).MaxAttempts(3).Timeout(2 * time.Second).Obj(),
		task("long", map[string]any{"sleep": 3 * httpVisibility.Seconds(), "key": "long-" + ns}),
	}
	single.createAll(t, tasks)

	r := kubectl(t, ns, "wait", "--for=jsonpath={.status.state}=Succeeded", "task/ok", "--timeout=60s")
	want(t, "kubectl wait ok", r, 0, "condition met", "")
	r = kubectl(t, ns, "get", "task", "ok", "-o", "jsonpath={.status.result}")
	want(t, "ok's result", r, 0, `"greeting": ?"hello, Ada"`, "")

	got := single.waitTerminal(t, ns, "http", len(tasks), 2*time.Minute)
	for name, w := range map[string]struct {
		state   dtqv1alpha1.TaskState
		attempt int32
		errPart string
	}{
		"ok":         {dtqv1alpha1.TaskSucceeded, 1, ""},
		"fail-once":  {dtqv1alpha1.TaskSucceeded, 2, ""},
		"reject":     {dtqv1alpha1.TaskDeadLettered, 1, "HTTP 400 from the handler: name must not be empty"},
		"slow-first": {dtqv1alpha1.TaskSucceeded, 2, ""},
		"long":       {dtqv1alpha1.TaskSucceeded, 1, ""},
	} {
		st := got[name].Status
		if st.State != w.state || st.Attempt != w.attempt || !strings.Contains(st.LastError, w.errPart) {
			t.Errorf("task %s: %s; want %s on attempt %d with error %q", name, describe(got[name]), w.state, w.attempt, w.errPart)
		}
	}
	if st := got["slow-first"].Status; !strings.Contains(st.LastError, "deadline exceeded") && st.State == dtqv1alpha1.TaskSucceeded {
		// The error of attempt 1 is cleared on success; the execution log
		// below shows the cancelled request did not answer.
		t.Logf("slow-first: %s", describe(got["slow-first"]))
	}
	if n := executions(t, filepath.Join(dir, "exec.log"), "long-"+ns); n != 1 {
		t.Errorf("a task three times longer than the visibility timeout ran %d times, want once", n)
	}

	// Through the HTTP API, with an Idempotency-Key the handler receives.
	c := apiClient(t, adminToken(t))
	sub, err := c.Queue(ns, "q").Submit(t.Context(), "greet", map[string]string{"name": "Grace"}, dtqclient.IdempotencyKey("grace-1"))
	must(t, err)
	done, err := c.Queue(ns, "q").Wait(t.Context(), sub.TaskID)
	must(t, err)
	var res map[string]any
	_ = json.Unmarshal(done.Result, &res)
	if done.Status != dtqclient.StatusSucceeded || res["greeting"] != "hello, Grace" || res["idempotency_key"] != "grace-1" {
		t.Fatalf("API task: %s result %s", done.Status, done.Result)
	}
	replay := call(t, adminToken(t), http.MethodPost, queuePath(ns, "q")+"/tasks", `{"task_type":"greet"}`, "Idempotency-Key", "grace-1")
	expect(t, "replay of the API task", replay, http.StatusOK, "")
	// The handler's progress report (greet reports {"step":"greeting"}
	// through the sidecar) is the task's latest progress and a TaskProgress
	// event that kubectl dtq events prints.
	if string(done.Execution.Progress) != `{"step":"greeting"}` {
		t.Errorf("API task's execution.progress %s, want {\"step\":\"greeting\"}", done.Execution.Progress)
	}
	want(t, "events of the API task", dtq(t, ns, "events", "q", "--task", sub.TaskID), 0,
		`(?m)^\S+ +\S+ TaskProgress +`+sub.TaskID+` 1 \{"step":"greeting"\}$`, `^$`)

	// The Queue reports its handler reachable.
	var q dtqv1alpha1.Queue
	must(t, single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "q"}, &q))
	if c := meta.FindStatusCondition(q.Status.Conditions, dtqv1alpha1.QueueHandlerReachable); c == nil || c.Status != "True" {
		t.Errorf("HandlerReachable = %+v, want True", c)
	}
}

// A wrong route (the app answers 404 to every task) pauses delivery and says
// so in the Queue's status instead of dead-lettering the queue, and costs the
// held task no attempt, past its deadlines too; fixing the path (the pods
// roll) delivers it as attempt 1.
func TestHTTPHandlerWrongRoute(t *testing.T) {
	ns := single.namespace(t, "e2e-http-route")
	q := pythonQueue(t, ns, t.TempDir(), 1)
	base := client.MergeFrom(q.DeepCopy())
	q.Spec.Handler.HTTP.Path = "/wrong"
	must(t, single.stack.Client.Patch(t.Context(), q, base))
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		var d appsv1.Deployment
		if err := single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "q-workers"}, &d); err != nil {
			return err
		}
		for _, e := range d.Spec.Template.Spec.InitContainers[0].Env {
			if e.Name == "DTQ_HANDLER_URL" && strings.HasSuffix(e.Value, "/wrong") && readyWorkers(single, ns) == 1 {
				return nil
			}
		}
		return fmt.Errorf("the workers do not run the wrong path yet")
	}))
	const timeout = 3 * time.Second
	single.createAll(t, []*dtqv1alpha1.Task{newTask("held", ns, "route", "greet", map[string]string{"name": "Lin"}).MaxAttempts(3).Timeout(timeout).Obj()})
	created := time.Now()
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		var got dtqv1alpha1.Queue
		if err := single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "q"}, &got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, dtqv1alpha1.QueueHandlerReachable)
		if c == nil || c.Status != "False" || c.Reason != dtqv1alpha1.ReasonHandlerNotFound {
			return fmt.Errorf("HandlerReachable = %+v, want False %s", c, dtqv1alpha1.ReasonHandlerNotFound)
		}
		t.Logf("HandlerReachable: %s", c.Message)
		return nil
	}))
	time.Sleep(time.Until(created.Add(2*timeout + time.Second))) // past two deadlines
	var held dtqv1alpha1.Task
	must(t, single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "held"}, &held))
	if held.Status.State == dtqv1alpha1.TaskDeadLettered || held.Status.State == dtqv1alpha1.TaskFailed || held.Status.Attempt > 1 {
		t.Fatalf("a task of a queue with a wrong route, past two deadlines: %s; want not ended, attempt 1", describe(&held))
	}
	must(t, single.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "q"}, q))
	base = client.MergeFrom(q.DeepCopy())
	q.Spec.Handler.HTTP.Path = "/tasks"
	must(t, single.stack.Client.Patch(t.Context(), q, base))
	got := single.waitTerminal(t, ns, "route", 1, 3*time.Minute)["held"]
	if got.Status.State != dtqv1alpha1.TaskSucceeded || got.Status.Attempt != 1 {
		t.Fatalf("the held task after the path was fixed: %s; want Succeeded on attempt 1", describe(got))
	}
}

// executions counts the execution log's lines of key.
func executions(t *testing.T, path, key string) int {
	t.Helper()
	log, err := demo.ReadChaosLog(path)
	must(t, err)
	n := 0
	for _, e := range log {
		if e.Key == key {
			n++
		}
	}
	return n
}

// lines counts the lines of a file (0 when it does not exist).
func lines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0
	}
	must(t, err)
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

// httpFaultTasks is the number of logical tasks of the HTTP handler's fault run.
const httpFaultTasks = 300

// The fault suite through the Python handler: 300 logical tasks (every
// tenth submitted twice with the same key), SIGKILLs of app processes and of
// sidecars while tasks are in flight; counted from the handler's own
// execution log: 0 lost, 0 duplicated. And a receipt whose app is killed
// right after its guarded side effect sends it once.
func TestHTTPHandlerFaults(t *testing.T) {
	ns := single.namespace(t, "e2e-http-faults")
	dir := t.TempDir()
	pythonQueue(t, ns, dir, 2)
	r := runHTTPFaults(t, ns, dir, httpFaultTasks, func() {
		killHTTP(t, ns, "app", 2)
		killHTTP(t, ns, "sidecar", 2)
	})
	if !r.OK() || r.Accepted != httpFaultTasks || r.Redeliveries == 0 {
		t.Errorf("want %d accepted, 0 lost, 0 duplicated and some redeliveries: %s\n%s", httpFaultTasks, r, r.Details(20))
	}

	receipts := filepath.Join(dir, "receipts.log")
	before := lines(t, receipts)
	rt := newTask("receipt", ns, "receipt", "receipt", map[string]any{"order": "e2e-1", "die_after_effect": true}).MaxAttempts(3).Obj()
	single.createAll(t, []*dtqv1alpha1.Task{rt})
	got := single.waitTerminal(t, ns, "receipt", 1, 2*time.Minute)["receipt"]
	if got.Status.State != dtqv1alpha1.TaskSucceeded || got.Status.Attempt < 2 || lines(t, receipts)-before != 1 ||
		!regexp.MustCompile(`"sent_now": ?false`).MatchString(got.Status.Result) {
		t.Errorf("receipt killed after its side effect: %s, %d receipts sent; want Succeeded after a redelivery, sent once",
			describe(got), lines(t, receipts)-before)
	}
}

// runHTTPFaults runs n chaos-keyed tasks through the Python handler of
// Queue <ns>/q, calls inject once a quarter succeeded, and checks the
// execution log.
func runHTTPFaults(t *testing.T, ns, dir string, n int, inject func()) chaoscheck.Report {
	t.Helper()
	scenario := "http-faults"
	var tasks, twins []*dtqv1alpha1.Task
	for i := range n {
		key := fmt.Sprintf("%s-%04d", ns, i)
		hold := 0.02
		if i%10 == 5 {
			hold = 2
		}
		mk := func(name string) *dtqv1alpha1.Task {
			return newTask(name, ns, scenario, "chaos", map[string]any{"key": key, "sleep": hold}).Key(key).MaxAttempts(chaosAttempts).Obj()
		}
		tasks = append(tasks, mk(fmt.Sprintf("f-%04d", i)))
		if i%twinEvery == 0 {
			twins = append(twins, mk(fmt.Sprintf("f-%04d-twin", i)))
		}
	}
	tasks = append(tasks, twins...)
	created := make(chan error, 1)
	go func() { created <- single.create(tasks) }()
	must(t, poll(t.Context(), 3*time.Minute, func() error {
		if s := succeeded(t, single, ns, scenario); s < n/4 {
			return fmt.Errorf("%d succeeded, waiting for %d", s, n/4)
		}
		return nil
	}))
	inject()
	must(t, <-created)
	got := single.waitTerminal(t, ns, scenario, len(tasks), 5*time.Minute)
	logical := chaoscheck.FromTasks(slices.Collect(maps.Values(got)), chaosAttempts)
	log, err := demo.ReadChaosLog(filepath.Join(dir, "exec.log"))
	must(t, err)
	r := chaoscheck.Check(logical, log, nil)
	t.Logf("HTTP handler faults: %s", r)
	return r
}

// killHTTP SIGKILLs, n times one second apart, the app process or the
// sidecar of the HTTP handler pod with the most tasks in flight.
func killHTTP(t *testing.T, ns, which string, n int) {
	t.Helper()
	for range n {
		name, active := busyWorker(t, ns)
		var pid int
		for _, p := range single.stack.Pods() {
			if p.Namespace == ns && p.Name == name {
				pid = p.PID
				if which == "app" {
					pid = p.AppPID
				}
			}
		}
		if pid == 0 {
			t.Fatalf("pod %s has no running %s process", name, which)
		}
		must(t, syscall.Kill(-pid, syscall.SIGKILL))
		t.Logf("SIGKILLed the %s of %s with %d tasks in flight", which, name, active)
		time.Sleep(time.Second)
	}
}

// brokenSend is the sidecar's request, which the broken build sends twice.
const brokenSend = "		a := f.send(ctx, t)\n"

// The HTTP fault checker can fail: with a sidecar built to send each
// request twice, the handler's execution log shows attempts that ran twice
// and the checker reports them duplicated.
func TestHTTPCheckerSeesBrokenSidecar(t *testing.T) {
	bin := buildBrokenWorker(t, "internal/delivery/forward.go", brokenSend, "		f.send(ctx, t) // a deliberately broken build\n"+brokenSend)
	single.stack.SetWorkerBin(bin)
	t.Cleanup(func() { single.stack.SetWorkerBin(filepath.Join(binDir, "worker")) })
	ns := single.namespace(t, "e2e-http-broken")
	dir := t.TempDir()
	pythonQueue(t, ns, dir, 1)
	r := runHTTPFaults(t, ns, dir, 40, func() {})
	t.Logf("broken sidecar (sends twice): %s\n%s", r, r.Details(3))
	if r.Duplicated != 40 {
		t.Errorf("the checker reports %d duplicated of %d, want all", r.Duplicated, r.Accepted)
	}
}
