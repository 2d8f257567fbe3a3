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

package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dtq-dev/dtq/pkg/client"
)

// In a pod, authenticate as the pod's ServiceAccount with a projected token
// for the API's audience (docs/api.md, "Token audiences"); the kubelet
// rotates it in place and the client reads it again when it changes.
// Outside the cluster use kubeauth.WithTokenRequest or WithToken.
func Example_new() {
	c, err := client.New("https://dtq-api.dtq-system.svc", client.WithTokenFile(client.APITokenFile))
	if err != nil {
		log.Fatal(err)
	}
	_ = c.Queue("shop", "emails")
}

// A second submission with the key of a task that has not finished is
// refused with the task's ID; once it has finished, the same key replays it.
func Example_queueSubmit() {
	ctx := context.Background()
	c, err := client.New(serverURL)
	if err != nil {
		log.Fatal(err)
	}
	q := c.Queue("shop", "idle") // no worker runs this queue's tasks
	t, err := q.Submit(ctx, "send_receipt", map[string]any{"order": 42}, client.IdempotencyKey("receipt-42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Status, t.Duplicate)

	_, err = q.Submit(ctx, "send_receipt", map[string]any{"order": 42}, client.IdempotencyKey("receipt-42"))
	var e *client.Error
	if errors.Is(err, client.ErrIdempotencyInProgress) && errors.As(err, &e) {
		fmt.Println("in progress, same task:", e.TaskID == t.TaskID)
	}
	// Output:
	// Queued false
	// in progress, same task: true
}

// Wait follows the queue's events until the task has finished, then returns
// it with its result.
func Example_queueWait() {
	c, err := client.New(serverURL)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := c.Queue("shop", "emails")
	t, err := q.Submit(ctx, "echo", map[string]string{"to": "ann@example.com"}, client.Priority(9))
	if err != nil {
		log.Fatal(err)
	}
	t, err = q.Wait(ctx, t.TaskID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Status, string(t.Result))
	// Output: Succeeded {"to":"ann@example.com"}
}

// A batch answers each task as a single submission at its place would be
// answered: here a new task, a duplicate key in flight and a bad priority.
func Example_queueSubmitBatch() {
	ctx := context.Background()
	c, err := client.New(serverURL)
	if err != nil {
		log.Fatal(err)
	}
	var reqs []client.SubmitRequest
	for _, p := range []int{5, 5, 42} {
		r, err := client.NewSubmitRequest("send_receipt", nil, client.IdempotencyKey("batch-7"), client.Priority(p))
		if err != nil {
			log.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	results, err := c.Queue("shop", "idle").SubmitBatch(ctx, reqs)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		if err := r.Err(); err != nil {
			fmt.Println(r.Status, r.Error.Code)
			continue
		}
		fmt.Println(r.Status, r.Task.Status)
	}
	// Output:
	// 202 Queued
	// 409 IDEMPOTENCY_IN_PROGRESS
	// 400 INVALID_TASK
}

// Events follows a queue's lifecycle events; it reconnects by itself and
// resumes after the last event it returned.
func Example_queueEvents() {
	c, err := client.New(serverURL)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := c.Queue("shop", "emails")
	stream, err := q.Events(ctx, client.EventsOptions{}) // from now on
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	t, err := q.Submit(ctx, "echo", nil)
	if err != nil {
		log.Fatal(err)
	}
	for {
		ev, err := stream.Next()
		if err != nil {
			log.Fatal(err)
		}
		if ev.TaskID != t.TaskID {
			continue
		}
		fmt.Println(ev.Type)
		if ev.Type.Terminal() {
			break
		}
	}
	// Output:
	// TaskQueued
	// TaskStarted
	// TaskSucceeded
}
