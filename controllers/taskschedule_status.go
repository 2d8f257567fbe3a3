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
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// maxActiveListed bounds status.active (the CRD's maxItems).
const maxActiveListed = 100

// setObserved fills in what the status reads off the runs and the schedule:
// the unfinished runs, the newest success, the next slot, Ready.
func (r *TaskScheduleReconciler) setObserved(next *dtqv1alpha1.TaskScheduleStatus, ts *dtqv1alpha1.TaskSchedule,
	runs scheduleRuns, nextSlot time.Time) {
	active := runs.active()
	next.ActiveCount = int32(len(active))
	next.Active = nil
	for _, t := range active[:min(len(active), maxActiveListed)] {
		run := dtqv1alpha1.ScheduleRun{Name: t.Name}
		if s, err := time.Parse(time.RFC3339, t.Annotations[AnnotationSlot]); err == nil {
			run.Slot = &metav1.Time{Time: s}
		}
		next.Active = append(next.Active, run)
	}
	for _, t := range runs {
		if t.Status.State == dtqv1alpha1.TaskSucceeded && t.Status.FinishedAt != nil &&
			(next.LastSuccessfulTime == nil || next.LastSuccessfulTime.Before(t.Status.FinishedAt)) {
			next.LastSuccessfulTime = t.Status.FinishedAt.DeepCopy()
		}
	}
	next.NextScheduleTime = nil
	if !nextSlot.IsZero() {
		next.NextScheduleTime = &metav1.Time{Time: nextSlot}
	}
	if ts.Spec.Suspend {
		setScheduleReady(next, ts, true, dtqv1alpha1.ReasonSuspended, "Suspended: slots pass without runs")
		return
	}
	setScheduleReady(next, ts, true, dtqv1alpha1.ReasonScheduled, fmt.Sprintf("Next run at %s", nextSlot.UTC().Format(time.RFC3339)))
}

func setScheduleReady(st *dtqv1alpha1.TaskScheduleStatus, ts *dtqv1alpha1.TaskSchedule, ready bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: dtqv1alpha1.TaskScheduleReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: ts.Generation,
	})
}

// writeStatus writes next if it changed, with ts's resourceVersion: a
// schedule changed since it was read (another manager handled the slot)
// makes it fail with a conflict rather than overwrite.
func (r *TaskScheduleReconciler) writeStatus(ctx context.Context, ts *dtqv1alpha1.TaskSchedule, next *dtqv1alpha1.TaskScheduleStatus) error {
	if equality.Semantic.DeepEqual(&ts.Status, next) {
		return nil
	}
	obj := ts.DeepCopy()
	obj.Status = *next
	if err := r.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("write schedule status: %w", err)
	}
	return nil
}
