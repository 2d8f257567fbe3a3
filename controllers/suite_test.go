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
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()

	rdb    *redis.Client
	engine *broker.Broker
	// stopManager stops the manager the suite runs; tests that restart the
	// manager replace it.
	stopManager func()
	// managerCache is the running manager's cache.
	managerCache client.Reader
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller Suite")
}

// newTestEnv is the envtest API server (kube-apiserver and etcd) of this
// package's tests and benchmark, with the CRDs installed.
func newTestEnv() *envtest.Environment {
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: envtestutil.AssetsDir(),
	}
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(dtqv1alpha1.AddToScheme(scheme)).To(Succeed())

	By("starting kube-apiserver and etcd with the CRDs installed")
	testEnv = newTestEnv()
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())

	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	policies, err := devstack.LoadManifests(filepath.Join("..", "config", "admission"))
	Expect(err).NotTo(HaveOccurred())
	Expect(devstack.Apply(ctx, k8sClient, policies)).To(Succeed())

	By("starting redis-server")
	srv := redistest.Start(GinkgoTB())
	rdb = redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 100})
	DeferCleanup(rdb.Close)
	engine = broker.New(rdb)

	By("starting the manager")
	stopManager = startManager(Options{})
})

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	cancel()
	Expect(testEnv.Stop()).To(Succeed())
})

// startManager runs a manager with the dtq controllers as cmd/manager does
// by default (per-namespace Redis users on), and returns a function that
// stops it and waits until it has stopped.
func startManager(opts Options) func() {
	opts.Workers.Isolation = true
	return startManagerWith(opts)
}

// startManagerWith is startManager with opts.Workers.Isolation as given.
func startManagerWith(opts Options) func() {
	return startManagerOn(cfg, opts)
}

// startManagerOn is startManagerWith on the API server connection c (a
// counting transport, for one).
func startManagerOn(c *rest.Config, opts Options) func() {
	mgr, err := ctrl.NewManager(c, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	opts.Workers.RedisURL = "redis://" + rdb.Options().Addr + "/0"
	if opts.RedisUserResync == 0 {
		opts.RedisUserResync = time.Second
	}
	Expect(Setup(mgr, rdb, opts)).To(Succeed())
	managerCache = mgr.GetCache()
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	return func() { stop(); <-done }
}

// runs counts executions of the "count" handler per payload name, so tests see
// how often a handler really ran (the demo counter deduplicates on purpose).
var runs sync.Map // name -> *atomic.Int64

func runCount(name string) int64 {
	v, _ := runs.LoadOrStore(name, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// countPayload is the count handler's payload.
type countPayload struct {
	Name   string `json:"name"`
	HoldMS int    `json:"holdMs,omitempty"`
}

func testHandler() *worker.Mux {
	mux := worker.NewMux()
	demo.Register(mux, rdb)
	mux.Handle("count", worker.Typed(func(ctx context.Context, t *worker.Task, p countPayload) (any, error) {
		v, _ := runs.LoadOrStore(p.Name, new(atomic.Int64))
		n := v.(*atomic.Int64).Add(1)
		select {
		case <-time.After(time.Duration(p.HoldMS) * time.Millisecond):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return map[string]any{"name": p.Name, "run": n}, nil
	}))
	return mux
}

var workerSeq atomic.Int64

// startWorker plays one worker pod of a Queue: the worker SDK's Server run
// in-process with the demo handlers and the count handler.
func startWorker(ns, queue string) func() {
	w, err := worker.NewServer(worker.Config{
		Redis:             rdb,
		Namespace:         ns,
		Queue:             queue,
		Concurrency:       16,
		VisibilityTimeout: 10 * time.Second,
		HeartbeatInterval: time.Second,
		DrainTimeout:      2 * time.Second,
		WorkerID:          fmt.Sprintf("test-worker-%d", workerSeq.Add(1)),
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, testHandler())
	Expect(err).NotTo(HaveOccurred())
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(w.Run(wctx)).To(Succeed())
	}()
	return func() { stop(); <-done }
}

var nsSeq atomic.Int64

// newNamespace creates a namespace of its own for a test: queues in Redis are
// scoped by namespace, so tests never share keys.
func newNamespace(prefix string) string {
	name := fmt.Sprintf("%s-%d", prefix, nsSeq.Add(1))
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

func getTask(t *dtqv1alpha1.Task) func(Gomega) *dtqv1alpha1.Task {
	return func(g Gomega) *dtqv1alpha1.Task {
		got := &dtqv1alpha1.Task{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), got)).To(Succeed())
		return got
	}
}

func getQueue(q *dtqv1alpha1.Queue) func(Gomega) *dtqv1alpha1.Queue {
	return func(g Gomega) *dtqv1alpha1.Queue {
		got := &dtqv1alpha1.Queue{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(q), got)).To(Succeed())
		return got
	}
}
