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
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// QueueReconciler sets a Queue up in Redis, applies pause/resume, owns and
// autoscales its worker Deployment and reports depth and workers in status.
// It writes the Deployment with server-side apply (queue_workers.go) and only
// reads its status (ready replicas).
type QueueReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Engine   Engine
	Clock    clock.Clock
	Recorder events.EventRecorder
	Workers  WorkerOptions

	// APIReader reads what the cache does not hold (a Deployment without the
	// Queue label).
	APIReader client.Reader
}

// +kubebuilder:rbac:groups=dtq.dev,resources=queues,verbs=get;list;watch
// +kubebuilder:rbac:groups=dtq.dev,resources=queues/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the Queue's Redis setup and worker Deployment to its spec.
func (r *QueueReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	q := &dtqv1alpha1.Queue{}
	if err := r.Get(ctx, req.NamespacedName, q); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A deleted Queue's Redis side goes with it (QueueFinalizer); its
	// Deployment is garbage-collected (owner reference).
	if done, err := r.finalize(ctx, q); done || err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcile(ctx, q)
}

func (r *QueueReconciler) reconcile(ctx context.Context, q *dtqv1alpha1.Queue) (ctrl.Result, error) {
	next := q.Status.DeepCopy()
	ref := queueRefOf(q)
	now := r.Clock.Now().UTC().Truncate(time.Second)

	if errs := q.Spec.DurationErrors(); len(errs) > 0 {
		// Only a Queue stored before the CRD validated durations gets here.
		r.setCondition(next, q, dtqv1alpha1.QueueReady, metav1.ConditionFalse, dtqv1alpha1.ReasonInvalidConfig,
			"Invalid spec, left unapplied (Redis config and workers unchanged) until it is fixed: "+strings.Join(errs, "; "))
		next.ObservedGeneration = q.Generation
		return ctrl.Result{}, r.writeStatus(ctx, q, next)
	}

	if errs := handlerTemplateErrors(q); len(errs) > 0 {
		r.setCondition(next, q, dtqv1alpha1.QueueReady, metav1.ConditionFalse, dtqv1alpha1.ReasonInvalidConfig,
			"Invalid spec, left unapplied (Redis config and workers unchanged) until it is fixed: "+strings.Join(errs, "; "))
		next.ObservedGeneration = q.Generation
		return ctrl.Result{}, r.writeStatus(ctx, q, next)
	}
	stats, err := r.setUpRedis(ctx, q, ref)
	if err != nil {
		reason := dtqv1alpha1.ReasonRedisUnavailable
		if broker.CodeOf(err) == broker.CodeWorkersBehind {
			reason = dtqv1alpha1.ReasonWorkersBehind
		}
		r.setCondition(next, q, dtqv1alpha1.QueueReady, metav1.ConditionFalse, reason, err.Error())
		if werr := r.writeStatus(ctx, q, next); werr != nil {
			return ctrl.Result{}, werr
		}
		return ctrl.Result{}, err
	}
	next.Queued, next.InFlight, next.Scheduled, next.DeadLettered = stats.Queued, stats.InFlight, stats.Scheduled, stats.DeadLettered
	if stats.Paused {
		r.setCondition(next, q, dtqv1alpha1.QueuePaused, metav1.ConditionTrue, dtqv1alpha1.ReasonPaused, "Workers start no new tasks")
	} else {
		r.setCondition(next, q, dtqv1alpha1.QueuePaused, metav1.ConditionFalse, dtqv1alpha1.ReasonActive, "Workers take tasks")
	}

	cred, ok := r.redisIsolation(ctx, q, next)
	if !ok {
		r.setCondition(next, q, dtqv1alpha1.QueueReady, metav1.ConditionFalse, dtqv1alpha1.ReasonRedisUserPending,
			"Waiting for the namespace's Redis user (Secret "+RedisUserSecret+"); workers are created once it exists")
		return ctrl.Result{}, r.writeStatus(ctx, q, next)
	}
	r.setEnvCondition(next, q, cred)
	dep, scale, err := r.reconcileWorkers(ctx, q, stats, now, cred)
	if err != nil {
		switch {
		case errors.Is(err, errDeploymentConflict):
			r.setCondition(next, q, dtqv1alpha1.QueueReady, metav1.ConditionFalse, dtqv1alpha1.ReasonDeploymentConflict, err.Error())
			return ctrl.Result{RequeueAfter: conflictRecheck}, r.writeStatus(ctx, q, next)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			r.setCondition(next, q, dtqv1alpha1.QueueReady, metav1.ConditionFalse, dtqv1alpha1.ReasonDeploymentRejected, err.Error())
			return ctrl.Result{}, r.writeStatus(ctx, q, next)
		case apierrors.IsForbidden(err):
			// Said on the Queue, not only in the manager's log; retried with
			// backoff (a quota or a role can change).
			r.setCondition(next, q, dtqv1alpha1.QueueReady, metav1.ConditionFalse, dtqv1alpha1.ReasonDeploymentForbidden, err.Error())
			if werr := r.writeStatus(ctx, q, next); werr != nil {
				return ctrl.Result{}, werr
			}
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, err
	}
	r.setWorkersStatus(next, q, dep, scale, now)
	r.setFlowStatus(next, q, stats, scale)
	if err := r.setHandlerCondition(ctx, next, q); err != nil {
		return ctrl.Result{}, err
	}
	r.setCondition(next, q, dtqv1alpha1.QueueReady, metav1.ConditionTrue, dtqv1alpha1.ReasonQueueEnsured, "Queue is set up in Redis and its workers are reconciled")
	next.ObservedGeneration = q.Generation
	if err := r.writeStatus(ctx, q, next); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueFor(stats, scale)}, nil
}

