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
	"math/rand/v2"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
)

// newSchedule is an every-minute TaskSchedule of a Queue that does not
// exist: its runs stay unfinished (Pending), and no worker runs anything.
func newSchedule(ns, name string) *dtqv1alpha1.TaskSchedule {
	return &dtqv1alpha1.TaskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: dtqv1alpha1.TaskScheduleSpec{
			Schedule: "* * * * *",
			Template: dtqv1alpha1.TaskTemplate{Queue: "absent", Type: "noop"},
			// Keep every run: the tests count them.
			SuccessfulRunsHistoryLimit: ptr.To(int32(1000)),
			FailedRunsHistoryLimit:     ptr.To(int32(1000)),
		},
	}
}

// createSchedule creates ts (deleted again before the suite's manager, on
// the real clock, comes back) and returns a fake clock 10s after the first
// minute boundary after its creation: that boundary is its first slot.
func createSchedule(ts *dtqv1alpha1.TaskSchedule) (*clocktesting.FakeClock, time.Time) {
	Expect(k8sClient.Create(ctx, ts)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ts))).To(Succeed()) })
	first := ts.CreationTimestamp.Truncate(time.Minute).Add(time.Minute)
	return clocktesting.NewFakeClock(first.Add(10 * time.Second)), first
}

// runsOf are the schedule's Tasks, read from the API server, by name.
func runsOf(ts *dtqv1alpha1.TaskSchedule) func(Gomega) map[string]dtqv1alpha1.Task {
	return func(g Gomega) map[string]dtqv1alpha1.Task {
		var list dtqv1alpha1.TaskList
		g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ts.Namespace), client.MatchingLabels{LabelSchedule: ts.Name})).To(Succeed())
		out := map[string]dtqv1alpha1.Task{}
		for _, t := range list.Items {
			out[t.Name] = t
		}
		return out
	}
}

// pausedQueueSchedule is newSchedule on a paused Queue q: its runs wait
// Queued (unfinished) until cancelled, which ends them at once.
func pausedQueueSchedule(ns, name string) *dtqv1alpha1.TaskSchedule {
	Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Paused(true).Obj())).To(Succeed())
	ts := newSchedule(ns, name)
	ts.Spec.Template.Queue = "q"
	return ts
}

// waitQueued waits for the run to show Queued, moving clock a second at a
// time: the Task controller holds a fresh task's status write for its
// coalescing window, which the fake clock measures.
func waitQueued(ts *dtqv1alpha1.TaskSchedule, name string, clock *clocktesting.FakeClock) {
	Eventually(func(g Gomega) dtqv1alpha1.TaskState {
		state := runsOf(ts)(g)[name].Status.State
		if state != dtqv1alpha1.TaskQueued {
			clock.Step(time.Second)
		}
		return state
	}).WithPolling(500 * time.Millisecond).Should(Equal(dtqv1alpha1.TaskQueued))
}

