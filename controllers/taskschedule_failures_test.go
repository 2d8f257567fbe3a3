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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
)

// readyOf is the schedule's Ready condition.
func readyOf(ts *dtqv1alpha1.TaskSchedule) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		c := meta.FindStatusCondition(scheduleStatus(ts)(g).Conditions, dtqv1alpha1.TaskScheduleReady)
		g.Expect(c).NotTo(BeNil())
		return c
	}
}

func setSchedule(ts *dtqv1alpha1.TaskSchedule, expr string) {
	GinkgoHelper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"schedule":"`+expr+`"}}`))
	Expect(k8sClient.Patch(ctx, ts.DeepCopy(), patch)).To(Succeed())
}

var _ = Describe("TaskSchedule failures", func() {
	BeforeEach(useScheduleTimeouts)

	It("reports a run whose Task the API server refuses (Ready=False, a Warning Event), and runs it once it can", func() {
		stopTheManager()
		ns := newNamespace("sched-refused")
		// An admission policy that refuses every Task of the namespace, as a
		// full ResourceQuota or a site's own policy would.
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{"dtq.dev"}, APIVersions: []string{"*"}, Resources: []string{"tasks"}},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "no Tasks in this namespace today"}},
			}}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: ns,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed()) })
		Eventually(func() error {
			probe := testutil.MakeTask("", ns).Queue("absent").Type("noop").Obj()
			probe.GenerateName = "probe-"
			return k8sClient.Create(ctx, probe)
		}).Should(MatchError(ContainSubstring("no Tasks in this namespace today")))
		ts := newSchedule(ns, "refused")
		clock, first := createSchedule(ts)
		DeferCleanup(startManagerWith(Options{Clock: clock}))

		Eventually(readyOf(ts)).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", dtqv1alpha1.ReasonRunCreationFailed),
			HaveField("Message", And(ContainSubstring(runName(ts, first)), ContainSubstring("no Tasks in this namespace today")))))
		st := scheduleStatus(ts)(Default)
		Expect(st.Runs).To(BeZero())
		Expect(st.NextScheduleTime.Time).To(BeTemporally(">", clock.Now()))
		Eventually(scheduleEvents(ts, dtqv1alpha1.ReasonRunCreationFailed)).Should(ContainElement(ContainSubstring(runName(ts, first))))

		By("the policy removed: the slot runs, and Ready is True again")
		Expect(k8sClient.Delete(ctx, binding)).To(Succeed())
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first)))
		Eventually(readyOf(ts)).Should(HaveField("Reason", dtqv1alpha1.ReasonScheduled))
		Expect(scheduleStatus(ts)(Default).Runs).To(Equal(int64(1)))
	})

	It("runs a trigger while the schedule is invalid, and counts the slots that passed meanwhile as skipped", func() {
		stopTheManager()
		ns := newNamespace("sched-typo")
		ts := newSchedule(ns, "typo")
		clock, first := createSchedule(ts)
		DeferCleanup(startManagerWith(Options{Clock: clock}))
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first)))
		Eventually(func(g Gomega) *metav1.Time { return scheduleStatus(ts)(g).LastHandledSlot }).Should(HaveField("Time", BeTemporally("==", first)))

		setSchedule(ts, "*/0 * * * *")
		Eventually(readyOf(ts)).Should(HaveField("Reason", dtqv1alpha1.ReasonInvalidSchedule))
		By("a trigger while invalid runs")
		setTrigger(ts, 1)
		Eventually(manualRuns(ts)).Should(ConsistOf(ts.Name + "-manual-1"))

		By("ten slots pass, then the fix: none of them runs")
		clock.Step(10 * time.Minute)
		setSchedule(ts, "* * * * *")
		Eventually(readyOf(ts)).Should(HaveField("Reason", dtqv1alpha1.ReasonScheduled))
		Consistently(func(g Gomega) int { return len(runsOf(ts)(g)) }, time.Second).Should(Equal(2))
		st := scheduleStatus(ts)(Default)
		Expect(st.SkippedSlots).To(Equal(int64(10)))
		Expect(st.LastSkipReason).To(Equal(dtqv1alpha1.ReasonInvalidSchedule))
		Expect(st.MissedSlots).To(BeZero())
		Expect(st.Runs).To(Equal(int64(1)))

		By("the next slot runs")
		clock.Step(time.Minute)
		Eventually(runsOf(ts)).Should(HaveKey(runName(ts, first.Add(11*time.Minute))))
	})

	It("emits MissedDeadline only once the status counting the slots is written", func() {
		stopTheManager()
		ns := newNamespace("sched-missed-once")
		ts := newSchedule(ns, "missed")
		ts.Spec.StartingDeadlineSeconds = ptr.To(int64(30))
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ts)).To(Succeed()) })
		// Eleven slots passed, the newest 40s ago: all missed, none run.
		first := ts.CreationTimestamp.Truncate(time.Minute).Add(time.Minute)
		clock := clocktesting.NewFakeClock(first.Add(10*time.Minute + 40*time.Second))
		recorder := events.NewFakeRecorder(10)
		r := &TaskScheduleReconciler{Client: k8sClient, Clock: clock, Recorder: recorder,
			wakeups: newScheduleWakeups(clock, make(chan event.TypedGenericEvent[*dtqv1alpha1.TaskSchedule], 10))}

		By("a reconcile of a stale copy: its status write conflicts")
		stale := ts.DeepCopy()
		Expect(k8sClient.Patch(ctx, ts, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"edited":"yes"}}}`)))).To(Succeed())
		_, err := r.reconcile(ctx, stale)
		Expect(err).NotTo(HaveOccurred())
		Expect(recorder.Events).NotTo(Receive(), "an Event for slots whose status did not land")
		Expect(scheduleStatus(ts)(Default).MissedSlots).To(BeZero())

		By("the reconcile of the current object")
		_, err = r.reconcile(ctx, ts)
		Expect(err).NotTo(HaveOccurred())
		Expect(recorder.Events).To(Receive(HavePrefix("Warning MissedDeadline Missed 11 slot(s)")))
		Expect(recorder.Events).NotTo(Receive())
		Expect(scheduleStatus(ts)(Default).MissedSlots).To(Equal(int64(11)))
	})
})
