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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/pkg/client"
)

// The kubectl-dtq verbs that go through the HTTP API (pkg/client), run as a
// make dev user would: the built binary with the dev kubeconfig, the API
// found through the api-url file beside it.
func TestCLIAPI(t *testing.T) {
	// Events restarts the API: it runs alone, before the parallel ones.
	t.Run("EventsFollowAcrossRestart", testCLIEvents)
	t.Run("FindAndAuthenticate", testCLIFindAPI)
	t.Run("SubmitGetList", testCLISubmitViaAPI)
	t.Run("DeadLetters", testCLIDeadLetters)
	t.Run("DeadLetterPagesAndRequeueAll", testCLIDeadLetterPages)
	t.Run("Queues", testCLIQueues)
}

// apiTask reads a task through kubectl-dtq get --via-api -o json.
func apiTask(t *testing.T, ns, id string) client.Task {
	t.Helper()
	r := dtq(t, ns, "get", "--via-api", "--queue", "q", id, "-o", "json")
	var task client.Task
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &task) != nil {
		t.Fatalf("get --via-api %s: %s", id, r)
	}
	return task
}

// apiTaskState waits (up to a minute) until the task is in state.
func apiTaskState(t *testing.T, ns, id string, state client.TaskStatus) client.Task {
	t.Helper()
	var task client.Task
	err := poll(t.Context(), time.Minute, func() error {
		if task = apiTask(t, ns, id); task.Status != state {
			return fmt.Errorf("task %s is %s, not %s", id, task.Status, state)
		}
		return nil
	})
	must(t, err)
	return task
}

// apiReadyQueue creates Queue <ns>/q (see queue) and waits until the API
// knows it: the Queue controller registers it in Redis shortly after.
func apiReadyQueue(t *testing.T, ns string, mutate func(*dtqv1alpha1.QueueSpec)) {
	t.Helper()
	single.queue(t, ns, mutate)
	must(t, poll(t.Context(), time.Minute, func() error {
		if r := dtq(t, ns, "queue", "stats", "-o", "name"); r.stdout != "q\n" {
			return fmt.Errorf("queue q not listed by the API yet: %s", r)
		}
		return nil
	}))
}

// submitAPI submits over the API with kubectl-dtq and returns the task ID.
func submitAPI(t *testing.T, ns string, args ...string) string {
	t.Helper()
	r := dtq(t, ns, append([]string{"submit", "--via-api", "--queue", "q", "-o", "name"}, args...)...)
	if r.code != 0 || !regexp.MustCompile(`^\S+\n$`).MatchString(r.stdout) {
		t.Fatalf("submit --via-api -o name %v: %s", args, r)
	}
	return strings.TrimSpace(r.stdout)
}

