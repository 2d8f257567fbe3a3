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
	"slices"
	"time"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/schedule"
)

const (
	// onTimeWindow is how late a slot may be reached and still be on time
	// (startingDeadlineSeconds, when shorter, is the window): at most a
	// minute, so at most one slot of a cron expression is on time.
	onTimeWindow = time.Minute
	// maxSlotsCounted bounds the slots one reconcile walks (a year of
	// minutes is about half of it); the next reconcile goes on from there.
	maxSlotsCounted = 1_000_000
)

// slotPlan is what to do with the slots since the schedule's cursor.
type slotPlan struct {
	// run are the slots to run, oldest first, including late slots whose
	// run exists already.
	run []time.Time
	// caughtUp counts the late slots in run that have no run yet, the ones
	// the catch-up policy picked.
	caughtUp int
	// missed counts the late slots not run: older than
	// startingDeadlineSeconds, or not picked by the catch-up policy.
	missed int64
	// skipped counts the slots that passed while suspended (skipReason
	// Suspended) or while the schedule was invalid (InvalidSchedule).
	skipped    int64
	skipReason string
	// lastSkipped is the newest slot missed or skipped.
	lastSkipped time.Time
	// cursor is the newest slot handled; zero when there was none.
	cursor time.Time
}

// cursorOr is the plan's cursor, or prev when the plan handled no slot.
func (p slotPlan) cursorOr(prev time.Time) time.Time {
	if p.cursor.IsZero() {
		return prev
	}
	return p.cursor
}

// planSlots splits the slots in (cursor, now] into the ones to run and the
// ones missed. A slot reached within a minute of its time (or within
// startingDeadlineSeconds, if shorter) is on time, and runs. Older ones are
// late: those older than startingDeadlineSeconds are missed, as a CronJob
// misses them, and of the others the catch-up policy picks which run: none
// (Skip), the newest (RunLatest) or the newest maxRuns (RunAll). While
// suspended no slot runs (a slot whose run exists is counted as run, not
// suspended).
//
// ran are the slots whose run Task exists. A late slot among them was
// handled by a reconcile whose cursor write did not land (its manager
// stopped in between): the late slots up to the newest such one are taken as
// that reconcile left them, those with a run ran and the others were missed,
// and the rules above apply only to the late slots after it, as if the
// cursor had been written. Pure: the same input gives every manager the same
// plan.
func planSlots(s *schedule.Schedule, spec *dtqv1alpha1.TaskScheduleSpec, cursor, now time.Time, ran []time.Time) slotPlan {
	window := onTimeWindow
	var expiredUntil time.Time // late slots at or before it are past the deadline; zero: no deadline
	if spec.StartingDeadlineSeconds != nil {
		deadline := time.Duration(*spec.StartingDeadlineSeconds) * time.Second
		window = min(window, deadline)
		expiredUntil = now.Add(-deadline)
	}
	keepLate := 0
	switch policy, maxRuns := catchUpOf(spec); policy {
	case dtqv1alpha1.CatchUpRunLatest:
		keepLate = 1
	case dtqv1alpha1.CatchUpRunAll:
		keepLate = int(maxRuns)
	}

	var p slotPlan
	lateUntil := now.Add(-window)
	if handled := handledSlots(s, ran, cursor, lateUntil); len(handled) > 0 {
		p.takeHandled(s, cursor, handled)
		cursor = p.cursor
	}
	// One more late slot than may run, to name the newest missed one.
	late, nLate := s.Slots(cursor, lateUntil, keepLate+1, maxSlotsCounted)
	var onTime []time.Time
	nOnTime := 0
	if nLate < maxSlotsCounted { // else the next reconcile goes on from late's newest
		onTime, nOnTime = s.Slots(later(cursor, lateUntil), now, maxSlotsCounted, maxSlotsCounted)
	}
	switch {
	case nOnTime > 0:
		p.cursor = onTime[len(onTime)-1]
	case nLate > 0:
		p.cursor = late[len(late)-1]
	default:
		return p
	}
	if spec.Suspend {
		// An on-time slot whose run exists ran before the suspend (the
		// reconcile that ran it lost its cursor write to the suspend's own
		// edit of the object): it ran, like a handled late slot.
		ranOnTime := handledSlots(s, ran, later(cursor, lateUntil), now)
		p.run = append(p.run, ranOnTime...)
		p.skipped = int64(nLate + nOnTime - len(ranOnTime))
		for _, t := range slices.Backward(append(slices.Clone(late), onTime...)) {
			if !slices.Contains(ranOnTime, t) {
				p.lastSkipped, p.skipReason = t, dtqv1alpha1.ReasonSuspended
				break
			}
		}
		return p
	}
	runLate := late[len(late)-min(keepLate, len(late)):]
	for len(runLate) > 0 && !runLate[0].After(expiredUntil) {
		runLate = runLate[1:] // past startingDeadlineSeconds: missed, whatever the policy
	}
	p.caughtUp = len(runLate)
	p.run = append(append(p.run, runLate...), onTime...)
	if missed := nLate - len(runLate); missed > 0 {
		p.missed += int64(missed)
		p.lastSkipped = late[len(late)-len(runLate)-1]
	}
	return p
}

