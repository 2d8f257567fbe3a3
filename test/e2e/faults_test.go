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
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil/chaoscheck"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// The fault suite. Each fault class is a named scenario on one Queue of chaos
// tasks (demo.RegisterChaos): faultTasks logical tasks, every twinEvery-th of
// them submitted a second time by a twin Task with the same key, the fault
// injected once a quarter of them succeeded, then the checker
// (internal/testutil/chaoscheck) on the Tasks' statuses, the execution log and
// the side-effect counters: lost 0 and duplicated 0, with the counts logged.
const (
	faultTasks      = 600
	twinEvery       = 10
	chaosVisibility = 3 * time.Second
	chaosAttempts   = 10
)

type faultClass struct {
	name   string
	inject func(t *testing.T, ns string)
	// slow, when set, is how long every tenth task holds (the others 20 ms):
	// for the worker faults, so the worker hit has tasks in flight.
	slow float64
	// redelivers: the fault must make some task run again (it hit running
	// work), else the scenario proved nothing.
	redelivers bool
}

func TestFaults(t *testing.T) {
	ns := single.namespace(t, "e2e-faults")
	chaosQueue(t, single, ns)
	restart := func(f func(context.Context, syscall.Signal) error, sig syscall.Signal) func(*testing.T, string) {
		return func(t *testing.T, _ string) { must(t, f(t.Context(), sig)) }
	}
	classes := []faultClass{
		{name: "WorkerSIGKILL", inject: killWorkers, slow: 2, redelivers: true},
		{name: "WorkerSIGSTOP", inject: pauseWorker, slow: 2, redelivers: true},
		{name: "ManagerSIGKILL", inject: restart(single.stack.RestartManager, syscall.SIGKILL)},
		{name: "ManagerRestart", inject: restart(single.stack.RestartManager, syscall.SIGTERM)},
		{name: "RedisSIGKILL", inject: restart(single.stack.RestartRedis, syscall.SIGKILL)},
		// Between the manager and Redis, and the workers and Redis.
		{name: "NetworkLatency", inject: toxic(5*time.Second, `{"name":"lag","type":"latency","attributes":{"latency":80,"jitter":40}}`)},
		{name: "NetworkResets", inject: toxic(3*time.Second, `{"name":"rst","type":"reset_peer","attributes":{"timeout":300}}`)},
		{name: "NetworkPartition", inject: toxic(2*chaosVisibility+time.Second, `{"name":"cut","type":"timeout","attributes":{"timeout":0}}`)},
	}
	var summary []string
	for _, fc := range classes {
		t.Run(fc.name, func(t *testing.T) {
			start := time.Now()
			r := runFault(t, single, ns, fc)
			summary = append(summary, fmt.Sprintf("%-16s %s (%v)", fc.name, r, time.Since(start).Round(time.Second)))
		})
	}
	t.Log("fault suite, per class:\n" + strings.Join(summary, "\n"))
}

// chaosQueue creates Queue <ns>/q on e whose workers register the chaos
// handler.
func chaosQueue(t *testing.T, e *env, ns string) {
	t.Helper()
	e.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		s.Concurrency = 8
		s.VisibilityTimeout = dur(chaosVisibility)
		s.HeartbeatInterval = dur(500 * time.Millisecond)
		s.Scaling.MinReplicas = ptr.To[int32](2)
		s.Scaling.MaxReplicas = 3
		s.Scaling.TargetBacklogPerWorker = 100
		s.Scaling.ScaleDownStabilization = dur(5 * time.Second)
		s.Retry.BaseDelay = dur(200 * time.Millisecond)
		s.Retry.MaxDelay = dur(2 * time.Second)
		s.Retry.MaxAttempts = chaosAttempts
		s.WorkerTemplate.Spec.Containers = []corev1.Container{{
			Name: "worker", Image: "ghcr.io/dtq-dev/dtq-worker:latest",
			Env: []corev1.EnvVar{{Name: demo.EnvChaosLog, Value: chaosLog}},
		}}
	})
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		if n := readyWorkers(e, ns); n < 2 {
			return fmt.Errorf("%d ready workers in %s, want 2", n, ns)
		}
		return nil
	}))
}

