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
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/schedule"
)

const (
	// LabelSchedule on a Task names the TaskSchedule that created it.
	LabelSchedule = "dtq.dev/schedule"
	// AnnotationSlot on a schedule's Task is its slot (RFC 3339, UTC);
	// AnnotationTrigger is the triggerGeneration of a manual run.
	AnnotationSlot    = "dtq.dev/slot"
	AnnotationTrigger = "dtq.dev/trigger-generation"
)

// runName is the Task of a slot: the schedule's name and the slot's Unix
// time, as a CronJob names its Jobs, so every manager picks the same name.
func runName(ts *dtqv1alpha1.TaskSchedule, slot time.Time) string {
	return fmt.Sprintf("%s-%d", ts.Name, slot.Unix())
}

// runKey is the idempotency key of a slot's run: schedule/<uid>/<slot UTC>.
func runKey(ts *dtqv1alpha1.TaskSchedule, slot time.Time) string {
	return fmt.Sprintf("schedule/%s/%s", ts.UID, slot.UTC().Format(time.RFC3339))
}

// desiredRunTask is the Task of a slot (trigger 0) or of the manual trigger
// generation trigger (slot zero).
func desiredRunTask(ts *dtqv1alpha1.TaskSchedule, slot time.Time, trigger int64) *dtqv1alpha1.Task {
	tpl := &ts.Spec.Template
	labels := map[string]string{}
	for k, v := range tpl.Labels {
		labels[k] = string(v)
	}
	labels[LabelSchedule] = ts.Name
	t := &dtqv1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Labels: labels},
		Spec: dtqv1alpha1.TaskSpec{
			Queue: tpl.Queue, Type: tpl.Type, FlowKey: tpl.FlowKey, Payload: tpl.Payload.DeepCopy(), Priority: tpl.Priority,
			MaxAttempts: tpl.MaxAttempts, Timeout: tpl.Timeout, TTL: tpl.TTL, TTLSecondsAfterFinished: tpl.TTLSecondsAfterFinished,
		},
	}
	if trigger > 0 {
		t.Name = fmt.Sprintf("%s-manual-%d", ts.Name, trigger)
		t.Annotations = map[string]string{AnnotationTrigger: strconv.FormatInt(trigger, 10)}
		t.Spec.IdempotencyKey = fmt.Sprintf("schedule/%s/manual/%d", ts.UID, trigger)
		return t
	}
	t.Name = runName(ts, slot)
	t.Annotations = map[string]string{AnnotationSlot: slot.UTC().Format(time.RFC3339)}
	t.Spec.IdempotencyKey = runKey(ts, slot)
	if ts.Spec.Jitter != nil {
		if d := schedule.Jitter(string(ts.UID), slot, ts.Spec.Jitter.Duration); d > 0 {
			t.Spec.NotBefore = &metav1.Time{Time: slot.Add(d)}
			if tpl.TTL != nil {
				// A Task's ttl counts from its creation, at the slot or
				// later: the run gets at least ttl after its notBefore.
				t.Spec.TTL = &metav1.Duration{Duration: tpl.TTL.Duration + d}
			}
		}
	}
	return t
}

// scheduleRuns are the Tasks a schedule owns, by name.
type scheduleRuns map[string]*dtqv1alpha1.Task

func (r *TaskScheduleReconciler) listRuns(ctx context.Context, ts *dtqv1alpha1.TaskSchedule) (scheduleRuns, error) {
	var list dtqv1alpha1.TaskList
	if err := r.List(ctx, &list, client.InNamespace(ts.Namespace), client.MatchingLabels{LabelSchedule: ts.Name}); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs := scheduleRuns{}
	for i := range list.Items {
		t := &list.Items[i]
		if metav1.IsControlledBy(t, ts) {
			runs[t.Name] = t
		}
	}
	return runs, nil
}

// slots are the slots of the runs named as runName names them (a Task that
// only claims a slot is none of its runs).
func (runs scheduleRuns) slots(ts *dtqv1alpha1.TaskSchedule) []time.Time {
	var out []time.Time
	for name, t := range runs {
		if s, err := time.Parse(time.RFC3339, t.Annotations[AnnotationSlot]); err == nil && name == runName(ts, s) {
			out = append(out, s)
		}
	}
	return out
}

