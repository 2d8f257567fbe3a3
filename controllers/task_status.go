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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// Status field limits (the CRD's maxLength).
const (
	maxResult     = 4096
	maxLastError  = 1024
	maxWaitReason = 256
)

// Event reasons besides the condition reasons.
const (
	EventReasonSubmitted = dtqv1alpha1.ReasonSubmitted
	EventReasonDuplicate = dtqv1alpha1.ReasonDuplicate
	// EventReasonRequestMismatch (a warning) replaces Duplicate when the
	// key's task was submitted with another type or payload.
	EventReasonRequestMismatch = dtqv1alpha1.TaskRequestMismatch
	EventReasonSucceeded       = string(dtqv1alpha1.TaskSucceeded)
	EventReasonFailed          = string(dtqv1alpha1.TaskFailed)
	EventReasonDeadLettered    = string(dtqv1alpha1.TaskDeadLettered)
	EventReasonCancelled       = string(dtqv1alpha1.TaskCancelled)
	EventReasonExpired         = string(dtqv1alpha1.TaskExpired)
	EventReasonScaled          = "Scaled"
)

// submitRequest is the engine request of a Task. The ID is the Task's UID, and
// times are relative to the Task's creation, so every reconcile of one Task
// sends the same request.
func submitRequest(t *dtqv1alpha1.Task) broker.SubmitRequest {
	req := broker.SubmitRequest{
		ID:             string(t.UID),
		Type:           t.Spec.Type,
		IdempotencyKey: t.Spec.IdempotencyKey,
		Priority:       5,
		FromTaskCR:     true,
		FlowKey:        t.Spec.FlowKey,
	}
	if t.Spec.Payload != nil {
		req.Payload = t.Spec.Payload.Raw
	}
	if t.Spec.Priority != nil {
		req.Priority = int(*t.Spec.Priority)
	}
	if t.Spec.MaxAttempts != nil {
		req.MaxAttempts = int(*t.Spec.MaxAttempts)
	}
	if t.Spec.Timeout != nil {
		req.Timeout = t.Spec.Timeout.Duration
	}
	created := t.CreationTimestamp.Time
	switch {
	case t.Spec.Delay != nil:
		req.NotBefore = created.Add(t.Spec.Delay.Duration)
	case t.Spec.NotBefore != nil:
		req.NotBefore = t.Spec.NotBefore.Time
	}
	if t.Spec.TTL != nil {
		req.ExpiresAt = created.Add(t.Spec.TTL.Duration)
	}
	return req
}

// applyTaskInfo copies the engine's task record into st. dup says info is the
// original task owning this Task's idempotency key, not this Task's own.
func applyTaskInfo(st *dtqv1alpha1.TaskStatus, t *dtqv1alpha1.Task, info broker.TaskInfo, dup bool) {
	st.State = dtqv1alpha1.TaskState(info.State)
	if !dup {
		st.TaskID = info.ID
	}
	st.Attempt = int32(info.Attempt)
	st.StartedAt = ptrTime(info.StartedAt)
	st.FinishedAt = ptrTime(info.FinishedAt)
	st.WorkerID = info.WorkerID
	st.Result, st.ResultTruncated = "", info.ResultTruncated
	if len(info.Result) > 0 {
		st.Result = string(info.Result)
		if len(st.Result) > maxResult {
			st.Result, st.ResultTruncated = st.Result[:maxResult], true
		}
	}
	st.LastError = truncate(info.LastError, maxLastError)
	st.WaitReason = ""
	if info.State == broker.StateQueued {
		st.WaitReason = truncate(info.WaitReason, maxWaitReason)
	}
	if t.Spec.IdempotencyKey == "" {
		st.Idempotency = nil
		return
	}
	var matches *bool // learnt at submission (setRequestMatch), kept while the Task follows its task
	if st.Idempotency != nil {
		matches = st.Idempotency.RequestMatches
	}
	st.Idempotency = &dtqv1alpha1.TaskIdempotency{
		Key:            t.Spec.IdempotencyKey,
		State:          idempotencyState(info.State),
		TaskID:         info.ID,
		Duplicate:      dup,
		RequestMatches: matches,
	}
}

