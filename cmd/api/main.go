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

// Command api serves dtq's HTTP API (internal/httpapi): stateless, so every
// replica serves; requests are authenticated and authorised by Kubernetes.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/logging"
	"github.com/dtq-dev/dtq/internal/otelsetup"
	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/redisconn/redismetrics"
	"github.com/dtq-dev/dtq/pkg/worker"
)

type flags struct {
	bind, certFile, keyFile, redisURL string
	noAuth                            bool
	auth                              httpapi.AuthOptions
	keepAlive, streamLife             time.Duration
	eventsQueues, streamsPerClient    int
	maxBody, maxBatchBody             int64
	bodyTimeout                       time.Duration
	bodyReads                         int
	qps                               float64
	burst                             int
	debug, printVersion               bool
	allowEviction                     bool
}

func main() {
	var f flags
	def := httpapi.DefaultAuthOptions()
	flag.StringVar(&f.bind, "bind-address", ":8443", "Address to serve the API on.")
	flag.StringVar(&f.certFile, "tls-cert-file", "", "TLS certificate (PEM); with --tls-key-file the API serves HTTPS and reloads both when they change. Without them it serves plain HTTP.")
	flag.StringVar(&f.keyFile, "tls-key-file", "", "TLS private key (PEM).")
	flag.StringVar(&f.redisURL, "redis-url", os.Getenv(redisconn.EnvURL),
		"Redis URL (env DTQ_REDIS_URL); DTQ_REDIS_USERNAME, DTQ_REDIS_PASSWORD or DTQ_REDIS_PASSWORD_FILE, and DTQ_REDIS_CA_FILE override its credentials and CA.")
	flag.BoolVar(&f.noAuth, "insecure-no-auth", false, "Serve every request without authentication or authorisation. For local use only.")
	flag.DurationVar(&f.auth.TokenTTL, "auth-token-cache-ttl", def.TokenTTL, "How long a TokenReview answer is cached.")
	flag.DurationVar(&f.auth.AllowTTL, "authz-allow-cache-ttl", def.AllowTTL, "How long an allowed SubjectAccessReview answer is cached.")
	flag.DurationVar(&f.auth.DenyTTL, "authz-deny-cache-ttl", def.DenyTTL, "How long a denied SubjectAccessReview answer is cached.")
	f.auth.Audiences = def.Audiences
	flag.Func("token-audiences", "Comma-separated token audiences the API accepts (default "+client.DefaultAudience+"): a token bound to none of them is 401. "+
		"Empty (--token-audiences=) accepts any token the Kubernetes API server accepts, its own included; the API then logs a warning.", func(v string) error {
		f.auth.Audiences = nil
		for a := range strings.SplitSeq(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				f.auth.Audiences = append(f.auth.Audiences, a)
			}
		}
		return nil
	})
	flag.DurationVar(&f.keepAlive, "events-keepalive", 15*time.Second, "Interval of the events streams' keep-alive comments.")
	flag.DurationVar(&f.streamLife, "events-max-life", 30*time.Minute,
		"How long an events stream lasts (±10%) before the API ends it; clients resume with Last-Event-ID, on any replica.")
	flag.IntVar(&f.streamsPerClient, "events-max-streams-per-client", 1000,
		"How many events streams (each Wait is one) one client identity (user, or address without auth) has open on a replica; more get 429.")
	flag.IntVar(&f.eventsQueues, "events-max-queues", 512,
		"Queues whose events streams this replica follows at once without waiting: the events Redis client's pool (each watched queue holds one connection for its blocking read).")
	flag.Int64Var(&f.maxBody, "max-body-bytes", 2<<20, "Largest submission body.")
	flag.Int64Var(&f.maxBatchBody, "max-batch-body-bytes", 16<<20, "Largest batch body.")
	flag.DurationVar(&f.bodyTimeout, "body-read-timeout", 10*time.Second, "How long a request's body may take to arrive once the request is authorized (else 408).")
	flag.IntVar(&f.bodyReads, "max-body-reads-per-client", 8,
		"How many request bodies of one client identity (user, or address without auth) are read at once; more wait, then get 429.")
	flag.Float64Var(&f.qps, "kube-api-qps", 50, "Queries per second to the Kubernetes API server (TokenReviews, SubjectAccessReviews, Queue patches).")
	flag.IntVar(&f.burst, "kube-api-burst", 100, "Burst of queries to the Kubernetes API server.")
	flag.BoolVar(&f.allowEviction, "allow-redis-eviction", false,
		"Start even when Redis's maxmemory-policy may evict idempotency records or streams (see docs/operations.md).")
	flag.BoolVar(&f.debug, "debug", false, "Log at debug level (denied requests included). Logs are JSON lines on stderr.")
	flag.BoolVar(&f.printVersion, "version", false, "Print the version and exit.")
	flag.Parse()
	if f.printVersion {
		fmt.Println(version.String())
		return
	}

	level := slog.LevelInfo
	if f.debug {
		level = slog.LevelDebug
	}
	// JSON lines with the keys of every dtq component (pkg/worker.NewLogger);
	// controller-runtime, client-go and go-redis write through the same logger.
	log := worker.NewLogger(os.Stderr, level)
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	klog.SetLogger(logr.FromSlogHandler(log.Handler()).WithName("client-go"))
	redis.SetLogger(logging.Printer(log))
	if err := run(f, log); err != nil {
		log.Error("API stopped", "error", err)
		os.Exit(1)
	}
}

