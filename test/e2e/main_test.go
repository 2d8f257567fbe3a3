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

// Package e2e runs dtq end to end on the dev stack (internal/devstack): the
// envtest control plane, a private redis-server with AOF, the real manager
// and API binaries and worker processes run by the stand-in kubelet. The
// manager and the workers reach Redis through two Toxiproxy proxies run in
// this process (transparent until a fault scenario adds a toxic). The tests
// drive the stack through Kubernetes objects and the HTTP API, as a user
// would, and read Redis only to count handler side effects and to check what
// the API wrote. They build the binaries themselves and fail
// (never skip) when a prerequisite is missing: run them with `make test`.
//
// Two stacks run side by side, each with its API: one on a single
// redis-server (behind the proxies), where every test runs, and one on a
// three-master Redis Cluster, where the feature scenarios (TestFeatures) run
// too, on Queues spread over all three masters.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/redisconn"
)

// env is one dev stack the scenarios run on, and a client of its Redis.
type env struct {
	name  string // "single" or "cluster"
	dir   string
	stack *devstack.Stack
	rdb   redis.UniversalClient
}

var (
	single  *env // one redis-server: every test runs here
	cluster *env // a three-master Redis Cluster: TestFeatures runs here too

	// managerBin is the manager the single stack runs (a test may replace it
	// for a while).
	managerBin string
	// toManager and toWorkers are the proxies between the single stack's
	// Redis and the manager, and its Redis and the workers.
	toManager, toWorkers *toxiproxy.Proxy
	// chaosLog is the chaos handler's execution log (demo.EnvChaosLog).
	chaosLog string
	// otlp receives the trace spans of the manager and of workers whose
	// Queue's template points them at it.
	otlp *otlpReceiver
	// binDir holds the binaries the suite built: manager, worker, api, kubectl-dtq.
	binDir string
	// builtCommit is the commit devstack.Build stamped into them (version.GitCommit).
	builtCommit string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	handler := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	ctrllog.SetLogger(logr.FromSlogHandler(handler))
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		return 1
	}

	tmp, err := os.MkdirTemp("", "dtq-e2e-")
	if err != nil {
		return fail("%v", err)
	}
	root := envtestutil.RepoRoot()
	binDir = filepath.Join(tmp, "bin")
	ctx := context.Background()
	t0 := time.Now()
	builtCommit = version.GitCommit(ctx, root)
	if err := devstack.Build(ctx, root, binDir, "./cmd/manager", "./cmd/worker", "./cmd/api", "./cmd/kubectl-dtq"); err != nil {
		return fail("build the binaries: %v", err)
	}
	managerBin, chaosLog = filepath.Join(binDir, "manager"), filepath.Join(tmp, "chaos.log")
	tox := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	defer func() {
		for _, p := range []*toxiproxy.Proxy{toManager, toWorkers} {
			if p != nil {
				p.Stop()
			}
		}
	}()
	otlp = startOTLPReceiver()
	defer otlp.Close()
	single = &env{name: "single", dir: filepath.Join(tmp, "dev")}
	cluster = &env{name: "cluster", dir: filepath.Join(tmp, "dev-cluster")}
	envs := []*env{single, cluster}
	var wg sync.WaitGroup
	errs := make([]error, len(envs))
	for i, e := range envs {
		opts := devstack.Options{
			Dir:        e.dir,
			AssetsDir:  envtestutil.AssetsDir(),
			ManagerBin: managerBin,
			WorkerBin:  filepath.Join(binDir, "worker"),
			// HTTP handler pods run the examples' commands in their folders.
			AppDirs: devstack.ExampleApps(root),
			APIBin:  filepath.Join(binDir, "api"),
			// Short keep-alives, and denials cached briefly so a RoleBinding
			// made during a test takes effect within it.
			APIArgs:      []string{"--events-keepalive=1s", "--authz-deny-cache-ttl=2s"},
			CRDDir:       filepath.Join(root, "config", "crd", "bases"),
			AdmissionDir: filepath.Join(root, "config", "admission"),
			ClusterRoles: []string{filepath.Join(root, "config", "rbac", "producer_role.yaml"),
				filepath.Join(root, "config", "rbac", "queue_operator_role.yaml"), filepath.Join(root, "config", "api", "version_reader_role.yaml")},
			// Nothing acknowledged may be lost when redis-server is killed.
			RedisFsync:   "always",
			RedisCluster: e == cluster,
			// The manager and the API export trace spans (of traced submissions only).
			ManagerEnv: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL(), "OTEL_BSP_SCHEDULE_DELAY=100"},
			APIEnv:     []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL(), "OTEL_BSP_SCHEDULE_DELAY=100"},
			Log:        slog.New(handler).With("stack", e.name),
		}
		if e == single {
			opts.RedisVia = func(addr string) (string, string, error) {
				toManager = toxiproxy.NewProxy(tox, "manager", "127.0.0.1:0", addr)
				toWorkers = toxiproxy.NewProxy(tox, "workers", "127.0.0.1:0", addr)
				if err := errors.Join(toManager.Start(), toWorkers.Start()); err != nil {
					return "", "", err
				}
				return toManager.Listen, toWorkers.Listen, nil // the ports Start picked
			}
		}
		wg.Go(func() {
			e.stack, errs[i] = devstack.Start(ctx, opts)
			if errs[i] == nil {
				e.rdb, errs[i] = redisconn.Config{URL: e.stack.RedisURL()}.Client()
			}
		})
	}
	wg.Wait()
	code := 0
	if err := errors.Join(errs...); err != nil {
		code = fail("start the dev stacks (logs in %s): %v", tmp, err)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: dev stacks up in %v (binaries built, both control planes started), logs in %s and %s\n",
			time.Since(t0).Round(time.Millisecond), filepath.Join(single.dir, "logs"), filepath.Join(cluster.dir, "logs"))
		code = m.Run()
	}

	for _, e := range envs {
		if e.rdb != nil {
			_ = e.rdb.Close()
		}
		if e.stack != nil {
			if err := e.stack.Stop(); err != nil {
				code = fail("stop the %s dev stack: %v", e.name, err)
			}
		}
		// No process the stack started may survive it.
		left, err := devstack.Leftovers(e.dir)
		if err != nil {
			code = fail("look for leftover processes: %v", err)
		} else if len(left) > 0 {
			code = fail("processes survived the %s dev stack: %+v", e.name, left)
		}
	}
	if code == 0 {
		_ = os.RemoveAll(tmp)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s and %s\n", filepath.Join(single.dir, "logs"), filepath.Join(cluster.dir, "logs"))
	}
	return code
}
