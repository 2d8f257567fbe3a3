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

package worker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

type EmailPayload struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Register handlers by task type, like http.ServeMux; run them with
// workertest.Execute in unit tests, without Redis.
func ExampleMux() {
	mux := worker.NewMux()
	mux.Handle("email:send", worker.Typed(func(ctx context.Context, t *worker.Task, p EmailPayload) (any, error) {
		if p.To == "" {
			return nil, fmt.Errorf("no recipient: %w", worker.SkipRetry)
		}
		return map[string]string{"sent_to": p.To}, nil
	}))

	res := workertest.Execute(context.Background(), mux, workertest.NewTask("email:send", EmailPayload{To: "ada@example.com"}))
	fmt.Println(string(res.Value), res.Err)

	res = workertest.Execute(context.Background(), mux, workertest.NewTask("email:send", EmailPayload{}))
	fmt.Println(res.Class, res.Retryable)

	res = workertest.Execute(context.Background(), mux, workertest.NewTask("sms:send", nil))
	fmt.Println(res.Class, res.Retryable)
	// Output:
	// {"sent_to":"ada@example.com"} <nil>
	// SkipRetry false
	// UnknownType false
}

// Only errors in the allow-list are retried.
func ExampleRetryable() {
	transient := worker.Retryable(errors.New("upstream 503"))
	fmt.Println(worker.IsRetryable(transient))
	fmt.Println(worker.IsRetryable(errors.New("invalid card")))
	fmt.Println(worker.IsRetryable(worker.Retryable(fmt.Errorf("gave up: %w", worker.SkipRetry))))
	// Output:
	// true
	// false
	// false
}

// A handler that overruns its deadline is retried (attempts permitting).
func ExampleHandlerFunc() {
	slow := worker.HandlerFunc(func(ctx context.Context, t *worker.Task) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	task := workertest.NewTask("report", nil, workertest.WithTimeout(10e6), workertest.WithAttempt(2))
	res := workertest.Execute(context.Background(), slow, task)
	fmt.Println(res.Class, res.Retryable, task.Attempt)
	// Output:
	// Timeout true 2
}
