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

// Package upgrade is the upgrade test (docs/upgrade.md#the-upgrade-test): the previous
// release, built from this repository's own history (previous-release names
// its commit), runs on the dev stack (internal/devstack: one redis-server,
// one kube-apiserver and etcd, worker pods as local processes) under
// continuous load, with tasks in every state; then its components are
// replaced by this commit's one at a time, killed with SIGKILL, in the worst
// orders (workers first; the API first; the manager last), with a downgrade
// back to the previous release between the two upgrades. The second upgrade
// leaves a third pod of Queue upgrade/q on the previous release's worker and
// then turns on flow control there (Redis layout 2): the raise must wait for that
// worker (WorkersBehind), flow control must apply once it is gone, and the
// previous release's binaries must then refuse this Redis. The fault suite's
// checker (internal/testutil/chaoscheck) counts every logical task from the
// handlers' own execution logs: 0 lost, 0 duplicated; every idempotency key
// must be answered alike before and after, and every stored object must stay
// valid under each release's CRDs and be reconciled by this commit's manager.
//
// It builds what it runs and fails, never skips, when something is missing.
// DTQ_UPGRADE_PLANT=<plant> builds a deliberate layout incompatibility, or a
// breach of the layout's guard, into this commit's binaries to see it fail
// (plants in release_test.go).
package upgrade

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	"github.com/dtq-dev/dtq/pkg/redisconn"
)

// The test's two Queues, both named q: the chaos handler of the reference
// worker, and the Python HTTP handler example behind the delivery sidecar.
const (
	nsChaos = "upgrade"
	nsHTTP  = "upgrade-http"
	queue   = "q"

	visibility  = 3 * time.Second
	maxAttempts = 10
	// Poisoned tasks fail (their counter holds no integer) until the poison
	// is removed, retrying with these delays: about 4 minutes from the first
	// attempt to the tenth, so they stay Retrying across the swaps.
	retryBase, retryMax = 5 * time.Second, 30 * time.Second
	// scheduleKey is the chaos key of the TaskSchedule's runs.
	scheduleName, scheduleKey = "tick", "upgrade/tick"
)

// step is one component swap of a phase.
type step string

const (
	workers step = "workers"
	api     step = "api"
	manager step = "manager"
	// flow turns on flow control on Queue upgrade/q beside the worker of the
	// previous release that the phase's workers step left there (flow_test.go).
	flow step = "flow"
)

// phase replaces every component by those of a release, in order.
type phase struct {
	name  string
	to    *release
	order []step
}

// suite is the running test: the stack, the releases, the load.
type suite struct {
	t        *testing.T
	root     string
	old, cur release
	stack    *devstack.Stack
	rdb      redis.UniversalClient
	chaosLog string // the reference worker's chaos log
	httpLog  string // the Python handler's execution log
	start    time.Time
	phase    atomic.Value // string: the phase load submitted in

	crChaos, crHTTP *crLoad
	api             *apiLoad
	seeds           *seeds
	// slotSpanned is the schedule's slot that fell due while no manager ran.
	slotSpanned time.Time
	// succeeded holds the API keys whose task was seen Succeeded (no need
	// to read them again while waiting).
	succeeded map[string]bool
	// straggler is the pod of Queue upgrade/q left on the previous release's
	// worker by a phase with a flow step, until that step.
	straggler string
}

func TestUpgrade(t *testing.T) {
	handler := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	ctrllog.SetLogger(logr.FromSlogHandler(handler))
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("the HTTP handler example needs python3: %v (make test installs it: make handler-runtimes)", err)
	}
	root := envtestutil.RepoRoot()
	s := &suite{t: t, root: root, start: time.Now(), succeeded: map[string]bool{}}
	s.old = previousRelease(t, root)
	s.cur = currentRelease(t, root, t.TempDir())
	s.setPhase("old")
	s.logf("built: %s and %s", s.old.name, s.cur.name)
	s.startStack(handler)

	s.schedule()
	s.chaosQueue()
	s.httpQueue()
	s.startLoad()
	s.seed()

	phases := []phase{
		{"upgrade-1", &s.cur, []step{workers, api, manager}},
		{"downgrade", &s.old, []step{manager, api, workers}},
		{"upgrade-2", &s.cur, []step{api, workers, manager, flow}},
	}
	for i, p := range phases {
		s.run(p, i == 0)
	}
	s.finish()
}