// active are the unfinished runs, by name.
func (runs scheduleRuns) active() []*dtqv1alpha1.Task {
	var out []*dtqv1alpha1.Task
	for _, t := range runs {
		if !t.Status.State.Finished() && t.DeletionTimestamp.IsZero() {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// runCreationError is a run's Task the API server refused (a ResourceQuota,
// an admission policy): the schedule reports it (Ready=False, reason
// RunCreationFailed) and tries again.
type runCreationError struct {
	run string
	err error
}

func (e *runCreationError) Error() string { return fmt.Sprintf("create run %s: %v", e.run, e.err) }
func (e *runCreationError) Unwrap() error { return e.err }

// runSlots applies plan: counts the missed and skipped slots and runs the
// others under the concurrency policy. When a run's Task cannot be created,
// the cursor stops just before its slot, so that slot and the ones after it
// are planned again.
func (r *TaskScheduleReconciler) runSlots(ctx context.Context, ts *dtqv1alpha1.TaskSchedule, next *dtqv1alpha1.TaskScheduleStatus,
	runs scheduleRuns, plan slotPlan) error {
	if !plan.cursor.IsZero() {
		next.LastHandledSlot = &metav1.Time{Time: plan.cursor}
	}
	if plan.skipped > 0 {
		next.SkippedSlots += plan.skipped
		skipped(next, plan.lastSkipped, plan.skipReason)
	}
	if plan.missed > 0 {
		next.MissedSlots += plan.missed
		skipped(next, plan.lastSkipped, dtqv1alpha1.ReasonMissedDeadline)
	}
	for _, slot := range plan.run {
		if _, done := runs[runName(ts, slot)]; done {
			// Created by a reconcile whose status write did not land.
			next.Runs++
			next.LastScheduleTime = &metav1.Time{Time: slot}
			continue
		}
		if active := runs.active(); len(active) > 0 {
			switch ts.Spec.ConcurrencyPolicy {
			case dtqv1alpha1.ConcurrencyForbid:
				next.SkippedSlots++
				skipped(next, slot, dtqv1alpha1.ReasonConcurrencyForbidden)
				r.Recorder.Eventf(ts, active[0], corev1.EventTypeWarning, dtqv1alpha1.ReasonConcurrencyForbidden, "Skip",
					"Skipped the slot at %s: run %s is unfinished", slot.UTC().Format(time.RFC3339), active[0].Name)
				continue
			case dtqv1alpha1.ConcurrencyReplace:
				if err := r.cancelRuns(ctx, ts, active); err != nil {
					return err
				}
			}
		}
		task, err := r.createRun(ctx, ts, desiredRunTask(ts, slot, 0))
		if err != nil {
			// Slots are whole seconds: none lies between the two.
			next.LastHandledSlot = &metav1.Time{Time: slot.Add(-time.Second)}
			return err
		}
		runs[task.Name] = task
		next.Runs++
		next.LastScheduleTime = &metav1.Time{Time: slot}
	}
	return nil
}

func skipped(st *dtqv1alpha1.TaskScheduleStatus, slot time.Time, reason string) {
	st.LastSkipReason = reason
	st.LastSkippedSlot = &metav1.Time{Time: slot}
}

// runTrigger runs one manual run per generation of spec.triggerGeneration
// raised since the one observed, at most MaxTriggerRunsPerReconcile (the
// newest), and returns how many older generations ran nothing (none when it
// fails). A run is named after its generation, so a reconcile whose status
// write did not land creates none twice.
func (r *TaskScheduleReconciler) runTrigger(ctx context.Context, ts *dtqv1alpha1.TaskSchedule, next *dtqv1alpha1.TaskScheduleStatus,
	runs scheduleRuns) (collapsed int64, err error) {
	gen := ts.Spec.TriggerGeneration
	from := next.ObservedTriggerGeneration + 1
	if gen-from >= dtqv1alpha1.MaxTriggerRunsPerReconcile {
		collapsed = gen - dtqv1alpha1.MaxTriggerRunsPerReconcile + 1 - from
		from += collapsed
	}
	for g := from; g <= gen; g++ {
		task, err := r.createRun(ctx, ts, desiredRunTask(ts, time.Time{}, g))
		if err != nil {
			return 0, err
		}
		runs[task.Name] = task
		next.ObservedTriggerGeneration = g
		r.Recorder.Eventf(ts, task, corev1.EventTypeNormal, dtqv1alpha1.ReasonTriggered, "Trigger",
			"Triggered run %s (triggerGeneration %d)", task.Name, g)
	}
	return collapsed, nil
}

// createRun creates a run's Task; one that exists already (this slot was run
// by a manager whose status write did not land) is taken as done.
func (r *TaskScheduleReconciler) createRun(ctx context.Context, ts *dtqv1alpha1.TaskSchedule, task *dtqv1alpha1.Task) (*dtqv1alpha1.Task, error) {
	if err := controllerutil.SetControllerReference(ts, task, r.Scheme()); err != nil {
		return nil, fmt.Errorf("own run %s: %w", task.Name, err)
	}
	if err := r.Create(ctx, task); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return task, nil
		}
		return nil, &runCreationError{run: task.Name, err: err}
	}
	r.Recorder.Eventf(ts, task, corev1.EventTypeNormal, dtqv1alpha1.ReasonRunCreated, "Run", "Created run %s", task.Name)
	return task, nil
}

// cancelRuns sets spec.cancel on the unfinished runs (concurrencyPolicy Replace).
func (r *TaskScheduleReconciler) cancelRuns(ctx context.Context, ts *dtqv1alpha1.TaskSchedule, active []*dtqv1alpha1.Task) error {
	for _, t := range active {
		if t.Spec.Cancel {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":true}}`))
		if err := r.Patch(ctx, t.DeepCopy(), patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("cancel run %s: %w", t.Name, err)
		}
		t.Status.State = dtqv1alpha1.TaskCancelled // for this reconcile: no longer active
		r.Recorder.Eventf(ts, t, corev1.EventTypeNormal, dtqv1alpha1.ReasonRunReplaced, "Cancel", "Cancelled run %s to replace it", t.Name)
	}
	return nil
}

// pruneHistory deletes the oldest finished runs beyond the history limits.
func (r *TaskScheduleReconciler) pruneHistory(ctx context.Context, ts *dtqv1alpha1.TaskSchedule, runs scheduleRuns) error {
	var succeeded, failed []*dtqv1alpha1.Task
	for _, t := range runs {
		switch {
		case !t.DeletionTimestamp.IsZero() || !t.Status.State.Finished():
		case t.Status.State == dtqv1alpha1.TaskSucceeded:
			succeeded = append(succeeded, t)
		default:
			failed = append(failed, t)
		}
	}
	for _, group := range []struct {
		tasks []*dtqv1alpha1.Task
		limit *int32
		def   int
	}{
		{succeeded, ts.Spec.SuccessfulRunsHistoryLimit, dtqv1alpha1.DefaultSuccessfulRunsHistoryLimit},
		{failed, ts.Spec.FailedRunsHistoryLimit, dtqv1alpha1.DefaultFailedRunsHistoryLimit},
	} {
		limit := group.def
		if group.limit != nil {
			limit = int(*group.limit)
		}
		if len(group.tasks) <= limit {
			continue
		}
		sort.Slice(group.tasks, func(i, j int) bool {
			return group.tasks[i].CreationTimestamp.Before(&group.tasks[j].CreationTimestamp) ||
				group.tasks[i].CreationTimestamp.Equal(&group.tasks[j].CreationTimestamp) && group.tasks[i].Name < group.tasks[j].Name
		})
		for _, t := range group.tasks[:len(group.tasks)-limit] {
			if err := r.Delete(ctx, t, client.Preconditions{UID: &t.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete finished run %s: %w", t.Name, err)
			}
			delete(runs, t.Name)
		}
	}
	return nil
}