func scheduleStatus(ts *dtqv1alpha1.TaskSchedule) func(Gomega) dtqv1alpha1.TaskScheduleStatus {
	return func(g Gomega) dtqv1alpha1.TaskScheduleStatus {
		got := &dtqv1alpha1.TaskSchedule{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
		return got.Status
	}
}

// expectOnePerSlot checks the schedule's Tasks are exactly one per slot
// first, first+1m, ... last: by name, by idempotency key and by slot annotation.
func expectOnePerSlot(ts *dtqv1alpha1.TaskSchedule, first, last time.Time) {
	runs := runsOf(ts)(Default)
	want := int(last.Sub(first)/time.Minute) + 1
	keys, slots := map[string]int{}, map[string]int{}
	for _, t := range runs {
		keys[t.Spec.IdempotencyKey]++
		slots[t.Annotations[AnnotationSlot]]++
	}
	Expect(runs).To(HaveLen(want), "Tasks")
	Expect(keys).To(HaveLen(want), "distinct idempotency keys")
	for s := first; !s.After(last); s = s.Add(time.Minute) {
		Expect(slots[s.UTC().Format(time.RFC3339)]).To(Equal(1), "Tasks of slot %s", s)
		Expect(keys[runKey(ts, s)]).To(Equal(1), "Tasks with key %s", runKey(ts, s))
	}
	st := scheduleStatus(ts)(Default)
	Expect(st.Runs).To(Equal(int64(want)))
	Expect(st.MissedSlots).To(BeZero())
	Expect(st.SkippedSlots).To(BeZero())
	Expect(st.LastScheduleTime.Time).To(BeTemporally("==", last))
	Expect(st.LastHandledSlot.Time).To(BeTemporally("==", last))
}

// waitSlot waits for a Task of the slot, found by its annotation (not by
// the name the controller should give it: the tests must see a wrong name).
func waitSlot(ts *dtqv1alpha1.TaskSchedule, slot time.Time) {
	Eventually(func(g Gomega) []string {
		var slots []string
		for _, t := range runsOf(ts)(g) {
			slots = append(slots, t.Annotations[AnnotationSlot])
		}
		return slots
	}).Should(ContainElement(slot.UTC().Format(time.RFC3339)), "slot %s", slot)
}

// stepSlots moves clock a minute at a time, n times, waiting for each
// slot's Task; before each wait, with probability pRestart, it sleeps a
// random moment (mid-reconcile, often) and restarts the manager of restart.
func stepSlots(ts *dtqv1alpha1.TaskSchedule, clock *clocktesting.FakeClock, first time.Time, n int, pRestart float64, restart func()) {
	rng := rand.New(rand.NewPCG(uint64(GinkgoRandomSeed()), 23))
	restarts := 0
	for i := 1; i <= n; i++ {
		clock.Step(time.Minute)
		if rng.Float64() < pRestart {
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
			restart()
			restarts++
		}
		waitSlot(ts, first.Add(time.Duration(i)*time.Minute))
	}
	GinkgoWriter.Printf("%d slots, %d manager restarts\n", n, restarts)
}

// useScheduleTimeouts lengthens Eventually for the spec: a restarted manager
// syncs its caches first.
func useScheduleTimeouts() {
	SetDefaultEventuallyTimeout(timeout)
	SetDefaultEventuallyPollingInterval(poll)
	DeferCleanup(func() {
		SetDefaultEventuallyTimeout(time.Second)
		SetDefaultEventuallyPollingInterval(10 * time.Millisecond)
	})
}

var _ = Describe("TaskSchedule", func() {
	BeforeEach(useScheduleTimeouts)

	It("makes exactly one Task per slot over 100 slots while the manager restarts at random points", func() {
		stopTheManager()
		ns := newNamespace("sched-restart")
		ts := newSchedule(ns, "every-minute")
		clock, first := createSchedule(ts)
		stop := startManagerWith(Options{Clock: clock})
		DeferCleanup(func() { stop() })
		waitSlot(ts, first)

		stepSlots(ts, clock, first, 100, 0.2, func() { stop(); stop = startManagerWith(Options{Clock: clock}) })

		last := first.Add(100 * time.Minute)
		Eventually(func(g Gomega) { g.Expect(scheduleStatus(ts)(g).LastHandledSlot).NotTo(BeNil()) }).Should(Succeed())
		Eventually(func(g Gomega) time.Time { return scheduleStatus(ts)(g).LastHandledSlot.Time }).Should(BeTemporally("==", last))
		expectOnePerSlot(ts, first, last)

		By("jumping the clock back an hour: nothing fires again")
		clock.SetTime(clock.Now().Add(-time.Hour))
		stop()
		stop = startManagerWith(Options{Clock: clock})
		for range 5 {
			clock.Step(time.Minute)
		}
		Consistently(func(g Gomega) int { return len(runsOf(ts)(g)) }, 2*time.Second).Should(Equal(101))
		st := scheduleStatus(ts)(Default)
		Expect(st.LastHandledSlot.Time).To(BeTemporally("==", last))
		Expect(st.NextScheduleTime.Time).To(BeTemporally("==", last.Add(time.Minute)))

		By("the clock back at the next slot: that slot, once")
		clock.SetTime(last.Add(time.Minute + time.Second))
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, last.Add(time.Minute))))
		Eventually(func(g Gomega) time.Time { return scheduleStatus(ts)(g).LastHandledSlot.Time }).
			Should(BeTemporally("==", last.Add(time.Minute)))
		expectOnePerSlot(ts, first, last.Add(time.Minute))
	})

	It("makes exactly one Task per slot over 100 slots with two managers and no leader election", func() {
		stopTheManager()
		ns := newNamespace("sched-two")
		ts := newSchedule(ns, "every-minute")
		clock, first := createSchedule(ts)
		stopA := startManagerWith(Options{Clock: clock})
		DeferCleanup(func() { stopA() })
		stopB := startManagerWith(Options{Clock: clock})
		DeferCleanup(func() { stopB() })
		waitSlot(ts, first)

		stepSlots(ts, clock, first, 100, 0.1, func() { stopB(); stopB = startManagerWith(Options{Clock: clock}) })

		last := first.Add(100 * time.Minute)
		Eventually(func(g Gomega) time.Time {
			st := scheduleStatus(ts)(g)
			g.Expect(st.LastHandledSlot).NotTo(BeNil())
			return st.LastHandledSlot.Time
		}).Should(BeTemporally("==", last))
		expectOnePerSlot(ts, first, last)
	})

	It("skips and counts a slot under Forbid while the previous run is unfinished", func() {
		stopTheManager()
		ns := newNamespace("sched-forbid")
		ts := pausedQueueSchedule(ns, "forbid")
		ts.Spec.ConcurrencyPolicy = dtqv1alpha1.ConcurrencyForbid
		clock, first := createSchedule(ts)
		DeferCleanup(startManagerWith(Options{Clock: clock}))
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first)))
		waitQueued(ts, runName(ts, first), clock)

		clock.Step(time.Minute)
		Eventually(func(g Gomega) {
			st := scheduleStatus(ts)(g)
			g.Expect(st.SkippedSlots).To(Equal(int64(1)))
			g.Expect(st.LastSkipReason).To(Equal(dtqv1alpha1.ReasonConcurrencyForbidden))
			g.Expect(st.ActiveCount).To(Equal(int32(1)))
		}).Should(Succeed())
		Expect(runsOf(ts)(Default)).To(HaveLen(1))
		By("lastScheduleTime is the newest run's slot, as a CronJob's; lastHandledSlot the skipped one")
		st := scheduleStatus(ts)(Default)
		Expect(st.LastScheduleTime.Time).To(BeTemporally("==", first))
		Expect(st.LastHandledSlot.Time).To(BeTemporally("==", first.Add(time.Minute)))

		By("cancelling the run: the next slot runs")
		Expect(k8sClient.Patch(ctx, &dtqv1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runName(ts, first)}},
			client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"cancel":true}}`)))).To(Succeed())
		Eventually(func(g Gomega) int32 { return scheduleStatus(ts)(g).ActiveCount }).Should(BeZero())
		clock.Step(time.Minute)
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first.Add(2*time.Minute))))
		Expect(runsOf(ts)(Default)).To(HaveLen(2))
		Expect(scheduleStatus(ts)(Default).SkippedSlots).To(Equal(int64(1)))
	})

	It("cancels the unfinished run under Replace", func() {
		stopTheManager()
		ns := newNamespace("sched-replace")
		ts := pausedQueueSchedule(ns, "replace")
		ts.Spec.ConcurrencyPolicy = dtqv1alpha1.ConcurrencyReplace
		clock, first := createSchedule(ts)
		DeferCleanup(startManagerWith(Options{Clock: clock}))
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first)))
		waitQueued(ts, runName(ts, first), clock)

		clock.Step(time.Minute)
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first.Add(time.Minute))))
		runs := runsOf(ts)(Default)
		Expect(runs[runName(ts, first)].Spec.Cancel).To(BeTrue())
		Expect(runs[runName(ts, first.Add(time.Minute))].Spec.Cancel).To(BeFalse())
		Eventually(func(g Gomega) dtqv1alpha1.TaskState { return runsOf(ts)(g)[runName(ts, first)].Status.State }).
			Should(Equal(dtqv1alpha1.TaskCancelled))
		Eventually(func(g Gomega) []dtqv1alpha1.ScheduleRun { return scheduleStatus(ts)(g).Active }).
			Should(ConsistOf(HaveField("Name", runName(ts, first.Add(time.Minute)))))
	})

	It("starts no slot older than startingDeadlineSeconds, whatever the catch-up policy, as a CronJob", func() {
		stopTheManager()
		ns := newNamespace("sched-deadline")
		ts := newSchedule(ns, "deadline")
		ts.Spec.CatchUp = &dtqv1alpha1.CatchUp{Policy: dtqv1alpha1.CatchUpRunAll, MaxRuns: 3}
		ts.Spec.StartingDeadlineSeconds = ptr.To(int64(30))
		clock, first := createSchedule(ts)
		stop := startManagerWith(Options{Clock: clock})
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first)))
		Eventually(func(g Gomega) *metav1.Time { return scheduleStatus(ts)(g).LastHandledSlot }).Should(HaveField("Time", BeTemporally("==", first)))
		stop()

		By("ten slots pass while no manager runs; the newest is 40s late")
		clock.SetTime(first.Add(10*time.Minute + 40*time.Second))
		DeferCleanup(startManagerWith(Options{Clock: clock}))
		Eventually(func(g Gomega) int64 { return scheduleStatus(ts)(g).MissedSlots }).Should(Equal(int64(10)))
		Consistently(func(g Gomega) int { return len(runsOf(ts)(g)) }, time.Second).Should(Equal(1))
		st := scheduleStatus(ts)(Default)
		Expect(st.Runs).To(Equal(int64(1)))
		Expect(st.LastScheduleTime.Time).To(BeTemporally("==", first))
		Expect(st.LastHandledSlot.Time).To(BeTemporally("==", first.Add(10*time.Minute)))
	})

	It("after a 10-slot outage runs the on-time slot and 0 late ones under Skip, 1 under RunLatest, 3 under RunAll with maxRuns 3", func() {
		expectOutage("sched-outage", false)
	})

	It("counts the same after an outage that began between a slot's Task and its cursor write", func() {
		expectOutage("sched-outage-mid", true)
	})

	It("counts suspended slots, resumes without a burst, and runs a manual trigger once", func() {
		stopTheManager()
		ns := newNamespace("sched-suspend")
		ts := newSchedule(ns, "suspend")
		clock, first := createSchedule(ts)
		DeferCleanup(startManagerWith(Options{Clock: clock}))
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first)))

		Expect(k8sClient.Patch(ctx, ts, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":true}}`)))).To(Succeed())
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(scheduleStatus(ts)(g).Conditions, dtqv1alpha1.TaskScheduleReady)
			g.Expect(c).NotTo(BeNil())
			return c.Reason
		}).Should(Equal(dtqv1alpha1.ReasonSuspended))
		for range 3 {
			clock.Step(time.Minute)
		}
		Eventually(func(g Gomega) int64 { return scheduleStatus(ts)(g).SkippedSlots }).Should(Equal(int64(3)))
		Expect(scheduleStatus(ts)(Default).LastSkipReason).To(Equal(dtqv1alpha1.ReasonSuspended))

		By("resuming: nothing runs for the suspended slots")
		Expect(k8sClient.Patch(ctx, ts, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`)))).To(Succeed())
		Consistently(func(g Gomega) int { return len(runsOf(ts)(g)) }, time.Second).Should(Equal(1))

		By("raising triggerGeneration: one manual run")
		Expect(k8sClient.Patch(ctx, ts, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"triggerGeneration":1}}`)))).To(Succeed())
		Eventually(runsOf(ts)).Should(HaveKey(ts.Name + "-manual-1"))
		Expect(runsOf(ts)(Default)[ts.Name+"-manual-1"].Spec.IdempotencyKey).To(Equal("schedule/" + string(ts.UID) + "/manual/1"))
		Consistently(func(g Gomega) int { return len(runsOf(ts)(g)) }, time.Second).Should(Equal(2))

		clock.Step(time.Minute)
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first.Add(4*time.Minute))))
	})

	It("refuses a bad cron expression or zone with the field named, and reports what the API server cannot check", func() {
		ns := newNamespace("sched-invalid")
		for expr, field := range map[string]string{
			"61 * * * *": "spec.schedule", "* * * *": "spec.schedule", "@every 1m": "spec.schedule", "0 0 0 * *": "spec.schedule",
		} {
			ts := newSchedule(ns, "bad")
			ts.Spec.Schedule = expr
			err := k8sClient.Create(ctx, ts)
			Expect(err).To(HaveOccurred(), expr)
			Expect(err.Error()).To(ContainSubstring(field), expr)
		}
		ts := newSchedule(ns, "bad-zone")
		ts.Spec.TimeZone = "Mars/Olympus_Mons"
		err := k8sClient.Create(ctx, ts)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.timeZone"))
		ts.Spec.TimeZone = "America/New_York"
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ts)).To(Succeed()) })

		ok := newSchedule(ns, "step-zero")
		ok.Spec.Schedule = "*/0 * * * *"
		Expect(k8sClient.Create(ctx, ok)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ok)).To(Succeed()) })
		Eventually(func(g Gomega) *metav1.Condition {
			return meta.FindStatusCondition(scheduleStatus(ok)(g).Conditions, dtqv1alpha1.TaskScheduleReady)
		}).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", dtqv1alpha1.ReasonInvalidSchedule)))
	})
})

