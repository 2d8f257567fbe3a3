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

// Command manager is the dtq operator: the Queue and Task controllers.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/controllers"
	"github.com/dtq-dev/dtq/internal/logging"
	"github.com/dtq-dev/dtq/internal/otelsetup"
	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/redisconn/redismetrics"
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(dtqv1alpha1.AddToScheme(scheme))
}

// options are the manager's command-line flags.
type options struct {
	metricsAddr, probeAddr, redisURL string
	metricsCertPath                  string
	metricsCertName, metricsCertKey  string
	workerImage, workerRedisURL      string
	workerRedisSecret                string
	leaderElect, secureMetrics       bool
	routineEvents, isolation         bool
	allowEviction, printVersion      bool
	qps                              float64
	burst                            int
	history                          controllers.HistoryOptions
	zap                              zap.Options
}

// bindFlags defines the manager's flags on fs.
func bindFlags(fs *flag.FlagSet) *options {
	o := &options{zap: zapOptions()}
	fs.BoolVar(&o.printVersion, "version", false, "Print the version and exit.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0",
		"Address of the metrics endpoint (:8443 HTTPS, :8080 HTTP, 0 disables).")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorisation.")
	fs.StringVar(&o.metricsCertPath, "metrics-cert-path", "",
		"Directory holding the metrics server's certificate and key (e.g. a cert-manager Secret); empty: a self-signed certificate.")
	fs.StringVar(&o.metricsCertName, "metrics-cert-name", "tls.crt", "File name of the metrics server certificate in --metrics-cert-path.")
	fs.StringVar(&o.metricsCertKey, "metrics-cert-key", "tls.key", "File name of the metrics server key in --metrics-cert-path.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so only one manager reconciles at a time.")
	fs.StringVar(&o.redisURL, "redis-url", envOr("DTQ_REDIS_URL", "redis://localhost:6379/0"),
		"Redis URL: redis://[user:pass@]host:port/db for one node, redis+cluster://host:port?addr=host:port for a cluster, "+
			"redis+sentinel://host:port/db?master_name=name&addr=host:port for Sentinel (rediss... for TLS; docs/redis.md); env DTQ_REDIS_URL. "+
			"DTQ_REDIS_USERNAME, DTQ_REDIS_PASSWORD or DTQ_REDIS_PASSWORD_FILE, and DTQ_REDIS_CA_FILE override its credentials and CA.")
	fs.StringVar(&o.workerImage, "worker-image", controllers.DefaultWorkerImage,
		"Image of worker pods whose Queue's template has no containers.")
	fs.StringVar(&o.workerRedisURL, "worker-redis-url", "",
		"DTQ_REDIS_URL given to worker pods, any form --redis-url takes (default: --redis-url without its credentials); it must hold no password.")
	fs.BoolVar(&o.isolation, "redis-isolation", true,
		"Give each namespace's workers a Redis ACL user of their own, allowed only that namespace's keys (needs Redis 6+ and "+
			"a manager Redis user allowed the ACL command). Off, workers share one identity and every Queue says so in its RedisIsolated condition.")
	fs.StringVar(&o.workerRedisSecret, "worker-redis-secret", "",
		"<secret>/<key> in each Queue's namespace holding the workers' Redis URL; overrides --worker-redis-url.")
	fs.BoolVar(&o.routineEvents, "routine-task-events", false,
		"Also emit the Normal Submitted and Succeeded Events of every Task (each Event is an API write).")
	fs.BoolVar(&o.allowEviction, "allow-redis-eviction", false,
		"Start even when Redis's maxmemory-policy is not noeviction (Redis may then evict idempotency records or tasks: duplicate runs and lost tasks follow).")
	fs.Float64Var(&o.qps, "kube-api-qps", 100, "Queries per second to the API server (client-go's default of 20 would cap the CR path at about 20 tasks/s).")
	fs.IntVar(&o.burst, "kube-api-burst", 200, "Burst of queries to the API server.")
	fs.DurationVar(&o.history.Interval, "queue-history-interval", controllers.DefaultHistoryInterval,
		"How often the elected manager samples every queue's backlog and counters into its history in Redis "+
			"(the console's charts, GET .../queues/{queue}/history); 0 turns sampling off.")
	fs.IntVar(&o.history.Samples, "queue-history-samples", controllers.DefaultHistorySamples,
		"Samples kept in each queue's history (about 45 bytes of Redis memory each).")
	o.zap.BindFlags(fs)
	return o
}

