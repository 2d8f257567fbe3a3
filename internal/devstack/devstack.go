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

// Package devstack runs dtq without a cluster: the envtest control plane
// (kube-apiserver and etcd), a private redis-server with AOF persistence, the
// manager binary, the HTTP API binary on a loopback port (authentication on),
// and a stand-in for the kubelet that runs each worker Deployment's replicas
// as local processes of the worker binary. It backs `kubectl-dtq dev` (make
// dev) and the end-to-end tests in test/e2e.
//
// Every process it starts runs in a process group of its own and is stopped,
// group and all, by Stop; Leftovers finds any that survived.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/version"
)

// Options configures Start. Paths may be relative to the working directory.
type Options struct {
	// Dir holds the stack's state: kubeconfig, etcd and Redis data, logs/.
	Dir string
	// AssetsDir holds kube-apiserver and etcd (envtestutil.AssetsDir()).
	AssetsDir string
	// ManagerBin and WorkerBin are the dtq binaries (make build puts them in bin/).
	ManagerBin, WorkerBin string
	// APIBin is the HTTP API binary; empty runs no API.
	APIBin string
	// APIArgs are extra API flags.
	APIArgs []string
	// APIEnv are extra KEY=value variables of the API, e.g. the OTEL_*
	// variables that make it export trace spans.
	APIEnv []string
	// CRDDir holds the CRD manifests (config/crd/bases).
	CRDDir string
	// ClusterRoles are files of ClusterRoles and their ClusterRoleBindings
	// (config/rbac's producer and queue-operator roles, config/api's version
	// reader) applied with the name prefix "dtq-", as config/default names
	// them in a cluster.
	ClusterRoles []string
	// AdmissionDir holds admission policies applied right after the CRDs
	// (config/admission), each named "dtq-<name>" as config/default names
	// them in a cluster; empty: none.
	AdmissionDir string
	// SampleDirs are applied once everything runs (config/samples).
	SampleDirs []string
	// DefaultQueue creates Queue default/default unless a sample defines it.
	DefaultQueue bool
	// KeepState reuses etcd and Redis data left in Dir by an earlier run;
	// otherwise they are wiped at start.
	KeepState bool
	// WorkerImage is passed to the manager as --worker-image. The stand-in
	// ignores images: every pod runs WorkerBin, unless its worker
	// container's command is the absolute path of a local executable.
	WorkerImage string
	// AppDirs maps an app container's image to the directory its command
	// runs in (HTTP handler pods: the stand-in runs the command, not the
	// image), e.g. the examples' images to examples/http-handlers/*.
	AppDirs map[string]string
	// ManagerArgs are extra manager flags.
	ManagerArgs []string
	// ManagerEnv are extra KEY=value variables of the manager, e.g. the
	// OTEL_* variables that make it export trace spans.
	ManagerEnv []string
	// RedisFsync is the AOF appendfsync policy: "everysec" (default) or "always".
	RedisFsync string
	// RedisVia, when set, is called with redis-server's address once it runs
	// and returns the addresses the manager and the workers dial instead: a
	// fault-injecting proxy, say (test/e2e puts Toxiproxy there). RedisURL
	// and the API stay direct. Not with RedisCluster (a cluster's clients
	// dial the nodes' own addresses).
	RedisVia func(redisAddr string) (manager, workers string, err error)
	// RedisCluster runs a three-master Redis Cluster (three redis-server
	// processes, the slots split evenly) instead of one redis-server; the
	// manager, the API and the workers get a redis+cluster:// URL.
	// KeepState does not apply to it.
	RedisCluster bool
	// Log receives the stack's progress; nil discards it.
	Log *slog.Logger
}

// DevSamples are the folders, relative to the checkout, whose manifests `make
// dev` applies (kubectl dtq dev --samples): the samples and the Python HTTP
// handler example's Queue.
var DevSamples = []string{"config/samples", "examples/http-handlers/python"}

// ExampleApps maps the images of the HTTP handler examples to their folders
// under the repository root, for Options.AppDirs.
func ExampleApps(root string) map[string]string {
	return map[string]string{
		"ghcr.io/dtq-dev/dtq-example-python:latest": filepath.Join(root, "examples", "http-handlers", "python"),
		"ghcr.io/dtq-dev/dtq-example-node:latest":   filepath.Join(root, "examples", "http-handlers", "node"),
	}
}

