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

package worker

import (
	"errors"

	"github.com/dtq-dev/dtq/pkg/broker"
)

// SkipRetry marks an error as permanent, even when it is also wrapped with
// Retryable: return fmt.Errorf("...: %w", worker.SkipRetry) and the task is
// dead-lettered at once.
var SkipRetry = errors.New("skip retry") //nolint:staticcheck // ST1012: named as asynq's SkipRetry, which queue users know

// ErrUnknownType is the permanent failure of a task whose type has no handler.
var ErrUnknownType = errors.New("no handler for task type")

// ErrPanic is the permanent failure of a handler that panicked.
var ErrPanic = errors.New("handler panicked")

type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// Retryable marks err as transient: the task is retried with backoff while
// attempts remain. Retryable(nil) is nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err: err}
}

// Error classes recorded on the task (LastErrorClass) and used in logs.
const (
	ClassRetryable   = "Retryable"
	ClassTimeout     = "Timeout"
	ClassConnection  = "Connection"
	ClassPermanent   = "Permanent"
	ClassSkipRetry   = "SkipRetry"
	ClassUnknownType = "UnknownType"
	ClassPanic       = "Panic"
	ClassBadResult   = "BadResult"
)

// IsRetryable reports whether a handler error is in the retry allow-list:
// wrapped with Retryable, or a connection error (net.Error, io.EOF,
// io.ErrUnexpectedEOF, redis.ErrPoolTimeout, and Redis's LOADING, READONLY,
// MASTERDOWN, CLUSTERDOWN and TRYAGAIN replies), and not wrapped with SkipRetry.
// A handler returning the task deadline's context.DeadlineExceeded is retried
// too, but that is decided by the server, which knows whether the task's own
// deadline passed.
func IsRetryable(err error) bool {
	r, _ := classify(err)
	return r
}

// Classify returns whether a handler error is retryable (see IsRetryable) and
// the error class a Server records for it (one of the Class* constants).
func Classify(err error) (retryable bool, class string) { return classify(err) }

// classify returns whether err is retryable and its class.
func classify(err error) (bool, string) {
	var re *retryableError
	switch {
	case err == nil:
		return false, ""
	case errors.Is(err, SkipRetry):
		return false, ClassSkipRetry
	case errors.Is(err, ErrUnknownType):
		return false, ClassUnknownType
	case errors.Is(err, ErrPanic):
		return false, ClassPanic
	case errors.As(err, &re):
		return true, ClassRetryable
	case isConnErr(err):
		return true, ClassConnection
	}
	return false, ClassPermanent
}

func isConnErr(err error) bool {
	// A Queue with spec.durability.replicaAcks: the write is on the master,
	// its replica has not confirmed it yet (a retry is a replay).
	return broker.Unreachable(err) || errors.Is(err, broker.ErrNotReplicated)
}
