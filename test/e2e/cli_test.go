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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
)

// result is one run of a command.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// runBin runs a binary with args and returns its output and exit code; it fails
// the test only when the binary cannot be started.
func runBin(t *testing.T, bin string, args ...string) result {
	t.Helper()
	return runCmd(t, exec.CommandContext(t.Context(), bin, args...))
}

// runCmd runs cmd (its Stdin and Env as the caller set them) and returns its
// output and exit code; it fails the test only when cmd cannot be started.
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return result{out.String(), errOut.String(), cmd.ProcessState.ExitCode()}
}

// dtq runs the built kubectl-dtq as the stack's admin in namespace ns.
func dtq(t *testing.T, ns string, args ...string) result {
	t.Helper()
	return runCmd(t, dtqCmd(t, ns, args...))
}

// dtqCmd is the command dtq runs, for a caller that sets its input or
// environment. It finds the HTTP API as make dev users do: the api-url file
// beside the kubeconfig.
func dtqCmd(t *testing.T, ns string, args ...string) *exec.Cmd {
	return exec.CommandContext(t.Context(), filepath.Join(binDir, "kubectl-dtq"), append([]string{"--kubeconfig", single.stack.Kubeconfig, "-n", ns}, args...)...)
}

// kubectl runs the real kubectl of the envtest assets (bin/k8s).
func kubectl(t *testing.T, ns string, args ...string) result {
	t.Helper()
	bin := filepath.Join(envtestutil.AssetsDir(), "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kubectl is missing (make envtest builds it): %v", err)
	}
	return runBin(t, bin, append([]string{"--kubeconfig", single.stack.Kubeconfig, "-n", ns}, args...)...)
}

// want fails the test unless r exited with code and its stdout and stderr
// match the patterns (empty: anything).
func want(t *testing.T, what string, r result, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code || !regexp.MustCompile(stdout).MatchString(r.stdout) || !regexp.MustCompile(stderr).MatchString(r.stderr) {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout matching %q, stderr matching %q",
			what, r.code, r.stdout, r.stderr, code, stdout, stderr)
	}
}

// The kubectl-dtq verbs on Task objects, run as a user would, each checked
// for its output and exit code.
func TestCLI(t *testing.T) {
	t.Run("Help", testCLIHelp)
	t.Run("SubmitGetListWait", testCLISubmitGetListWait)
	t.Run("WaitOnFailures", testCLIWaitOnFailures)
	t.Run("RetryDeadLettered", testCLIRetryDeadLettered)
	t.Run("KubectlWaitAndFieldSelector", testKubectlWaitAndFieldSelector)
}

func testCLIHelp(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"submit", "get", "list", "wait", "cancel", "retry", "dev",
		"dlq list", "dlq show", "dlq requeue", "dlq discard", "dlq purge",
		"queue list", "queue stats", "queue pause", "queue resume", "queue purge", "workers", "flow", "events",
		"dlq", "queue", "ui", "schedule"} {
		want(t, verb+" --help", dtq(t, "default", append(strings.Fields(verb), "--help")...), 0, `(?s)Usage:\n  kubectl dtq `+verb+`.*Examples?:\n  (kubectl dtq|make dev)`, `^$`)
	}
}

