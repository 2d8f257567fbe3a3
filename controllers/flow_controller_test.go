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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

var _ = Describe("Flow control", func() {
	It("writes spec.flowControl into the queue's Redis config, and a change applies on the next reconcile", func() {
		ns := newNamespace("flowcfg")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		q := testutil.MakeQueue("q", ns).FlowControl(&dtqv1alpha1.FlowControl{
			RateLimit:      &dtqv1alpha1.FlowRate{Limit: 200, Burst: 20},
			MaxConcurrency: ptr.To[int32](400),
			PerKey:         &dtqv1alpha1.KeyLimits{Concurrency: ptr.To[int32](3)},
			Overrides:      []dtqv1alpha1.KeyOverride{{Key: "tenant-gold", Weight: 5, Concurrency: ptr.To[int32](10)}},
		}).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		flowInRedis := func(g Gomega) *broker.FlowControl {
			c, err := engine.QueueConfig(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			return c.Flow
		}
		Eventually(flowInRedis, timeout, poll).Should(Equal(&broker.FlowControl{
			Rate:           &broker.FlowRate{Limit: 200, Period: time.Second, Burst: 20},
			MaxConcurrency: 400,
			PerKey:         broker.KeyLimits{Concurrency: 3},
			Fairness:       broker.FairnessWeighted,
			Overrides:      map[string]broker.KeyOverride{"tenant-gold": {Weight: 5, KeyLimits: broker.KeyLimits{Concurrency: 10}}},
		}))

		By("lowering the rate and making fairness FIFO (a kubectl patch)")
		patchQueue(q, func(q *dtqv1alpha1.Queue) {
			q.Spec.FlowControl.RateLimit = &dtqv1alpha1.FlowRate{Limit: 20, Period: dtqv1alpha1.NewDuration(time.Minute), Burst: 1}
			q.Spec.FlowControl.Fairness = dtqv1alpha1.FairnessFIFO
			q.Spec.FlowControl.Overrides = nil
		})
		Eventually(flowInRedis, timeout, poll).Should(Equal(&broker.FlowControl{
			Rate:           &broker.FlowRate{Limit: 20, Period: time.Minute, Burst: 1},
			MaxConcurrency: 400,
			PerKey:         broker.KeyLimits{Concurrency: 3},
			Fairness:       broker.FairnessFIFO,
		}))

		By("removing flowControl")
		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.FlowControl = nil })
		Eventually(flowInRedis, timeout, poll).Should(BeNil())
	})

	It("writes status.flow and the FlowLimited condition on a Queue with flowControl, and removes both with it", func() {
		ns := newNamespace("flow")
		q := testutil.MakeQueue("q", ns).FlowControl(&dtqv1alpha1.FlowControl{MaxConcurrency: ptr.To[int32](2)}).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(func(g Gomega) {
			st := getQueue(q)(g).Status
			g.Expect(st.Flow).NotTo(BeNil())
			c := meta.FindStatusCondition(st.Conditions, dtqv1alpha1.QueueFlowLimited)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dtqv1alpha1.ReasonNotLimited))
		}, timeout, poll).Should(Succeed())

		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.FlowControl = nil })
		Eventually(func(g Gomega) {
			st := getQueue(q)(g).Status
			g.Expect(st.Flow).To(BeNil())
			g.Expect(meta.FindStatusCondition(st.Conditions, dtqv1alpha1.QueueFlowLimited)).To(BeNil())
		}, timeout, poll).Should(Succeed())
	})

	It("names the binding limit in the Queue's status, condition and metrics, and a waiting Task's reason, while it binds", func() {
		ns := newNamespace("flowlimited")
		q := testutil.MakeQueue("q", ns).FlowControl(&dtqv1alpha1.FlowControl{
			PerKey: &dtqv1alpha1.KeyLimits{Concurrency: ptr.To[int32](1)}}).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(func(g Gomega) bool {
			return meta.IsStatusConditionTrue(getQueue(q)(g).Status.Conditions, dtqv1alpha1.QueueReady)
		}, timeout, poll).Should(BeTrue())
		DeferCleanup(startWorker(ns, "q"))
		// The first task holds tenant-a's only slot until the test ends (the
		// worker's stop cancels it); the other two wait on the key's cap.
		var tasks []*dtqv1alpha1.Task
		for i, hold := range []int{int(time.Hour / time.Millisecond), 0, 0} {
			t := testutil.MakeTask(fmt.Sprintf("a-%d", i), ns).Queue("q").Type("count").FlowKey("tenant-a").
				Payload(countPayload{Name: ns + "-a", HoldMS: hold}).Obj()
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			tasks = append(tasks, t)
		}
		Eventually(getTask(tasks[0]), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskRunning))

		Eventually(func(g Gomega) {
			st := getQueue(q)(g).Status
			c := meta.FindStatusCondition(st.Conditions, dtqv1alpha1.QueueFlowLimited)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(string(dtqv1alpha1.LimitKeyConcurrency)))
			g.Expect(c.Message).To(Equal("2 queued, 0 admissible: per-key concurrency 1 (1 of 1 keys parked) binds"))
			g.Expect(st.Flow).To(Equal(&dtqv1alpha1.QueueFlowStatus{Admissible: 0, Throttled: 2, HeldSlots: 1, ActiveKeys: 1, ParkedKeys: 1,
				LimitedBy: []dtqv1alpha1.FlowLimit{dtqv1alpha1.LimitKeyConcurrency}}))
		}, timeout, poll).Should(Succeed())
		Eventually(func(g Gomega) map[string]float64 {
			return queueSeries(g, ctrlmetrics.Registry, ns)
		}, timeout, poll).Should(And(
			HaveKeyWithValue("dtq_queue_flow_limited{limit=KeyConcurrency,queue=q}", 1.0),
			HaveKeyWithValue("dtq_queue_flow_limited{limit=RateLimit,queue=q}", 0.0),
			HaveKeyWithValue("dtq_queue_flow_throttled_tasks{queue=q}", 2.0),
			HaveKeyWithValue("dtq_queue_flow_held_slots{queue=q}", 1.0),
			HaveKeyWithValue("dtq_queue_flow_parked_keys{queue=q}", 1.0)))
		// The Task's status is written when it is submitted: by then the
		// first task holds the key's slot, or the resync writes it later.
		Eventually(getTask(tasks[2]), 2*DefaultResyncPeriod, poll).Should(And(
			HaveField("Status.State", dtqv1alpha1.TaskQueued),
			HaveField("Status.WaitReason", ContainSubstring("tenant-a"))))
		GinkgoWriter.Println("wait reason:", getTask(tasks[2])(Default).Status.WaitReason)
	})

	It("sizes the workers of a backlog by what maxConcurrency can use, not by the backlog", func() {
		ns := newNamespace("flowscale")
		// Without flow control, 20 queued at 1 per worker would ask for the
		// maximum, 10; maxConcurrency 3 over 1 slot per worker uses 3.
		q := testutil.MakeQueue("q", ns).Replicas(1, 10).TargetBacklog(1).Concurrency(1).
			FlowControl(&dtqv1alpha1.FlowControl{MaxConcurrency: ptr.To[int32](3)}).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(replicasOf(ns, "q-workers"), timeout, poll).Should(Equal(int32(1)))
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		for range 20 {
			_, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "echo"})
			Expect(err).NotTo(HaveOccurred())
		}
		// The reconcile that reports 20 admissible applied its replica count
		// before writing status; a count of 10 would then stay for the
		// scale-down window (60s), past the timeout.
		Eventually(func(g Gomega) int64 {
			f := getQueue(q)(g).Status.Flow
			g.Expect(f).NotTo(BeNil())
			return f.Admissible
		}, timeout, poll).Should(Equal(int64(20)))
		Eventually(replicasOf(ns, "q-workers"), timeout, poll).Should(Equal(int32(3)))
		Expect(getQueue(q)(Default).Status.DesiredWorkers).To(Equal(int32(3)))
	})
})