// chaosTasks returns n logical tasks of a scenario, keys <scenario>-NNNN, each
// a Task of that name holding 20 ms, or slow seconds for every tenth one when
// slow is set; every twinEvery-th key gets a twin Task (<key>-twin) created
// about 50 Tasks later, a second submission of the same key.
func chaosTasks(ns, scenario string, n int, slow float64) []*dtqv1alpha1.Task {
	var out, twins []*dtqv1alpha1.Task
	for i := range n {
		key := fmt.Sprintf("%s-%04d", scenario, i)
		hold := 0.02
		if slow > 0 && i%10 == 5 {
			hold = slow
		}
		out = append(out, chaosTask(ns, scenario, key, key, hold))
		if i%twinEvery == 0 {
			twins = append(twins, chaosTask(ns, scenario, key+"-twin", key, hold))
		}
		if len(twins) > 0 && i >= 50 && (i-50)%twinEvery == 0 {
			out, twins = append(out, twins[0]), twins[1:]
		}
	}
	return append(out, twins...)
}

// chaosTask is a Task of a scenario running the chaos handler for key.
func chaosTask(ns, scenario, name, key string, hold float64) *dtqv1alpha1.Task {
	return newTask(name, ns, scenario, demo.Chaos, demo.ChaosPayload{Key: key, HoldSeconds: hold}).
		Key(key).MaxAttempts(chaosAttempts).Obj()
}

// runFault runs one fault class on e and returns the checker's report.
func runFault(t *testing.T, e *env, ns string, fc faultClass) chaoscheck.Report {
	scenario := strings.ToLower(fc.name)
	tasks := chaosTasks(ns, scenario, faultTasks, fc.slow)
	t.Cleanup(func() {
		// Finished Tasks go (their Redis records stay): etcd holds one class at a time.
		_ = e.stack.Client.DeleteAllOf(context.Background(), &dtqv1alpha1.Task{}, client.InNamespace(ns),
			client.MatchingLabels{scenarioLabel: scenario})
	})
	start := time.Now()
	created := make(chan error, 1)
	go func() { created <- e.create(tasks) }()
	must(t, poll(t.Context(), 3*time.Minute, func() error {
		if n := succeeded(t, e, ns, scenario); n < faultTasks/4 {
			return fmt.Errorf("%d succeeded, waiting for %d", n, faultTasks/4)
		}
		return nil
	}))
	t.Logf("%s: injecting at %v (%d succeeded)", fc.name, time.Since(start).Round(time.Millisecond), succeeded(t, e, ns, scenario))
	fc.inject(t, ns)
	t.Logf("%s: fault over at %v (%d succeeded)", fc.name, time.Since(start).Round(time.Millisecond), succeeded(t, e, ns, scenario))
	must(t, <-created)
	got := e.waitTerminal(t, ns, scenario, len(tasks), 5*time.Minute)
	r := check(t, e, got)
	t.Logf("%s: %s; %d Tasks terminal %v after the first create", fc.name, r, len(tasks), time.Since(start).Round(time.Millisecond))
	if !r.OK() || r.Accepted != faultTasks {
		t.Errorf("%s: want %d accepted, 0 lost, 0 duplicated:\n%s", fc.name, faultTasks, r.Details(20))
	}
	if fc.redelivers && r.Redeliveries == 0 {
		t.Errorf("%s: no task ran again: the fault hit no running work", fc.name)
	}
	return r
}

// check runs the chaos checker on Tasks of e: one logical task per
// idempotency key.
func check(t *testing.T, e *env, tasks map[string]*dtqv1alpha1.Task) chaoscheck.Report {
	t.Helper()
	logical := chaoscheck.FromTasks(slices.Collect(maps.Values(tasks)), chaosAttempts)
	ns, keys := "", make([]string, 0, len(logical))
	for _, task := range tasks {
		ns = task.Namespace
	}
	for _, lt := range logical {
		keys = append(keys, lt.Key)
	}
	effects, err := chaoscheck.ReadEffects(t.Context(), e.rdb, ns, keys)
	must(t, err)
	log, err := demo.ReadChaosLog(chaosLog)
	must(t, err)
	return chaoscheck.Check(logical, log, effects)
}

