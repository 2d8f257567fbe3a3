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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// queueGone computes the status of a Task whose Queue does not exist or is
// being deleted (queue nil, or its deletionTimestamp set).
//
//   - A Task that never had work in Redis waits: Pending, reason QueueNotFound,
//     submitted when the Queue appears.
//   - A Task whose own task is still in Redis never runs again: the task is
//     cancelled there (a running one when its worker sees the cancel) and the
//     Task mirrors it until it is finished.
//   - A Task that was submitted (its status names a task, its own or the
//     original it mirrors) whose task is gone ends Cancelled with reason
//     QueueDeleted: deleting a Queue cancels its unfinished tasks and removes
//     its Redis keys, and a Queue created again with the same name must not
//     run them a second time.
func (r *TaskReconciler) queueGone(ctx context.Context, task *dtqv1alpha1.Task, next *dtqv1alpha1.TaskStatus, queue *dtqv1alpha1.Queue) (outcome, error) {
	q, id := queueRef(task), string(task.UID)
	_, err := r.Engine.Cancel(ctx, q, id)
	switch {
	case err == nil, errors.Is(err, broker.ErrTaskTerminal):
		info, err := r.Engine.GetTask(ctx, q, id)
		if err == nil {
			applyTaskInfo(next, task, info, false)
			r.setSubmitted(next, task, info, false)
			if !info.State.Terminal() {
				return outcome{info: &info, requeue: queueNotReadyRetry}, nil
			}
			return outcome{info: &info}, nil
		}
		if !errors.Is(err, broker.ErrTaskNotFound) {
			return outcome{}, fmt.Errorf("get task of a deleted queue: %w", err)
		}
	case !errors.Is(err, broker.ErrTaskNotFound):
		return outcome{}, fmt.Errorf("cancel task of a deleted queue: %w", err)
	}
	if next.TaskID == "" && next.Idempotency == nil {
		msg := fmt.Sprintf("Queue %q does not exist in namespace %q; the task is submitted when it appears", task.Spec.Queue, task.Namespace)
		if queue != nil {
			msg = fmt.Sprintf("Queue %q is being deleted; the task is submitted if it is created again", task.Spec.Queue)
		}
		next.State = dtqv1alpha1.TaskPending
		r.setCondition(next, task, dtqv1alpha1.TaskSubmitted, metav1.ConditionFalse, dtqv1alpha1.ReasonQueueNotFound, msg)
		return outcome{}, nil
	}
	msg := fmt.Sprintf("Queue %q was deleted; its unfinished tasks were cancelled", task.Spec.Queue)
	next.State = dtqv1alpha1.TaskCancelled
	next.FinishedAt = ptrTime(r.now())
	if next.Idempotency != nil {
		next.Idempotency.State = dtqv1alpha1.IdempotencyFailed
	}
	next.LastError = msg // the Succeeded=False and Stalled conditions carry it
	return outcome{}, nil
}
