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
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// BenchmarkManyQueues runs one manager (the controllers and queue loops of
// cmd/manager, its /readyz check included) with many Queues on one envtest API
// server and one Redis, and measures what the Queues' users see: how soon a
// Queue's status shows a task submitted straight to Redis (as the HTTP API
// does), how late delayed tasks are promoted, /readyz latency, and the Redis
// connections the manager holds. Run it with:
//
//	go test ./controllers -run '^$' -bench ManyQueues -benchtime 1x
//
// DTQ_BENCH_QUEUES sets the number of Queues (default 200); DTQ_BENCH_CLUSTER=1
// runs on a three-master Redis Cluster instead of one redis-server.
func BenchmarkManyQueues(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("DTQ_BENCH_QUEUES")); err == nil && v > 0 {
		n = v
	}
	logf.SetLogger(logr.Discard())
	env := newTestEnv()
	cfg, err := env.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = 100, 200 // cmd/manager's defaults
	cl, err := client.New(cfg, client.Options{Scheme: devstack.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The manager's client is built as cmd/manager builds it; its connections
	// carry a name so CLIENT LIST can count them apart from the bench's.
	var url string
	var admin []*redis.Client // one per data node
	var bench redis.UniversalClient
	topology := "one redis-server"
	if os.Getenv("DTQ_BENCH_CLUSTER") == "1" {
		cc := redistest.StartCluster(b, 3)
		addrs := cc.Options().Addrs
		url = "redis+cluster://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=") + "&client_name=dtq-manager"
		for _, a := range addrs {
			admin = append(admin, redis.NewClient(&redis.Options{Addr: a}))
		}
		bench, topology = cc, "three-master Redis Cluster"
	} else {
		srv := redistest.Start(b)
		url = srv.URL() + "?client_name=dtq-manager"
		admin, bench = []*redis.Client{srv.Client()}, srv.Client()
	}
	rdb, err := redisconn.Config{URL: url}.Client()
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	probe, err := loopback.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: devstack.NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: probe})
	if err != nil {
		b.Fatal(err)
	}
	if err := Setup(mgr, rdb, Options{}); err != nil {
		b.Fatal(err)
	}
	// As in cmd/manager.
	if err := mgr.AddReadyzCheck("redis", func(r *http.Request) error { return rdb.Ping(r.Context()).Err() }); err != nil {
		b.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()

	readyz := sampleReadyz(ctx, "http://"+probe+"/readyz")
	conns := sampleConnections(ctx, admin)

	const ns = "many"
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	refs := make([]broker.QueueRef, n)
	start := time.Now()
	for i := range refs {
		refs[i] = broker.QueueRef{Namespace: ns, Name: fmt.Sprintf("q%03d", i)}
		if err := cl.Create(ctx, testutil.MakeQueue(refs[i].Name, ns).Obj()); err != nil {
			b.Fatal(err)
		}
	}
	ready, err := waitQueues(ctx, mgr, ns, n, 2*time.Minute, func(q *dtqv1alpha1.Queue) bool {
		return meta.IsStatusConditionTrue(q.Status.Conditions, dtqv1alpha1.QueueReady)
	})
	if err != nil {
		b.Fatal(err)
	}
	allReady := time.Since(start)

	// Status freshness: one task submitted to every Queue at once, straight to
	// Redis; the lag is from its submission to the first status showing it.
	eng := broker.New(bench)
	const rounds = 3
	var lags []time.Duration
	stale := 0 // status never showed the task within the round's minute
	for r := 1; r <= rounds; r++ {
		submitted := make([]time.Time, n)
		for i, ref := range refs {
			submitted[i] = time.Now()
			if _, err := eng.Submit(ctx, ref, broker.SubmitRequest{Type: "echo", Priority: 5}); err != nil {
				b.Logf("submit to %s: %v", ref, err) // a Queue not set up in Redis yet
			}
		}
		seen, err := waitQueues(ctx, mgr, ns, n, time.Minute, func(q *dtqv1alpha1.Queue) bool { return q.Status.Queued >= int64(r) })
		if err != nil {
			b.Fatal(err)
		}
		for i, ref := range refs {
			if at, ok := seen[ref.Name]; ok {
				lags = append(lags, at.Sub(submitted[i]))
			} else {
				stale++
			}
		}
	}

	// Promotion delay: a delayed task on every Queue, all due at one moment;
	// the delay is from the due time to the TaskQueued event the promotion writes.
	due := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	ids := make([]string, n)
	for i, ref := range refs {
		res, err := eng.Submit(ctx, ref, broker.SubmitRequest{Type: "echo", Priority: 5, NotBefore: due})
		if err != nil {
			b.Logf("submit to %s: %v", ref, err)
			continue
		}
		ids[i] = res.Task.ID
	}
	time.Sleep(time.Until(due) + 5*time.Second)
	var delays []time.Duration
	notPromoted := 0
	for i, ref := range refs {
		evs, err := eng.ReadEvents(ctx, ref, "0", 1000, 0)
		if err != nil {
			b.Fatal(err)
		}
		if ids[i] == "" {
			notPromoted++
			continue
		}
		// The submission wrote a TaskQueued event too (before the due time).
		var at time.Time
		for _, ev := range evs {
			if ev.TaskID == ids[i] && ev.Type == broker.EventQueued && !ev.At.Before(due) {
				at = ev.At
			}
		}
		if at.IsZero() {
			notPromoted++
		} else {
			delays = append(delays, at.Sub(due))
		}
	}

	// What the idle manager costs Redis: commands per second over 10 s with
	// nothing submitted (the bench itself sends only the INFO calls).
	cmds0 := commandsProcessed(ctx, admin)
	idleStart := time.Now()
	time.Sleep(10 * time.Second)
	idleRate := float64(commandsProcessed(ctx, admin)-cmds0) / time.Since(idleStart).Seconds()
	cancel()

	rz := readyz()
	maxConns, lastConns := conns()
	fmt.Printf("\n%d Queues, one manager, %s\n\n| what | value |\n|---|---|\n", n, topology)
	fmt.Printf("| Queues Ready after creation | %d of %d after %v |\n", len(ready), n, allReady.Round(time.Millisecond))
	fmt.Printf("| status shows a submitted task (%d rounds x %d Queues; not within 1 min: %d): p50 / p99 / max | %s |\n",
		rounds, n, stale, percentiles(lags))
	fmt.Printf("| delayed task promoted after its due time: p50 / p99 / max (not submitted or not promoted within 5 s: %d) | %s |\n", notPromoted, percentiles(delays))
	fmt.Printf("| /readyz latency (%d probes, %d failed or not 200 within 10 s): p50 / p99 / max | %s |\n", len(rz.latencies), rz.failed, percentiles(rz.latencies))
	fmt.Printf("| Redis connections of the manager: max / at the end | %d / %d |\n", maxConns, lastConns)
	fmt.Printf("| Redis commands/s with the Queues idle | %.0f |\n", idleRate)
}