func testCLIFindAPI(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-cli-find")
	apiReadyQueue(t, ns, nil)
	// No api-url beside this kubeconfig and no flag: a clear error.
	dir := t.TempDir()
	kc, err := os.ReadFile(single.stack.Kubeconfig)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), kc, 0o600))
	elsewhere := dtqCmd(t, ns, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "queue", "stats")
	want(t, "no API URL", runCmd(t, elsewhere), 1, `^$`, `no dtq HTTP API URL: give --api-url or \$DTQ_API_URL`)
	// $DTQ_API_URL, then --api-url over it.
	env := dtqCmd(t, ns, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "queue", "stats")
	env.Env = append(os.Environ(), "DTQ_API_URL="+single.stack.APIURL)
	want(t, "DTQ_API_URL", runCmd(t, env), 0, `(?m)^QUEUE +PAUSED +DEPTH +QUEUED +IN FLIGHT +SCHEDULED +DEAD +WORKERS\nq +false +0 `, `^$`)
	flag := dtqCmd(t, ns, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "--api-url", single.stack.APIURL, "queue", "stats", "q", "-o", "name")
	flag.Env = append(os.Environ(), "DTQ_API_URL=http://127.0.0.1:1")
	want(t, "--api-url wins", runCmd(t, flag), 0, `^q\n$`, `^$`)
	// The dev kubeconfig's user is a ServiceAccount: the verbs request tokens
	// of it for the API's audience (above). envtest's admin kubeconfig
	// (beside the api-url file) has a client certificate: not a
	// ServiceAccount, so the error says how to give a token.
	admin := filepath.Join(single.stack.Dir, "admin.kubeconfig")
	want(t, "client-certificate kubeconfig", dtq(t, ns, "--kubeconfig", admin, "queue", "stats"), 1,
		`^$`, `not a ServiceAccount: user "[^"]+" cannot request a token for audience "dtq-api" for itself\n`+
			`kubectl-dtq: .*--api-token "\$\(kubectl -n NAMESPACE create token SERVICEACCOUNT --audience dtq-api\)"`)
	// --api-audience= sends the kubeconfig's own credentials: a client
	// certificate cannot authenticate, and the error says so.
	want(t, "client-certificate kubeconfig, --api-audience=", dtq(t, ns, "--kubeconfig", admin, "--api-audience=", "queue", "stats"), 1,
		`^$`, `the kubeconfig's user has no token \(a client certificate cannot authenticate to the dtq API\)`)
	// As the hint says: a token for the audience, given or in a file, works
	// with any kubeconfig.
	tok, err := single.stack.APIToken(t.Context(), devstack.AdminNamespace, devstack.AdminServiceAccount, time.Hour)
	must(t, err)
	want(t, "--api-token", dtq(t, ns, "--kubeconfig", admin, "--api-token", tok, "queue", "stats", "q", "-o", "name"), 0, `^q\n$`, `^$`)
	file := filepath.Join(dir, "api-token")
	must(t, os.WriteFile(file, []byte(tok+"\n"), 0o600))
	want(t, "--api-token-file", dtq(t, ns, "--kubeconfig", admin, "--api-token-file", file, "queue", "stats", "q", "-o", "name"), 0, `^q\n$`, `^$`)
	// A token for another audience, or the kubeconfig's own token for the
	// Kubernetes API server (--api-audience=): 401 from the API.
	kubeTok, err := single.stack.Token(t.Context(), devstack.AdminNamespace, devstack.AdminServiceAccount, time.Hour)
	must(t, err)
	want(t, "a token for the API server", dtq(t, ns, "--api-token", kubeTok, "queue", "stats"), 1, `^$`, `UNAUTHORIZED`)
	want(t, "the kubeconfig's own token", dtq(t, ns, "--api-audience=", "queue", "stats"), 1, `^$`, `UNAUTHORIZED`)
	// A kubeconfig token the API server rejects: its SelfSubjectReview fails.
	want(t, "bad token", dtq(t, ns, "--token", "not-a-token", "queue", "stats"), 1, `^$`, `\(SelfSubjectReview\): Unauthorized`)
}

