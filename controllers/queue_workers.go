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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// errDeploymentConflict: <queue>-workers exists and the Queue does not control it.
var errDeploymentConflict = errors.New("deployment not controlled by this Queue")

// conflictRecheck is how often a Queue whose Deployment name is taken looks
// again: the other Deployment is not watched (the cache holds only worker
// Deployments), so its removal is noticed by this poll.
const conflictRecheck = 30 * time.Second

// reconcileWorkers server-side applies the worker Deployment with the
// autoscaler's replica count (none in External scaling mode) and returns it
// and the scale decision. It applies only when the desired spec or the
// replica count changed, so an idle queue costs no API write. It never
// touches a Deployment the Queue does not control (errDeploymentConflict).
func (r *QueueReconciler) reconcileWorkers(ctx context.Context, q *dtqv1alpha1.Queue, stats broker.QueueStats, now time.Time,
	cred *redisCredential) (*appsv1.Deployment, scaleDecision, error) {
	desired := desiredWorkerDeployment(q, r.Workers, cred)
	if err := controllerutil.SetControllerReference(q, desired, r.Scheme); err != nil {
		return nil, scaleDecision{}, fmt.Errorf("set owner of worker deployment: %w", err)
	}
	cur, err := r.currentDeployment(ctx, client.ObjectKeyFromObject(desired))
	if err != nil {
		return nil, scaleDecision{}, err
	}
	if cur != nil && !metav1.IsControlledBy(cur, q) {
		return cur, scaleDecision{}, fmt.Errorf("%w: Deployment %s exists and is controlled by %s; the operator leaves it untouched "+
			"(delete or rename it, or rename the Queue)", errDeploymentConflict, desired.Name, controllerOf(cur))
	}
	current := int32(0)
	if cur != nil {
		current = ptr.Deref(cur.Spec.Replicas, 1)
	}
	var scale scaleDecision
	if q.Spec.Scaling.Mode == dtqv1alpha1.ScalingExternal {
		scale = scaleDecision{Replicas: current, Wanted: current}
	} else {
		var since *time.Time
		if q.Status.ScaleDownSince != nil {
			since = &q.Status.ScaleDownSince.Time
		}
		scale = decideScale(q, stats, current, since, now)
		desired.Spec.Replicas = ptr.To(scale.Replicas)
	}
	if cur != nil && cur.Annotations[AnnotationTemplateHash] == desired.Annotations[AnnotationTemplateHash] &&
		(desired.Spec.Replicas == nil || current == scale.Replicas) {
		return cur, scale, nil
	}
	applied, err := r.applyDeployment(ctx, desired)
	if err != nil {
		return nil, scale, err
	}
	log := ctrl.LoggerFrom(ctx)
	switch {
	case cur == nil:
		log.Info("Created worker Deployment", "deployment", desired.Name, "replicas", ptr.Deref(applied.Spec.Replicas, 1))
	case desired.Spec.Replicas != nil && current != scale.Replicas:
		log.Info("Scaled workers", "from", current, "to", scale.Replicas, "queued", stats.Queued, "inFlight", stats.InFlight)
		if r.Recorder != nil {
			r.Recorder.Eventf(q, applied, corev1.EventTypeNormal, EventReasonScaled, "Scale",
				"Scaled workers from %d to %d (queued %d, in flight %d)", current, scale.Replicas, stats.Queued, stats.InFlight)
		}
	}
	return applied, scale, nil
}

// currentDeployment reads the worker Deployment from the cache, which holds
// only Deployments carrying the Queue label; on a miss it asks the API server,
// so a Deployment of that name without the label is seen (and not adopted).
func (r *QueueReconciler) currentDeployment(ctx context.Context, key client.ObjectKey) (*appsv1.Deployment, error) {
	cur := &appsv1.Deployment{}
	err := r.Get(ctx, key, cur)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, cur)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get worker deployment: %w", err)
	}
	return cur, nil
}

// applyDeployment writes d with server-side apply as FieldOwner, forcing
// ownership of the fields d sets. Fields set by others and absent from d (the
// rollout-restart annotation, an HPA's replicas in External mode, a label
// another controller adds) are theirs and stay.
func (r *QueueReconciler) applyDeployment(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return nil, fmt.Errorf("encode worker deployment: %w", err)
	}
	// The typed object carries zero values the operator does not mean to own.
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(obj, "spec", "template", "metadata", "creationTimestamp")
	u := &unstructured.Unstructured{Object: obj}
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("apply worker deployment: %w", err)
	}
	out := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decode applied worker deployment: %w", err)
	}
	return out, nil
}