func run(f flags, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopTracing, err := otelsetup.Setup(ctx, "dtq-api")
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() { _ = stopTracing(context.Background()) }()

	conn := redisconn.FromEnv()
	conn.URL = f.redisURL
	rdb, err := connect(ctx, conn)
	if err != nil {
		return fmt.Errorf("redis is unreachable (--redis-url / DTQ_REDIS_URL): %w", err)
	}
	defer rdb.Close()
	// The events streams' blocking reads get a client of their own, so
	// watchers never hold the connections requests need.
	events, err := httpapi.EventsRedis(conn, f.eventsQueues)
	if err != nil {
		return err
	}
	defer events.Close()
	warnings, err := broker.CheckRedis(ctx, rdb, f.allowEviction)
	for _, w := range warnings {
		log.Warn(w)
	}
	if err != nil {
		return err
	}
	// The Redis layout (docs/upgrade.md, "Redis layout version"): checked
	// before the API writes anything, and again every LayoutCheckInterval.
	b := broker.New(rdb)
	if err := b.CheckLayout(ctx); err != nil {
		return err
	}
	ctx, stopLayout := context.WithCancelCause(ctx)
	defer stopLayout(nil)
	go broker.WatchLayout(ctx, broker.LayoutCheckInterval, b.CheckLayout, func(err error) {
		log.Error("Stopping: Redis now holds a dtq layout this API cannot read", "error", err)
		_ = rdb.Close() // no request writes to Redis from here on
		_ = events.Close()
		stopLayout(err)
	})

	kube, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no Kubernetes config (in-cluster, --kubeconfig or KUBECONFIG): %w", err)
	}
	kube.QPS, kube.Burst = float32(f.qps), f.burst
	var auth httpapi.Authorizer = httpapi.NoAuth{}
	if f.noAuth {
		log.Warn("INSECURE: --insecure-no-auth is set. Every request is served without authentication or " +
			"authorisation: anyone who reaches " + f.bind + " can submit, read, cancel and purge. For local use only.")
	} else {
		if len(f.auth.Audiences) == 0 {
			log.Warn("--token-audiences is empty: the API accepts any token the Kubernetes API server accepts, " +
				"including tokens for the API server itself, which a compromised API replica could replay there. " +
				"Prefer tokens for audience " + client.DefaultAudience + " (docs/api.md, Token audiences).")
		}
		if auth, err = httpapi.KubernetesAuth(kube, f.auth); err != nil {
			return err
		}
	}
	scheme := runtime.NewScheme()
	if err := dtqv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	kc, err := ctrlclient.New(kube, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := redismetrics.Instrument(rdb, reg); err != nil {
		return err
	}
	reg.MustRegister(version.BuildInfo())
	pod, _ := os.Hostname()
	go b.RunComponentRecord(ctx, broker.Component{Component: broker.ComponentAPI, Pod: pod, Version: version.Version, Commit: version.Commit},
		func(err error) { log.Warn("Failed to record the API's version in Redis", "error", err) })
	api, err := httpapi.New(httpapi.Options{
		Broker:                b,
		Events:                broker.New(events),
		Auth:                  auth,
		PauseQueue:            httpapi.KubernetesPauser(kc),
		Schedules:             kc,
		Queues:                httpapi.KubernetesQueues(kc),
		Ready:                 func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		Log:                   log,
		Registry:              reg,
		KeepAlive:             f.keepAlive,
		MaxStreamLife:         f.streamLife,
		MaxStreamsPerClient:   f.streamsPerClient,
		MaxBodyBytes:          f.maxBody,
		MaxBatchBodyBytes:     f.maxBatchBody,
		BodyTimeout:           f.bodyTimeout,
		MaxBodyReadsPerClient: f.bodyReads,
	})
	if err != nil {
		return err
	}
	if err := serve(ctx, f, api, log); err != nil {
		return err
	}
	if cause := context.Cause(ctx); errors.Is(cause, broker.ErrLayoutUnknown) {
		return cause
	}
	return nil
}

// serve listens until ctx ends, then ends the events streams (their clients
// resume elsewhere) and drains the other requests for up to 20 seconds.
func serve(ctx context.Context, f flags, api *httpapi.Server, log *slog.Logger) error {
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	ln, err := net.Listen("tcp", f.bind)
	if err != nil {
		return err
	}
	scheme := "http"
	if f.certFile != "" || f.keyFile != "" {
		cw, err := certwatcher.New(f.certFile, f.keyFile)
		if err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
		go func() { _ = cw.Start(ctx) }()
		// HTTP/2 stays off: Rapid Reset and Stream Cancellation CVEs.
		srv.TLSConfig = &tls.Config{GetCertificate: cw.GetCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
		ln, scheme = tls.NewListener(ln, srv.TLSConfig), "https"
	}
	log.Info("Serving the dtq API", "url", scheme+"://"+ln.Addr().String(), "auth", !f.noAuth, "tokenAudiences", f.auth.Audiences)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("Shutting down")
	api.Stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// connect builds the client and pings Redis, so a wrong URL or credential
// fails at start with a clear message.
func connect(ctx context.Context, conn redisconn.Config) (redis.UniversalClient, error) {
	rdb, err := conn.Client()
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("ping: %w", err)
	}
	return rdb, nil
}