func testCLISubmitViaAPI(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-cli-api")
	apiReadyQueue(t, ns, nil)

	r := dtq(t, ns, "submit", "--via-api", "--queue", "q", "--type", demo.Echo, "--payload", `{"via":"api"}`, "--key", "api-1")
	want(t, "submit --via-api", r, 0, `^\S+ submitted\n$`, `^$`)
	id := strings.Fields(r.stdout)[0]
	done := apiTaskState(t, ns, id, client.StatusSucceeded)
	var result bytes.Buffer
	must(t, json.Compact(&result, done.Result))
	if result.String() != `{"via":"api"}` || done.IdempotencyKey != "api-1" || done.Attempt != 1 {
		t.Errorf("task %s: want the echo's result, key api-1, attempt 1: %+v", id, done)
	}
	want(t, "submit the key again", dtq(t, ns, "submit", "--via-api", "--queue", "q", "--type", demo.Echo, "--payload", `{"via":"api"}`, "--key", "api-1"), 0,
		`^`+id+` is a duplicate of the key's task \(Succeeded\)\n$`, `^$`)
	want(t, "submit the key again without the payload", dtq(t, ns, "submit", "--via-api", "--queue", "q", "--type", demo.Echo, "--key", "api-1"), 0,
		`^`+id+` is a duplicate of the key's task \(Succeeded\), which was submitted with another type or payload: this submission's payload does not run\n$`, `^$`)
	want(t, "submit --via-api -f", dtq(t, ns, "submit", "--via-api", "-f", "x.yaml"), 1, `^$`, `--via-api submits from the flags`)
	want(t, "submit --via-api, bad payload", dtq(t, ns, "submit", "--via-api", "--queue", "q", "--type", "echo", "--payload", "[1]"), 1,
		`^$`, `--payload must be a JSON object`)
	want(t, "submit --via-api, unknown queue", dtq(t, ns, "submit", "--via-api", "--queue", "nope", "--type", "echo"), 1,
		`^$`, `QUEUE_NOT_FOUND`)

	// A Task object's task is in the engine too: list --via-api shows both.
	single.createAll(t, []*dtqv1alpha1.Task{newTask("object", ns, "api", demo.Echo, nil).Obj()})
	want(t, "wait object", dtq(t, ns, "wait", "object", "--timeout", "1m"), 0, `Succeeded`, `^$`)
	objectID := strings.TrimSpace(dtq(t, ns, "get", "object", "-o", "jsonpath={.status.taskID}").stdout)

	want(t, "get --via-api", dtq(t, ns, "get", "--via-api", "--queue", "q", id), 0,
		`^TASK ID +QUEUE +TYPE +STATE +ATTEMPT +AGE\n`+id+` +q +echo +Succeeded +1 +\S+\n$`, `^$`)
	want(t, "get --via-api -o wide", dtq(t, ns, "get", "--via-api", "--queue", "q", id, "-o", "wide"), 0, `KEY +FLOW KEY +PREVIOUS ATTEMPTS +WORKER +ERROR +PROGRESS +WAIT REASON\n.* api-1 +0 +\S+`, `^$`)
	want(t, "get --via-api -o yaml", dtq(t, ns, "get", "--via-api", "--queue", "q", id, objectID, "-o", "yaml"), 0,
		`(?s)count: 2\ntasks:\n.*task_id: `+id+`\n.*task_id: `+objectID+`\n`, `^$`)
	want(t, "get --via-api without --queue", dtq(t, ns, "get", "--via-api", id), 1, `^$`, `--via-api needs --queue`)
	want(t, "get --via-api, unknown ID", dtq(t, ns, "get", "--via-api", "--queue", "q", "0123456789"), 1, `^$`, `TASK_NOT_FOUND`)

	want(t, "list --via-api", dtq(t, ns, "list", "--via-api", "--queue", "q"), 0,
		`(?s)^TASK ID +QUEUE +TYPE +STATE .*\n(`+objectID+`|`+id+`) .*\n(`+objectID+`|`+id+`) `, `^$`)
	want(t, "list --via-api --state -o name", dtq(t, ns, "list", "--via-api", "--state", "Succeeded", "-o", "name"), 0,
		`^(`+objectID+`\n`+id+`|`+id+`\n`+objectID+`)\n$`, `^$`)
	want(t, "list --via-api --limit", dtq(t, ns, "list", "--via-api", "--queue", "q", "--limit", "1", "-o", "name"), 0, `^\S+\n$`, `^$`)
	want(t, "list --via-api, none", dtq(t, ns, "list", "--via-api", "--state", "DeadLettered"), 0, `^$`, `^No tasks found in namespace `+ns+`\.\n$`)
	want(t, "list --via-api -o json", dtq(t, ns, "list", "--via-api", "-o", "json"), 0, `"count": 2`, `^$`)
	want(t, "list --via-api --state bad", dtq(t, ns, "list", "--via-api", "--state", "Done"), 1, `^$`, `--state "Done" is not a task state`)
	want(t, "list --via-api --type", dtq(t, ns, "list", "--via-api", "--type", "echo"), 1, `^$`, `--via-api filters by --queue and --state only`)
}