// logf logs with the time since the test started.
func (s *suite) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("%6.1fs [%s] %s", time.Since(s.start).Seconds(), s.phaseName(), fmt.Sprintf(format, args...))
}

func (s *suite) setPhase(name string) { s.phase.Store(name) }

func (s *suite) phaseName() string {
	name, _ := s.phase.Load().(string)
	return name
}

// startStack starts the dev stack with the previous release's binaries and
// CRDs, and stops it at cleanup (keeping its logs when the test failed).
func (s *suite) startStack(handler slog.Handler) {
	t := s.t
	dir, err := os.MkdirTemp("", "dtq-upgrade-")
	must(t, err)
	s.chaosLog, s.httpLog = filepath.Join(dir, "chaos.log"), filepath.Join(dir, "http-exec.log")
	s.stack, err = devstack.Start(t.Context(), devstack.Options{
		Dir:          filepath.Join(dir, "dev"),
		AssetsDir:    envtestutil.AssetsDir(),
		ManagerBin:   s.old.manager,
		WorkerBin:    s.old.worker,
		APIBin:       s.old.api,
		AppDirs:      devstack.ExampleApps(s.root),
		CRDDir:       s.old.crdDir,
		AdmissionDir: s.old.admissionDir,
		// Nothing acknowledged may be lost when a process dies.
		RedisFsync: "always",
		Log:        slog.New(handler).With("stack", "upgrade"),
	})
	if err != nil {
		t.Fatalf("start the dev stack with %s (logs in %s): %v", s.old.name, dir, err)
	}
	t.Cleanup(func() {
		if s.rdb != nil {
			_ = s.rdb.Close()
		}
		if err := s.stack.Stop(); err != nil {
			t.Errorf("stop the dev stack: %v", err)
		}
		if left, err := devstack.Leftovers(s.stack.Dir); err != nil || len(left) > 0 {
			t.Errorf("processes survived the dev stack: %+v %v", left, err)
		}
		if t.Failed() {
			t.Logf("logs kept in %s", filepath.Join(s.stack.Dir, "logs"))
			return
		}
		_ = os.RemoveAll(dir)
	})
	s.rdb, err = redisconn.Config{URL: s.stack.RedisURL()}.Client()
	must(t, err)
	for _, ns := range []string{nsChaos, nsHTTP} {
		must(t, s.stack.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	s.logf("dev stack up with %s: its manager, API and worker binaries, CRDs and admission policies", s.old.name)
}

// chaosQueue creates Queue upgrade/q: two workers of the reference worker
// with the chaos handler, whose log is s.chaosLog.
func (s *suite) chaosQueue() {
	s.createQueue(nsChaos, retryBase, retryMax, func(q *dtqv1alpha1.QueueSpec) {
		q.Concurrency = 8
		q.VisibilityTimeout = dtqv1alpha1.NewDuration(visibility)
		q.HeartbeatInterval = dtqv1alpha1.NewDuration(500 * time.Millisecond)
		q.TaskTimeout = dtqv1alpha1.NewDuration(2 * time.Minute)
		q.WorkerTemplate.Spec.Containers = []corev1.Container{{
			Name: "worker", Image: "ghcr.io/dtq-dev/dtq-worker:latest",
			Env: []corev1.EnvVar{{Name: demo.EnvChaosLog, Value: s.chaosLog}},
		}}
	})
}

// httpQueue creates Queue upgrade-http/q from the Python example's manifest:
// two pods of its app beside the delivery sidecar, its execution log
// s.httpLog.
func (s *suite) httpQueue() {
	objs, err := devstack.LoadManifests(filepath.Join(s.root, "examples", "http-handlers", "python"))
	must(s.t, err)
	var example dtqv1alpha1.Queue
	for _, o := range objs {
		if o.GetKind() == "Queue" {
			must(s.t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &example))
		}
	}
	if example.Spec.Handler == nil {
		s.t.Fatal("the Python example's queue.yaml holds no Queue with a handler")
	}
	// Its tasks failing a first attempt wait 30 s, so they are Retrying
	// while the sidecars are swapped.
	s.createQueue(nsHTTP, 30*time.Second, 30*time.Second, func(q *dtqv1alpha1.QueueSpec) {
		*q = example.Spec
		q.VisibilityTimeout = dtqv1alpha1.NewDuration(2 * time.Second)
		q.HeartbeatInterval = dtqv1alpha1.NewDuration(400 * time.Millisecond)
		q.TaskTimeout = dtqv1alpha1.NewDuration(time.Minute)
		c := &q.WorkerTemplate.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "EXEC_LOG", Value: s.httpLog})
	})
}

