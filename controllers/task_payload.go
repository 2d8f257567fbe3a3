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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// The manager's cache holds a Task's spec.payload only up to
// cachedPayloadLimit (stripTask): payloads of up to etcd's object limit, times
// every Task in the cluster, would not fit in the manager's memory. A Task
// with a small payload (or none) is submitted from the cache alone; a larger
// payload is read from the API server once, to submit the Task. A Task
// already in Redis is read back with GetTask.

// cachedPayloadLimit is the largest spec.payload, in bytes of JSON, the cache
// keeps: most payloads name their work (IDs, URLs, a few parameters) in less.
// 10,000 Tasks with payloads at the limit cost the manager 40-70 MiB more RSS
// than without them (docs/benchmarks.md, "Manager memory").
const cachedPayloadLimit = 1 << 10

// annotationPayloadOmitted marks a cached Task whose payload stripTask
// dropped. It exists only in the manager's cache: the controllers write only
// a Task's status, and a status write leaves the stored metadata as it is.
const annotationPayloadOmitted = "dtq.dev/payload-omitted"

// stripTask is the cache transform of Tasks: it drops managedFields, which no
// controller reads, and a payload larger than cachedPayloadLimit, marking the
// Task so that loadPayload reads it. The controllers write only a Task's
// status (the status subresource ignores the spec), and the CRD refuses any
// change of spec.payload, so a cached Task can never write its missing
// payload back.
func stripTask(obj any) (any, error) {
	t, ok := obj.(*dtqv1alpha1.Task)
	if !ok {
		return obj, nil
	}
	t.ManagedFields = nil
	if t.Spec.Payload != nil && len(t.Spec.Payload.Raw) > cachedPayloadLimit {
		t.Spec.Payload = nil
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[annotationPayloadOmitted] = "true"
	}
	return t, nil
}

// loadPayload reads the Task's payload from the API server into req when the
// cache dropped it; req already holds a payload the cache kept. A Task
// deleted meanwhile has nothing left to submit (errTaskGone).
func (r *TaskReconciler) loadPayload(ctx context.Context, task *dtqv1alpha1.Task, req *broker.SubmitRequest) error {
	if task.Spec.Payload != nil || task.Annotations[annotationPayloadOmitted] == "" {
		return nil
	}
	full := &dtqv1alpha1.Task{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(task), full); err != nil {
		if apierrors.IsNotFound(err) {
			return errTaskGone
		}
		return fmt.Errorf("read task payload: %w", err)
	}
	if full.UID != task.UID {
		return errTaskGone
	}
	if full.Spec.Payload != nil {
		req.Payload = full.Spec.Payload.Raw
	}
	return nil
}

// errTaskGone: the Task was deleted (or replaced by a new object of the same
// name) between the cache read and the payload read.
var errTaskGone = errors.New("task deleted before submission")

// readBack syncs a Task that is already in Redis (its own task, or the
// original it mirrors as a duplicate) from the engine, without submitting it
// again. done=false when the Task was never submitted, or when its task is no
// longer in Redis: then it is submitted (again).
func (r *TaskReconciler) readBack(ctx context.Context, task *dtqv1alpha1.Task, prev, next *dtqv1alpha1.TaskStatus) (outcome, bool, error) {
	id := r.submittedID(task, prev)
	if id == "" {
		return outcome{}, false, nil
	}
	info, err := r.Engine.GetTask(ctx, queueRef(task), id)
	switch {
	case errors.Is(err, broker.ErrTaskNotFound):
		return outcome{}, false, nil
	case err != nil:
		return outcome{}, true, fmt.Errorf("get task %s: %w", id, err)
	}
	dup := id != string(task.UID)
	applyTaskInfo(next, task, info, dup)
	r.setSubmitted(next, task, info, dup)
	if v, ok := r.submitted.Load(task.UID); ok { // a status not written yet (held back) has not kept it
		r.setRequestMatch(next, task, id, v.(submission).matches)
	}
	return outcome{info: &info}, true, nil
}

// submittedID is the task a submitted Task follows in Redis: the one this
// manager submitted it as, else the one its status names; "" when none.
func (r *TaskReconciler) submittedID(task *dtqv1alpha1.Task, st *dtqv1alpha1.TaskStatus) string {
	if v, ok := r.submitted.Load(task.UID); ok {
		return v.(submission).id
	}
	if i := st.Idempotency; i != nil && i.Duplicate && i.TaskID != "" {
		return i.TaskID
	}
	return st.TaskID
}
