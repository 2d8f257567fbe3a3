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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// setLifecycleConditions derives the conditions that tools read from the
// state, so they ride on the status write the state needs anyway:
//
//	state         Succeeded  Reconciling  Stalled
//	unfinished    -          True         -
//	Succeeded     True       -            -
//	other ending  False      -            True
//
// Their reason is the state, or the Submitted condition's reason while that
// is False (QueueNotFound, InvalidTask ...); the message adds lastError to a
// failure. A condition that does not apply is removed, not set False or
// Unknown: each one costs the API server CPU on every status write, and
// kstatus recommends absent abnormal-true conditions.
func (r *TaskReconciler) setLifecycleConditions(st *dtqv1alpha1.TaskStatus, task *dtqv1alpha1.Task) {
	state := st.State
	if state == "" {
		state = dtqv1alpha1.TaskPending
	}
	reason, msg := string(state), "Task "+string(state)
	if c := findCondition(st.Conditions, dtqv1alpha1.TaskSubmitted); c != nil && c.Status == metav1.ConditionFalse {
		reason, msg = c.Reason, c.Message
	} else if state.Finished() && state != dtqv1alpha1.TaskSucceeded && st.LastError != "" {
		msg += ": " + st.LastError
	}
	set := func(typ string, status metav1.ConditionStatus) { r.setCondition(st, task, typ, status, reason, msg) }
	remove := func(typ string) { meta.RemoveStatusCondition(&st.Conditions, typ) }
	remove(legacyComplete)
	switch {
	case !state.Finished():
		set(dtqv1alpha1.TaskReconciling, metav1.ConditionTrue)
		remove(dtqv1alpha1.TaskSucceededCondition)
		remove(dtqv1alpha1.TaskStalled)
	case state == dtqv1alpha1.TaskSucceeded:
		set(dtqv1alpha1.TaskSucceededCondition, metav1.ConditionTrue)
		remove(dtqv1alpha1.TaskReconciling)
		remove(dtqv1alpha1.TaskStalled)
	default:
		set(dtqv1alpha1.TaskSucceededCondition, metav1.ConditionFalse)
		set(dtqv1alpha1.TaskStalled, metav1.ConditionTrue)
		remove(dtqv1alpha1.TaskReconciling)
	}
}

// legacyComplete is the condition earlier versions set True on every terminal
// state; a status written now drops it (a retried Task would keep it otherwise).
const legacyComplete = "Complete"
