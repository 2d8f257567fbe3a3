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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/schedule"
)

func TestPlanSlots(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	catchUp := func(p dtqv1alpha1.CatchUpPolicy, max int32) *dtqv1alpha1.CatchUp {
		return &dtqv1alpha1.CatchUp{Policy: p, MaxRuns: max}
	}
	tests := map[string]struct {
		spec   dtqv1alpha1.TaskScheduleSpec
		cursor time.Time
		now    time.Time
		ran    []time.Time // slots whose run Task exists
		want   slotPlan
	}{
		"on time": {
			spec: dtqv1alpha1.TaskScheduleSpec{}, cursor: m(0), now: m(1).Add(time.Second),
			want: slotPlan{run: []time.Time{m(1)}, cursor: m(1)},
		},
		"nothing due": {
			spec: dtqv1alpha1.TaskScheduleSpec{}, cursor: m(1), now: m(1).Add(30 * time.Second),
			want: slotPlan{},
		},
		"clock behind the cursor": {
			spec: dtqv1alpha1.TaskScheduleSpec{}, cursor: m(10), now: m(2),
			want: slotPlan{},
		},
		"10-slot outage, Skip": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpSkip, 3), StartingDeadlineSeconds: ptr.To(int64(30))}, cursor: m(0), now: m(10).Add(40 * time.Second),
			want: slotPlan{missed: 10, lastSkipped: m(10), cursor: m(10)},
		},
		// As a CronJob: a slot reached more than startingDeadlineSeconds late
		// does not start, whatever the catch-up policy.
		"10-slot outage, the newest past a 30s deadline: RunLatest runs nothing": {
			spec: dtqv1alpha1.TaskScheduleSpec{StartingDeadlineSeconds: ptr.To(int64(30))}, cursor: m(0), now: m(10).Add(40 * time.Second),
			want: slotPlan{missed: 10, lastSkipped: m(10), cursor: m(10)},
		},
		"10-slot outage, the newest past a 30s deadline: RunAll max 3 runs nothing": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpRunAll, 3), StartingDeadlineSeconds: ptr.To(int64(30))}, cursor: m(0), now: m(10).Add(40 * time.Second),
			want: slotPlan{missed: 10, lastSkipped: m(10), cursor: m(10)},
		},
		"10-slot outage, no deadline, Skip: the on-time slot runs": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpSkip, 3)}, cursor: m(0), now: m(10).Add(40 * time.Second),
			want: slotPlan{run: []time.Time{m(10)}, missed: 9, lastSkipped: m(9), cursor: m(10)},
		},
		"10-slot outage, no deadline, RunLatest (the default): the newest late slot and the on-time one run": {
			spec: dtqv1alpha1.TaskScheduleSpec{}, cursor: m(0), now: m(10).Add(40 * time.Second),
			want: slotPlan{run: []time.Time{m(9), m(10)}, caughtUp: 1, missed: 8, lastSkipped: m(8), cursor: m(10)},
		},
		"10-slot outage, no deadline, RunAll max 3": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpRunAll, 3)}, cursor: m(0), now: m(10).Add(40 * time.Second),
			want: slotPlan{run: []time.Time{m(7), m(8), m(9), m(10)}, caughtUp: 3, missed: 6, lastSkipped: m(6), cursor: m(10)},
		},
		"the slots older than a 300s deadline are missed, RunAll runs the late ones within it": {
			spec:   dtqv1alpha1.TaskScheduleSpec{StartingDeadlineSeconds: ptr.To(int64(300)), CatchUp: catchUp(dtqv1alpha1.CatchUpRunAll, 10)},
			cursor: m(0), now: m(10).Add(10 * time.Second),
			want: slotPlan{run: []time.Time{m(6), m(7), m(8), m(9), m(10)}, caughtUp: 4, missed: 5, lastSkipped: m(5), cursor: m(10)},
		},
		// A manager created the Task of slot 1 and stopped before writing the
		// cursor; ten more slots passed before the next reconcile. Slot 1 ran;
		// the outage is slots 2-11, as had the cursor been written (slot 11
		// on time).
		"run of slot 1 exists, cursor behind it, 10-slot outage, Skip": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpSkip, 3)}, cursor: m(0), now: m(11).Add(40 * time.Second),
			ran:  []time.Time{m(1)},
			want: slotPlan{run: []time.Time{m(1), m(11)}, missed: 9, lastSkipped: m(10), cursor: m(11)},
		},
		"run of slot 1 exists, cursor behind it, 10-slot outage, RunLatest": {
			spec: dtqv1alpha1.TaskScheduleSpec{}, cursor: m(0), now: m(11).Add(40 * time.Second),
			ran:  []time.Time{m(1)},
			want: slotPlan{run: []time.Time{m(1), m(10), m(11)}, caughtUp: 1, missed: 8, lastSkipped: m(9), cursor: m(11)},
		},
		"run of slot 1 exists, cursor behind it, 10-slot outage, RunAll max 3": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpRunAll, 3)}, cursor: m(0), now: m(11).Add(40 * time.Second),
			ran:  []time.Time{m(1)},
			want: slotPlan{run: []time.Time{m(1), m(8), m(9), m(10), m(11)}, caughtUp: 3, missed: 6, lastSkipped: m(7), cursor: m(11)},
		},
		"run of slot 1 exists, cursor behind it, the others past a 30s deadline": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpRunAll, 3), StartingDeadlineSeconds: ptr.To(int64(30))}, cursor: m(0), now: m(11).Add(40 * time.Second),
			ran:  []time.Time{m(1)},
			want: slotPlan{run: []time.Time{m(1)}, missed: 10, lastSkipped: m(11), cursor: m(11)},
		},
		// A catch-up (RunAll max 3) created its runs and stopped before
		// writing the cursor: the next reconcile runs no more.
		"catch-up runs exist, cursor behind them": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpRunAll, 3), StartingDeadlineSeconds: ptr.To(int64(30))}, cursor: m(0), now: m(10).Add(40 * time.Second),
			ran:  []time.Time{m(10), m(8), m(9)},
			want: slotPlan{run: []time.Time{m(8), m(9), m(10)}, missed: 7, lastSkipped: m(7), cursor: m(10)},
		},
		"the first of the catch-up runs exists, cursor behind it": {
			spec: dtqv1alpha1.TaskScheduleSpec{CatchUp: catchUp(dtqv1alpha1.CatchUpRunAll, 3)}, cursor: m(0), now: m(10).Add(40 * time.Second),
			ran:  []time.Time{m(8)},
			want: slotPlan{run: []time.Time{m(8), m(9), m(10)}, caughtUp: 1, missed: 7, lastSkipped: m(7), cursor: m(10)},
		},
		"runs at or before the cursor, or not at a slot, change nothing": {
			spec: dtqv1alpha1.TaskScheduleSpec{}, cursor: m(0), now: m(10).Add(40 * time.Second),
			ran:  []time.Time{m(-1), m(0), m(3).Add(30 * time.Second)},
			want: slotPlan{run: []time.Time{m(9), m(10)}, caughtUp: 1, missed: 8, lastSkipped: m(8), cursor: m(10)},
		},
		"an on-time slot's run exists: it is in run (runSlots finds it done)": {
			spec: dtqv1alpha1.TaskScheduleSpec{}, cursor: m(0), now: m(1).Add(time.Second),
			ran:  []time.Time{m(1)},
			want: slotPlan{run: []time.Time{m(1)}, cursor: m(1)},
		},
		"suspended after a run whose cursor was not written": {
			spec: dtqv1alpha1.TaskScheduleSpec{Suspend: true, StartingDeadlineSeconds: ptr.To(int64(30))}, cursor: m(0), now: m(3).Add(40 * time.Second),
			ran:  []time.Time{m(1)},
			want: slotPlan{run: []time.Time{m(1)}, skipped: 2, skipReason: dtqv1alpha1.ReasonSuspended, lastSkipped: m(3), cursor: m(3)},
		},
		"suspended": {
			spec: dtqv1alpha1.TaskScheduleSpec{Suspend: true}, cursor: m(0), now: m(3).Add(time.Second),
			want: slotPlan{skipped: 3, skipReason: dtqv1alpha1.ReasonSuspended, lastSkipped: m(3), cursor: m(3)},
		},
		"suspended just after an on-time run whose cursor write lost to the suspend's edit": {
			spec: dtqv1alpha1.TaskScheduleSpec{Suspend: true}, cursor: m(0), now: m(1).Add(time.Second),
			ran:  []time.Time{m(1)},
			want: slotPlan{run: []time.Time{m(1)}, cursor: m(1)},
		},
		"suspended, the older slot ran": {
			spec: dtqv1alpha1.TaskScheduleSpec{Suspend: true, StartingDeadlineSeconds: ptr.To(int64(300))}, cursor: m(0), now: m(2).Add(time.Second),
			ran:  []time.Time{m(1)},
			want: slotPlan{run: []time.Time{m(1)}, skipped: 1, skipReason: dtqv1alpha1.ReasonSuspended, lastSkipped: m(2), cursor: m(2)},
		},
		"suspended, the newer on-time slot ran": {
			spec: dtqv1alpha1.TaskScheduleSpec{Suspend: true, StartingDeadlineSeconds: ptr.To(int64(300))}, cursor: m(0), now: m(2).Add(time.Second),
			ran:  []time.Time{m(2)},
			want: slotPlan{run: []time.Time{m(2)}, skipped: 1, skipReason: dtqv1alpha1.ReasonSuspended, lastSkipped: m(1), cursor: m(2)},
		},
	}
	s, err := schedule.Parse("* * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := planSlots(s, &tc.spec, tc.cursor, tc.now, tc.ran)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(slotPlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDesiredRunTask(t *testing.T) {
	ts := &dtqv1alpha1.TaskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "shop", UID: "u-1"},
		Spec: dtqv1alpha1.TaskScheduleSpec{
			Schedule: "0 3 * * *",
			Template: dtqv1alpha1.TaskTemplate{Queue: "q", Type: "report", FlowKey: "tenant-a", Labels: map[string]dtqv1alpha1.LabelValue{"team": "a"}, Priority: ptr.To(int32(7)),
				TTL: &metav1.Duration{Duration: 5 * time.Minute}},
			Jitter: &metav1.Duration{Duration: time.Hour},
		},
	}
	slot := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	got := desiredRunTask(ts, slot, 0)
	if got.Name != "nightly-1796094000" || got.Spec.IdempotencyKey != "schedule/u-1/2026-12-01T03:00:00Z" {
		t.Errorf("name %q, key %q", got.Name, got.Spec.IdempotencyKey)
	}
	if got.Labels[LabelSchedule] != "nightly" || got.Labels["team"] != "a" || *got.Spec.Priority != 7 || got.Spec.Queue != "q" || got.Spec.FlowKey != "tenant-a" {
		t.Errorf("labels %v, spec %+v", got.Labels, got.Spec)
	}
	d := schedule.Jitter("u-1", slot, time.Hour)
	if d == 0 || got.Spec.NotBefore == nil || !got.Spec.NotBefore.Time.Equal(slot.Add(d)) {
		t.Errorf("notBefore %v, jitter %v", got.Spec.NotBefore, d)
	}
	manual := desiredRunTask(ts, time.Time{}, 4)
	if manual.Name != "nightly-manual-4" || manual.Spec.IdempotencyKey != "schedule/u-1/manual/4" || manual.Spec.NotBefore != nil {
		t.Errorf("manual run %q key %q notBefore %v", manual.Name, manual.Spec.IdempotencyKey, manual.Spec.NotBefore)
	}
	if manual.Spec.TTL.Duration != 5*time.Minute {
		t.Errorf("manual run ttl %v, want the template's 5m", manual.Spec.TTL.Duration)
	}
}

