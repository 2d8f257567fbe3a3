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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// QueueFinalizer holds a deleted Queue until its Redis side is gone: its
// unfinished tasks cancelled and its keys removed (broker.DeleteQueue). Without
// it a deleted Queue left its streams, task hashes and records in Redis
// forever, and its unfinished tasks ran if a Queue of the same name came back.
const QueueFinalizer = "dtq.dev/queue-cleanup"

// EventReasonQueueDeleted is the Event recorded when a Queue's Redis side is removed.
const EventReasonQueueDeleted = dtqv1alpha1.ReasonQueueDeleted

// +kubebuilder:rbac:groups=dtq.dev,resources=queues,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=dtq.dev,resources=queues/finalizers,verbs=update

// finalize adds the finalizer to a live Queue, and cleans a deleted one up:
// done says the Queue is being deleted and Reconcile has nothing more to do.
// Redis being unreachable keeps the Queue (and the error retries) until it
// answers, so no task outlives its Queue unseen.
func (r *QueueReconciler) finalize(ctx context.Context, q *dtqv1alpha1.Queue) (done bool, err error) {
	if q.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(q, QueueFinalizer) {
			return false, nil
		}
		base := q.DeepCopy()
		controllerutil.AddFinalizer(q, QueueFinalizer)
		if err := r.Patch(ctx, q, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, fmt.Errorf("add finalizer: %w", err)
		}
		return false, nil
	}
	if !controllerutil.ContainsFinalizer(q, QueueFinalizer) {
		return true, nil
	}
	cancelled, err := r.Engine.DeleteQueue(ctx, queueRefOf(q))
	if err != nil {
		return true, fmt.Errorf("delete queue from Redis: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted the queue from Redis", "cancelledTasks", cancelled)
	if r.Recorder != nil {
		r.Recorder.Eventf(q, nil, corev1.EventTypeNormal, EventReasonQueueDeleted, "Delete",
			"Cancelled %d unfinished tasks and removed the queue's Redis keys", cancelled)
	}
	base := q.DeepCopy()
	controllerutil.RemoveFinalizer(q, QueueFinalizer)
	if err := r.Patch(ctx, q, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return true, client.IgnoreNotFound(fmt.Errorf("remove finalizer: %w", err))
	}
	return true, nil
}
