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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/schedule"
)

// TaskScheduleReconciler creates a Task for each slot of a TaskSchedule.
//
// Exactly one Task per slot, whatever restarts, second managers or clock
// jumps happen: a slot's Task has a name derived from the slot
// (runName), so etcd refuses a second one (AlreadyExists, taken as done), and
// the idempotency key schedule/<uid>/<slot> (runKey), so Redis refuses to run
// a second one should the first be deleted meanwhile. status.lastHandledSlot,
// the newest slot handled, is written after the Tasks, with the resourceVersion
// read (optimistic concurrency): a manager that lost the race re-reads and
// finds nothing left to do, and no slot at or before it is handled again.
// The reconciler wakes at each slot through a timer of its Clock
// (scheduleWakeups), so tests drive it with a fake clock.
type TaskScheduleReconciler struct {
	client.Client
	Clock    clock.Clock
	Recorder events.EventRecorder

	wakeups *scheduleWakeups
}

// +kubebuilder:rbac:groups=dtq.dev,resources=taskschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=dtq.dev,resources=taskschedules/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=dtq.dev,resources=tasks,verbs=get;list;watch;create;patch;delete

// Reconcile handles the slots due since the last one, the manual trigger and
// the history of a TaskSchedule, then writes its status.
func (r *TaskScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ts := &dtqv1alpha1.TaskSchedule{}
	if err := r.Get(ctx, req.NamespacedName, ts); err != nil {
		if apierrors.IsNotFound(err) {
			r.wakeups.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ts.DeletionTimestamp.IsZero() {
		r.wakeups.forget(req.NamespacedName)
		return ctrl.Result{}, nil // the Tasks go with it (owner references)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("schedule", ts.Spec.Schedule, "timeZone", ts.Spec.TimeZone))
	return r.reconcile(ctx, ts)
}

func (r *TaskScheduleReconciler) reconcile(ctx context.Context, ts *dtqv1alpha1.TaskSchedule) (ctrl.Result, error) {
	now := r.Clock.Now()
	next := ts.Status.DeepCopy()
	next.ObservedGeneration = ts.Generation
	if ts.Generation == 1 {
		// The spec is as created: a triggerGeneration it was created with
		// runs nothing. (A status not yet written says nothing: the first
		// write may have conflicted with a raise.)
		next.ObservedTriggerGeneration = ts.Spec.TriggerGeneration
	}
	runs, err := r.listRuns(ctx, ts)
	if err != nil {
		return ctrl.Result{}, err
	}
	sched, err := schedule.Parse(ts.Spec.Schedule, string(ts.Spec.TimeZone))
	if err != nil {
		// The slots that pass meanwhile are counted when it parses again
		// (planInvalid); a manual trigger still runs.
		setScheduleReady(next, ts, false, dtqv1alpha1.ReasonInvalidSchedule, err.Error())
		next.NextScheduleTime = nil
		if _, err := r.runTrigger(ctx, ts, next, runs); err != nil {
			return r.runFailed(ctx, ts, next, err)
		}
		return ctrl.Result{}, r.writeStatus(ctx, ts, next)
	}
	cursor := scheduleCursor(ts)
	var plan slotPlan
	if wasInvalid(ts) {
		plan = planInvalid(sched, cursor, now)
	} else {
		plan = planSlots(sched, &ts.Spec, cursor, now, runs.slots(ts))
	}
	// After a backwards clock jump the cursor is ahead of now: nothing is
	// due before the slot after it.
	nextSlot := sched.Next(later(plan.cursorOr(cursor), now))
	if err := r.runSlots(ctx, ts, next, runs, plan); err != nil {
		r.setObserved(next, ts, runs, nextSlot)
		return r.runFailed(ctx, ts, next, err)
	}
	collapsed, err := r.runTrigger(ctx, ts, next, runs)
	if err != nil {
		r.setObserved(next, ts, runs, nextSlot)
		return r.runFailed(ctx, ts, next, err)
	}
	if err := r.pruneHistory(ctx, ts, runs); err != nil {
		return ctrl.Result{}, err
	}
	r.setObserved(next, ts, runs, nextSlot)
	if err := r.writeStatus(ctx, ts, next); err != nil {
		if apierrors.IsConflict(err) {
			// Another manager (or our previous write, not yet in the cache)
			// moved the schedule on: look again with the newer version.
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	r.recordSkips(ts, plan, collapsed)
	if !nextSlot.IsZero() {
		r.wakeups.at(ts, nextSlot)
	}
	return ctrl.Result{}, nil
}

// runFailed reports a run whose Task the API server refused: Ready=False
// (RunCreationFailed, unless the schedule is invalid, which Ready keeps
// saying) with the refusal, a Warning Event, and the status of what was done
// before it. The error goes back to the work queue, which tries again with
// backoff.
func (r *TaskScheduleReconciler) runFailed(ctx context.Context, ts *dtqv1alpha1.TaskSchedule, next *dtqv1alpha1.TaskScheduleStatus,
	err error) (ctrl.Result, error) {
	var failed *runCreationError
	if !errors.As(err, &failed) {
		return ctrl.Result{}, err
	}
	if c := meta.FindStatusCondition(next.Conditions, dtqv1alpha1.TaskScheduleReady); c == nil || c.Reason != dtqv1alpha1.ReasonInvalidSchedule {
		setScheduleReady(next, ts, false, dtqv1alpha1.ReasonRunCreationFailed, failed.Error())
	}
	r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, dtqv1alpha1.ReasonRunCreationFailed, "Run", "%s", failed.Error())
	if werr := r.writeStatus(ctx, ts, next); werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	return ctrl.Result{}, err
}

// recordSkips emits the Warning Events of a plan's missed slots and of
// collapsed trigger generations, once the status that counts them is written
// (a reconcile whose write conflicts plans again, and would say it twice).
func (r *TaskScheduleReconciler) recordSkips(ts *dtqv1alpha1.TaskSchedule, plan slotPlan, collapsed int64) {
	if plan.missed > 0 {
		r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, dtqv1alpha1.ReasonMissedDeadline, "Skip",
			"Missed %d slot(s), the newest at %s: reached late, past startingDeadlineSeconds or not picked by the catch-up policy; catch-up ran %d",
			plan.missed, plan.lastSkipped.UTC().Format(time.RFC3339), plan.caughtUp)
	}
	if collapsed > 0 {
		r.Recorder.Eventf(ts, nil, corev1.EventTypeWarning, dtqv1alpha1.ReasonTriggersCollapsed, "Trigger",
			"triggerGeneration rose by more than %d: ran the newest %d generations, not the %d before them",
			dtqv1alpha1.MaxTriggerRunsPerReconcile, dtqv1alpha1.MaxTriggerRunsPerReconcile, collapsed)
	}
}

// wasInvalid reports whether the status last written says the schedule did
// not parse.
func wasInvalid(ts *dtqv1alpha1.TaskSchedule) bool {
	c := meta.FindStatusCondition(ts.Status.Conditions, dtqv1alpha1.TaskScheduleReady)
	return c != nil && c.Reason == dtqv1alpha1.ReasonInvalidSchedule
}

// scheduleCursor is the newest slot handled: status.lastHandledSlot, or the
// schedule's creation (its first slot is the first one after it). A manager
// of dtq 7c16315 or earlier (one upgraded, or still leading while the new one
// starts) keeps its cursor in lastScheduleTime and leaves lastHandledSlot as
// it was, so the later of the two is the cursor: this version never sets
// lastScheduleTime past lastHandledSlot.
func scheduleCursor(ts *dtqv1alpha1.TaskSchedule) time.Time {
	cursor := ts.CreationTimestamp.Time
	for _, t := range []*metav1.Time{ts.Status.LastHandledSlot, ts.Status.LastScheduleTime} {
		if t != nil && t.After(cursor) {
			cursor = t.Time
		}
	}
	return cursor
}

// SetupWithManager watches TaskSchedules, the Tasks they own and the wake-ups
// of their slots.
func (r *TaskScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	wake := make(chan event.TypedGenericEvent[*dtqv1alpha1.TaskSchedule], 1024)
	dc, ok := r.Clock.(clock.WithDelayedExecution)
	if !ok {
		return fmt.Errorf("taskschedule controller: clock %T has no AfterFunc", r.Clock)
	}
	r.wakeups = newScheduleWakeups(dc, wake)
	err := ctrl.NewControllerManagedBy(mgr).
		For(&dtqv1alpha1.TaskSchedule{}).
		Owns(&dtqv1alpha1.Task{}).
		WatchesRawSource(source.Channel(wake, &handler.TypedEnqueueRequestForObject[*dtqv1alpha1.TaskSchedule]{})).
		Named("taskschedule").
		Complete(r)
	if err != nil {
		return fmt.Errorf("build taskschedule controller: %w", err)
	}
	return nil
}
