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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/broker"
	"github.com/dtq-dev/dtq/internal/testutil"
)

var _ = Describe("Flow control", func() {
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
		// The reconcile that reports 20 queued applied its replica count
		// before writing status; a count of 10 would then stay for the
		// scale-down window (60s), past the timeout.
		Eventually(func(g Gomega) int64 { return getQueue(q)(g).Status.Queued }, timeout, poll).Should(Equal(int64(20)))
		Eventually(replicasOf(ns, "q-workers"), timeout, poll).Should(Equal(int32(3)))
		Expect(getQueue(q)(Default).Status.DesiredWorkers).To(Equal(int32(3)))
	})
})
