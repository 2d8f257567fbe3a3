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

package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/redis/go-redis/v9"
)

// Code is a documented error code; the HTTP API maps each to a status.
type Code string

const (
	CodeInvalidTask            Code = "INVALID_TASK"             // 400
	CodePayloadTooLarge        Code = "PAYLOAD_TOO_LARGE"        // 413
	CodeIdempotencyInProgress  Code = "IDEMPOTENCY_IN_PROGRESS"  // 409, TaskID is the in-flight task
	CodeIdempotencyKeyMismatch Code = "IDEMPOTENCY_KEY_MISMATCH" // 422, TaskID is the task the key belongs to (a different request; the queue rejects mismatches)
	CodeQueueFull              Code = "QUEUE_FULL"               // 429, Depth and Limit set
	CodeQueueNotFound          Code = "QUEUE_NOT_FOUND"          // 404, EnsureQueue never ran
	CodeTaskNotFound           Code = "TASK_NOT_FOUND"           // 404
	CodeTaskTerminal           Code = "TASK_TERMINAL"            // 410
	CodeTaskConflict           Code = "TASK_CONFLICT"            // 409, e.g. requeue of a task that is not dead-lettered
	CodeDLQEntryNotFound       Code = "DLQ_ENTRY_NOT_FOUND"      // 404
	CodeConsumerBusy           Code = "CONSUMER_BUSY"            // a consumer with pending entries cannot be removed
	CodeStaleExecution         Code = "STALE_EXECUTION"          // another worker took the task over; the call changed nothing
	CodeEvictionPolicy         Code = "REDIS_EVICTION_POLICY"    // Redis may evict keys (maxmemory-policy is not noeviction)
	CodeInvalidRequest         Code = "INVALID_REQUEST"          // 400, a malformed argument other than a task (e.g. a list's continue token)
	CodeNotReplicated          Code = "NOT_REPLICATED"           // 503, Queue spec.durability: written on the master, too few replicas acknowledged it in time
	CodeNotSubmitted           Code = "NOT_SUBMITTED"            // SubmitMany: an item the batch did not write because Redis failed (Err is the failure)
	CodeWorkersBehind          Code = "WORKERS_BEHIND"           // EnsureQueue: flow control waits for live workers of an earlier layout (raiseForFlow)
)

// Error is the engine's typed error. errors.Is(err, ErrQueueFull) and friends
// compare codes, so callers never match strings.
type Error struct {
	Code    Code
	Message string
	TaskID  string // IDEMPOTENCY_IN_PROGRESS: the in-flight task; IDEMPOTENCY_KEY_MISMATCH: the key's task
	// RequestMatches (IDEMPOTENCY_IN_PROGRESS) says whether this request
	// matched the in-flight task's (fingerprint.go); nil when that task has
	// no fingerprint (submitted by an older release).
	RequestMatches *bool
	Depth          int64  // QUEUE_FULL
	Limit          int64  // QUEUE_FULL, PAYLOAD_TOO_LARGE
	Field          string // INVALID_TASK: the field at fault, as the HTTP API names it ("" unknown)
	Err            error  // NOT_SUBMITTED: the failure that stopped the batch; NOT_REPLICATED: WAIT's error, if it failed
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the failure behind a NOT_SUBMITTED item or a failed WAIT (nil otherwise).
func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrInvalidTask            = &Error{Code: CodeInvalidTask}
	ErrPayloadTooLarge        = &Error{Code: CodePayloadTooLarge}
	ErrIdempotencyInProgress  = &Error{Code: CodeIdempotencyInProgress}
	ErrIdempotencyKeyMismatch = &Error{Code: CodeIdempotencyKeyMismatch}
	ErrQueueFull              = &Error{Code: CodeQueueFull}
	ErrQueueNotFound          = &Error{Code: CodeQueueNotFound}
	ErrTaskNotFound           = &Error{Code: CodeTaskNotFound}
	ErrTaskTerminal           = &Error{Code: CodeTaskTerminal}
	ErrTaskConflict           = &Error{Code: CodeTaskConflict}
	ErrDLQEntryNotFound       = &Error{Code: CodeDLQEntryNotFound}
	ErrConsumerBusy           = &Error{Code: CodeConsumerBusy}
	ErrStaleExecution         = &Error{Code: CodeStaleExecution}
	ErrEvictionPolicy         = &Error{Code: CodeEvictionPolicy}
	ErrInvalidRequest         = &Error{Code: CodeInvalidRequest}
	ErrNotReplicated          = &Error{Code: CodeNotReplicated}
	ErrNotSubmitted           = &Error{Code: CodeNotSubmitted}
)

// CodeOf returns the code of an engine error, or "" for any other error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Unreachable reports whether err is a failure to reach Redis, or a node of
// it not serving yet, rather than an answer: a network error, a closed
// connection or an exhausted pool, a node loading its data, a failover or
// resharding in progress, a cluster down. The same call may succeed later.
// A network error that wraps a context error is the caller's context's, not
// Redis's, and is not one.
func Unreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrPoolTimeout) ||
		redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsMasterDownError(err) ||
		redis.IsClusterDownError(err) || redis.IsTryAgainError(err)
}