// The dead-letter path on the API: a gate task (fails until a Redis
// flag is set) dead-letters; it is in dlq list and dlq show; after the flag is
// set, dlq requeue runs it to success with its first run's attempts kept.
// Then discard, and purge with its confirmation.
func testCLIDeadLetters(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-cli-dlq")
	apiReadyQueue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		s.Retry.BaseDelay = dur(200 * time.Millisecond)
		s.Retry.MaxDelay = dur(time.Second)
	})
	id := submitAPI(t, ns, "--type", demo.Gate, "--payload", `{"name":"fix"}`, "--max-attempts", "2", "--key", "nightly")
	apiTaskState(t, ns, id, client.StatusDeadLettered)

	want(t, "dlq list", dtq(t, ns, "dlq", "list", "q"), 0,
		`^TASK ID +TYPE +ATTEMPTS +FAILED +ERROR\n`+id+` +gate +2 +\S+ +gate: fix is closed \(attempt 2\)\n$`, `^$`)
	want(t, "dlq list -o name", dtq(t, ns, "dlq", "list", "q", "-o", "name"), 0, `^`+id+`\n$`, `^$`)
	want(t, "dlq show", dtq(t, ns, "dlq", "show", "q", id), 0,
		`(?s)Task ID: +`+id+`\nType: +gate\nState: +DeadLettered\nAttempts: +2 \(earlier runs: 0\).*Error: +gate: fix is closed.*Payload: +\{"name":"fix"\}`, `^$`)
	want(t, "dlq show -o json", dtq(t, ns, "dlq", "show", "q", id, "-o", "json"), 0, `(?s)"entry": \{.*"attempts_made": 2.*"task": \{`, `^$`)
	want(t, "dlq show, not dead-lettered", dtq(t, ns, "dlq", "show", "q", "0123456789"), 1, `^$`, `DLQ_ENTRY_NOT_FOUND`)
	// The key's record is failed: a resubmission replays the failure.
	want(t, "resubmit before the requeue", dtq(t, ns, "submit", "--via-api", "--queue", "q", "--type", demo.Gate, "--key", "nightly"), 0,
		`is a duplicate of the key's task \(DeadLettered\)`, `^$`)

	must(t, single.rdb.Set(t.Context(), demo.GateKey(ns, "fix"), 1, 0).Err())
	want(t, "dlq requeue", dtq(t, ns, "dlq", "requeue", "q", id), 0, `^`+id+` requeued\n$`, `^$`)
	done := apiTaskState(t, ns, id, client.StatusSucceeded)
	if done.Attempt != 1 || done.PreviousAttempts != 2 {
		t.Errorf("requeued task: want Succeeded on attempt 1 with 2 previous attempts: %+v", done)
	}
	want(t, "dlq requeue, succeeded", dtq(t, ns, "dlq", "requeue", "q", id), 1, `^$`, `TASK_CONFLICT: task `+id+` is Succeeded, not DeadLettered`)
	want(t, "dlq list after the requeue", dtq(t, ns, "dlq", "list", "q"), 0, `^$`, `^No dead letters in queue q\.\n$`)

	a := submitAPI(t, ns, "--type", demo.Fail, "--max-attempts", "1")
	b := submitAPI(t, ns, "--type", demo.Fail, "--max-attempts", "1")
	apiTaskState(t, ns, a, client.StatusDeadLettered)
	apiTaskState(t, ns, b, client.StatusDeadLettered)
	want(t, "dlq discard", dtq(t, ns, "dlq", "discard", "q", a), 0, `^`+a+` discarded\n$`, `^$`)
	want(t, "dlq list after discard", dtq(t, ns, "dlq", "list", "q", "-o", "name"), 0, `^`+b+`\n$`, `^$`)
	if got := apiTask(t, ns, a); got.Status != client.StatusDeadLettered {
		t.Errorf("discarded task %s: want it still DeadLettered, got %s", a, got.Status)
	}
	no := dtqCmd(t, ns, "dlq", "purge", "q")
	no.Stdin = strings.NewReader("n\n")
	want(t, "dlq purge, answered no", runCmd(t, no), 1, `^$`, `Remove all 1 dead-letter entries of queue `+ns+`/q\? \[y/N\] kubectl-dtq: not confirmed`)
	want(t, "dlq purge, no answer", dtq(t, ns, "dlq", "purge", "q"), 1, `^$`, `not confirmed`)
	want(t, "dlq list after refused purges", dtq(t, ns, "dlq", "list", "q", "-o", "name"), 0, `^`+b+`\n$`, `^$`)
	yes := dtqCmd(t, ns, "dlq", "purge", "q")
	yes.Stdin = strings.NewReader("y\n")
	want(t, "dlq purge, answered yes", runCmd(t, yes), 0, `^1 dead-letter entries purged\n$`, `\[y/N\] $`)
	want(t, "dlq purge --yes, empty", dtq(t, ns, "dlq", "purge", "q", "--yes"), 0, `^0 dead-letter entries purged\n$`, `^$`)
	want(t, "dlq list, unknown queue", dtq(t, ns, "dlq", "list", "nope"), 1, `^$`, `QUEUE_NOT_FOUND`)
}

