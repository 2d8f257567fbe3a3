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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// manualRuns are the names of the schedule's manual runs.
func manualRuns(ts *dtqv1alpha1.TaskSchedule) func(Gomega) []string {
	return func(g Gomega) []string {
		var names []string
		for name, t := range runsOf(ts)(g) {
			if _, manual := t.Annotations[AnnotationTrigger]; manual {
				names = append(names, name)
			}
		}
		return names
	}
}

// setTrigger sets the schedule's spec.triggerGeneration.
func setTrigger(ts *dtqv1alpha1.TaskSchedule, gen int) {
	GinkgoHelper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"triggerGeneration":%d}}`, gen))
	Expect(k8sClient.Patch(ctx, ts.DeepCopy(), patch)).To(Succeed())
}

// scheduleEvents are the notes of the schedule's Events with reason.
func scheduleEvents(ts *dtqv1alpha1.TaskSchedule, reason string) func(Gomega) []string {
	return func(g Gomega) []string {
		var notes []string
		var evs eventsv1.EventList
		g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ts.Namespace))).To(Succeed())
		for _, e := range evs.Items {
			if e.Regarding.Name == ts.Name && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
}

var _ = Describe("TaskSchedule triggers", func() {
	BeforeEach(useScheduleTimeouts)

	It("runs one manual run per generation raised, however close together the raises", func() {
		stopTheManager()
		ns := newNamespace("sched-trigger-each")
		ts := newSchedule(ns, "each")
		ts.Spec.Suspend = true // no slot runs; manual runs run even while suspended
		clock, _ := createSchedule(ts)
		stop := startManagerWith(Options{Clock: clock})
		DeferCleanup(func() { stop() })
		Eventually(func(g Gomega) int64 { return scheduleStatus(ts)(g).ObservedGeneration }).Should(Equal(int64(1)))
		stop()

		By("two raises reach the API server before the next reconcile")
		setTrigger(ts, 1)
		setTrigger(ts, 2)
		stop = startManagerWith(Options{Clock: clock})
		Eventually(manualRuns(ts)).Should(ConsistOf(ts.Name+"-manual-1", ts.Name+"-manual-2"))
		Eventually(func(g Gomega) int64 { return scheduleStatus(ts)(g).ObservedTriggerGeneration }).Should(Equal(int64(2)))
		stop()

		By("a raise by 13: the newest 10 generations run, and an Event counts the 3 before them")
		setTrigger(ts, 15)
		stop = startManagerWith(Options{Clock: clock})
		want := []string{ts.Name + "-manual-1", ts.Name + "-manual-2"}
		for g := 6; g <= 15; g++ {
			want = append(want, fmt.Sprintf("%s-manual-%d", ts.Name, g))
		}
		Eventually(manualRuns(ts)).Should(ConsistOf(want))
		Eventually(func(g Gomega) int64 { return scheduleStatus(ts)(g).ObservedTriggerGeneration }).Should(Equal(int64(15)))
		Consistently(manualRuns(ts), time.Second).Should(HaveLen(12))
		Eventually(scheduleEvents(ts, dtqv1alpha1.ReasonTriggersCollapsed)).Should(ConsistOf(ContainSubstring("not the 3 before them")))
	})

	It("refuses removing triggerGeneration, with the field named", func() {
		ns := newNamespace("sched-trigger-remove")
		ts := newSchedule(ns, "remove")
		ts.Spec.TriggerGeneration = 3
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ts)).To(Succeed()) })

		err := k8sClient.Patch(ctx, ts.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"triggerGeneration":null}}`)))
		Expect(err).To(MatchError(And(ContainSubstring("spec.triggerGeneration"), ContainSubstring("cannot be removed"))))
		got := &dtqv1alpha1.TaskSchedule{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ts), got)).To(Succeed())
		Expect(got.Spec.TriggerGeneration).To(Equal(int64(3)))
	})

	It("runs a trigger raised before the first status write, and nothing for a value the schedule was created with", func() {
		stopTheManager()
		ns := newNamespace("sched-trigger-early")
		early := newSchedule(ns, "early")
		early.Spec.Suspend = true
		clock, _ := createSchedule(early)
		setTrigger(early, 1) // generation 2; no status written yet
		created := newSchedule(ns, "created")
		created.Spec.Suspend = true
		created.Spec.TriggerGeneration = 5
		createSchedule(created)

		DeferCleanup(startManagerWith(Options{Clock: clock}))
		Eventually(manualRuns(early)).Should(ConsistOf(early.Name + "-manual-1"))
		Eventually(func(g Gomega) int64 { return scheduleStatus(created)(g).ObservedTriggerGeneration }).Should(Equal(int64(5)))
		Consistently(manualRuns(created), time.Second).Should(BeEmpty())
	})
})