// A slot's run gets its whole ttl from its notBefore: a Task's ttl counts
// from its creation (at the slot or later), so the run carries ttl plus its
// jitter delay, and a jitter longer than the ttl does not expire it unstarted.
func TestDesiredRunTaskTTLFromNotBefore(t *testing.T) {
	ts := &dtqv1alpha1.TaskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "shop", UID: "u-1"},
		Spec: dtqv1alpha1.TaskScheduleSpec{
			Schedule: "0 3 * * *",
			Template: dtqv1alpha1.TaskTemplate{Queue: "q", Type: "report", TTL: &metav1.Duration{Duration: 5 * time.Minute}},
			Jitter:   &metav1.Duration{Duration: 30 * time.Minute},
		},
	}
	slot := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	got := desiredRunTask(ts, slot, 0)
	d := schedule.Jitter("u-1", slot, 30*time.Minute)
	if d <= 5*time.Minute {
		t.Fatalf("jitter %v: pick a slot whose delay exceeds the ttl", d)
	}
	if got.Spec.TTL == nil || got.Spec.TTL.Duration != 5*time.Minute+d {
		t.Errorf("run ttl %v, want ttl 5m + jitter %v = %v (expiry %v after the slot, notBefore %v after it)",
			got.Spec.TTL, d, 5*time.Minute+d, got.Spec.TTL, d)
	}
}