func testCLISubmitGetListWait(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-cli")
	single.queue(t, ns, nil)

	r := dtq(t, ns, "submit", "--queue", "q", "--type", "echo", "--payload", `{"hello":"cli"}`, "--key", "cli-1")
	want(t, "submit", r, 0, `^task\.dtq\.dev/echo-[a-z0-9]{5} created\n$`, `^$`)
	echo := strings.Fields(r.stdout)[0]
	want(t, "wait", dtq(t, ns, "wait", echo, "--timeout", "1m"), 0, `^`+regexp.QuoteMeta(echo)+` Succeeded\n$`, `^$`)
	want(t, "wait -o jsonpath", dtq(t, ns, "wait", echo, "-o", "jsonpath={.status.result}"), 0, `^\{"hello":"cli"\}$`, `^$`)
	name := strings.TrimPrefix(echo, "task.dtq.dev/")

	manifest := filepath.Join(t.TempDir(), "task.yaml")
	must(t, os.WriteFile(manifest, []byte(`apiVersion: dtq.dev/v1alpha1
kind: Task
metadata: {name: from-file}
spec: {queue: q, type: flaky, payload: {failTimes: 1}}
`), 0o644))
	want(t, "submit -f", dtq(t, ns, "submit", "-f", manifest), 0, `^task\.dtq\.dev/from-file created\n$`, `^$`)
	want(t, "submit -o name", dtq(t, ns, "submit", "--queue", "other", "--type", "echo", "--name", "elsewhere", "-o", "name"), 0,
		`^task\.dtq\.dev/elsewhere\n$`, `^$`)
	want(t, "wait from-file", dtq(t, ns, "wait", "tasks.dtq.dev/from-file", "--timeout", "1m"), 0, `Succeeded`, `^$`)

	want(t, "get", dtq(t, ns, "get", name, "from-file"), 0,
		`^NAME +QUEUE +TYPE +STATE +IDEMPOTENCY +ATTEMPTS +AGE\n`+name+` +q +echo +Succeeded +completed +1 .*\nfrom-file +q +flaky +Succeeded +2 `, `^$`)
	want(t, "get -o wide", dtq(t, ns, "get", "from-file", "-o", "wide"), 0, `WORKER`, `^$`)
	r = dtq(t, ns, "get", name, "-o", "json")
	var got dtqv1alpha1.Task
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Status.Idempotency == nil || got.Status.Idempotency.Key != "cli-1" {
		t.Errorf("get -o json: %v, %s", err, r)
	}
	want(t, "get missing", dtq(t, ns, "get", "nope"), 1, `^$`, `not found`)

	want(t, "list --queue", dtq(t, ns, "list", "--queue", "q", "-o", "name"), 0,
		`^(task\.dtq\.dev/(`+name+`|from-file)\n){2}$`, `^$`)
	want(t, "list --state", dtq(t, ns, "list", "--state", "Pending", "-o", "name"), 0, `^task\.dtq\.dev/elsewhere\n$`, `^$`)
	want(t, "list --type", dtq(t, ns, "list", "--type", "flaky"), 0, `^NAME .*\nfrom-file `, `^$`)
	want(t, "list --key", dtq(t, ns, "list", "--key", "cli-1", "-o", "name"), 0, `^`+regexp.QuoteMeta(echo)+`\n$`, `^$`)
	want(t, "list -A", dtq(t, ns, "list", "-A", "--queue", "other"), 0, `^NAMESPACE +NAME .*\n`+ns+` +elsewhere `, `^$`)
	want(t, "list none", dtq(t, ns, "list", "--state", "Expired"), 0, `^$`, `^No Tasks found in namespace `+ns)
	want(t, "list bad state", dtq(t, ns, "list", "--state", "Done"), 1, `^$`, `"Done" is not a task state`)
	want(t, "submit without type", dtq(t, ns, "submit", "--queue", "q"), 1, `^$`, `--queue and --type are required`)
	want(t, "submit bad payload", dtq(t, ns, "submit", "--queue", "q", "--type", "echo", "--payload", "[1]"), 1, `^$`, `must be a JSON object`)
	want(t, "retry of a Succeeded task", dtq(t, ns, "retry", name), 1, `^$`,
		`cannot retry task `+name+`: it is Succeeded; only a Failed or DeadLettered task can be retried`)
}