// controllerOf describes the controller of o for messages.
func controllerOf(o metav1.Object) string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return fmt.Sprintf("%s %s", ref.Kind, ref.Name)
	}
	return "no controller"
}

// redisIsolation sets the RedisIsolated condition and returns the
// namespace's Redis credential for the workers: nil with isolation off;
// ok=false while the namespace's Secret is not written yet.
func (r *QueueReconciler) redisIsolation(ctx context.Context, q *dtqv1alpha1.Queue, next *dtqv1alpha1.QueueStatus) (*redisCredential, bool) {
	if !r.Workers.Isolation {
		r.setCondition(next, q, dtqv1alpha1.QueueRedisIsolated, metav1.ConditionFalse, dtqv1alpha1.ReasonIsolationDisabled,
			"The manager runs with --redis-isolation=false: workers share one Redis identity and can read, change and delete every namespace's queues")
		return nil, true
	}
	sec := &corev1.Secret{}
	var cred *redisCredential
	if err := r.Get(ctx, client.ObjectKey{Namespace: q.Namespace, Name: RedisUserSecret}, sec); err == nil {
		cred = credentialOf(sec)
	}
	if cred == nil {
		r.setCondition(next, q, dtqv1alpha1.QueueRedisIsolated, metav1.ConditionFalse, dtqv1alpha1.ReasonRedisUserPending,
			"Waiting for Secret "+RedisUserSecret+" with the namespace's Redis user (the Queue's Events say why when it is late)")
		return nil, false
	}
	r.setCondition(next, q, dtqv1alpha1.QueueRedisIsolated, metav1.ConditionTrue, dtqv1alpha1.ReasonNamespaceUser,
		fmt.Sprintf("Workers log in to Redis as %s (Secret %s), allowed only this namespace's keys", broker.NamespaceUser(q.Namespace), RedisUserSecret))
	return cred, true
}

// setEnvCondition reports whether the template sets variables the operator owns.
func (r *QueueReconciler) setEnvCondition(next *dtqv1alpha1.QueueStatus, q *dtqv1alpha1.Queue, cred *redisCredential) {
	if names := overriddenEnv(q, cred); len(names) > 0 {
		r.setCondition(next, q, dtqv1alpha1.QueueWorkerEnvOverridden, metav1.ConditionTrue, dtqv1alpha1.ReasonEnvOverridden,
			fmt.Sprintf("workerTemplate sets %s; the operator replaced them with this Queue's own values", strings.Join(names, ", ")))
		return
	}
	r.setCondition(next, q, dtqv1alpha1.QueueWorkerEnvOverridden, metav1.ConditionFalse, dtqv1alpha1.ReasonEnvAsSpecified,
		"workerTemplate sets none of the variables the operator owns")
}

// setWorkersStatus records the scale decision and the Deployment's ready
// workers in status.
func (r *QueueReconciler) setWorkersStatus(next *dtqv1alpha1.QueueStatus, q *dtqv1alpha1.Queue, dep *appsv1.Deployment, scale scaleDecision, now time.Time) {
	if next.DesiredWorkers != scale.Replicas {
		next.LastScaleTime = &metav1.Time{Time: now}
	}
	next.DesiredWorkers = scale.Replicas
	next.ReadyWorkers = dep.Status.ReadyReplicas
	next.Workers = fmt.Sprintf("%d/%d", next.ReadyWorkers, next.DesiredWorkers)
	next.ScaleDownSince = nil
	if scale.ScaleDownSince != nil {
		next.ScaleDownSince = &metav1.Time{Time: *scale.ScaleDownSince}
	}
	switch {
	case scale.Replicas == 0:
		r.setCondition(next, q, dtqv1alpha1.QueueWorkersAvailable, metav1.ConditionTrue, dtqv1alpha1.ReasonScaledToZero, "No workers needed; the first task scales the queue up")
	case next.ReadyWorkers >= scale.Replicas:
		r.setCondition(next, q, dtqv1alpha1.QueueWorkersAvailable, metav1.ConditionTrue, dtqv1alpha1.ReasonWorkersReady, fmt.Sprintf("%d workers ready", next.ReadyWorkers))
	default:
		r.setCondition(next, q, dtqv1alpha1.QueueWorkersAvailable, metav1.ConditionFalse, dtqv1alpha1.ReasonWorkersStarting,
			fmt.Sprintf("%d of %d workers ready", next.ReadyWorkers, scale.Replicas))
	}
}
