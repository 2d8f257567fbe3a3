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
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// BenchmarkManagerMemory measures the resident memory of manager processes
// with many large Tasks in the cluster: it creates DTQ_BENCH_TASKS Tasks
// (default 10000) with DTQ_BENCH_PAYLOAD_KIB of payload each (default 64) on
// an envtest API server, then runs each manager binary of
// DTQ_BENCH_MANAGERS (label=path,...; default: this tree's cmd/manager, built
// into a temp dir) in turn, waits until it has reconciled every Task, and
// prints its RSS, peak RSS and Go heap in a table. To compare with another
// release, build its manager and name both:
//
//	git archive main | tar -x -C /tmp/dtq-main && (cd /tmp/dtq-main && go build -o /tmp/manager-main ./cmd/manager)
//	go build -o /tmp/manager-branch ./cmd/manager
//	DTQ_BENCH_MANAGERS=main=/tmp/manager-main,branch=/tmp/manager-branch \
//	  go test ./controllers -run '^$' -bench ManagerMemory -benchtime 1x -timeout 60m
//
// The Tasks name a Queue that does not exist, so they stay Pending and only
// the manager's cache and bookkeeping are measured, not the engine.
func BenchmarkManagerMemory(b *testing.B) {
	n, kib := envInt("DTQ_BENCH_TASKS", 10000), envInt("DTQ_BENCH_PAYLOAD_KIB", 64)
	logf.SetLogger(logr.Discard())
	managers := benchManagers(b)

	env := newTestEnv()
	env.ControlPlane.Etcd = &envtest.Etcd{}
	// The Tasks and a status revision of each are about 2n x payload in etcd.
	env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(8<<30))
	cfg, err := env.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = -1, 0
	cl, err := client.New(cfg, client.Options{Scheme: devstack.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		b.Fatal(err)
	}
	srv := redistest.Start(b)
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mem"}}); err != nil {
		b.Fatal(err)
	}
	blob := strings.Repeat("x", kib<<10-16)
	rate := produce(b, n, 8, func(i int) error {
		return cl.Create(ctx, testutil.MakeTask(fmt.Sprintf("t-%d", i), "mem").Queue("absent").
			Payload(map[string]any{"blob": blob}).Obj())
	})
	b.Logf("created %d Tasks of %d KiB at %.0f/s", n, kib, rate)

	var table strings.Builder
	fmt.Fprintf(&table, "\n%d Tasks with %d KiB of payload each\n\n", n, kib)
	fmt.Fprintf(&table, "| manager | RSS after sync | peak RSS | Go heap in use | time to reconcile all |\n|---|---|---|---|---|\n")
	for _, m := range managers {
		s := runManagerForMemory(b, m.path, kubeconfig, "redis://"+srv.Addr+"/0", n)
		fmt.Fprintf(&table, "| %s | %d MiB | %d MiB | %d MiB | %v |\n", m.label, s.rss>>20, s.peak>>20, s.heap>>20, s.synced.Round(time.Second))
	}
	fmt.Println(table.String())
}

type benchManager struct{ label, path string }

// benchManagers parses DTQ_BENCH_MANAGERS, or builds this tree's manager.
func benchManagers(b *testing.B) []benchManager {
	var out []benchManager
	if v := os.Getenv("DTQ_BENCH_MANAGERS"); v != "" {
		for _, item := range strings.Split(v, ",") {
			label, path, ok := strings.Cut(item, "=")
			if !ok {
				b.Fatalf("DTQ_BENCH_MANAGERS: want label=path, got %q", item)
			}
			out = append(out, benchManager{label, path})
		}
		return out
	}
	bin := filepath.Join(b.TempDir(), "manager")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/manager").CombinedOutput(); err != nil {
		b.Fatalf("build manager: %v\n%s", err, out)
	}
	return []benchManager{{"this tree", bin}}
}

type memSample struct {
	rss, peak, heap int64
	synced          time.Duration
}

// runManagerForMemory runs one manager until its task controller has
// reconciled n Tasks and its work queue is empty, then samples its memory
// for a few seconds and stops it.
func runManagerForMemory(b *testing.B, bin, kubeconfig, redisURL string, n int) memSample {
	port := freeLoopbackPort(b)
	cmd := exec.Command(bin, "--redis-url="+redisURL, "--health-probe-bind-address=0",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--metrics-secure=false")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	deadline := time.Now().Add(20 * time.Minute)
	for {
		if time.Now().After(deadline) {
			b.Fatalf("%s did not reconcile %d Tasks in time", bin, n)
		}
		m := scrape(url)
		if m[`controller_runtime_reconcile_total{controller="task",result="success"}`] >= float64(n) && m[`workqueue_depth{controller="task",name="task"}`] == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	s := memSample{synced: time.Since(start)}
	for range 5 { // settle: the largest RSS of five samples a second apart
		time.Sleep(time.Second)
		rss, peak := procMemory(b, cmd.Process.Pid)
		s.rss, s.peak = max(s.rss, rss), max(s.peak, peak)
		s.heap = max(s.heap, int64(scrape(url)["go_memstats_heap_inuse_bytes"]))
	}
	return s
}

// scrape reads a Prometheus text endpoint into series -> value (nil on error).
func scrape(url string) map[string]float64 {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil && i > 0 {
			out[line[:i]] = v
		}
	}
	return out
}

// procMemory returns VmRSS and VmHWM (peak RSS) of pid in bytes.
func procMemory(b *testing.B, pid int) (rss, peak int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

func freeLoopbackPort(b *testing.B) int {
	port, err := loopback.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	return port
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