// zapOptions are the log defaults: JSON lines at info with the keys of
// internal/logging (time, level, msg), and no stack trace on error lines (a
// Redis outage is not a bug); --zap-devel switches to the console format.
func zapOptions() zap.Options {
	stack := uberzap.NewAtomicLevelAt(zapcore.PanicLevel)
	return zap.Options{
		StacktraceLevel: &stack,
		TimeEncoder:     zapcore.RFC3339NanoTimeEncoder,
		EncoderConfigOptions: []zap.EncoderConfigOption{func(c *zapcore.EncoderConfig) {
			c.TimeKey = "time"
		}},
	}
}

func main() {
	o := bindFlags(flag.CommandLine)
	flag.Parse()
	if o.printVersion {
		fmt.Println(version.String())
		return
	}
	log := zap.New(zap.UseFlagOptions(&o.zap))
	ctrl.SetLogger(log)
	klog.SetLogger(log.WithName("client-go"))
	redis.SetLogger(logging.Printer(slog.New(logr.ToSlogHandler(log))))

	stopTracing, err := otelsetup.Setup(context.Background(), "dtq-manager")
	if err != nil {
		setupLog.Error(err, "Failed to set up tracing")
		os.Exit(1)
	}
	defer func() { _ = stopTracing(context.Background()) }()

	conn := redisconn.FromEnv()
	conn.URL = o.redisURL
	rdb, err := connectRedis(conn)
	if err != nil {
		setupLog.Error(err, "Redis is unreachable; start it or pass --redis-url / DTQ_REDIS_URL")
		os.Exit(1) //nolint:gocritic // exitAfterDefer: a start that fails here has made no span to flush
	}
	topology, _ := conn.Topology()
	setupLog.Info("Connected to Redis", "topology", topology)
	if err := checkRedis(rdb, o.allowEviction); err != nil {
		setupLog.Error(err, "Redis is not fit for dtq; fix the setting, or pass --allow-redis-eviction to start anyway")
		os.Exit(1)
	}
	// Before anything else writes to Redis or the API server is reached.
	layout := broker.New(rdb)
	if err := ensureLayout(layout); err != nil {
		setupLog.Error(err, "Redis holds a dtq layout this manager cannot read")
		os.Exit(1)
	}

	if err := redismetrics.Instrument(rdb, ctrlmetrics.Registry); err != nil {
		setupLog.Error(err, "Failed to register Redis metrics")
		os.Exit(1)
	}
	if err := ctrlmetrics.Registry.Register(version.BuildInfo()); err != nil {
		setupLog.Error(err, "Failed to register dtq_build_info")
		os.Exit(1)
	}

	metricsOpts := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.secureMetrics,
		// HTTP/2 stays off: Rapid Reset and Stream Cancellation CVEs.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	if o.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	var certWatcher *certwatcher.CertWatcher
	if o.metricsCertPath != "" {
		certWatcher, err = certwatcher.New(filepath.Join(o.metricsCertPath, o.metricsCertName), filepath.Join(o.metricsCertPath, o.metricsCertKey))
		if err != nil {
			setupLog.Error(err, "Failed to load the metrics certificate", "path", o.metricsCertPath)
			os.Exit(1)
		}
		metricsOpts.TLSOpts = append(metricsOpts.TLSOpts, func(c *tls.Config) { c.GetCertificate = certWatcher.GetCertificate })
	}
	restCfg := ctrl.GetConfigOrDie()
	restCfg.QPS, restCfg.Burst = float32(o.qps), o.burst
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         controllers.CacheOptions(),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "manager.dtq.dev",
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		setupLog.Error(err, "Failed to create manager")
		os.Exit(1)
	}
	if certWatcher != nil {
		if err := mgr.Add(certWatcher); err != nil {
			setupLog.Error(err, "Failed to add the metrics certificate watcher")
			os.Exit(1)
		}
	}
	workers := controllers.WorkerOptions{Image: o.workerImage, Isolation: o.isolation}
	if workers.RedisURL, err = workersRedisURL(o.redisURL, o.workerRedisURL); err != nil {
		setupLog.Error(err, "Bad --worker-redis-url")
		os.Exit(1)
	}
	if o.workerRedisSecret != "" {
		name, key, ok := strings.Cut(o.workerRedisSecret, "/")
		if !ok || name == "" || key == "" {
			setupLog.Error(nil, "--worker-redis-secret must be <secret>/<key>", "value", o.workerRedisSecret)
			os.Exit(1)
		}
		workers.RedisSecretName, workers.RedisSecretKey = name, key
	}
	if o.history.Interval == 0 {
		o.history.Interval = -1 // Options: negative is off, zero the default
	}
	if err := controllers.Setup(mgr, rdb, controllers.Options{Workers: workers, RoutineTaskEvents: o.routineEvents, History: o.history}); err != nil {
		setupLog.Error(err, "Failed to set up controllers")
		os.Exit(1)
	}
	if err := mgr.Add(newVersionRecord(broker.New(rdb))); err != nil {
		setupLog.Error(err, "Failed to add the version record")
		os.Exit(1)
	}
	if err := mgr.Add(migrator{b: layout, c: mgr.GetClient(), steps: broker.Migrations()}); err != nil {
		setupLog.Error(err, "Failed to set up the Redis layout migrations")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "Failed to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("redis", func(r *http.Request) error { return rdb.Ping(r.Context()).Err() }); err != nil {
		setupLog.Error(err, "Failed to set up ready check")
		os.Exit(1)
	}

	ctx, stop := context.WithCancelCause(ctrl.SetupSignalHandler())
	go broker.WatchLayout(ctx, broker.LayoutCheckInterval, layout.CheckLayout, func(err error) {
		setupLog.Error(err, "Stopping: Redis now holds a dtq layout this manager cannot read")
		_ = rdb.Close() // no reconcile writes to Redis from here on
		stop(err)
	})
	setupLog.Info("Starting manager")
	if err := mgr.Start(ctx); err != nil {
		setupLog.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
	if errors.Is(context.Cause(ctx), broker.ErrLayoutUnknown) {
		os.Exit(1)
	}
}

