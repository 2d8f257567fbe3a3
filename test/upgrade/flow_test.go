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

package upgrade

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/pkg/broker"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// Flow control's layout change (docs/flow-control.md#edge-cases): the flow
// keys the test submits, and the one its flowControl limits to one task
// Running at a time.
const (
	flowKeyInert  = "fc-inert"  // submitted before flow control applies: stored, inert
	flowKeySerial = "fc-serial" // an override with concurrency 1
	serialHold    = 1.0         // seconds each task of flowKeySerial holds
)

// flowControl is the flow step: an operator applies spec.flowControl to
// Queue upgrade/q while a worker of the previous release (s.straggler)
// still serves it. The raise to layout 2 must be refused while the queue
// keeps working (flowRefused); once that worker is rolled, flow control must
// apply (flowApplied) and tasks of a flow key must run under its limit
// (checkSerial). Then the previous release's binaries must refuse this Redis
// (previousRefuses).
func (s *suite) flowControl() {
	t := s.t
	ref := broker.QueueRef{Namespace: nsChaos, Name: queue}
	if p := s.workerPod(nsChaos, s.straggler); p.Bin != s.old.worker || !s.registered(ref, s.straggler, 1) {
		t.Fatalf("flow: pod %s/%s runs %q, registered at layout 1: %v; want the previous release's worker registered",
			nsChaos, s.straggler, p.Bin, s.registered(ref, s.straggler, 1))
	}
	inert := s.flowTasks("inert", flowKeyInert, 0.2)

	q := &dtqv1alpha1.Queue{}
	must(t, s.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: nsChaos, Name: queue}, q))
	base := client.MergeFrom(q.DeepCopy())
	q.Spec.FlowControl = &dtqv1alpha1.FlowControl{
		MaxConcurrency: ptr.To[int32](1000), // never binds: the load runs as before
		Overrides:      []dtqv1alpha1.KeyOverride{{Key: flowKeySerial, Concurrency: ptr.To[int32](1)}},
	}
	must(t, s.stack.Client.Patch(t.Context(), q, base))
	s.logf("flow: applied spec.flowControl to Queue %s/%s (generation %d) while pod %s runs %s's worker", nsChaos, queue,
		q.Generation, s.straggler, s.old.name)

	s.flowRefused(q)
	s.swapPod(nsChaos, s.straggler, s.cur.worker) // the rollout ends
	s.straggler = ""
	s.flowApplied(q)
	s.checkSerial(s.flowTasks("serial", flowKeySerial, serialHold))
	s.awaitTasks(inert)
	s.previousRefuses()
}

// flowRefused checks that flow control waits for s.straggler: the Queue's
// Ready condition False, reason WorkersBehind, naming it; both layout
// records at 1 and no limit written; and 3 s later (the load running on the
// queue, old and new workers side by side) the straggler still serving.
func (s *suite) flowRefused(q *dtqv1alpha1.Queue) {
	t := s.t
	ready, err := s.awaitReady(q, func(c *metav1.Condition) error {
		if c.Status != metav1.ConditionFalse || c.Reason != dtqv1alpha1.ReasonWorkersBehind || !strings.Contains(c.Message, s.straggler) {
			return fmt.Errorf("Ready %s %s %q, want False %s naming %s", c.Status, c.Reason, c.Message, dtqv1alpha1.ReasonWorkersBehind, s.straggler)
		}
		return nil
	})
	if err != nil {
		t.Errorf("flow: flow control beside a worker of the previous release was not refused: %v", err)
	} else {
		s.logf("flow: refused: Ready False %s: %s", ready.Reason, ready.Message)
	}
	s.checkLayouts("beside the previous release's worker", 1, 1, false)
	time.Sleep(3 * time.Second)
	ref := broker.QueueRef{Namespace: nsChaos, Name: queue}
	if p := s.workerPod(nsChaos, s.straggler); p.Bin != s.old.worker || !p.Ready || !s.registered(ref, s.straggler, 1) {
		t.Errorf("flow: after the refusal pod %s/%s runs %s, ready %v, registered at layout 1 %v: the previous release's worker "+
			"must keep serving the queue", nsChaos, s.straggler, p.Bin, p.Ready, s.registered(ref, s.straggler, 1))
	}
	s.checkLayouts("still beside the previous release's worker", 1, 1, false)
}