// TestScheduleCursor: the cursor is status.lastHandledSlot; a manager of
// 7c16315 kept it in lastScheduleTime (and leaves lastHandledSlot as it
// was), and reading it from there keeps an upgraded schedule from handling
// slots again (every slot since its creation, as missed or as a catch-up
// run, or those an old leader handled during the rollout).
func TestScheduleCursor(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	handled := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	ran := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	at := func(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }
	for name, tc := range map[string]struct {
		st   dtqv1alpha1.TaskScheduleStatus
		want time.Time
	}{
		"new schedule":        {want: created},
		"lastHandledSlot":     {st: dtqv1alpha1.TaskScheduleStatus{LastHandledSlot: at(handled), LastScheduleTime: at(ran)}, want: handled},
		"status of 7c16315":   {st: dtqv1alpha1.TaskScheduleStatus{LastScheduleTime: at(handled)}, want: handled},
		"7c16315 wrote after": {st: dtqv1alpha1.TaskScheduleStatus{LastHandledSlot: at(ran), LastScheduleTime: at(handled)}, want: handled},
	} {
		ts := &dtqv1alpha1.TaskSchedule{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Time{Time: created}}, Status: tc.st}
		if got := scheduleCursor(ts); !got.Equal(tc.want) {
			t.Errorf("%s: cursor %v, want %v", name, got, tc.want)
		}
	}
}
