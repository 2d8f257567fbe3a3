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

// Package worker is the dtq worker SDK: register handlers by task type on a Mux,
// and run them with a Server against the queue the dtq operator manages.
//
// The API is shaped like net/http:
//
//	mux := worker.NewMux()
//	mux.HandleFunc("email:send", func(ctx context.Context, t *worker.Task) (any, error) {
//		p, err := worker.Decode[EmailPayload](t)
//		if err != nil {
//			return nil, err // permanent: a payload that does not decode never will
//		}
//		return nil, send(ctx, p)
//	})
//	cfg, err := worker.ConfigFromEnv() // DTQ_REDIS_URL, DTQ_QUEUE_NAME, ...
//	if err != nil { ... }
//	srv, err := worker.NewServer(cfg, mux)
//	if err != nil { ... }
//	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
//	defer stop()
//	err = srv.Run(ctx) // returns after a graceful drain
//
// # Delivery
//
// Execution is at-least-once. A handler runs with a context that carries the
// task's deadline (its timeout) and is cancelled when the task's cancel is
// requested. A handler's result is stored as JSON. A handler can be run again for
// the same task after a worker crash (the attempt number then grows, and a task
// that kills its worker every time ends dead-lettered after MaxAttempts); guard
// side effects with [IdempotentOperation].
//
// # Retries
//
// Only a closed allow-list of errors is retried, with the queue's exponential
// backoff and jitter: errors wrapped with [Retryable], the task's own deadline
// passing (context.DeadlineExceeded), and Redis/network connection errors
// (net.Error, io.EOF, io.ErrUnexpectedEOF, go-redis pool timeouts). Every other
// error, [SkipRetry], an unknown task type, an undecodable payload and a panic
// are permanent: the task ends dead-lettered (or Failed when the queue has no
// dead-letter stream) at once.
//
// # Shutdown
//
// When Run's context ends the server stops reading, waits up to the drain timeout
// for in-flight handlers, then cancels the rest and hands their tasks back to the
// queue at once, never acknowledged as done: any worker reads them right away
// (not after the visibility timeout), as attempt+1 since their handlers ran. A
// handler that has not begun its task when the drain starts may return
// [ErrHandBack]: the task then goes back without counting the attempt;
// [Task.Draining] tells a waiting handler that the drain started. Entries
// never read stay in the stream.
//
// # Progress
//
// [Task.ReportProgress] records a running task's progress: the task's latest
// progress and a TaskProgress event on its queue's event stream, at most one
// write a second per task.
//
// Package workertest helps test handlers without Redis and run servers in
// integration tests.
package worker