func testCLIQueues(t *testing.T) {
	t.Parallel()
	ns := single.namespace(t, "e2e-cli-queues")
	apiReadyQueue(t, ns, nil)
	id := submitAPI(t, ns, "--type", demo.Echo)
	apiTaskState(t, ns, id, client.StatusSucceeded)

	want(t, "queue list", dtq(t, ns, "queue", "list"), 0, `^NAME +QUEUED +IN FLIGHT +WORKERS +PAUSED +READY +AGE\nq +`, `^$`)
	want(t, "queue stats -o wide", dtq(t, ns, "queue", "stats", "-o", "wide"), 0,
		`^QUEUE +PAUSED +DEPTH +QUEUED +IN FLIGHT +SCHEDULED +DEAD +WORKERS +BY PRIORITY\nq +false +0 +0 +0 +0 +0 +[1-9]\d* +0 0 0 0 0 0 0 0 0 0\n$`, `^$`)
	want(t, "queue stats, unknown", dtq(t, ns, "queue", "stats", "nope"), 1, `^$`, `QUEUE_NOT_FOUND`)
	want(t, "workers", dtq(t, ns, "workers", "q"), 0, `^WORKER ID +STATUS +CONCURRENCY +IN FLIGHT +STARTED +HEARTBEAT\n\S+ +\S+ +\d+ +0 `, `^$`)
	want(t, "workers -o json", dtq(t, ns, "workers", "q", "-o", "json"), 0, `"worker_id": `, `^$`)

	want(t, "queue pause", dtq(t, ns, "queue", "pause", "q"), 0, `^queue\.dtq\.dev/q paused\n$`, `^$`)
	must(t, poll(t.Context(), time.Minute, func() error {
		if r := dtq(t, ns, "queue", "stats", "q", "-o", "json"); !strings.Contains(r.stdout, `"paused": true`) {
			return fmt.Errorf("not paused in the engine yet: %s", r)
		}
		return nil
	}))
	waiting := []string{submitAPI(t, ns, "--type", demo.Echo), submitAPI(t, ns, "--type", demo.Echo), submitAPI(t, ns, "--type", demo.Echo, "--delay", "1h")}
	no := dtqCmd(t, ns, "queue", "purge", "q")
	no.Stdin = strings.NewReader("\n")
	want(t, "queue purge, no answer", runCmd(t, no), 1, `^$`, `Cancel the 3 waiting tasks of queue `+ns+`/q\? \[y/N\] kubectl-dtq: not confirmed`)
	want(t, "queue purge --yes", dtq(t, ns, "queue", "purge", "q", "--yes"), 0, `^3 tasks cancelled\n$`, `^$`)
	for _, w := range waiting {
		if got := apiTask(t, ns, w); got.Status != client.StatusCancelled {
			t.Errorf("purged task %s: %s, want Cancelled", w, got.Status)
		}
	}
	want(t, "queue resume", dtq(t, ns, "queue", "resume", "q", "-o", "name"), 0, `^queue\.dtq\.dev/q\n$`, `^$`)
	want(t, "queue pause, unknown", dtq(t, ns, "queue", "pause", "nope"), 1, `^$`, `not found`)
}