// ensureLayout checks the Redis layout record (docs/upgrade.md, "Redis
// layout version") and writes it when absent; it writes nothing when the
// record names a layout this build cannot read.
func ensureLayout(b *broker.Broker) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.EnsureLayout(ctx)
}

// connectRedis builds the client and pings the server, so a wrong URL or
// credential fails at start with a clear message instead of in the first reconcile.
func connectRedis(conn redisconn.Config) (redis.UniversalClient, error) {
	rdb, err := conn.Client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("ping Redis: %w", err)
	}
	return rdb, nil
}

// workersRedisURL is the DTQ_REDIS_URL of worker pods: workerURL, or the
// manager's URL without its credentials (the user info, and a Sentinel URL's
// username and password options of the data nodes). Worker pods get
// credentials from a Secret, never inside a URL in their spec, so a workerURL
// holding a password is refused.
func workersRedisURL(managerURL, workerURL string) (string, error) {
	if workerURL != "" {
		if u, err := url.Parse(workerURL); err == nil && hasPassword(u) {
			return "", errors.New("--worker-redis-url holds a password, which would be readable in every worker Deployment; " +
				"use --worker-redis-secret, or the per-namespace users of --redis-isolation")
		}
		return workerURL, nil
	}
	u, err := url.Parse(managerURL)
	if err != nil {
		return "", fmt.Errorf("parse --redis-url: %w", err)
	}
	u.User = nil
	if q := u.Query(); q.Has("username") || q.Has("password") {
		q.Del("username")
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// checkRedis runs the engine's start-up check of the Redis settings
// (maxmemory-policy, persistence) and logs its warnings.
func checkRedis(rdb redis.UniversalClient, allowEviction bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	warnings, err := broker.CheckRedis(ctx, rdb, allowEviction)
	for _, w := range warnings {
		setupLog.Info("WARNING: " + w)
	}
	return err
}

// hasPassword reports whether u carries a password: in its user info, or as
// a Sentinel URL's password option (docs/redis.md).
func hasPassword(u *url.URL) bool {
	_, ok := u.User.Password()
	return ok || u.Query().Has("password")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// versionRecord records this manager's build in Redis (broker.Component) for
// GET /api/v1/version, on every replica: the elected one and the standbys.
type versionRecord struct {
	b *broker.Broker
	c broker.Component
}

func newVersionRecord(b *broker.Broker) versionRecord {
	pod, _ := os.Hostname()
	return versionRecord{b: b, c: broker.Component{Component: broker.ComponentManager, Pod: pod, Version: version.Version, Commit: version.Commit}}
}

func (r versionRecord) Start(ctx context.Context) error {
	r.b.RunComponentRecord(ctx, r.c, func(err error) { setupLog.Error(err, "Failed to record the manager's version in Redis") })
	return nil
}

// NeedLeaderElection is false: standbys record their version too.
func (versionRecord) NeedLeaderElection() bool { return false }