func succeeded(t *testing.T, e *env, ns, scenario string) int {
	got, err := e.listTasks(t.Context(), ns, scenario)
	if err != nil {
		return 0
	}
	n := 0
	for _, task := range got {
		if task.Status.State == dtqv1alpha1.TaskSucceeded {
			n++
		}
	}
	return n
}

// killWorkers SIGKILLs two of the Queue's worker processes, one second apart,
// in the middle of their tasks; the stand-in kubelet restarts them.
func killWorkers(t *testing.T, ns string) {
	for range 2 {
		p, active := busyWorker(t, ns)
		must(t, single.stack.SignalPod(ns, p, syscall.SIGKILL))
		t.Logf("SIGKILLed worker %s with %d tasks in flight", p, active)
		time.Sleep(time.Second)
	}
}

// pauseWorker stops a worker process (SIGSTOP) for twice the visibility
// timeout, so its peers reclaim its tasks, then lets it run on (SIGCONT): a
// zombie that must neither complete nor keep what it lost.
func pauseWorker(t *testing.T, ns string) {
	p, active := busyWorker(t, ns)
	must(t, single.stack.SignalPod(ns, p, syscall.SIGSTOP))
	t.Logf("SIGSTOPped worker %s with %d tasks in flight, for %v", p, active, 2*chaosVisibility)
	time.Sleep(2 * chaosVisibility)
	must(t, single.stack.SignalPod(ns, p, syscall.SIGCONT))
}

// busyWorker waits for a running worker process of the Queue with tasks in
// flight (by its last heartbeat) and returns it: the busiest one.
func busyWorker(t *testing.T, ns string) (name string, active int) {
	t.Helper()
	b := broker.New(single.rdb)
	must(t, poll(t.Context(), time.Minute, func() error {
		running := map[string]bool{}
		for _, p := range single.stack.Pods() {
			if p.Namespace == ns && p.PID != 0 && p.Ready && !p.Terminating {
				running[p.Name] = true
			}
		}
		ws, err := b.Workers(t.Context(), broker.QueueRef{Namespace: ns, Name: "q"})
		if err != nil {
			return err
		}
		for _, w := range ws {
			if running[w.ID] && w.Active > active {
				name, active = w.ID, w.Active
			}
		}
		if active == 0 {
			return fmt.Errorf("no running worker of %s has tasks in flight", ns)
		}
		return nil
	}))
	return name, active
}

// toxic returns a fault that puts the toxic (Toxiproxy's JSON form) on both
// proxies, manager-Redis and workers-Redis, for d.
func toxic(d time.Duration, spec string) func(*testing.T, string) {
	return func(t *testing.T, _ string) {
		proxies := []*toxiproxy.Proxy{toManager, toWorkers}
		defer func() {
			for _, p := range proxies {
				p.Toxics.ResetToxics(context.Background())
			}
		}()
		for _, p := range proxies {
			_, err := p.Toxics.AddToxicJson(strings.NewReader(spec))
			must(t, err)
		}
		t.Logf("toxic %s on both proxies for %v", spec, d)
		time.Sleep(d)
	}
}

// readyWorkers counts the ready worker processes of Queue <ns>/q on e.
func readyWorkers(e *env, ns string) int {
	n := 0
	for _, p := range e.stack.Pods() {
		if p.Namespace == ns && p.Deployment == "q-workers" && p.Ready && !p.Terminating {
			n++
		}
	}
	return n
}

