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

// Command worker is dtq's reference worker: the demo handlers of internal/demo
// on the pkg/worker SDK, configured from the DTQ_* environment variables the
// Queue controller injects (docs/worker.md). It exits 0 after a graceful drain
// on SIGTERM or SIGINT.
//
// `worker delivery` runs the delivery sidecar of a Queue with an HTTP handler
// (package internal/delivery, docs/http-handlers.md) instead of the demo
// handlers.
//
// DTQ_METRICS_AUTH=kubernetes guards /metrics with Kubernetes authentication
// (package metricsauth).
//
// DTQ_DEMO_CRASH=true also registers the "crash" handler, which SIGKILLs the
// process; it exists for crash tests only. DTQ_DEMO_CHAOS_LOG=<file> also
// registers the "chaos" handler, the fault suite's witness, which appends one
// line per execution to that file.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/internal/delivery"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/logging"
	"github.com/dtq-dev/dtq/internal/otelsetup"
	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/kubeauth/metricsauth"
	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workermetrics"
)

// usage is printed by --help; the worker's only flag is --version, the rest
// is the environment.
const usage = `Usage: worker [delivery] [--version]

dtq's reference worker: runs the demo handlers (echo, sleep, flaky, counter ...)
of one Queue until SIGTERM, then drains. Its one flag, --version, prints the
version and exits; the Queue controller sets its environment (docs/worker.md):

  DTQ_REDIS_URL            Redis URL (required); DTQ_REDIS_USERNAME, DTQ_REDIS_PASSWORD,
                           DTQ_REDIS_PASSWORD_FILE and DTQ_REDIS_CA_FILE override its
                           credentials and CA
  DTQ_QUEUE_NAMESPACE      the Queue's namespace (default "default")
  DTQ_QUEUE_NAME           the Queue's name (required)
  DTQ_WORKER_CONCURRENCY   execution slots (default 4)
  DTQ_VISIBILITY_TIMEOUT   e.g. 30s; DTQ_HEARTBEAT_INTERVAL, e.g. 5s; DTQ_DRAIN_TIMEOUT, e.g. 30s
  DTQ_WORKER_ID            consumer name (default $POD_NAME, else hostname-<random>)
  DTQ_METRICS_ADDR         /metrics, /healthz, /readyz (default :8080; 0 disables)
  DTQ_LOG_LEVEL            debug, info (default), warn, error; logs are JSON lines

worker delivery runs the delivery sidecar of a Queue with spec.handler.http
instead: each task is POSTed to the app container (docs/http-handlers.md).

  DTQ_HANDLER_URL          http://127.0.0.1:<port><path> (required)
  DTQ_HANDLER_READY_URL    the app's readiness check (default: a TCP connect)
  DTQ_SIDECAR_ADDR         the loopback API for the app (default 127.0.0.1:8081)
`

func main() {
	flag.Usage = func() { _, _ = fmt.Fprint(flag.CommandLine.Output(), usage) }
	printVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	mode := flag.Arg(0)
	if mode == "delivery" {
		_ = flag.CommandLine.Parse(flag.Args()[1:]) // the flags after the mode: worker delivery --version
	}
	if *printVersion {
		fmt.Println(version.String())
		return
	}
	if mode != "" && mode != "delivery" {
		fmt.Fprintf(os.Stderr, "worker: unknown mode %q (want none or delivery)\n", mode)
		os.Exit(2)
	}
	if err := run(mode == "delivery"); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(delivering bool) error {
	cfg, err := worker.ConfigFromEnv()
	if err != nil {
		return err
	}
	cfg.Metrics = workermetrics.New()
	if cfg.MetricsMiddleware, err = metricsauth.FromEnv(logr.FromSlogHandler(cfg.Logger.Handler())); err != nil {
		return err
	}
	redis.SetLogger(logging.Printer(cfg.Logger))
	stopTracing, err := otelsetup.Setup(context.Background(), "dtq-worker")
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() { _ = stopTracing(context.Background()) }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if delivering {
		dcfg, err := delivery.ConfigFromEnv()
		if err != nil {
			return err
		}
		return delivery.Run(ctx, cfg, dcfg)
	}
	mux := worker.NewMux()
	srv, err := worker.NewServer(cfg, mux)
	if err != nil {
		return err
	}
	demo.Register(mux, srv.Redis())
	if os.Getenv("DTQ_DEMO_CRASH") == "true" {
		demo.RegisterCrash(mux)
	}
	if path := os.Getenv(demo.EnvChaosLog); path != "" {
		log, err := demo.OpenChaosLog(path)
		if err != nil {
			return err
		}
		defer log.Close()
		effects, err := noRetryClient(cfg.RedisConn)
		if err != nil {
			return err
		}
		defer effects.Close()
		demo.RegisterChaos(mux, effects, log, srv.WorkerID())
	}
	return srv.Run(ctx)
}

// noRetryClient is a client of conn that never re-sends a command (go-redis's
// max_retries=-1), for the chaos handler's increment.
func noRetryClient(conn redisconn.Config) (redis.UniversalClient, error) {
	u, err := url.Parse(conn.URL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", redisconn.EnvURL, err)
	}
	q := u.Query()
	q.Set("max_retries", "-1")
	u.RawQuery = q.Encode()
	conn.URL = u.String()
	return conn.Client()
}
