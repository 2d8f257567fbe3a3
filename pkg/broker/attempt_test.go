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
	"testing"
	"time"
)

// A task that never ran has made no attempt, delayed or queued; its first
// start is attempt 1, which a retry waiting for its due time still shows
// (the last attempt made).
func TestAttemptCountsRunsOnly(t *testing.T) {
	e := newEnv(t)
	delayed := e.mustSubmit(SubmitRequest{NotBefore: e.clock.Now().Add(time.Minute)})
	queued := e.mustSubmit(SubmitRequest{})
	for _, ti := range []TaskInfo{delayed, queued, e.task(delayed.ID), e.task(queued.ID)} {
		if ti.Attempt != 0 {
			t.Errorf("task %s (%s, never ran): attempt %d, want 0", ti.ID, ti.State, ti.Attempt)
		}
	}
	x, run := e.deliver("w")
	if run.Attempt != 1 || e.task(queued.ID).Attempt != 1 {
		t.Fatalf("started: attempt %d, stored %d, want 1", run.Attempt, e.task(queued.ID).Attempt)
	}
	e.complete(x, Outcome{Err: "blip", Retryable: true})
	if got := e.task(queued.ID); got.State != StateRetrying || got.Attempt != 1 {
		t.Errorf("retrying: %s attempt %d, want Retrying attempt 1", got.State, got.Attempt)
	}
}
