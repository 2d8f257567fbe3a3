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

package controllers

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// raceEngine answers Submit with "in progress" but GetTask with the original
// already finished: the original completed between the two calls.
type raceEngine struct {
	Engine
	original broker.TaskInfo
}

func (e raceEngine) Submit(context.Context, broker.QueueRef, broker.SubmitRequest) (broker.SubmitResult, error) {
	return broker.SubmitResult{}, &broker.Error{Code: broker.CodeIdempotencyInProgress, TaskID: e.original.ID}
}

func (e raceEngine) GetTask(context.Context, broker.QueueRef, string) (broker.TaskInfo, error) {
	return e.original, nil
}

func TestSyncMirrorOfOriginalThatJustFinished(t *testing.T) {
	original := broker.TaskInfo{ID: "orig", State: broker.StateSucceeded, Attempt: 1, Result: []byte(`{"ok":true}`)}
	task := testutil.MakeTask("second", "ns").Key("k").Obj()
	task.UID = "second-uid"
	s := runtime.NewScheme()
	if err := dtqv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	r := &TaskReconciler{Engine: raceEngine{original: original}, Clock: clocktesting.NewFakeClock(time.Now()),
		APIReader: fake.NewClientBuilder().WithScheme(s).WithObjects(task.DeepCopy()).Build()}
	next := &dtqv1alpha1.TaskStatus{}
	if _, err := r.sync(context.Background(), task, &dtqv1alpha1.TaskStatus{}, next); err != nil {
		t.Fatal(err)
	}
	want := dtqv1alpha1.TaskIdempotency{Key: "k", State: dtqv1alpha1.IdempotencyCompleted, TaskID: "orig", Duplicate: true}
	if next.State != dtqv1alpha1.TaskSucceeded || next.Idempotency == nil || *next.Idempotency != want {
		t.Fatalf("status %+v idempotency %+v, want Succeeded and %+v", next, next.Idempotency, want)
	}
	if c := findCondition(next.Conditions, dtqv1alpha1.TaskSubmitted); c == nil || c.Reason != dtqv1alpha1.ReasonDuplicate {
		t.Fatalf("Submitted condition %+v, want reason %s", c, dtqv1alpha1.ReasonDuplicate)
	}
}

// The engine and the API spell states with the same strings on purpose (the
// engine and the worker SDK must not import the Kubernetes API types), and the
// status code converts by type conversion; this keeps the two lists in step.
func TestEngineStatesAreTaskStates(t *testing.T) {
	for _, s := range []broker.State{broker.StatePending, broker.StateQueued, broker.StateRunning,
		broker.StateRetrying, broker.StateSucceeded, broker.StateFailed, broker.StateDeadLettered,
		broker.StateCancelled, broker.StateExpired} {
		ts := dtqv1alpha1.TaskState(s)
		if ts.Finished() != s.Terminal() {
			t.Errorf("%s: Finished %v, Terminal %v", s, ts.Finished(), s.Terminal())
		}
		switch ts {
		case dtqv1alpha1.TaskPending, dtqv1alpha1.TaskQueued, dtqv1alpha1.TaskRunning, dtqv1alpha1.TaskRetrying,
			dtqv1alpha1.TaskSucceeded, dtqv1alpha1.TaskFailed, dtqv1alpha1.TaskDeadLettered,
			dtqv1alpha1.TaskCancelled, dtqv1alpha1.TaskExpired:
		default:
			t.Errorf("engine state %q is not a Task state", s)
		}
	}
	for _, s := range []broker.IdempotencyState{broker.IdempotencyProcessing, broker.IdempotencyCompleted, broker.IdempotencyFailed} {
		switch dtqv1alpha1.IdempotencyState(s) {
		case dtqv1alpha1.IdempotencyProcessing, dtqv1alpha1.IdempotencyCompleted, dtqv1alpha1.IdempotencyFailed:
		default:
			t.Errorf("engine idempotency state %q is not a Task idempotency state", s)
		}
	}
}