// expectOutage runs three every-minute schedules (Skip, RunLatest, RunAll
// with maxRuns 3) without a starting deadline to their first slot, stops the
// manager, lets ten slots pass and starts it again 40s after the newest: that
// one is on time and runs, and of the nine late ones the policies run 0, 1
// and 3 and count the others missed, in status and in one Warning Event each.
// With killedMidSlot the manager stopped later, in the second slot, after
// creating its Task but before writing the cursor (the Task is created here
// as the controller does): that slot counts as run, and the outage is the
// ten slots after it.
func expectOutage(nsPrefix string, killedMidSlot bool) {
	stopTheManager()
	ns := newNamespace(nsPrefix)
	policies := map[dtqv1alpha1.CatchUpPolicy]int{
		dtqv1alpha1.CatchUpSkip: 0, dtqv1alpha1.CatchUpRunLatest: 1, dtqv1alpha1.CatchUpRunAll: 3,
	}
	var clock *clocktesting.FakeClock
	var first time.Time
	schedules := map[dtqv1alpha1.CatchUpPolicy]*dtqv1alpha1.TaskSchedule{}
	for _, p := range []dtqv1alpha1.CatchUpPolicy{dtqv1alpha1.CatchUpSkip, dtqv1alpha1.CatchUpRunLatest, dtqv1alpha1.CatchUpRunAll} {
		ts := newSchedule(ns, map[dtqv1alpha1.CatchUpPolicy]string{"Skip": "skip", "RunLatest": "run-latest", "RunAll": "run-all"}[p])
		ts.Spec.CatchUp = &dtqv1alpha1.CatchUp{Policy: p, MaxRuns: 3}
		c, f := createSchedule(ts)
		if clock == nil {
			clock, first = c, f
		}
		schedules[p] = ts
	}
	stop := startManagerWith(Options{Clock: clock})
	for _, ts := range schedules {
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first)))
		// The first slot is recorded before the outage: a cursor still
		// behind it would make the outage eleven slots.
		Eventually(func(g Gomega) time.Time {
			st := scheduleStatus(ts)(g)
			g.Expect(st.LastHandledSlot).NotTo(BeNil())
			return st.LastHandledSlot.Time
		}).Should(BeTemporally("==", first))
	}
	stop()

	names := map[dtqv1alpha1.CatchUpPolicy]string{}
	for p, ts := range schedules {
		names[p] = ts.Name
	}
	lastRun, ran := first, 1
	if killedMidSlot {
		By("the second slot's Task created, its cursor not written")
		lastRun, ran = first.Add(time.Minute), 2
		for _, ts := range schedules {
			task := desiredRunTask(ts, lastRun, 0)
			Expect(controllerutil.SetControllerReference(ts, task, scheme)).To(Succeed())
			Expect(k8sClient.Create(ctx, task)).To(Succeed())
		}
	}

	By("ten slots pass while no manager runs; the newest is 40s old, on time")
	newest := lastRun.Add(10 * time.Minute)
	clock.SetTime(newest.Add(40 * time.Second))
	DeferCleanup(startManagerWith(Options{Clock: clock}))
	for p, ts := range schedules {
		missed := 9 - policies[p]
		Eventually(func(g Gomega) int64 { return scheduleStatus(ts)(g).MissedSlots }).Should(Equal(int64(missed)), string(p))
		Consistently(func(g Gomega) int { return len(runsOf(ts)(g)) }, time.Second).Should(Equal(ran+1+policies[p]), string(p))
		st := scheduleStatus(ts)(Default)
		Expect(st.Runs).To(Equal(int64(ran+1+policies[p])), string(p))
		Expect(st.LastSkipReason).To(Equal(dtqv1alpha1.ReasonMissedDeadline))
		Expect(st.LastScheduleTime.Time).To(BeTemporally("==", newest))
		Expect(st.LastHandledSlot.Time).To(BeTemporally("==", newest))
		runs := runsOf(ts)(Default)
		for i := range policies[p] + 1 {
			Expect(runs).To(HaveKey(runName(ts, newest.Add(-time.Duration(i)*time.Minute))), "%s runs the newest", p)
		}
		Eventually(func(g Gomega) []string {
			var notes []string
			var evs eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			for _, e := range evs.Items {
				if e.Regarding.Name == ts.Name && e.Reason == dtqv1alpha1.ReasonMissedDeadline {
					notes = append(notes, e.Note)
				}
			}
			return notes
		}).Should(ConsistOf(HavePrefix(fmt.Sprintf("Missed %d slot(s),", missed))), string(p))
	}

	By("the missed-slots metric says the same")
	want := map[string]float64{}
	for p, n := range policies {
		want["dtq_schedule_missed_slots_total{schedule="+names[p]+"}"] = float64(9 - n)
	}
	mfs, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	Expect(testutil.Series(mfs, "dtq_schedule_missed_slots_total", ns)).To(Equal(want))
}
