// asynq's hello-world worker, for comparison.
package main

import (
	"context"
	"log"

	"github.com/hibiken/asynq"
)

func main() {
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: "localhost:6379"}, asynq.Config{Concurrency: 10})
	mux := asynq.NewServeMux()
	mux.HandleFunc("hello", func(ctx context.Context, t *asynq.Task) error {
		_, err := t.ResultWriter().Write([]byte("hello, " + string(t.Payload())))
		return err
	})
	if err := srv.Run(mux); err != nil {
		log.Fatal(err)
	}
}
