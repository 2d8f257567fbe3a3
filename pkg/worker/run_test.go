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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// outcome is the pure decision of what a Server records for one handler run.
func TestOutcome(t *testing.T) {
	deadline := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	before, after := deadline.Add(-time.Millisecond), deadline
	boom := errors.New("boom")
	type want struct {
		Result                     string
		Err, Class                 string
		Retryable, Cancelled, Redo bool
	}
	cases := map[string]struct {
		v     any
		herr  error
		cause error
		now   time.Time
		want  want
	}{
		"success with a value":             {v: map[string]int{"n": 1}, now: before, want: want{Result: `{"n":1}`}},
		"success with no value":            {now: before, want: want{}},
		"success with raw JSON":            {v: json.RawMessage(`[1]`), now: before, want: want{Result: `[1]`}},
		"raw result not JSON":              {v: json.RawMessage(`{`), now: before, want: want{Err: "handler result is not valid JSON", Class: ClassBadResult}},
		"result that does not marshal":     {v: make(chan int), now: before, want: want{Err: "handler result: json: unsupported type: chan int", Class: ClassBadResult}},
		"permanent error":                  {herr: boom, now: before, want: want{Err: "boom", Class: ClassPermanent}},
		"retryable error":                  {herr: Retryable(boom), now: before, want: want{Err: "boom", Class: ClassRetryable, Retryable: true}},
		"panic":                            {herr: fmt.Errorf("%w: x", ErrPanic), now: before, want: want{Err: "handler panicked: x", Class: ClassPanic}},
		"deadline passed":                  {herr: context.DeadlineExceeded, cause: context.DeadlineExceeded, now: after, want: want{Err: "deadline exceeded after 30s: context deadline exceeded", Class: ClassTimeout, Retryable: true}},
		"deadline passed, own error":       {herr: boom, cause: context.DeadlineExceeded, now: after, want: want{Err: "deadline exceeded after 30s: boom", Class: ClassTimeout, Retryable: true}},
		"own deadline before the task's":   {herr: context.DeadlineExceeded, now: before, want: want{Err: "context deadline exceeded", Class: ClassPermanent}},
		"deadline passed, success anyway":  {v: 1, cause: context.DeadlineExceeded, now: after, want: want{Result: "1"}},
		"cancel requested":                 {herr: ErrCancelRequested, cause: ErrCancelRequested, now: before, want: want{Err: "cancelled: " + ErrCancelRequested.Error(), Class: "Cancelled", Cancelled: true}},
		"cancel requested, own error":      {herr: Retryable(boom), cause: ErrCancelRequested, now: before, want: want{Err: "cancelled: boom", Class: "Cancelled", Cancelled: true}},
		"cancel requested, success anyway": {v: 1, cause: ErrCancelRequested, now: before, want: want{Result: "1"}},
		"interrupted":                      {herr: ErrInterrupted, cause: ErrInterrupted, now: before, want: want{Redo: true}},
		"interrupted, success anyway":      {v: 1, cause: ErrInterrupted, now: before, want: want{Redo: true}},
		"lease lost":                       {herr: boom, cause: ErrLeaseLost, now: before, want: want{Redo: true}},
		"lease lost, success anyway":       {v: 1, cause: ErrLeaseLost, now: before, want: want{Result: "1"}},
		"parent cancelled":                 {herr: context.Canceled, cause: context.Canceled, now: before, want: want{Err: "context canceled", Class: ClassPermanent}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			o := outcome(c.v, c.herr, c.cause, c.now, deadline, 30*time.Second)
			got := want{Result: string(o.Result), Class: o.Class, Retryable: o.Retryable, Cancelled: o.Cancelled, Redo: o.Redeliver}
			if o.Err != nil {
				got.Err = o.Err.Error()
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("outcome (-want +got):\n%s", d)
			}
			if c.herr != nil && o.Err != nil && !errors.Is(o.Err, c.herr) {
				t.Errorf("recorded error %v does not wrap the handler's %v", o.Err, c.herr)
			}
		})
	}
}
