// Command worker is dtq's reference worker: the demo handlers of internal/demo
// on the pkg/worker SDK, configured from the DTQ_* environment variables the
// Queue controller injects (docs/worker.md). It exits 0 after a graceful drain
// on SIGTERM or SIGINT.
//
// DTQ_DEMO_CRASH=true also registers the "crash" handler, which SIGKILLs the
// process; it exists for crash tests only.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/pkg/worker"
)

func main() {
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
