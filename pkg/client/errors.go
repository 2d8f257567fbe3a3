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

package client

import (
	"fmt"
	"time"
)

// Error codes of the API, each with its HTTP status.
const (
	CodeInvalidTask            = "INVALID_TASK"             // 400: a task field is invalid (details.field names it)
	CodeInvalidRequest         = "INVALID_REQUEST"          // 400: a bad query parameter, header or batch envelope
	CodeUnauthorized           = "UNAUTHORIZED"             // 401: no bearer token, or one the API server rejects
	CodeForbidden              = "FORBIDDEN"                // 403: RBAC does not allow the verb
	CodeNotFound               = "NOT_FOUND"                // 404: no such path
	CodeQueueNotFound          = "QUEUE_NOT_FOUND"          // 404
	CodeTaskNotFound           = "TASK_NOT_FOUND"           // 404
	CodeDLQEntryNotFound       = "DLQ_ENTRY_NOT_FOUND"      // 404
	CodeMethodNotAllowed       = "METHOD_NOT_ALLOWED"       // 405
	CodeRequestTimeout         = "REQUEST_TIMEOUT"          // 408: the request body did not arrive within the server's body timeout
	CodeIdempotencyInProgress  = "IDEMPOTENCY_IN_PROGRESS"  // 409: details.task_id is the in-flight task; details.request_matches whether this request matched it
	CodeIdempotencyKeyMismatch = "IDEMPOTENCY_KEY_MISMATCH" // 422: the key belongs to task details.task_id, another request; the Queue rejects such reuse
	CodeCancelRequested        = "CANCEL_REQUESTED"         // 409: the task is running; its worker was asked to stop it
	CodeTaskConflict           = "TASK_CONFLICT"            // 409: e.g. requeue of a task that is not dead-lettered
	CodeTaskTerminal           = "TASK_TERMINAL"            // 410: the task has finished
	CodePayloadTooLarge        = "PAYLOAD_TOO_LARGE"        // 413: payload over the Queue's limit, or body over the server's
	CodeQueueFull              = "QUEUE_FULL"               // 429: Retry-After says when to try again
	CodeTooManyRequests        = "TOO_MANY_REQUESTS"        // 429: too many bodies of this client are being read at once, or too many of its events streams are open; Retry-After
	CodeCanceled               = "CANCELED"                 // 499: the caller cancelled the request (its context)
	CodeInternal               = "INTERNAL_ERROR"           // 500
	CodeRedisError             = "REDIS_ERROR"              // 500: Redis refused the command (e.g. NOPERM, WRONGTYPE); retrying does not help
	CodeRedisUnavailable       = "REDIS_UNAVAILABLE"        // 503: Redis did not answer, or answered that it cannot now (LOADING, READONLY ...); retry
	CodeNotReplicated          = "NOT_REPLICATED"           // 503: no replica confirmed the write in time (Queue spec.durability); the task may exist, retry with the same idempotency key
	CodeTimeout                = "TIMEOUT"                  // 504: the request ran out of time; a submission may have been written
	CodeNotSubmitted           = "NOT_SUBMITTED"            // a batch item not written because the batch stopped at a failure (details.cause); its status is the cause's
)

// Error is an error answer of the API, whose body is {code, message, details,
// request_id}. Compare with errors.Is against the Err* sentinels (the code
// decides), and use errors.As to read TaskID or RetryAfter:
//
//	var e *client.Error
//	if errors.As(err, &e) && e.Code == client.CodeIdempotencyInProgress { wait for e.TaskID }
type Error struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details"`
	RequestID string         `json:"request_id,omitempty"`

	// StatusCode is the HTTP status (set for errors of the direct producer
	// too, as the API would answer).
	StatusCode int `json:"-"`
	// TaskID is the task concerned: the in-flight task of
	// IDEMPOTENCY_IN_PROGRESS, the task owning the key of
	// IDEMPOTENCY_KEY_MISMATCH, the task of CANCEL_REQUESTED and
	// TASK_TERMINAL.
	TaskID string `json:"-"`
	// RequestMatches (IDEMPOTENCY_IN_PROGRESS) says whether this submission's
	// task type and payload are the in-flight task's; nil when that task has
	// no fingerprint (submitted by an older release).
	RequestMatches *bool `json:"-"`
	// RetryAfter is how long to wait before submitting again (QUEUE_FULL,
	// NOT_REPLICATED).
	RetryAfter time.Duration `json:"-"`
	// Err is the cause, when the error was made in this process: the
	// context's error of CANCELED and TIMEOUT (so errors.Is(err,
	// context.Canceled) holds), the engine's or Redis's error of the direct
	// producer. Answers of the HTTP API carry no cause.
	Err error `json:"-"`
}

func (e *Error) Error() string {
	if e.RequestID != "" {
		return fmt.Sprintf("%s: %s (request %s)", e.Code, e.Message, e.RequestID)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Is matches an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one per code.
var (
	ErrInvalidTask            = &Error{Code: CodeInvalidTask}
	ErrInvalidRequest         = &Error{Code: CodeInvalidRequest}
	ErrUnauthorized           = &Error{Code: CodeUnauthorized}
	ErrForbidden              = &Error{Code: CodeForbidden}
	ErrNotFound               = &Error{Code: CodeNotFound}
	ErrQueueNotFound          = &Error{Code: CodeQueueNotFound}
	ErrTaskNotFound           = &Error{Code: CodeTaskNotFound}
	ErrDLQEntryNotFound       = &Error{Code: CodeDLQEntryNotFound}
	ErrMethodNotAllowed       = &Error{Code: CodeMethodNotAllowed}
	ErrRequestTimeout         = &Error{Code: CodeRequestTimeout}
	ErrTooManyRequests        = &Error{Code: CodeTooManyRequests}
	ErrIdempotencyInProgress  = &Error{Code: CodeIdempotencyInProgress}
	ErrIdempotencyKeyMismatch = &Error{Code: CodeIdempotencyKeyMismatch}
	ErrCancelRequested        = &Error{Code: CodeCancelRequested}
	ErrTaskConflict           = &Error{Code: CodeTaskConflict}
	ErrTaskTerminal           = &Error{Code: CodeTaskTerminal}
	ErrPayloadTooLarge        = &Error{Code: CodePayloadTooLarge}
	ErrQueueFull              = &Error{Code: CodeQueueFull}
	ErrCanceled               = &Error{Code: CodeCanceled}
	ErrInternal               = &Error{Code: CodeInternal}
	ErrRedisError             = &Error{Code: CodeRedisError}
	ErrRedisUnavailable       = &Error{Code: CodeRedisUnavailable}
	ErrNotReplicated          = &Error{Code: CodeNotReplicated}
	ErrTimeout                = &Error{Code: CodeTimeout}
	ErrNotSubmitted           = &Error{Code: CodeNotSubmitted}
)

// fillFromDetails sets TaskID, RequestMatches and RetryAfter from the details the server sent.
func (e *Error) fillFromDetails() {
	if id, ok := e.Details["task_id"].(string); ok {
		e.TaskID = id
	}
	if m, ok := e.Details["request_matches"].(bool); ok {
		e.RequestMatches = &m
	}
	if s, ok := e.Details["retry_after_s"].(float64); ok && e.RetryAfter == 0 {
		e.RetryAfter = time.Duration(s * float64(time.Second))
	}
}