// Stack is a running dev stack.
type Stack struct {
	// Dir is the absolute state directory.
	Dir string
	// Kubeconfig is the user's kubeconfig (<Dir>/kubeconfig): cluster-admin
	// by a ServiceAccount's bearer token (see token.go), so it also reaches
	// the HTTP API.
	Kubeconfig string
	// APIURL is the HTTP API's base URL ("" without APIBin), also written
	// to <Dir>/api-url.
	APIURL string
	// Config and Client talk to the API server as admin.
	Config *rest.Config
	Client client.Client
	// Scheme knows the core and dtq types.
	Scheme *runtime.Scheme

	opts    Options
	log     *slog.Logger
	env     *envtest.Environment
	redis   *redisNodes
	manager *managerProcess
	api     *apiProcess
	kubelet *kubelet
	cancel  context.CancelFunc // stops the stand-in and its cache
	stopped chan struct{}      // closed when the stand-in has stopped its pods
	logs    []io.Closer

	mu       sync.Mutex // serialises restarts and Stop
	stopOnce sync.Once
	stopErr  error
}

// NewScheme returns a scheme with the core Kubernetes and dtq types.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(dtqv1alpha1.AddToScheme(s))
	return s
}

// Start brings the stack up; on error it stops whatever it had started.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.RedisFsync == "" {
		opts.RedisFsync = "everysec"
	}
	if opts.RedisVia != nil && opts.RedisCluster {
		return nil, errors.New("devstack: RedisVia cannot route a Redis Cluster (its clients dial the nodes' own addresses)")
	}
	if opts.WorkerImage == "" {
		opts.WorkerImage = version.Image("dtq-worker")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	for _, p := range []*string{&opts.AssetsDir, &opts.ManagerBin, &opts.WorkerBin, &opts.APIBin, &opts.CRDDir} {
		if *p == "" {
			continue
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, err
		}
	}
	if err := checkPrerequisites(opts); err != nil {
		return nil, err
	}
	s := &Stack{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), Scheme: NewScheme(), opts: opts, log: opts.Log}
	if err := s.start(ctx); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

func checkPrerequisites(o Options) error {
	var errs []error
	for _, f := range []struct{ path, hint string }{
		{filepath.Join(o.AssetsDir, "kube-apiserver"), "run `make envtest` (builds it once into bin/k8s) or set KUBEBUILDER_ASSETS"},
		{filepath.Join(o.AssetsDir, "etcd"), "run `make envtest` or set KUBEBUILDER_ASSETS"},
		{o.ManagerBin, "run `make build`"},
		{o.WorkerBin, "run `make build`"},
		{o.CRDDir, "run from the repository root or pass the CRD directory"},
		{o.APIBin, "run `make build`"},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s is missing: %s", f.path, f.hint))
		}
	}
	if _, err := redisBinary(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Stack) start(ctx context.Context) error {
	logDir := filepath.Join(s.Dir, "logs")
	if !s.opts.KeepState {
		for _, d := range []string{"etcd", "redis", "logs"} {
			if err := os.RemoveAll(filepath.Join(s.Dir, d)); err != nil {
				return err
			}
		}
	}
	// Certificates are regenerated on every start.
	if err := os.RemoveAll(filepath.Join(s.Dir, "apiserver")); err != nil {
		return err
	}
	for _, d := range []string{logDir, filepath.Join(s.Dir, "apiserver")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}

	t0 := time.Now()
	redisBin, _ := redisBinary()
	s.redis = newRedisNodes(redisBin, s.Dir, logDir, s.opts.RedisFsync, s.opts.RedisCluster)
	if err := s.redis.start(ctx); err != nil {
		return err
	}
	s.log.Info("Redis running", "url", s.redis.url(), "aof", filepath.Join(s.Dir, "redis"))

	if err := s.startControlPlane(logDir); err != nil {
		return err
	}
	s.log.Info("Control plane running", "apiserver", s.Config.Host, "crds", s.opts.CRDDir)
	if err := s.applyClusterRoles(ctx); err != nil {
		return err
	}

	managerURL, workerURL := s.redis.url(), s.redis.url()
	if s.opts.RedisVia != nil {
		m, w, err := s.opts.RedisVia(s.redis.servers[0].addr())
		if err != nil {
			return fmt.Errorf("route Redis through RedisVia: %w", err)
		}
		managerURL, workerURL = "redis://"+m+"/0", "redis://"+w+"/0"
		s.log.Info("Redis reached through", "manager", m, "workers", w)
	}
	s.manager = &managerProcess{bin: s.opts.ManagerBin, kubeconfig: s.adminKubeconfig(), logPath: filepath.Join(logDir, "manager.log"),
		stackDir: s.Dir, redisURL: managerURL, workerRedisURL: workerURL, workerImage: s.opts.WorkerImage, extraArgs: s.opts.ManagerArgs,
		extraEnv: s.opts.ManagerEnv}
	if err := s.manager.start(ctx); err != nil {
		return err
	}
	s.log.Info("Manager ready", "pid", s.manager.proc.pid(), "log", s.manager.logPath, "metrics", s.ManagerMetricsURL())

	if s.opts.APIBin != "" {
		s.api = &apiProcess{bin: s.opts.APIBin, kubeconfig: s.adminKubeconfig(), logPath: filepath.Join(logDir, "api.log"),
			stackDir: s.Dir, redisURL: s.redis.url(), extraArgs: s.opts.APIArgs, extraEnv: s.opts.APIEnv}
		if err := s.api.start(ctx); err != nil {
			return err
		}
		s.APIURL = s.api.url()
		if err := os.WriteFile(filepath.Join(s.Dir, "api-url"), []byte(s.APIURL+"\n"), 0o644); err != nil {
			return err
		}
		s.log.Info("API ready", "url", s.APIURL, "pid", s.api.proc.pid(), "log", s.api.logPath)
	}

	if err := s.startKubelet(ctx, logDir); err != nil {
		return err
	}
	s.log.Info("Stand-in kubelet running", "worker", s.opts.WorkerBin)

	if err := s.applySamples(ctx); err != nil {
		return err
	}
	s.log.Info("Stack up", "took", time.Since(t0).Round(time.Millisecond).String())
	return nil
}