// One master of the cluster stack is SIGKILLed while the chaos queue on it
// works, kept down past the cluster's node timeout (the others mark it
// failed), then started again with its data (AOF, fsync always): the queue on
// it loses and duplicates nothing, and a queue on another master runs a Task
// from its create to success within otherQueueBound while the first is down
// (about 0.3 s here; 8.6 s or only after the restart when the down queue's
// Tasks held the manager's workers).
func TestFaultsOneMasterDown(t *testing.T) {
	e := cluster
	ns := e.namespace(t, "e2e-master-down")
	victim := masterOf(t, e, broker.KeyPrefix(broker.QueueRef{Namespace: ns, Name: "q"}))
	// A namespace whose Queue q is on another master, and whose list of
	// queues (the key tagged {<ns>}) is on the one killed.
	other := ""
	for i := 0; other == ""; i++ {
		n := fmt.Sprintf("e2e-master-down-other-%d", i)
		if masterOf(t, e, broker.KeyPrefix(broker.QueueRef{Namespace: n, Name: "q"})) != victim && masterOf(t, e, "{"+n+"}") == victim {
			other = e.namespace(t, n)
		}
	}
	e.queue(t, other, nil)
	chaosQueue(t, e, ns)
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		if n := readyWorkers(e, other); n < 1 {
			return fmt.Errorf("%d ready workers in %s, want 1", n, other)
		}
		return nil
	}))
	const down, otherQueueBound = 10 * time.Second, 5 * time.Second
	runFault(t, e, ns, faultClass{name: "OneMasterDown", inject: func(t *testing.T, _ string) {
		back := make(chan error, 1)
		go func() { back <- e.stack.RestartRedisNode(t.Context(), victim, syscall.SIGKILL, down) }()
		t.Logf("SIGKILLed master %d (%s), for %v", victim, e.stack.RedisAddrs()[victim], down)
		time.Sleep(3 * time.Second) // past the node timeout (2 s): the cluster marked it failed
		task := newTask("while-down", other, "master-down", "echo", map[string]int{"i": 1}).Key("while-down").Obj()
		must(t, e.stack.Client.Create(t.Context(), task))
		created := time.Now()
		var took time.Duration
		var ready bool
		var readyMsg string
		err := poll(t.Context(), otherQueueBound, func() error {
			got := &dtqv1alpha1.Task{}
			if err := e.stack.Client.Get(t.Context(), client.ObjectKeyFromObject(task), got); err != nil {
				return err
			}
			if got.Status.State != dtqv1alpha1.TaskSucceeded {
				return fmt.Errorf("the Task on the other master is %q", got.Status.State)
			}
			took = time.Since(created)
			return nil
		})
		if err == nil {
			// The Task's events made the Queue reconcile while the master
			// was down: it stays Ready.
			time.Sleep(1500 * time.Millisecond)
			q := &dtqv1alpha1.Queue{}
			must(t, e.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: other, Name: "q"}, q))
			c := meta.FindStatusCondition(q.Status.Conditions, dtqv1alpha1.QueueReady)
			ready = c != nil && c.Status == metav1.ConditionTrue
			if c != nil {
				readyMsg = c.Reason + ": " + c.Message
			}
		}
		var restarted error
		wasDown := true
		select {
		case restarted = <-back:
			wasDown = false
		default:
			restarted = <-back // the master back either way, before the test ends
		}
		must(t, restarted)
		must(t, err)
		if !wasDown {
			t.Fatal("the Task on the other master succeeded only once the killed master was back")
		}
		t.Logf("a Task on another master succeeded %v after its create, while the master was down", took.Round(time.Millisecond))
		if !ready {
			t.Errorf("the other Queue was not Ready while its namespace's list of queues was down: %s", readyMsg)
		}
	}})
}

// masterOf returns the index (RedisAddrs' order) of the master of e's
// cluster that holds key's slot.
func masterOf(t *testing.T, e *env, key string) int {
	t.Helper()
	cc, ok := e.rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("the %s stack's client is a %T, not a cluster client", e.name, e.rdb)
	}
	slot, err := cc.ClusterKeySlot(t.Context(), key).Result()
	must(t, err)
	shards, err := cc.ClusterShards(t.Context()).Result()
	must(t, err)
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				addr := fmt.Sprintf("%s:%d", sh.Nodes[0].IP, sh.Nodes[0].Port) // one master per shard
				if i := slices.Index(e.stack.RedisAddrs(), addr); i >= 0 {
					return i
				}
				t.Fatalf("slot %d's master %s is not one of the stack's %v", slot, addr, e.stack.RedisAddrs())
			}
		}
	}
	t.Fatalf("no master holds slot %d", slot)
	return -1
}