// waitQueues waits until n Queues of ns satisfy ok or timeout passes, and
// returns when each that did was first seen to. It watches through the
// manager's own informer: a watch or polling of the bench's own would add
// load on the API server that the product does not have.
func waitQueues(ctx context.Context, mgr ctrl.Manager, ns string, n int, timeout time.Duration, ok func(*dtqv1alpha1.Queue) bool) (map[string]time.Time, error) {
	inf, err := mgr.GetCache().GetInformer(ctx, &dtqv1alpha1.Queue{})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	seen := map[string]time.Time{}
	done := make(chan struct{})
	check := func(obj any) {
		q, isQueue := obj.(*dtqv1alpha1.Queue)
		if !isQueue || q.Namespace != ns || !ok(q) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, dup := seen[q.Name]; !dup {
			seen[q.Name] = time.Now()
			if len(seen) == n {
				close(done)
			}
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }})
	if err != nil {
		return nil, err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(seen), nil
}

type readyzStats struct {
	latencies []time.Duration
	failed    int
}

// sampleReadyz GETs url every 100 ms until ctx ends; the returned function
// reports what it saw.
func sampleReadyz(ctx context.Context, url string) func() readyzStats {
	var mu sync.Mutex
	var st readyzStats
	hc := &http.Client{Timeout: 10 * time.Second}
	go func() {
		for ctx.Err() == nil {
			t0 := time.Now()
			resp, err := hc.Get(url)
			d := time.Since(t0)
			mu.Lock()
			st.latencies = append(st.latencies, d)
			if err != nil || resp.StatusCode != http.StatusOK {
				st.failed++
			}
			if err == nil {
				_ = resp.Body.Close()
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() readyzStats {
		mu.Lock()
		defer mu.Unlock()
		return st
	}
}

// sampleConnections counts, every 200 ms, the connections named dtq-manager
// on every node; the returned function reports the maximum and the last count.
func sampleConnections(ctx context.Context, nodes []*redis.Client) func() (maxN, last int) {
	var mu sync.Mutex
	var hi, cur int
	go func() {
		for ctx.Err() == nil {
			total := 0
			for _, n := range nodes {
				list, err := n.ClientList(ctx).Result()
				if err != nil {
					return
				}
				total += strings.Count(list, "name=dtq-manager ")
			}
			mu.Lock()
			hi, cur = max(hi, total), total
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return hi, cur
	}
}

// commandsProcessed sums total_commands_processed over the nodes.
func commandsProcessed(ctx context.Context, nodes []*redis.Client) int64 {
	var sum int64
	for _, n := range nodes {
		info, _ := n.Info(ctx, "stats").Result()
		for l := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "total_commands_processed:"); ok {
				x, _ := strconv.ParseInt(v, 10, 64)
				sum += x
			}
		}
	}
	return sum
}

// percentiles formats p50 / p99 / max of ds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return r(at(0.5)) + " / " + r(at(0.99)) + " / " + r(s[len(s)-1])
}