// events without -f prints what the queue's stream keeps and ends; with -f
// it follows across a SIGKILL of the API (the client resumes with
// Last-Event-ID): every event of the queue once, in order.
func testCLIEvents(t *testing.T) {
	ns := single.namespace(t, "e2e-cli-events")
	apiReadyQueue(t, ns, nil)
	first := submitAPI(t, ns, "--type", demo.Echo)
	apiTaskState(t, ns, first, client.StatusSucceeded)
	r := dtq(t, ns, "events", "q")
	want(t, "events", r, 0, `(?s)^\S+ +\S+ TaskQueued +`+first+` \d+\n.*TaskStarted +`+first+` 1\n.*TaskSucceeded +`+first+` 1\n$`, `^$`)
	want(t, "events --task -o json", dtq(t, ns, "events", "q", "--task", first, "-o", "json"), 0, `(?m)^\{"event_id":"\S+","type":"TaskSucceeded","task_id":"`+first+`"`, `^$`)
	want(t, "events --since now without -f", dtq(t, ns, "events", "q", "--since", "now"), 1, `^$`, `--since now needs -f`)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	follow := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl-dtq"), "--kubeconfig", single.stack.Kubeconfig, "-n", ns, "events", "q", "-f", "--since", "0", "-o", "json")
	follow.Cancel = func() error { return follow.Process.Signal(syscall.SIGINT) }
	out, err := follow.StdoutPipe()
	must(t, err)
	var stderr strings.Builder
	follow.Stderr = &stderr
	must(t, follow.Start())
	var mu sync.Mutex
	var events []client.Event
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev client.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			}
		}
	}()
	succeeded := func(ids ...string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if !slices.ContainsFunc(events, func(ev client.Event) bool { return ev.TaskID == id && ev.Type == client.EventSucceeded }) {
				return fmt.Errorf("no TaskSucceeded of %s among %d events yet", id, len(events))
			}
		}
		return nil
	}
	before := submitAPI(t, ns, "--type", demo.Echo)
	must(t, poll(t.Context(), time.Minute, func() error { return succeeded(first, before) }))
	must(t, single.stack.RestartAPI(t.Context(), syscall.SIGKILL))
	after := submitAPI(t, ns, "--type", demo.Echo)
	must(t, poll(t.Context(), time.Minute, func() error { return succeeded(after) }))
	cancel()
	<-readDone
	err = follow.Wait()
	if code := follow.ProcessState.ExitCode(); code != 0 {
		t.Errorf("events -f ended with exit %d (%v) on SIGINT, stderr %q", code, err, stderr.String())
	}
	// Every event once, in order: IDs strictly increasing.
	pos := regexp.MustCompile(`^(\d+)-(\d+):(\d+)$`)
	var last [3]int
	for i, ev := range events {
		m := pos.FindStringSubmatch(ev.EventID)
		if m == nil {
			t.Fatalf("event %d has ID %q", i, ev.EventID)
		}
		var cur [3]int
		for j := range cur {
			if _, err := fmt.Sscan(m[j+1], &cur[j]); err != nil {
				t.Fatal(err)
			}
		}
		if i > 0 && !(cur[0] > last[0] || cur[0] == last[0] && (cur[1] > last[1] || cur[1] == last[1] && cur[2] > last[2])) {
			t.Errorf("event %d (%s) is not after event %d: repeated or out of order", i, ev.EventID, i-1)
		}
		last = cur
	}
	t.Logf("events -f printed %d events across the API's SIGKILL", len(events))
}