// flowApplied checks that flow control applies once every worker of the
// queue is of this commit: the Queue Ready, both layout records at 2 and the
// limits written.
func (s *suite) flowApplied(q *dtqv1alpha1.Queue) {
	ref := broker.QueueRef{Namespace: nsChaos, Name: queue}
	b := broker.New(s.rdb)
	if _, err := s.awaitReady(q, func(c *metav1.Condition) error {
		if c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s %q", c.Status, c.Reason, c.Message)
		}
		n, err := b.QueueLayout(s.t.Context(), ref)
		if err == nil && n != broker.LayoutFlowControl {
			err = fmt.Errorf("queue layout %d", n)
		}
		return err
	}); err != nil {
		s.t.Errorf("flow: flow control did not apply once every worker was of this commit: %v", err)
	}
	s.checkLayouts("once every worker is of this commit", broker.LayoutFlowControl, broker.LayoutFlowControl, true)
}

// registered reports whether worker id is registered (live) on q, reading
// layout n at most.
func (s *suite) registered(q broker.QueueRef, id string, n int) bool {
	ws, err := broker.New(s.rdb).Workers(s.t.Context(), q)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ws, func(w broker.WorkerInfo) bool { return w.ID == id && w.Layout <= n })
}

// awaitReady waits (a minute) until Queue q's status has observed its
// generation with a Ready condition check accepts, and returns it.
func (s *suite) awaitReady(q *dtqv1alpha1.Queue, check func(*metav1.Condition) error) (*metav1.Condition, error) {
	var ready *metav1.Condition
	err := poll(s.t.Context(), time.Minute, func() error {
		got := &dtqv1alpha1.Queue{}
		if err := s.stack.Client.Get(s.t.Context(), client.ObjectKeyFromObject(q), got); err != nil {
			return err
		}
		ready = meta.FindStatusCondition(got.Status.Conditions, dtqv1alpha1.QueueReady)
		if ready == nil || ready.ObservedGeneration != got.Generation {
			return fmt.Errorf("Ready %+v has not observed generation %d", ready, got.Generation)
		}
		return check(ready)
	})
	return ready, err
}

// checkLayouts checks the records of Redis layout: the global one and Queue
// upgrade/q's, and whether flow control's limits are written.
func (s *suite) checkLayouts(when string, global, queueLayout int, limits bool) {
	ctx := s.t.Context()
	b := broker.New(s.rdb)
	ref := broker.QueueRef{Namespace: nsChaos, Name: queue}
	g, err := b.ReadLayout(ctx)
	must(s.t, err)
	n, err := b.QueueLayout(ctx, ref)
	must(s.t, err)
	cfg, err := b.QueueConfig(ctx, ref)
	must(s.t, err)
	if g.Layout != global || n != queueLayout || (cfg.Flow != nil) != limits {
		s.t.Errorf("flow: %s: global layout %d, queue %s layout %d, flow control written %v; want %d, %d, %v", when, g.Layout, ref, n,
			cfg.Flow != nil, global, queueLayout, limits)
		return
	}
	s.logf("flow: %s: global layout %d, queue layout %d, flow control written %v", when, g.Layout, n, limits)
}

// flowTask is one task of flowTasks: a Task CR or an API key.
type flowTask struct {
	cr  *dtqv1alpha1.Task
	api *apiKey
}