// idempotencyState is the seed's record state for a task state: Succeeded is
// completed, every other terminal state failed, the rest processing.
func idempotencyState(s broker.State) dtqv1alpha1.IdempotencyState {
	switch {
	case s == broker.StateSucceeded:
		return dtqv1alpha1.IdempotencyCompleted
	case s.Terminal():
		return dtqv1alpha1.IdempotencyFailed
	}
	return dtqv1alpha1.IdempotencyProcessing
}

// milestone is the Kubernetes Event for a status transition, if any.
func milestone(prev, next *dtqv1alpha1.TaskStatus) (eventType, reason, note string, ok bool) {
	dup := next.Idempotency != nil && next.Idempotency.Duplicate
	ranAgain := !equality.Semantic.DeepEqual(prev.History, next.History)
	switch {
	case ranAgain && !next.State.Finished():
		last := next.History[len(next.History)-1]
		return corev1.EventTypeNormal, EventReasonRetried,
			fmt.Sprintf("Task runs again from attempt 1; the previous run ended %s after %d attempt(s)", last.State, last.Attempts), true
	case next.State.Finished() && (!prev.State.Finished() || ranAgain):
		if dup && next.Idempotency.State != dtqv1alpha1.IdempotencyProcessing {
			return duplicateEvent(next.Idempotency,
				fmt.Sprintf("Replayed task %s (%s) for idempotency key %q", next.Idempotency.TaskID, next.State, next.Idempotency.Key))
		}
		switch next.State {
		case dtqv1alpha1.TaskSucceeded:
			return corev1.EventTypeNormal, EventReasonSucceeded, fmt.Sprintf("Task succeeded on attempt %d", next.Attempt), true
		case dtqv1alpha1.TaskCancelled:
			return corev1.EventTypeNormal, EventReasonCancelled, "Task cancelled", true
		default:
			return corev1.EventTypeWarning, string(next.State), fmt.Sprintf("Task %s: %s", next.State, next.LastError), true
		}
	case dup && (prev.Idempotency == nil || !prev.Idempotency.Duplicate):
		return duplicateEvent(next.Idempotency,
			fmt.Sprintf("Idempotency key %q is owned by in-progress task %s", next.Idempotency.Key, next.Idempotency.TaskID))
	case next.TaskID != "" && prev.TaskID == "":
		return corev1.EventTypeNormal, EventReasonSubmitted, "Task queued as " + next.TaskID, true
	}
	return "", "", "", false
}

// duplicateEvent is the Event of a duplicate Task: Duplicate, or a
// RequestMismatch warning when its request did not match the key's task's.
func duplicateEvent(i *dtqv1alpha1.TaskIdempotency, note string) (eventType, reason, _ string, ok bool) {
	if i.RequestMatches != nil && !*i.RequestMatches {
		return corev1.EventTypeWarning, EventReasonRequestMismatch,
			note + "; that task was submitted with another type or payload, and this Task's payload never runs", true
	}
	return corev1.EventTypeNormal, EventReasonDuplicate, note, true
}

func (r *TaskReconciler) recordMilestones(t *dtqv1alpha1.Task, prev, next *dtqv1alpha1.TaskStatus) {
	if r.Recorder == nil {
		return
	}
	if typ, reason, note, ok := milestone(prev, next); ok {
		if r.RoutineEvents || (reason != EventReasonSubmitted && reason != EventReasonSucceeded) {
			r.Recorder.Eventf(t, nil, typ, reason, "Sync", "%s", note)
		}
		return
	}
	if c := findCondition(next.Conditions, dtqv1alpha1.TaskSubmitted); c != nil && c.Status == metav1.ConditionFalse {
		if p := findCondition(prev.Conditions, dtqv1alpha1.TaskSubmitted); p == nil || p.Reason != c.Reason {
			r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, c.Reason, "Submit", "%s", c.Message)
		}
	}
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// ptrTime returns t at the API's second precision, or nil when zero, so a
// status computed in memory compares equal to the one read back.
func ptrTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
