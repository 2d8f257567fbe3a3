package controllers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
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
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	"github.com/dtq-dev/dtq/internal/testutil/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// BenchmarkCRPath measures, on one envtest API server, the raw create rate of
// ConfigMaps and the rate at which Task CRs go from create to Succeeded with
// the echo handler, plus the API writes per task counted by the API server's
// own request metrics. Run it with:
//
//	go test ./controllers -run '^$' -bench CRPath -benchtime 1x
func BenchmarkCRPath(b *testing.B) {
	const producers = 8
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("DTQ_BENCH_TASKS")); err == nil && v > 0 {
		n = v
	}
	logf.SetLogger(logr.Discard())
	sch := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(sch)
	_ = dtqv1alpha1.AddToScheme(sch)
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: envtestutil.AssetsDir(),
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
	rawRate := produce(b, n, producers, func(i int) error {
		return cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "raw"},
			Data: map[string]string{"i": strconv.Itoa(i)}})
	})

	// The same Tasks with no manager running: what creating them alone costs the
	// API server (CEL rules and a larger object than a ConfigMap). Deleted again
	// before the manager starts, so it never sees them.
	taskCreateRate := produce(b, n, producers, func(i int) error {
		return cl.Create(ctx, testutil.MakeTask(fmt.Sprintf("t-%d", i), "rawtasks").Queue("bench").
			Key(fmt.Sprintf("k-%d", i)).Payload(map[string]any{"i": i}).Obj())
	})
	if err := cl.DeleteAllOf(ctx, &dtqv1alpha1.Task{}, client.InNamespace("rawtasks")); err != nil {
		b.Fatal(err)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: sch, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
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

	succeeded := watchSucceeded(ctx, cl, "cr", n)
	before, err := apiWrites(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	crCreateRate := produce(b, n, producers, func(i int) error {
		return cl.Create(ctx, testutil.MakeTask(fmt.Sprintf("t-%d", i), "cr").Queue("bench").
			Key(fmt.Sprintf("k-%d", i)).Payload(map[string]any{"i": i}).Obj())
	})
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
	time.Sleep(2 * time.Second) // let the event broadcaster flush
	after, err := apiWrites(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()

	perTask := func(keys ...string) float64 {
		var sum float64
		for _, k := range keys {
			sum += after[k] - before[k]
		}
		return sum / float64(n)
	}
	taskWrites := perTask("POST tasks", "PATCH tasks/status", "PUT tasks/status", "PUT tasks", "PATCH tasks")
	eventWrites := perTask("POST events", "PATCH events")
	b.ReportMetric(rawRate, "configmaps/s")
	b.ReportMetric(taskCreateRate, "taskcreates/s")
	b.ReportMetric(crCreateRate, "crcreates/s")
	b.ReportMetric(crRate, "tasks/s")
	b.ReportMetric(crRate/rawRate*100, "%raw")
	b.ReportMetric(taskWrites, "taskwrites/task")
	b.ReportMetric(eventWrites, "eventwrites/task")
	b.Logf("\n| what | value |\n|---|---|\n| raw ConfigMap create rate (%d producers) | %.0f/s |\n"+
		"| raw Task create rate, no manager (%d producers) | %.0f/s |\n| Task create rate while the manager runs | %.0f/s |\n"+
		"| Task CR create -> Succeeded (%d Tasks, %d producers, echo) | %.0f/s |\n| CR path / raw | %.0f%% |\n"+
		"| Task writes per task (create + status) | %.2f |\n| Event writes per task (routine events: %t) | %.2f |\n",
		producers, rawRate, producers, taskCreateRate, crCreateRate, n, producers, crRate, crRate/rawRate*100, taskWrites, opts.RoutineTaskEvents, eventWrites)
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

// watchSucceeded closes the returned channel once n Tasks in ns are Succeeded.
// It re-lists and watches again whenever the API server ends the watch.
func watchSucceeded(ctx context.Context, cl client.WithWatch, ns string, n int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		seen := map[string]bool{}
		count := func(t *dtqv1alpha1.Task) bool {
			if t.Status.State == dtqv1alpha1.TaskSucceeded {
				seen[t.Name] = true
			}
			return len(seen) >= n
		}
		for ctx.Err() == nil {
			var list dtqv1alpha1.TaskList
			if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range list.Items {
				if count(&list.Items[i]) {
					close(done)
					return
				}
			}
			wi, err := cl.Watch(ctx, &dtqv1alpha1.TaskList{}, client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
			if err != nil {
				continue
			}
			for ev := range wi.ResultChan() {
				if t, ok := ev.Object.(*dtqv1alpha1.Task); ok && count(t) {
					wi.Stop()
					close(done)
					return
				}
			}
		}
	}()
	return done
}

// apiWrites reads apiserver_request_total and sums it by "VERB resource[/subresource]".
func apiWrites(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
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
		switch l["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
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
