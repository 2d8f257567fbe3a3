// The hello-world worker plus an OTLP exporter: the budget check must refuse it.
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/dtq-dev/dtq/pkg/worker"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
)

func main() {
	if _, err := otlptracehttp.New(context.Background()); err != nil {
		log.Fatal(err)
	}
	mux := worker.NewMux()
	mux.HandleFunc("hello", func(ctx context.Context, t *worker.Task) (any, error) {
		return "hello, " + string(t.Payload), nil
	})
	cfg, err := worker.ConfigFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	srv, err := worker.NewServer(cfg, mux)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
