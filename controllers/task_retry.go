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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// maxHistory is how many earlier runs status.history keeps (the CRD's maxItems).
const maxHistory = 10

// Event reasons of retries.
const (
	EventReasonRetried      = "Retried"
	EventReasonRetryRefused = "RetryRefused"
)

// reconcileFinished handles a Task whose status is terminal. It runs the task
// again when spec.retryGeneration was raised (retry), follows its task when
// that runs again for another reason (follow: a dead-letter requeue through
// the API, or a retry of the Task that owns the key this one mirrors), and
// acknowledges other spec changes (observedGeneration). It writes status only
// when one of these changed it, so finished Tasks cost no writes.
func (r *TaskReconciler) reconcileFinished(ctx context.Context, task *dtqv1alpha1.Task, prev *dtqv1alpha1.TaskStatus) (ctrl.Result, error) {
	next := prev.DeepCopy()
	next.ObservedGeneration = task.Generation
	var o outcome
	var err error
	switch {
	case task.Spec.RetryGeneration > prev.ObservedRetryGeneration:
		o, err = r.retry(ctx, task, next)
	case failedRun(prev.State):
		err = r.follow(ctx, task, next)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !statusChanged(prev, next) {
		return r.collectFinished(ctx, task, next)
	}
	r.setLifecycleConditions(next, task)
	if err := r.writeStatus(ctx, task, next); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	r.recordMilestones(task, prev, next)
	if next.State.Finished() {
		return r.collectFinished(ctx, task, next)
	}
	return ctrl.Result{RequeueAfter: o.requeue}, nil
}

// failedRun says whether a task that ended in state can run again.
func failedRun(s dtqv1alpha1.TaskState) bool {
	return s == dtqv1alpha1.TaskFailed || s == dtqv1alpha1.TaskDeadLettered
}

// retry acts on a raised spec.retryGeneration: the task runs again through
// the engine's Retry, with a token naming this Task and generation, so a
// manager that dies before writing the status does not retry twice. A Task
// with no task in Redis (rejected at submission, or its record is past
// retention) is submitted again as new work. A mirror retries the original it
// mirrors: they are one logical task.
func (r *TaskReconciler) retry(ctx context.Context, task *dtqv1alpha1.Task, next *dtqv1alpha1.TaskStatus) (outcome, error) {
	next.ObservedRetryGeneration = task.Spec.RetryGeneration
	if !failedRun(next.State) {
		// Admission refuses this; the state changed since (a follow).
		r.event(task, corev1.EventTypeWarning, EventReasonRetryRefused,
			fmt.Sprintf("Retry generation %d ignored: the task is %s; only a Failed or DeadLettered task can be retried", task.Spec.RetryGeneration, next.State))
		return outcome{}, nil
	}
	if id := r.submittedID(task, next); id != "" {
		dup := id != string(task.UID)
		token := fmt.Sprintf("%s/%d", task.UID, task.Spec.RetryGeneration)
		info, err := r.Engine.Retry(ctx, queueRef(task), id, token)
		switch {
		case err == nil:
			addHistory(next)
			applyTaskInfo(next, task, info, dup)
			r.setSubmitted(next, task, info, dup)
			return outcome{info: &info}, nil
		case errors.Is(err, broker.ErrTaskConflict): // it ran again since the status was written
			return outcome{}, r.follow(ctx, task, next)
		case !errors.Is(err, broker.ErrTaskNotFound):
			return outcome{}, fmt.Errorf("retry task %s: %w", id, err)
		}
	}
	addHistory(next)
	*next = dtqv1alpha1.TaskStatus{
		Conditions:              next.Conditions,
		ObservedGeneration:      next.ObservedGeneration,
		ObservedRetryGeneration: next.ObservedRetryGeneration,
		History:                 next.History,
	}
	return r.sync(ctx, task, next.DeepCopy(), next)
}

// follow re-reads the task of a Failed or DeadLettered Task and, when it ran
// again since (it is unfinished, or finished at another time), moves the
// Task's status to it with the ended run added to the history.
func (r *TaskReconciler) follow(ctx context.Context, task *dtqv1alpha1.Task, next *dtqv1alpha1.TaskStatus) error {
	id := r.submittedID(task, next)
	if id == "" {
		return nil
	}
	dup := id != string(task.UID)
	info, err := r.Engine.GetTask(ctx, queueRef(task), id)
	switch {
	case errors.Is(err, broker.ErrTaskNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("get task %s: %w", id, err)
	}
	if dtqv1alpha1.TaskState(info.State) == next.State && ptrTime(info.FinishedAt).Equal(next.FinishedAt) {
		return nil
	}
	addHistory(next)
	applyTaskInfo(next, task, info, dup)
	r.setSubmitted(next, task, info, dup)
	return nil
}

// addHistory appends the run the status shows to its history.
func addHistory(st *dtqv1alpha1.TaskStatus) {
	st.History = append(st.History, dtqv1alpha1.TaskRun{
		State: st.State, Attempts: st.Attempt, FinishedAt: st.FinishedAt, LastError: st.LastError,
	})
	if n := len(st.History); n > maxHistory {
		st.History = st.History[n-maxHistory:]
	}
}

func (r *TaskReconciler) event(task *dtqv1alpha1.Task, typ, reason, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(task, nil, typ, reason, "Retry", "%s", note)
	}
}
