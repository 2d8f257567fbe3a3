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

// Package client is the Go client of dtq's HTTP API (docs/api.md): submit
// tasks with idempotency keys, read, wait for, list and cancel them, read and
// pause queues, handle dead letters, and follow a queue's events.
//
//	c, err := client.New("https://dtq-api.dtq-system.svc", client.WithTokenFile(client.APITokenFile))
//	q := c.Queue("shop", "emails")
//	t, err := q.Submit(ctx, "send_receipt", map[string]any{"order": 42}, client.IdempotencyKey("receipt-42"))
//	t, err = q.Wait(ctx, t.TaskID)
//
// Every call takes a context. Errors of the API are *Error values: compare
// them with errors.Is against the Err* sentinels and read TaskID (the task
// in progress) or RetryAfter (a full queue) with errors.As.
//
// Lists page: follow TaskList.Continue (List) and DeadLetterList.Continue
// (ListDeadLetters) until it is empty; RequeueAll requeues every dead letter
// up to a fence. An EventStream (Events, and Wait underneath) reconnects by
// itself with a jittered backoff and resumes without a gap; its Close may be
// called from any goroutine.
//
// Credentials are Kubernetes ServiceAccount tokens for the API's audience
// (DefaultAudience, "dtq-api", unless the API is started with other
// --token-audiences): a fixed one (WithToken, e.g. from `kubectl create token
// SA --audience dtq-api`), a file read again whenever it changes, such as a
// projected ServiceAccount token (WithTokenFile, APITokenFile), or tokens the
// client requests itself with the TokenRequest API (package kubeauth's
// WithTokenRequest, for a named ServiceAccount or the one a kubeconfig
// authenticates as). kubeauth.WithKubeconfig and kubeauth.WithRESTConfig send
// a kubeconfig user's own credentials, for an API started with
// --token-audiences= (empty). kubeauth is a module of its own (client-go):
// this package needs no k8s.io, and takes any credentials through
// WithTokenSource and WithTransport. RBAC on
// the dtq.dev resources decides what a token may do.
//
// Every request carries the W3C trace context (traceparent header) of the
// span ctx carries, if any: a submission then runs in a dtq.submit span, its
// child, and the task's handler runs in the same trace (docs/observability.md).
//
// Trusted Go services in the cluster can skip the HTTP hop: package
// pkg/client/direct submits to Redis with the engine's own scripts, with the
// same semantics, types and errors (both implement Producer).
package client
