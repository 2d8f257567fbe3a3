// Command worker is dtq's reference worker: the demo handlers of internal/demo
// on the pkg/worker SDK, configured from the DTQ_* environment variables the
// Queue controller injects (docs/worker.md). It exits 0 after a graceful drain
// on SIGTERM or SIGINT.
//
// DTQ_METRICS_AUTH=kubernetes guards /metrics with Kubernetes authentication
// (package metricsauth).
//
// DTQ_DEMO_CRASH=true also registers the "crash" handler, which SIGKILLs the
// process; it exists for crash tests only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"

	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/metricsauth"
)

// usage is printed by --help; the worker has no flags, only the environment.
const usage = `Usage: worker

dtq's reference worker: runs the demo handlers (echo, sleep, flaky, counter ...)
of one Queue until SIGTERM, then drains. It takes no flags; the Queue controller
sets its environment (docs/worker.md):

  DTQ_REDIS_URL            Redis URL (required); DTQ_REDIS_USERNAME, DTQ_REDIS_PASSWORD,
                           DTQ_REDIS_PASSWORD_FILE and DTQ_REDIS_CA_FILE override its
                           credentials and CA
  DTQ_QUEUE_NAMESPACE      the Queue's namespace (default "default")
  DTQ_QUEUE_NAME           the Queue's name (required)
  DTQ_WORKER_CONCURRENCY   execution slots (default 4)
  DTQ_VISIBILITY_TIMEOUT   e.g. 30s; DTQ_HEARTBEAT_INTERVAL, e.g. 5s; DTQ_DRAIN_TIMEOUT, e.g. 30s
  DTQ_WORKER_ID            consumer name (default $POD_NAME, else hostname-<random>)
  DTQ_METRICS_ADDR         /metrics, /healthz, /readyz (default :8080; 0 disables)
  DTQ_LOG_LEVEL            debug, info, warn, error
`

func main() {
	flag.Usage = func() { fmt.Fprint(flag.CommandLine.Output(), usage) }
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := worker.ConfigFromEnv()
	if err != nil {
		return err
	}
	if cfg.MetricsMiddleware, err = metricsauth.FromEnv(logr.FromSlogHandler(cfg.Logger.Handler())); err != nil {
		return err
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return srv.Run(ctx)
}