// requeueFor polls a busy queue quickly (backlog, workers or a pending
// scale-down); an idle queue scaled to zero waits for the status syncer's
// trigger on its next task, with a slow poll as a safety net.
func requeueFor(stats broker.QueueStats, scale scaleDecision) time.Duration {
	switch {
	case scale.Recheck > 0:
		return min(scale.Recheck, busyRequeue)
	case stats.Queued+stats.InFlight > 0 || scale.Replicas > 0:
		return busyRequeue
	}
	return 30 * time.Second
}

// setUpRedis writes the queue's config, creates its consumer groups, applies
// pause/resume and reads its backlog.
func (r *QueueReconciler) setUpRedis(ctx context.Context, q *dtqv1alpha1.Queue, ref broker.QueueRef) (broker.QueueStats, error) {
	if err := r.Engine.EnsureQueue(ctx, ref, queueConfig(q)); errors.Is(err, broker.ErrNotListed) {
		// The queue is set up; only the namespace's list of queues (the HTTP
		// API's) misses it until a later reconcile: its master may be down
		// while the queue's is not.
		ctrl.LoggerFrom(ctx).Info("Queue set up but not listed in its namespace yet", "error", err.Error())
	} else if err != nil {
		return broker.QueueStats{}, fmt.Errorf("set up queue in Redis: %w", err)
	}
	stats, err := r.Engine.Stats(ctx, ref)
	if err != nil {
		return stats, fmt.Errorf("read queue stats: %w", err)
	}
	if stats.Paused != q.Spec.Paused {
		if q.Spec.Paused {
			err = r.Engine.Pause(ctx, ref)
		} else {
			err = r.Engine.Resume(ctx, ref)
		}
		if err != nil {
			return stats, fmt.Errorf("set paused=%t: %w", q.Spec.Paused, err)
		}
		stats.Paused = q.Spec.Paused
	}
	return stats, nil
}

func (r *QueueReconciler) setCondition(st *dtqv1alpha1.QueueStatus, q *dtqv1alpha1.Queue, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: q.Generation,
		LastTransitionTime: metav1.NewTime(r.Clock.Now().UTC().Truncate(time.Second)),
	})
}

func (r *QueueReconciler) writeStatus(ctx context.Context, q *dtqv1alpha1.Queue, next *dtqv1alpha1.QueueStatus) error {
	if equality.Semantic.DeepEqual(&q.Status, next) {
		return nil
	}
	base := client.MergeFrom(q.DeepCopy())
	q.Status = *next
	if err := r.Status().Patch(ctx, q, base); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("write queue status: %w", err)
	}
	return nil
}

// SetupWithManager watches Queues, their Deployments (ready replicas), the
// namespaces' Redis user Secrets and the status syncer's channel (a task
// arrived: scale up now).
func (r *QueueReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, syncer <-chan event.TypedGenericEvent[*dtqv1alpha1.Queue]) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("queue").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		For(&dtqv1alpha1.Queue{}).
		Owns(&appsv1.Deployment{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.queuesOfNamespace)).
		WatchesRawSource(source.Channel(syncer, &handler.TypedEnqueueRequestForObject[*dtqv1alpha1.Queue]{})).
		Complete(r)
}

// queuesOfNamespace maps an object to the Queues of its namespace.
func (r *QueueReconciler) queuesOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list dtqv1alpha1.QueueList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List Queues of a namespace", "namespace", o.GetNamespace())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