// createQueue creates Queue <ns>/q as mutate makes it, with two workers and
// the retry delays given, and waits until both workers are ready.
func (s *suite) createQueue(ns string, base, maxDelay time.Duration, mutate func(*dtqv1alpha1.QueueSpec)) {
	t := s.t
	q := &dtqv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: queue, Namespace: ns}}
	mutate(&q.Spec)
	q.Spec.Scaling.MinReplicas, q.Spec.Scaling.MaxReplicas = ptr.To[int32](2), 2
	q.Spec.Retry.BaseDelay = dtqv1alpha1.NewDuration(base)
	q.Spec.Retry.MaxDelay = dtqv1alpha1.NewDuration(maxDelay)
	q.Spec.Retry.MaxAttempts = maxAttempts
	must(t, s.stack.Client.Create(t.Context(), q))
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		if n := len(s.workerPods(ns, true)); n < 2 {
			return fmt.Errorf("%d ready worker pods in %s, want 2", n, ns)
		}
		return nil
	}))
	s.logf("Queue %s/%s ready with two worker pods", ns, queue)
}

// schedule creates TaskSchedule upgrade/tick: a chaos task every minute
// holding 10 s, every slot run however late (RunAll), its runs kept.
func (s *suite) schedule() {
	ts := &dtqv1alpha1.TaskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: scheduleName, Namespace: nsChaos},
		Spec: dtqv1alpha1.TaskScheduleSpec{
			Schedule: "* * * * *",
			CatchUp:  &dtqv1alpha1.CatchUp{Policy: dtqv1alpha1.CatchUpRunAll, MaxRuns: 100},
			Template: dtqv1alpha1.TaskTemplate{
				Queue: queue, Type: demo.Chaos,
				Payload: &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"key":%q,"holdSeconds":10}`, scheduleKey)},
			},
			SuccessfulRunsHistoryLimit: ptr.To[int32](1000),
			FailedRunsHistoryLimit:     ptr.To[int32](1000),
		},
	}
	must(s.t, s.stack.Client.Create(s.t.Context(), ts))
}

// workerPods lists the worker pods of Queue <ns>/q (the ready ones only
// when ready is set).
func (s *suite) workerPods(ns string, ready bool) []devstack.PodInfo {
	var out []devstack.PodInfo
	for _, p := range s.stack.Pods() {
		if p.Namespace == ns && p.Deployment == queue+"-workers" && !p.Terminating && (!ready || p.Ready && p.PID != 0) {
			out = append(out, p)
		}
	}
	return out
}

// run runs one phase: tasks placed to cross it (long ones running, a
// backlog queued), the release's CRDs and admission policies, then its
// components swapped in order, each killed with SIGKILL while the load goes
// on. Tasks submitted during the swaps belong to the phase (p.name), those
// after it to "after-<p.name>".
func (s *suite) run(p phase, first bool) {
	t := s.t
	s.logf("%s to %s, in the order %v", p.name, p.to.name, p.order)
	s.seeds.crossing(first)
	if p.name == "upgrade-2" {
		// The retrying tasks may succeed from now on: on this commit's build.
		s.seeds.cure(s.seeds.retry)
	}
	s.setPhase(p.name)
	must(t, s.stack.InstallCRDs(t.Context(), p.to.crdDir, p.to.admissionDir))
	s.logf("installed the CRDs and admission policies of %s", p.to.name)
	for i, st := range p.order {
		if i > 0 {
			time.Sleep(3 * time.Second) // the load runs on the mixed versions
		}
		switch st {
		case workers:
			s.swapWorkers(p.to.worker, slices.Contains(p.order, flow))
		case api:
			s.swapAPI(p.to.api)
		case manager:
			s.swapManager(p.to.manager, first, p.name == "upgrade-2")
		case flow:
			s.flowControl()
		}
	}
	s.setPhase("after-" + p.name)
	time.Sleep(5 * time.Second) // the load runs on the release alone
	s.validate(p.to, false)
	s.logf("%s done", p.name)
}

// swapWorkers makes the stand-in kubelet start bin for workers and delivery
// sidecars, then SIGKILLs the worker (or sidecar) process of each pod of
// both Queues in turn, waiting for each to run bin and be ready: a rolling
// update whose old pods die mid-task. With leaveOne, Queue upgrade/q first
// gets a third pod, which keeps the worker it starts with (s.straggler): a
// rollout not finished yet. (A third pod rather than one of the two, so
// that the tasks placed to cross the swaps run on pods this step kills,
// wherever they were delivered.)
func (s *suite) swapWorkers(bin string, leaveOne bool) {
	if leaveOne {
		s.addStraggler()
	}
	s.stack.SetWorkerBin(bin)
	for _, ns := range []string{nsChaos, nsHTTP} {
		for _, p := range s.workerPods(ns, false) {
			if p.Bin != bin && p.Name != s.straggler {
				s.swapPod(ns, p.Name, bin)
			}
		}
	}
	if s.straggler != "" {
		s.logf("workers: pod %s/%s left on %s's worker", nsChaos, s.straggler, s.releaseOf(s.workerPod(nsChaos, s.straggler).Bin))
	}
}

// addStraggler scales Queue upgrade/q to three workers and waits until the
// new pod is ready; it becomes s.straggler.
func (s *suite) addStraggler() {
	t := s.t
	before := map[string]bool{}
	for _, p := range s.workerPods(nsChaos, false) {
		before[p.Name] = true
	}
	q := &dtqv1alpha1.Queue{}
	must(t, s.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: nsChaos, Name: queue}, q))
	base := client.MergeFrom(q.DeepCopy())
	q.Spec.Scaling.MinReplicas, q.Spec.Scaling.MaxReplicas = ptr.To[int32](3), 3
	must(t, s.stack.Client.Patch(t.Context(), q, base))
	must(t, poll(t.Context(), time.Minute, func() error {
		for _, p := range s.workerPods(nsChaos, true) {
			if !before[p.Name] {
				s.straggler = p.Name
				return nil
			}
		}
		return fmt.Errorf("Queue %s/%s has no third ready worker pod yet", nsChaos, queue)
	}))
	s.logf("workers: Queue %s/%s scaled to three pods; the new one, %s, runs %s", nsChaos, queue, s.straggler,
		s.releaseOf(s.workerPod(nsChaos, s.straggler).Bin))
}

// swapPod SIGKILLs the worker (or sidecar) process of pod ns/name and waits
// until the stand-in has started bin in its place and it is ready.
func (s *suite) swapPod(ns, name, bin string) {
	t := s.t
	active := s.inFlight(ns, name)
	must(t, s.stack.SignalPod(ns, name, syscall.SIGKILL))
	must(t, poll(t.Context(), time.Minute, func() error {
		for _, q := range s.workerPods(ns, true) {
			if q.Name == name && q.Bin == bin {
				return nil
			}
		}
		return fmt.Errorf("pod %s/%s does not run %s yet", ns, name, bin)
	}))
	s.logf("workers: SIGKILLed pod %s/%s's %s with %d tasks in flight; it runs %s now", ns, name,
		map[string]string{nsChaos: "worker", nsHTTP: "delivery sidecar"}[ns], active, s.releaseOf(bin))
}

// workerPod is worker pod ns/name of Queue <ns>/q (zero when there is none).
func (s *suite) workerPod(ns, name string) devstack.PodInfo {
	for _, p := range s.workerPods(ns, false) {
		if p.Name == name {
			return p
		}
	}
	return devstack.PodInfo{}
}

// swapAPI SIGKILLs the API while the API load submits as fast as it can,
// and starts bin on the same port.
func (s *suite) swapAPI(bin string) {
	s.api.burst(true)
	defer s.api.burst(false)
	time.Sleep(300 * time.Millisecond)
	before := s.api.submissions()
	t0 := time.Now()
	must(s.t, s.stack.SwapAPI(s.t.Context(), bin, syscall.SIGKILL))
	s.logf("api: SIGKILLed during a burst of submissions (%d answered so far); %s serves after %v", before, s.releaseOf(bin),
		time.Since(t0).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
}

// managerDown is how long no manager runs in a swap: a new replica takes
// over a SIGKILLed leader's lease after about this long.
const managerDown = 3 * time.Second

// swapManager SIGKILLs the manager and starts bin managerDown later. With
// afterSlot, only once the running manager has run a slot of the schedule,
// so that the new one continues from its cursor. With across, bin starts
// only after the next whole minute (at least managerDown later): that slot
// of the schedule falls due while no manager runs, and the new one must run
// it late, once, while the load goes on without a manager.
func (s *suite) swapManager(bin string, afterSlot, across bool) {
	if afterSlot {
		s.awaitScheduleRun()
	}
	t0 := time.Now()
	down := managerDown
	if across {
		s.slotSpanned = t0.Add(managerDown).Truncate(time.Minute).Add(time.Minute)
		down = s.slotSpanned.Add(1500 * time.Millisecond).Sub(t0)
	}
	must(s.t, s.stack.SwapManager(s.t.Context(), bin, syscall.SIGKILL, down))
	s.logf("manager: SIGKILLed at %s; %s started %v later, ready after %v", t0.UTC().Format("15:04:05.0"), s.releaseOf(bin),
		down.Round(100*time.Millisecond), (time.Since(t0) - down).Round(time.Millisecond))
	if across {
		s.logf("manager: the schedule's slot %s fell due while no manager ran", s.slotSpanned.UTC().Format("15:04"))
	}
}

// awaitScheduleRun waits until the schedule has run a slot.
func (s *suite) awaitScheduleRun() {
	must(s.t, poll(s.t.Context(), 2*time.Minute, func() error {
		ts := &dtqv1alpha1.TaskSchedule{}
		if err := s.stack.Client.Get(s.t.Context(), client.ObjectKey{Namespace: nsChaos, Name: scheduleName}, ts); err != nil {
			return err
		}
		if ts.Status.LastHandledSlot == nil {
			return fmt.Errorf("the schedule has handled no slot yet")
		}
		return nil
	}))
}

// releaseOf names the release bin belongs to.
func (s *suite) releaseOf(bin string) string {
	if strings.HasPrefix(bin, filepath.Dir(s.old.worker)+string(os.PathSeparator)) {
		return s.old.name
	}
	return s.cur.name
}

// poll calls f until it succeeds or timeout passes; the error is f's last.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