// flowTasks submits four chaos Task CRs and four API tasks with flow key
// fk, each holding hold seconds (keys cr-flow-<name>-<i>, api-flow-<name>-<i>).
func (s *suite) flowTasks(name, fk string, hold float64) []flowTask {
	var out []flowTask
	for i := range 4 {
		key := fmt.Sprintf("cr-flow-%s-%d", name, i)
		task := s.chaosTask(nsChaos, key, key, classFlow, chaosPayload(nsChaos, key, hold), maxAttempts)
		task.Spec.FlowKey = fk
		must(s.t, s.stack.Client.Create(s.t.Context(), task))
		k := s.api.add(fmt.Sprintf("api-flow-%s-%d", name, i), classFlow, hold, maxAttempts, 0)
		k.flowKey = fk
		s.api.submit(k)
		out = append(out, flowTask{cr: task}, flowTask{api: k})
	}
	return out
}

// awaitTasks waits (two minutes) until every task of tasks has Succeeded, by
// the engine's state read through the API; each read is also passed to seen.
func (s *suite) awaitTasks(tasks []flowTask, seen ...func(*dtqclient.Task)) {
	err := poll(s.t.Context(), 2*time.Minute, func() error {
		left := 0
		for _, ft := range tasks {
			var got *dtqclient.Task
			var err error
			if ft.cr != nil {
				got, err = s.api.q.Get(s.t.Context(), string(ft.cr.UID))
			} else {
				got, err = s.apiTask(ft.api)
			}
			if err != nil || got.Status != dtqclient.StatusSucceeded {
				left++
			}
			if err == nil {
				for _, f := range seen {
					f(got)
				}
			}
		}
		if left > 0 {
			return fmt.Errorf("%d of %d flow-keyed tasks have not Succeeded", left, len(tasks))
		}
		return nil
	})
	if err != nil {
		s.t.Errorf("flow: %v", err)
	}
}

// checkSerial checks that the tasks of flowKeySerial ran under its limit of
// one task Running at a time: each execution (chaos log) started at least
// serialHold after the one before it, and some task was seen waiting, its
// wait reason naming the key.
func (s *suite) checkSerial(tasks []flowTask) {
	reasons := map[string]bool{}
	s.awaitTasks(tasks, func(task *dtqclient.Task) {
		if task.WaitReason != "" {
			reasons[task.WaitReason] = true
		}
	})
	keys := map[string]bool{}
	for _, ft := range tasks {
		if ft.cr != nil {
			keys[ft.cr.Spec.IdempotencyKey] = true
		} else {
			keys[ft.api.key] = true
		}
	}
	log, err := demo.ReadChaosLog(s.chaosLog)
	must(s.t, err)
	var runs []demo.ChaosExecution
	for _, e := range log {
		if keys[e.Key] {
			runs = append(runs, e)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].At.Before(runs[j].At) })
	hold := time.Duration(serialHold * float64(time.Second))
	var overlaps []string
	for i := 1; i < len(runs); i++ {
		if d := runs[i].At.Sub(runs[i-1].At); d < hold {
			overlaps = append(overlaps, fmt.Sprintf("%s started %v after %s", runs[i].Key, d.Round(time.Millisecond), runs[i-1].Key))
		}
	}
	seen := slices.Sorted(maps.Keys(reasons))
	waited := slices.ContainsFunc(seen, func(r string) bool { return strings.Contains(r, flowKeySerial) })
	switch {
	case len(runs) < len(tasks) || len(overlaps) > 0:
		s.t.Errorf("flow: %d executions of the %d tasks of flow key %s (override concurrency 1, each holding %v); overlapping: %v",
			len(runs), len(tasks), flowKeySerial, hold, overlaps)
	case !waited:
		s.t.Errorf("flow: no task of flow key %s was seen waiting on its limit (wait reasons seen: %q)", flowKeySerial, seen)
	default:
		s.logf("flow: the %d tasks of flow key %s ran one at a time (%d executions); wait reasons seen: %q", len(tasks), flowKeySerial,
			len(runs), seen)
	}
}

// previousUser is the Redis ACL user the previous release's binaries log in
// as in previousRefuses: every command and key, but no write command (+@all
// -@write), so a write they attempt is refused and logged (ACL LOG) instead
// of done.
const previousUser = "upgrade-previous-release"