// planInvalid counts the slots in (cursor, now] as skipped with reason
// InvalidSchedule: they passed while the schedule could not be parsed, and
// fixing it runs none of them (as resuming runs no suspended slot).
func planInvalid(s *schedule.Schedule, cursor, now time.Time) slotPlan {
	newest, n := s.Slots(cursor, now, 1, maxSlotsCounted)
	if n == 0 {
		return slotPlan{}
	}
	t := newest[len(newest)-1]
	return slotPlan{skipped: int64(n), skipReason: dtqv1alpha1.ReasonInvalidSchedule, lastSkipped: t, cursor: t}
}

// catchUpOf is the spec's catch-up policy and RunAll bound, defaulted.
func catchUpOf(spec *dtqv1alpha1.TaskScheduleSpec) (dtqv1alpha1.CatchUpPolicy, int32) {
	policy, maxRuns := dtqv1alpha1.CatchUpRunLatest, int32(dtqv1alpha1.DefaultCatchUpMaxRuns)
	if spec.CatchUp != nil {
		if spec.CatchUp.Policy != "" {
			policy = spec.CatchUp.Policy
		}
		if spec.CatchUp.MaxRuns > 0 {
			maxRuns = spec.CatchUp.MaxRuns
		}
	}
	return policy, maxRuns
}

// handledSlots are the slots of ran in (cursor, lateUntil], oldest first:
// late slots whose run exists.
func handledSlots(s *schedule.Schedule, ran []time.Time, cursor, lateUntil time.Time) []time.Time {
	var out []time.Time
	for _, t := range ran {
		// A run of a slot the schedule no longer has (its spec changed) is
		// no slot to count.
		if t.After(cursor) && !t.After(lateUntil) && s.Next(t.Add(-time.Nanosecond)).Equal(t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.CompactFunc(out, time.Time.Equal)
}

// takeHandled plans the slots in (cursor, newest handled] as a reconcile
// that did not write its cursor left them: the handled slots ran, the others
// were missed. The plan's cursor is the newest handled slot.
func (p *slotPlan) takeHandled(s *schedule.Schedule, cursor time.Time, handled []time.Time) {
	p.cursor = handled[len(handled)-1]
	p.run = append(p.run, handled...)
	// The newest unhandled slot is among the len(handled)+1 newest slots.
	newest, n := s.Slots(cursor, p.cursor, len(handled)+1, maxSlotsCounted)
	if missed := n - len(handled); missed > 0 {
		p.missed = int64(missed)
		for i := len(newest) - 1; i >= 0; i-- {
			if _, found := slices.BinarySearchFunc(handled, newest[i], time.Time.Compare); !found {
				p.lastSkipped = newest[i]
				break
			}
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