func testCLIWaitOnFailures(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-cli-fail")
	single.queue(t, ns, nil)
	single.createAll(t, []*dtqv1alpha1.Task{
		newTask("dead", ns, "cli", demo.Fail, nil).MaxAttempts(1).Obj(),
		newTask("slow", ns, "cli", demo.Sleep, demo.SleepPayload{Seconds: 60}).Obj(),
		newTask("late", ns, "cli", demo.Echo, nil).Delay(2 * time.Second).TTL(time.Second).Obj(),
	})
	want(t, "wait dead-lettered", dtq(t, ns, "wait", "dead", "--timeout", "1m"), 2, `^$`,
		`task dead ended DeadLettered: fail: permanent failure by design`)
	want(t, "wait expired", dtq(t, ns, "wait", "late", "--timeout", "1m"), 2, `^$`, `task late ended Expired`)
	want(t, "wait timeout", dtq(t, ns, "wait", "slow", "--timeout", "1s"), 3, `^$`, `timed out after 1s waiting for task slow`)
	want(t, "cancel", dtq(t, ns, "cancel", "slow"), 0, `^task\.dtq\.dev/slow cancel requested\n$`, `^$`)
	want(t, "wait cancelled", dtq(t, ns, "wait", "slow", "--timeout", "1m"), 2, `^$`, `task slow ended Cancelled`)
	want(t, "cancel again", dtq(t, ns, "cancel", "slow"), 1, `^$`, `already ended Cancelled; there is nothing to cancel`)
	want(t, "wait missing", dtq(t, ns, "wait", "nope", "--timeout", "10s"), 1, `^$`, `not found`)
}

// The CR retry of the issue: a Task whose handler fails until a Redis flag is
// set ends DeadLettered, its idempotency mirror too; after the flag is set,
// kubectl-dtq retry runs it again through Queued and Running to Succeeded,
// with the first run in its history, and the mirror follows.
func testCLIRetryDeadLettered(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-cli-retry")
	single.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		s.Retry.BaseDelay = dur(200 * time.Millisecond)
		s.Retry.MaxDelay = dur(time.Second)
	})
	gate := ns + "-deploy"
	// The run after the retry holds 3 s in Running, so a manager slowed by a
	// loaded machine still writes Running before Succeeded.
	payload := demo.GatePayload{Name: gate, HoldSeconds: 3}
	single.createAll(t, []*dtqv1alpha1.Task{newTask("report", ns, "retry", demo.Gate, payload).Key("report-2026-11").MaxAttempts(2).Obj()})
	want(t, "wait before the fix", dtq(t, ns, "wait", "report", "--timeout", "1m"), 2, `^$`, `task report ended DeadLettered: gate: .* is closed \(attempt 2\)`)
	single.createAll(t, []*dtqv1alpha1.Task{newTask("report-again", ns, "retry", demo.Gate, payload).Key("report-2026-11").Obj()})
	want(t, "wait on the mirror", dtq(t, ns, "wait", "report-again", "--timeout", "1m"), 2, `^$`, `ended DeadLettered`)

	must(t, single.rdb.Set(t.Context(), demo.GateKey(ns, gate), 1, 0).Err())
	states := watchStates(t, ns, "report")
	want(t, "retry", dtq(t, ns, "retry", "report"), 0, `^task\.dtq\.dev/report retried\n$`, `^$`)
	want(t, "wait after retry", dtq(t, ns, "wait", "report", "--timeout", "1m"), 0, `^task\.dtq\.dev/report Succeeded\n$`, `^$`)
	want(t, "wait on the mirror after retry", dtq(t, ns, "wait", "report-again", "--timeout", "1m"), 0, `Succeeded`, `^$`)

	seen := states()
	if i, j := slices.Index(seen, dtqv1alpha1.TaskQueued), slices.Index(seen, dtqv1alpha1.TaskRunning); i < 0 || j < i || seen[len(seen)-1] != dtqv1alpha1.TaskSucceeded {
		t.Errorf("states after the retry %v, want Queued, then Running, then Succeeded", seen)
	}
	got := single.waitTerminal(t, ns, "retry", 2, time.Minute)
	report, mirror := got["report"].Status, got["report-again"].Status
	if report.State != dtqv1alpha1.TaskSucceeded || report.Attempt != 1 || report.Idempotency.State != dtqv1alpha1.IdempotencyCompleted ||
		len(report.History) != 1 || report.History[0].State != dtqv1alpha1.TaskDeadLettered || report.History[0].Attempts != 2 ||
		!strings.Contains(report.History[0].LastError, "closed") {
		t.Errorf("report: want Succeeded on attempt 1, record completed, one DeadLettered run of 2 attempts in history: %+v", report)
	}
	if mirror.State != dtqv1alpha1.TaskSucceeded || !mirror.Idempotency.Duplicate || mirror.Idempotency.TaskID != report.TaskID ||
		mirror.Result != report.Result || len(mirror.History) != 1 {
		t.Errorf("mirror: want a Succeeded duplicate of %s with its result and one ended run: %+v", report.TaskID, mirror)
	}
}

