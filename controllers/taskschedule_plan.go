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
	defaultStartingDeadline = 60 * time.Second
	defaultCatchUpMaxRuns   = 10
	// maxOnTimeSlots bounds the slots one reconcile runs on time (a
	// startingDeadlineSeconds much longer than the interval); older ones
	// are missed.
	maxOnTimeSlots = 100
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
	// missed counts the late slots the catch-up policy does not run;
	// suspended counts the slots that passed while suspended.
	missed, suspended int64
	// lastSkipped is the newest slot missed or suspended.
	lastSkipped time.Time
	// cursor is the newest slot handled; zero when there was none.
	cursor time.Time
}

// planSlots splits the slots in (cursor, now] into the ones to run and the
// ones missed. A slot is on time while now is within startingDeadlineSeconds
// of it: on-time slots run. Older ones are late, and the catch-up policy
// picks which of them run: none (Skip), the newest (RunLatest) or the newest
// maxRuns (RunAll). While suspended no slot runs (a slot whose run exists
// is counted as run, not suspended).
//
// ran are the slots whose run Task exists. A late slot among them was
// handled by a reconcile whose cursor write did not land (its manager
// stopped in between): the late slots up to the newest such one are taken as
// that reconcile left them, those with a run ran and the others were missed,
// and the catch-up policy applies only to the late slots after it, as if the
// cursor had been written. Pure: the same input gives every manager the same
// plan.
func planSlots(s *schedule.Schedule, spec *dtqv1alpha1.TaskScheduleSpec, cursor, now time.Time, ran []time.Time) slotPlan {
	deadline := defaultStartingDeadline
	if spec.StartingDeadlineSeconds != nil {
		deadline = time.Duration(*spec.StartingDeadlineSeconds) * time.Second
	}
	policy, maxRuns := dtqv1alpha1.CatchUpRunLatest, int32(defaultCatchUpMaxRuns)
	if spec.CatchUp != nil {
		if spec.CatchUp.Policy != "" {
			policy = spec.CatchUp.Policy
		}
		if spec.CatchUp.MaxRuns > 0 {
			maxRuns = spec.CatchUp.MaxRuns
		}
	}
	keepLate := 0
	switch policy {
	case dtqv1alpha1.CatchUpRunLatest:
		keepLate = 1
	case dtqv1alpha1.CatchUpRunAll:
		keepLate = int(maxRuns)
	}

	var p slotPlan
	lateUntil := now.Add(-deadline)
	if handled := handledSlots(s, ran, cursor, lateUntil); len(handled) > 0 {
		p.takeHandled(s, cursor, handled)
		cursor = p.cursor
	}
	// One more late slot than may run, to name the newest missed one.
	late, nLate := s.Slots(cursor, lateUntil, keepLate+1, maxSlotsCounted)
	var onTime []time.Time
	nOnTime := 0
	if nLate < maxSlotsCounted { // else the next reconcile goes on from late's newest
		onTime, nOnTime = s.Slots(later(cursor, lateUntil), now, maxOnTimeSlots, maxSlotsCounted)
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
		p.suspended = int64(nLate + nOnTime - len(ranOnTime))
		for _, t := range slices.Backward(append(slices.Clone(late), onTime...)) {
			if !slices.Contains(ranOnTime, t) {
				p.lastSkipped = t
				break
			}
		}
		return p
	}
	runLate := late[len(late)-min(keepLate, len(late)):]
	p.caughtUp = len(runLate)
	p.run = append(append(p.run, runLate...), onTime...)
	if missed := nLate - len(runLate); missed > 0 {
		p.missed += int64(missed)
		p.lastSkipped = late[len(late)-len(runLate)-1]
	}
	// On-time slots beyond maxOnTimeSlots are missed too (the oldest ones).
	p.missed += int64(nOnTime - len(onTime))
	return p
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
