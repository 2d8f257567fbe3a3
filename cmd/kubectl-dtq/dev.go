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

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/version"
)

type devFlags struct {
	dir, binDir, assetsDir, crdDir, admissionDir, workerImage, redisFsync, redis string
	samples                                                                      []string
	keepState, exitAfterReady, quiet                                             bool
	timeout                                                                      time.Duration
}

func newDevCommand() *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run dtq locally: control plane, Redis, operator and workers, with the samples applied",
		Long: `dev runs the whole product on this machine, without a cluster or Docker:
the envtest kube-apiserver and etcd, a private redis-server (AOF on; with
--redis cluster, a three-master Redis Cluster instead), the CRDs, bin/manager,
the HTTP API (bin/api) on a loopback port with Kubernetes authentication on,
and a stand-in for the kubelet that runs every worker Deployment's replicas as
local bin/worker processes (container images are ignored). It creates Queue
default/default, applies the samples, writes the admin kubeconfig
(cluster-admin by a token of ServiceAccount dtq-system/dtq-dev-admin; the API
accepts that ServiceAccount's tokens for its audience, which kubectl dtq
requests and curl users mint with kubectl -n dtq-system create token
dtq-dev-admin --audience dtq-api) and the API's base URL to <dir>/api-url, and
prints one line:

  dtq dev: ready, export KUBECONFIG=<dir>/kubeconfig, API at http://127.0.0.1:<port>

then runs until Ctrl-C (or --timeout) and stops everything it started.
Logs are in <dir>/logs. Run it from the repository root (make dev does).`,
		Example: `  make dev
  bin/kubectl-dtq dev --keep-state
  bin/kubectl-dtq dev --exit-after-ready -q`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDev(f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", ".dev", "State directory: kubeconfig, etcd and Redis data, logs.")
	fl.StringVar(&f.binDir, "bin-dir", "", "Directory with the manager, worker and api binaries (default: this binary's directory).")
	fl.StringVar(&f.assetsDir, "assets-dir", "", "Directory with kube-apiserver and etcd (default: $KUBEBUILDER_ASSETS, else <bin-dir>/k8s/<version>-<os>-<arch>).")
	fl.StringVar(&f.crdDir, "crd-dir", "config/crd/bases", "Directory with the CRD manifests.")
	fl.StringVar(&f.admissionDir, "admission-dir", "config/admission", "Directory with the admission policies applied with the CRDs (empty for none).")
	fl.StringSliceVar(&f.samples, "samples", devstack.DevSamples,
		"Directories whose YAML files are applied once the stack runs (empty for none); the Python HTTP handler example's Queue is one.")
	fl.StringVar(&f.workerImage, "worker-image", version.Image("dtq-worker"), "Worker image the manager puts in Deployments (the stand-in ignores it).")
	fl.StringVar(&f.redisFsync, "redis-appendfsync", "everysec", "Redis AOF fsync policy: everysec or always.")
	fl.StringVar(&f.redis, "redis", "single", "Redis topology: single (one redis-server) or cluster (a three-master Redis Cluster).")
	fl.BoolVar(&f.keepState, "keep-state", false, "Keep the etcd and Redis data of the previous run instead of starting fresh.")
	fl.BoolVar(&f.exitAfterReady, "exit-after-ready", false, "Stop everything and exit 0 right after the ready line (a smoke test).")
	fl.DurationVar(&f.timeout, "timeout", 0, "Stop everything and exit after this long once ready (0: run until Ctrl-C).")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "Print only the ready line and errors.")
	return cmd
}

func runDev(f devFlags) error {
	if f.redis != "single" && f.redis != "cluster" {
		return fmt.Errorf("--redis %q: want single or cluster", f.redis)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	if f.binDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		f.binDir = filepath.Dir(exe)
	}
	if f.assetsDir == "" {
		f.assetsDir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if f.assetsDir == "" {
		k8s := os.Getenv("K8S_VERSION")
		if k8s == "" {
			k8s = "1.37.2"
		}
		f.assetsDir = filepath.Join(f.binDir, "k8s", k8s+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	}
	level := slog.LevelInfo
	if f.quiet {
		level = slog.LevelWarn
	}
	handler := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	log := slog.New(handler)
	ctrllog.SetLogger(logr.FromSlogHandler(handler))

	var samples []string
	for _, s := range f.samples {
		if s != "" {
			samples = append(samples, s)
		}
	}
	stack, err := devstack.Start(ctx, devstack.Options{
		Dir:          f.dir,
		AssetsDir:    f.assetsDir,
		ManagerBin:   filepath.Join(f.binDir, "manager"),
		WorkerBin:    filepath.Join(f.binDir, "worker"),
		APIBin:       filepath.Join(f.binDir, "api"),
		ClusterRoles: []string{"config/rbac/producer_role.yaml", "config/rbac/queue_operator_role.yaml", "config/api/version_reader_role.yaml"},
		CRDDir:       f.crdDir,
		AdmissionDir: f.admissionDir,
		SampleDirs:   samples,
		AppDirs:      devstack.ExampleApps("."),
		DefaultQueue: true,
		KeepState:    f.keepState,
		WorkerImage:  f.workerImage,
		RedisFsync:   f.redisFsync,
		RedisCluster: f.redis == "cluster",
		ManagerEnv:   otelEnv(),
		APIEnv:       otelEnv(),
		Log:          log,
	})
	if err != nil {
		return err
	}
	fmt.Printf("dtq dev: ready, export KUBECONFIG=%s, API at %s\n", stack.Kubeconfig, stack.APIURL)

	switch {
	case f.exitAfterReady:
	case f.timeout > 0:
		select {
		case <-ctx.Done():
		case <-time.After(f.timeout):
		}
	default:
		<-ctx.Done()
	}
	log.Info("Stopping the stack")
	return stack.Stop()
}

// otelEnv is this process's OTEL_* variables, handed to the manager and the
// API: run `OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 make dev` to
// export their trace spans (docs/observability.md). Workers take theirs from the Queue's
// workerTemplate, as in a cluster.
func otelEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}