// watchStates records the states a Task goes through from now on; the
// returned function stops the watch and returns them.
func watchStates(t *testing.T, ns, name string) func() []dtqv1alpha1.TaskState {
	t.Helper()
	c, err := client.NewWithWatch(single.stack.Config, client.Options{Scheme: single.stack.Scheme})
	must(t, err)
	w, err := c.Watch(t.Context(), &dtqv1alpha1.TaskList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	must(t, err)
	var seen []dtqv1alpha1.TaskState
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if task, ok := ev.Object.(*dtqv1alpha1.Task); ok && ev.Type == watch.Modified &&
				(len(seen) == 0 || seen[len(seen)-1] != task.Status.State) {
				seen = append(seen, task.Status.State)
			}
		}
	}()
	return func() []dtqv1alpha1.TaskState { w.Stop(); <-done; return seen }
}

// kubectl wait --for=condition=Succeeded, the admission policy refusing a
// retry of a succeeded task, and kubectl get with a field selector, with the
// real kubectl.
func testKubectlWaitAndFieldSelector(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-kubectl")
	single.queue(t, ns, nil)
	single.createAll(t, []*dtqv1alpha1.Task{
		newTask("ok", ns, "kubectl", demo.Echo, nil).Obj(),
		newTask("dead", ns, "kubectl", demo.Fail, nil).MaxAttempts(1).Obj(),
	})
	other := newTask("parked", ns, "kubectl", demo.Echo, nil).Obj()
	other.Spec.Queue = "parked"
	single.createAll(t, []*dtqv1alpha1.Task{other})

	want(t, "kubectl wait on a succeeded task", kubectl(t, ns, "wait", "--for=condition=Succeeded", "tasks.dtq.dev/ok", "--timeout=60s"), 0,
		`^task\.dtq\.dev/ok condition met\n$`, ``)
	want(t, "kubectl wait Succeeded=False on the dead-lettered task", kubectl(t, ns, "wait", "--for=condition=Succeeded=False", "tasks.dtq.dev/dead", "--timeout=60s"), 0,
		`condition met`, ``)
	want(t, "kubectl wait Succeeded on the dead-lettered task", kubectl(t, ns, "wait", "--for=condition=Succeeded", "tasks.dtq.dev/dead", "--timeout=3s"), 1,
		`^$`, `timed out waiting for the condition`)
	want(t, "kubectl patch retryGeneration of a succeeded task", kubectl(t, ns, "patch", "tasks.dtq.dev/ok", "--type=merge", "-p", `{"spec":{"retryGeneration":1}}`), 1,
		`^$`, `cannot retry a task that is Succeeded: only a Failed or DeadLettered task can be retried`)
	want(t, "kubectl get --field-selector spec.queue", kubectl(t, ns, "get", "tasks.dtq.dev", "--field-selector", "spec.queue=parked", "-o", "name"), 0,
		`^task\.dtq\.dev/parked\n$`, ``)
	want(t, "kubectl get --field-selector status.state", kubectl(t, ns, "get", "dt", "--field-selector", "status.state=DeadLettered", "-o", "name"), 0,
		`^task\.dtq\.dev/dead\n$`, ``)
}
