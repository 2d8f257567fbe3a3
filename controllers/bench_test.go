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

package controllers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// BenchmarkCRPath measures, on one envtest API server, the raw create rate of
// ConfigMaps and the rate at which Task CRs go from create to Succeeded with
// the echo handler, plus the API writes per task counted by the API server's
// own request metrics (every request per task is logged), and the CPU each
// process (API server, etcd, Redis, this one) spends per operation in each
// phase. Run it with:
//
//	go test ./controllers -run '^$' -bench CRPath -benchtime 1x
//
// DTQ_BENCH_APISERVER_PROFILE=<prefix> also writes 5 s CPU profiles of the API
// server taken during the status writes with no manager (<prefix>-status.prof)
// and during the CR phase (<prefix>-cr.prof); DTQ_BENCH_TASKS=3000 makes both
// phases last longer than that. DTQ_BENCH_CRDS=<dir> installs the CRDs of dir
// instead of config/crd/bases, to compare a CRD change with one test binary.
func BenchmarkCRPath(b *testing.B) {
	const producers = 8
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("DTQ_BENCH_TASKS")); err == nil && v > 0 {
		n = v
	}
	logf.SetLogger(logr.Discard())
	sch := devstack.NewScheme()
	env := newTestEnv()
	if dir := os.Getenv("DTQ_BENCH_CRDS"); dir != "" {
		env.CRDDirectoryPaths = []string{dir}
	}
	cfg, err := env.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: measure the server
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: sch})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 200})
	defer rdb.Close()

	for _, ns := range []string{"raw", "rawtasks", "cr"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}

	b.ResetTimer()
	cpu := cpuTimes()
	createConfigMaps := func(prefix string) float64 {
		return produce(b, n, producers, func(i int) error {
			return cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: "raw"},
				Data: map[string]string{"i": strconv.Itoa(i)}})
		})
	}
	rawBefore := createConfigMaps("before")
	cpu = cpu.report(b, "ConfigMap creates", n)

	// The same Tasks with no manager running: what creating them alone costs the
	// API server (CEL rules and a larger object than a ConfigMap). Deleted again
	// before the manager starts, so it never sees them.
	task := func(ns string, i int) *dtqv1alpha1.Task {
		return testutil.MakeTask(fmt.Sprintf("t-%d", i), ns).Queue("bench").
			Key(fmt.Sprintf("k-%d", i)).Payload(map[string]any{"i": i}).Obj()
	}
	rawTasks := make([]*dtqv1alpha1.Task, n)
	taskCreateRate := produce(b, n, producers, func(i int) error {
		rawTasks[i] = task("rawtasks", i)
		return cl.Create(ctx, rawTasks[i])
	})
	cpu = cpu.report(b, "Task creates, no manager", n)
	// The one status write the controller makes for a fast task, written
	// straight away by the producers: with the create above, the two writes
	// every Task needs, at the API server's own speed with nothing else running.
	profile := os.Getenv("DTQ_BENCH_APISERVER_PROFILE")
	if profile != "" {
		go profileAPIServer(ctx, cfg, profile+"-status.prof")
	}
	statusRate := produce(b, n, producers, func(i int) error {
		t := rawTasks[i]
		t.Status = finishedStatus(t)
		return cl.Status().Update(ctx, statusUpdate(t))
	})
	cpu.report(b, "Task status writes (Succeeded), no manager", n)
	twoWrites := 1 / (1/taskCreateRate + 1/statusRate)
	if err := cl.DeleteAllOf(ctx, &dtqv1alpha1.Task{}, client.InNamespace("rawtasks")); err != nil {
		b.Fatal(err)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: sch, Cache: CacheOptions(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{RoutineTaskEvents: os.Getenv("DTQ_BENCH_ROUTINE_EVENTS") == "1"}
	if err := Setup(mgr, rdb, opts); err != nil {
		b.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	if err := cl.Create(ctx, testutil.MakeQueue("bench", "cr").Replicas(1, 1).Obj()); err != nil {
		b.Fatal(err)
	}
	mux := worker.NewMux()
	demo.Register(mux, rdb)
	w, err := worker.NewServer(worker.Config{Redis: rdb, Namespace: "cr", Queue: "bench", Concurrency: 64,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, mux)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()

	succeeded, err := countSucceeded(ctx, mgr, "cr", n)
	if err != nil {
		b.Fatal(err)
	}
	before, err := apiWrites(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	cpu = cpuTimes()
	if profile != "" {
		go profileAPIServer(ctx, cfg, profile+"-cr.prof")
	}
	crCreateRate := produce(b, n, producers, func(i int) error { return cl.Create(ctx, task("cr", i)) })
	select {
	case <-succeeded:
	case <-time.After(3 * time.Minute):
		var list dtqv1alpha1.TaskList
		_ = cl.List(ctx, &list, client.InNamespace("cr"))
		states := map[dtqv1alpha1.TaskState]int{}
		for _, t := range list.Items {
			states[t.Status.State]++
		}
		b.Fatalf("tasks did not all succeed within 3 minutes: %v", states)
	}
	crRate := float64(n) / time.Since(start).Seconds()
	cpu.report(b, "Task CRs to Succeeded", n)
	time.Sleep(2 * time.Second) // let the event broadcaster flush
	after, err := apiWrites(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	// The raw rate again, after: this shared machine's speed drifts within a
	// run, so the ratio uses the mean of the two.
	rawAfter := createConfigMaps("after")
	rawRate := (rawBefore + rawAfter) / 2
	b.StopTimer()

	perTask := func(keys ...string) float64 {
		var sum float64
		for _, k := range keys {
			sum += after[k] - before[k]
		}
		return sum / float64(n)
	}
	var reqs []string
	for k, v := range after {
		if d := v - before[k]; d >= float64(n)/20 {
			reqs = append(reqs, fmt.Sprintf("%s %.2f", k, d/float64(n)))
		}
	}
	slices.Sort(reqs)
	b.Logf("API requests per task (at least 0.05): %s", strings.Join(reqs, ", "))
	taskWrites := perTask("POST tasks", "PATCH tasks/status", "PUT tasks/status", "PUT tasks", "PATCH tasks")
	eventWrites := perTask("POST events", "PATCH events")
	b.ReportMetric(rawRate, "configmaps/s")
	b.ReportMetric(rawBefore, "configmaps-before/s")
	b.ReportMetric(rawAfter, "configmaps-after/s")
	b.ReportMetric(taskCreateRate, "taskcreates/s")
	b.ReportMetric(crCreateRate, "crcreates/s")
	b.ReportMetric(crRate, "tasks/s")
	b.ReportMetric(crRate/rawRate*100, "%raw")
	b.ReportMetric(statusRate, "statuswrites/s")
	b.ReportMetric(twoWrites/rawRate*100, "%raw-two-writes")
	b.ReportMetric(taskWrites, "taskwrites/task")
	b.ReportMetric(eventWrites, "eventwrites/task")
	fmt.Printf("\n| what | value |\n|---|---|\n| raw ConfigMap create rate (%d producers; mean of before and after: %.0f, %.0f) | %.0f/s |\n"+
		"| raw Task create rate, no manager (%d producers) | %.0f/s |\n| raw Task status write rate (Succeeded), no manager | %.0f/s |\n"+
		"| the two writes alone, create then status (floor of the CR path) | %.0f/s (%.0f%% of raw) |\n| Task create rate while the manager runs | %.0f/s |\n"+
		"| Task CR create -> Succeeded (%d Tasks, %d producers, echo) | %.0f/s |\n| CR path / raw | %.0f%% |\n"+
		"| Task writes per task (create + status) | %.2f |\n| Event writes per task (routine events: %t) | %.2f |\n",
		producers, rawBefore, rawAfter, rawRate, producers, taskCreateRate, statusRate, twoWrites, twoWrites/rawRate*100, crCreateRate, n, producers, crRate, crRate/rawRate*100, taskWrites, opts.RoutineTaskEvents, eventWrites)
}

// finishedStatus is the status the controller writes for t once its task
// succeeded (as the echo handler leaves it), built with the controller's own code.
func finishedStatus(t *dtqv1alpha1.Task) dtqv1alpha1.TaskStatus {
	r := &TaskReconciler{Clock: clock.RealClock{}}
	now := time.Now()
	info := broker.TaskInfo{ID: string(t.UID), State: broker.StateSucceeded, Attempt: 1, StartedAt: now, FinishedAt: now,
		WorkerID: "vm-00000000", Result: json.RawMessage(t.Spec.Payload.Raw)}
	st := dtqv1alpha1.TaskStatus{ObservedGeneration: t.Generation}
	applyTaskInfo(&st, t, info, false)
	r.setSubmitted(&st, t, info, false)
	r.setLifecycleConditions(&st, t)
	return st
}

// procCPU is the CPU time used so far by this process and by its children
// kube-apiserver and etcd (envtest's), by name.
type procCPU map[string]time.Duration

func cpuTimes() procCPU {
	out := procCPU{}
	self := os.Getpid()
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15), in clock ticks (100/s)
		stat := string(data)
		name := stat[strings.IndexByte(stat, '(')+1 : strings.LastIndexByte(stat, ')')]
		f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:])
		ppid, _ := strconv.Atoi(f[1])
		if pid != self && ppid != self {
			continue
		}
		if pid == self {
			name = "test process (manager, worker, producers)"
		}
		ut, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		out[name] += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out
}

// report logs the CPU each process used since c, per operation, and returns
// the current times.
func (c procCPU) report(b *testing.B, phase string, n int) procCPU {
	now := cpuTimes()
	var parts []string
	for name, t := range now {
		parts = append(parts, fmt.Sprintf("%s %.2f ms", name, float64(t-c[name])/float64(time.Millisecond)/float64(n)))
	}
	slices.Sort(parts)
	b.Logf("CPU per operation, %s: %s", phase, strings.Join(parts, ", "))
	return now
}

// produce runs n calls of f over p goroutines and returns calls per second.
func produce(b *testing.B, n, p int, f func(i int) error) float64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// countSucceeded closes the returned channel once n Tasks in ns are Succeeded,
// as seen by the manager's own informer: a watch of the bench's own would add
// a watcher, and its cost on the API server, that the product does not have.
func countSucceeded(ctx context.Context, mgr ctrl.Manager, ns string, n int) (<-chan struct{}, error) {
	inf, err := mgr.GetCache().GetInformer(ctx, &dtqv1alpha1.Task{})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]bool{}
	count := func(obj any) {
		t, ok := obj.(*dtqv1alpha1.Task)
		if !ok || t.Namespace != ns || t.Status.State != dtqv1alpha1.TaskSucceeded {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[t.Name] {
			seen[t.Name] = true
			if len(seen) == n {
				close(done)
			}
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    count,
		UpdateFunc: func(_, o any) { count(o) },
	})
	return done, err
}

// apiWrites reads apiserver_request_total and sums it by "VERB resource[/subresource]"
// (every verb: reads too).
func apiWrites(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	resp, err := apiGet(ctx, cfg, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimPrefix(line, "apiserver_request_total{"), "} ")
		l := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(v, `"`)
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		v, _ := strconv.ParseFloat(value, 64)
		out[key] += v
	}
	return out, sc.Err()
}

// profileAPIServer writes a 5-second CPU profile of the API server to file.
func profileAPIServer(ctx context.Context, cfg *rest.Config, file string) {
	resp, err := apiGet(ctx, cfg, "/debug/pprof/profile?seconds=5")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	_ = os.WriteFile(file, data, 0o644)
}

// apiGet GETs path from the API server with cfg's credentials.
func apiGet(ctx context.Context, cfg *rest.Config, path string) (*http.Response, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	return hc.Do(req)
}