func (s *Stack) startControlPlane(logDir string) error {
	out, err := os.OpenFile(filepath.Join(logDir, "control-plane.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.logs = append(s.logs, out)
	etcdDir := filepath.Join(s.Dir, "etcd")
	if err := os.MkdirAll(etcdDir, 0o700); err != nil {
		return err
	}
	s.env = &envtest.Environment{
		BinaryAssetsDirectory: s.opts.AssetsDir,
		CRDDirectoryPaths:     []string{s.opts.CRDDir},
		ErrorIfCRDPathMissing: true,
		Scheme:                s.Scheme,
	}
	s.env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir, Out: out, Err: out}
	s.env.ControlPlane.APIServer = &envtest.APIServer{CertDir: filepath.Join(s.Dir, "apiserver"), Out: out, Err: out}
	cfg, err := s.env.Start()
	if err != nil {
		return fmt.Errorf("start the control plane (log: %s): %w", out.Name(), err)
	}
	s.Config = cfg
	if err := os.WriteFile(s.adminKubeconfig(), s.env.KubeConfig, 0o600); err != nil {
		return err
	}
	if s.Client, err = client.New(cfg, client.Options{Scheme: s.Scheme}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.opts.AdmissionDir != "" {
		policies, err := LoadManifests(s.opts.AdmissionDir)
		if err != nil {
			return fmt.Errorf("load admission policies: %w", err)
		}
		if err := Apply(ctx, s.Client, withPrefix(policies)); err != nil {
			return err
		}
	}
	return s.writeTokenKubeconfig(ctx, s.Kubeconfig)
}

// InstallCRDs creates or updates the CRDs in crdDir and the admission
// policies in admissionDir ("": none), named as Start names them, and waits
// until the API server serves the CRDs: the schema change of an upgrade, or of
// a rollback (test/upgrade installs each release's own).
func (s *Stack) InstallCRDs(ctx context.Context, crdDir, admissionDir string) error {
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Scheme: s.Scheme, Paths: []string{crdDir},
		ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("install the CRDs of %s: %w", crdDir, err)
	}
	if admissionDir == "" {
		return nil
	}
	policies, err := LoadManifests(admissionDir)
	if err != nil {
		return fmt.Errorf("load admission policies: %w", err)
	}
	return Apply(ctx, s.Client, withPrefix(policies))
}

// adminKubeconfig is envtest's client-certificate kubeconfig, which the
// stack's own processes use.
func (s *Stack) adminKubeconfig() string { return filepath.Join(s.Dir, "admin.kubeconfig") }

func (s *Stack) startKubelet(ctx context.Context, logDir string) error {
	c, err := cache.New(s.Config, deploymentCacheOptions(s.Scheme))
	if err != nil {
		return err
	}
	s.kubelet = newKubelet(s.Client, c, s.opts.WorkerBin, s.opts.AppDirs, s.Dir, logDir, s.log.With("component", "kubelet"))
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { _ = c.Start(runCtx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !c.WaitForCacheSync(syncCtx) {
		return errors.New("the stand-in kubelet's Deployment cache did not sync")
	}
	if err := s.kubelet.watch(runCtx, c); err != nil {
		return err
	}
	s.stopped = make(chan struct{})
	go func() {
		s.kubelet.run(runCtx)
		close(s.stopped)
	}()
	return nil
}

// applySamples creates the default Queue (unless a sample defines it) and
// applies the sample directories.
func (s *Stack) applySamples(ctx context.Context) error {
	var objs []*unstructured.Unstructured
	for _, d := range s.opts.SampleDirs {
		got, err := LoadManifests(d)
		if err != nil {
			return fmt.Errorf("load samples: %w", err)
		}
		objs = append(objs, got...)
	}
	if s.opts.DefaultQueue && !definesQueue(objs, "default", "default") {
		q := &unstructured.Unstructured{}
		q.SetAPIVersion(dtqv1alpha1.GroupVersion.String())
		q.SetKind("Queue")
		q.SetNamespace("default")
		q.SetName("default")
		objs = append([]*unstructured.Unstructured{q}, objs...)
	}
	if len(objs) == 0 {
		return nil
	}
	// The CRDs were just installed; their REST mapping can lag by a moment.
	var err error
	for range 50 {
		if err = Apply(ctx, s.Client, objs); err == nil || !meta.IsNoMatchError(errors.Unwrap(err)) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	s.log.Info("Samples applied", "objects", len(objs))
	return nil
}

// applyClusterRoles applies Options.ClusterRoles, each named "dtq-<name>".
func (s *Stack) applyClusterRoles(ctx context.Context) error {
	var objs []*unstructured.Unstructured
	for _, f := range s.opts.ClusterRoles {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		got, err := DecodeManifests(data)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		objs = append(objs, withPrefix(got)...)
	}
	if len(objs) == 0 {
		return nil
	}
	return Apply(ctx, s.Client, objs)
}

// withPrefix names cluster-scoped objects "dtq-<name>", as config/default's
// namePrefix does in a cluster, and points policy and role bindings at the
// renamed policies and roles.
func withPrefix(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	for _, o := range objs {
		o.SetName("dtq-" + o.GetName())
		switch o.GetKind() {
		case "ValidatingAdmissionPolicyBinding":
			if p, ok, _ := unstructured.NestedString(o.Object, "spec", "policyName"); ok {
				_ = unstructured.SetNestedField(o.Object, "dtq-"+p, "spec", "policyName")
			}
		case "ClusterRoleBinding":
			if r, ok, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ok {
				_ = unstructured.SetNestedField(o.Object, "dtq-"+r, "roleRef", "name")
			}
		}
	}
	return objs
}

func definesQueue(objs []*unstructured.Unstructured, ns, name string) bool {
	for _, o := range objs {
		if o.GetKind() == "Queue" && o.GetName() == name && (o.GetNamespace() == ns || o.GetNamespace() == "") {
			return true
		}
	}
	return false
}

// ManagerMetricsURL is the manager's metrics endpoint (plain HTTP on loopback).
func (s *Stack) ManagerMetricsURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(s.manager.metricsPort) + "/metrics"
}

// RedisURL is the Redis URL the manager, the API and the workers use
// (DTQ_REDIS_URL: redis:// or, with RedisCluster, redis+cluster://; the
// manager and the workers dial RedisVia's addresses instead when it is set).
func (s *Stack) RedisURL() string { return s.redis.url() }

// ManagerPID is the manager's process id (0 while it is not running).
func (s *Stack) ManagerPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.manager == nil || s.manager.proc == nil {
		return 0
	}
	return s.manager.proc.pid()
}

// Pods lists the worker processes the stand-in runs.
func (s *Stack) Pods() []PodInfo { return s.kubelet.pods() }

// SignalPod sends sig to a worker pod's process group (SIGKILL simulates a
// crash; the stand-in restarts the process like a kubelet would).
func (s *Stack) SignalPod(namespace, name string, sig syscall.Signal) error {
	return s.kubelet.signalPod(namespace, name, sig)
}

// RestartManager stops the manager with sig (SIGKILL at once, or SIGTERM with
// a grace period), starts it again and waits until it is ready.
func (s *Stack) RestartManager(ctx context.Context, sig syscall.Signal) error {
	return s.SwapManager(ctx, "", sig, 0)
}

// ReplaceManager stops the manager (SIGTERM) and runs bin in its place until
// the next ReplaceManager: a test runs a deliberately broken build this way,
// and restores Options.ManagerBin after.
func (s *Stack) ReplaceManager(ctx context.Context, bin string) error {
	return s.SwapManager(ctx, bin, syscall.SIGTERM, 0)
}

// SwapManager stops the manager with sig (SIGKILL at once, or SIGTERM with a
// grace period), waits down (no manager runs meanwhile, as while a new
// replica waits for a killed leader's lease), then starts bin in its place
// ("": the same binary) with the flags its --help offers, and waits until it
// is ready: one step of an upgrade (test/upgrade runs the previous release's
// manager, then this one).
func (s *Stack) SwapManager(ctx context.Context, bin string, sig syscall.Signal, down time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig == syscall.SIGKILL {
		s.manager.proc.kill()
	} else {
		s.manager.stop()
	}
	s.manager.proc = nil
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	if bin != "" {
		s.manager.bin = bin
	}
	return s.manager.start(ctx)
}

// SetWorkerBin makes the stand-in run bin for worker containers and
// delivery sidecars started from now on (pods already running keep theirs),
// e.g. a deliberately broken build for one test.
func (s *Stack) SetWorkerBin(bin string) { s.kubelet.workerBin.Store(bin) }

// RestartAPI stops the API with sig (SIGKILL at once, or SIGTERM: it ends
// its events streams and drains requests), starts it again on the same port
// and waits until it is ready.
func (s *Stack) RestartAPI(ctx context.Context, sig syscall.Signal) error {
	return s.SwapAPI(ctx, "", sig)
}

// SwapAPI is RestartAPI running bin in the API's place ("": the same
// binary), on the same port.
func (s *Stack) SwapAPI(ctx context.Context, bin string, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig == syscall.SIGKILL {
		s.api.proc.kill()
	} else {
		s.api.stop()
	}
	s.api.proc = nil
	if bin != "" {
		s.api.bin = bin
	}
	return s.api.start(ctx)
}

// WithRedisStopped stops redis-server (every master of a cluster; SIGTERM,
// data kept), runs f, then starts it again on the same port and waits until
// it answers (a cluster: until it is healthy).
func (s *Stack) WithRedisStopped(ctx context.Context, f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.redis.stop()
	ferr := f()
	return errors.Join(ferr, s.redis.start(ctx))
}

// RestartRedis stops redis-server (every master of a cluster) with sig
// (SIGKILL loses only what the AOF policy had not synced; "always" loses
// nothing acknowledged), starts it again on the same port with the same data
// and waits until it answers (a cluster: until it is healthy).
func (s *Stack) RestartRedis(ctx context.Context, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redis.restart(ctx, sig)
}

// RestartRedisNode stops redis-server i (RedisAddrs' order) with sig, keeps
// it down for down, starts it again on its port with its data and waits until
// it answers (a cluster: until it is healthy). On a cluster the other masters
// serve on meanwhile: only the stopped one's slots are unavailable.
func (s *Stack) RestartRedisNode(ctx context.Context, i int, sig syscall.Signal, down time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redis.restartNode(ctx, i, sig, down)
}

// RedisAddrs returns the addresses of the stack's redis-servers (a cluster's
// masters).
func (s *Stack) RedisAddrs() []string { return s.redis.addrs() }

// Stop stops everything in the reverse order of start: worker processes
// (SIGTERM, then SIGKILL after their grace period), the manager, the control
// plane, Redis. It is safe to call more than once.
func (s *Stack) Stop() error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		var errs []error
		if s.cancel != nil {
			s.cancel()
			if s.stopped != nil {
				<-s.stopped
			}
		}
		if s.api != nil {
			s.api.stop()
		}
		if s.manager != nil {
			s.manager.stop()
		}
		if s.env != nil {
			if err := s.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop the control plane: %w", err))
			}
		}
		if s.redis != nil {
			s.redis.stop()
		}
		for _, l := range s.logs {
			_ = l.Close()
		}
		if left, err := Leftovers(s.Dir); err == nil && len(left) > 0 {
			errs = append(errs, fmt.Errorf("processes survived the stack: %v", left))
		}
		s.stopErr = errors.Join(errs...)
		s.log.Info("Stack stopped")
	})
	return s.stopErr
}