// previousRefuses starts the previous release's manager, API, worker and
// delivery sidecar (for Queue upgrade/q) against this Redis, now at layout
// 2, beside the running stack: the first pods of a rollback. Each must exit
// non-zero with the layout message, without attempting a write. The
// manager and the API get no Kubernetes config: one that got past the check
// fails on that instead, with another message, rather than join the stack.
func (s *suite) previousRefuses() {
	t := s.t
	ctx := t.Context()
	must(t, s.rdb.Do(ctx, "ACL", "SETUSER", previousUser, "reset", "on", ">"+previousUser, "~*", "&*", "+@all", "-@write").Err())
	defer s.rdb.Do(context.WithoutCancel(ctx), "ACL", "DELUSER", previousUser)
	u, err := url.Parse(s.stack.RedisURL())
	must(t, err)
	u.User = url.UserPassword(previousUser, previousUser)
	redisURL := u.String()

	ref := broker.QueueRef{Namespace: nsChaos, Name: queue}
	global := fmt.Sprintf("Redis holds dtq layout %d; this binary reads layouts 1..1", broker.LayoutFlowControl)
	ofQueue := fmt.Sprintf("queue %s in Redis holds dtq layout %d; this binary reads layouts 1..1", ref, broker.LayoutFlowControl)
	workerEnv := []string{"DTQ_REDIS_URL=" + redisURL, "DTQ_QUEUE_NAMESPACE=" + ref.Namespace, "DTQ_QUEUE_NAME=" + ref.Name,
		"DTQ_METRICS_ADDR=0", "DTQ_HEARTBEAT_INTERVAL=100ms", "DTQ_HANDLER_URL=http://127.0.0.1:1/run", "DTQ_SIDECAR_ADDR=127.0.0.1:0",
		"DTQ_WORKER_ID=" + previousUser}
	runs := []struct {
		name string
		args []string
		env  []string
		says string
	}{
		{"manager", []string{s.old.manager, "--redis-url=" + redisURL, "--health-probe-bind-address=0", "--metrics-bind-address=0"}, nil, global},
		{"API", []string{s.old.api, "--redis-url=" + redisURL, "--bind-address=127.0.0.1:0", "--insecure-no-auth"}, nil, global},
		{"worker", []string{s.old.worker}, workerEnv, ofQueue},
		{"delivery sidecar", []string{s.old.worker, "delivery"}, workerEnv, ofQueue},
	}
	var wg sync.WaitGroup
	outs := make([]string, len(runs))
	errs := make([]error, len(runs))
	for i, r := range runs {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, r.args[0], r.args[1:]...)
			cmd.Env = append([]string{"KUBECONFIG=/nonexistent", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, r.env...)
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		})
	}
	wg.Wait()
	for i, r := range runs {
		var ee *exec.ExitError
		switch {
		case !errors.As(errs[i], &ee) || ee.ExitCode() <= 0:
			t.Errorf("flow: %s's %s: %v (killed after 30 s if still running), want a non-zero exit code; output begins:\n%s",
				s.old.name, r.name, errs[i], head(outs[i], 10))
		case !strings.Contains(outs[i], r.says):
			t.Errorf("flow: %s's %s exited (%v) without saying %q; output begins:\n%s", s.old.name, r.name, errs[i], r.says,
				head(outs[i], 10))
		default:
			s.logf("flow: %s's %s refused this Redis: %v, %q", s.old.name, r.name, errs[i], r.says)
		}
	}
	entries, err := s.rdb.ACLLog(ctx, 1000).Result()
	must(t, err)
	var attempted []string
	for _, e := range entries {
		if e.Username == previousUser {
			attempted = append(attempted, fmt.Sprintf("%s %s (%s, %d times)", e.Reason, e.Object, e.Context, e.Count))
		}
	}
	if len(attempted) > 0 {
		t.Errorf("flow: the previous release's binaries attempted writes (refused by ACL): %v", attempted)
	} else {
		s.logf("flow: they attempted no write (ACL LOG of user %s empty)", previousUser)
	}
}

// head is the first n lines of out.
func head(out string, n int) string {
	lines := strings.SplitAfter(out, "\n")
	return strings.Join(lines[:min(n, len(lines))], "")
}
