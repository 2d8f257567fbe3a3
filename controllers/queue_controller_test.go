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

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

func getDeployment(ns, name string) func(Gomega) *appsv1.Deployment {
	return func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d)).To(Succeed())
		return d
	}
}

func replicasOf(ns, name string) func(Gomega) int32 {
	return func(g Gomega) int32 { return ptr.Deref(getDeployment(ns, name)(g).Spec.Replicas, -1) }
}

// markReady plays the kube-controller-manager and kubelet, which envtest does
// not run: it reports every desired replica as ready.
func markReady(ns, name string) {
	Eventually(func(g Gomega) {
		d := getDeployment(ns, name)(g)
		n := ptr.Deref(d.Spec.Replicas, 0)
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = n, n, n, n
		g.Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
	}, timeout, poll).Should(Succeed())
}

var _ = Describe("Queue controller", func() {
	It("sets the queue up in Redis and owns a worker Deployment with the worker environment", func() {
		ns := newNamespace("queue")
		q := testutil.MakeQueue("emails", ns).Concurrency(7).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())

		Eventually(getDeployment(ns, "emails-workers"), timeout, poll).Should(Not(BeNil()))
		d := getDeployment(ns, "emails-workers")(Default)
		Expect(d.OwnerReferences).To(ContainElement(And(
			HaveField("Kind", "Queue"), HaveField("Name", "emails"), HaveField("Controller", ptr.To(true)))))
		Expect(d.Labels).To(HaveKeyWithValue(LabelQueue, "emails"))
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Image).To(Equal(DefaultWorkerImage))
		Expect(c.Env).To(ContainElements(
			HaveField("Name", "DTQ_REDIS_URL"),
			And(HaveField("Name", "DTQ_QUEUE_NAMESPACE"), HaveField("Value", ns)),
			And(HaveField("Name", "DTQ_QUEUE_NAME"), HaveField("Value", "emails")),
			And(HaveField("Name", "DTQ_WORKER_CONCURRENCY"), HaveField("Value", "7")),
		))
		Expect(*c.SecurityContext.RunAsNonRoot).To(BeTrue())

		cfg, err := engine.QueueConfig(ctx, broker.QueueRef{Namespace: ns, Name: "emails"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.MaxDepth).To(Equal(int64(10000)))

		By("reporting ready workers from the Deployment's status")
		markReady(ns, "emails-workers")
		Eventually(func(g Gomega) {
			st := getQueue(q)(g).Status
			g.Expect(st.Workers).To(Equal("1/1"))
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, dtqv1alpha1.QueueReady)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, dtqv1alpha1.QueueWorkersAvailable)).To(BeTrue())
			g.Expect(st.ObservedGeneration).To(Equal(getQueue(q)(g).Generation))
		}, timeout, poll).Should(Succeed())

		By("pausing and resuming the queue in Redis")
		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.Paused = true })
		Eventually(func() (bool, error) { return engine.Paused(ctx, broker.QueueRef{Namespace: ns, Name: "emails"}) }, timeout, poll).Should(BeTrue())
		Eventually(func(g Gomega) bool {
			return meta.IsStatusConditionTrue(getQueue(q)(g).Status.Conditions, dtqv1alpha1.QueuePaused)
		}, timeout, poll).Should(BeTrue())
		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.Paused = false })
		Eventually(func() (bool, error) { return engine.Paused(ctx, broker.QueueRef{Namespace: ns, Name: "emails"}) }, timeout, poll).Should(BeFalse())
	})

	It("scales workers with the backlog: up at once, down after the window, to zero and back on the next task", func() {
		ns := newNamespace("scale")
		const dep = "q-workers"
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		q := testutil.MakeQueue("q", ns).Replicas(1, 3).TargetBacklog(2).ScaleDownAfter(2 * time.Second).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(replicasOf(ns, dep), timeout, poll).Should(Equal(int32(1)))

		By("submitting a burst over the engine (the HTTP path: no Task objects)")
		for range 10 {
			_, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "echo"})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(replicasOf(ns, dep), 5*time.Second, poll).Should(Equal(int32(3)))
		markReady(ns, dep)
		Eventually(func(g Gomega) string { return getQueue(q)(g).Status.Workers }, timeout, poll).Should(Equal("3/3"))

		By("draining the queue: replicas fall to min only after the stabilization window")
		stop := startWorker(ns, "q")
		Eventually(func(g Gomega) *metav1.Time { return getQueue(q)(g).Status.ScaleDownSince }, timeout, poll).ShouldNot(BeNil())
		Expect(replicasOf(ns, dep)(Default)).To(Equal(int32(3)))
		Eventually(replicasOf(ns, dep), timeout, poll).Should(Equal(int32(1)))
		stop()

		By("scaling to zero when min is 0 and the queue is idle")
		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.Scaling.MinReplicas = ptr.To(int32(0)) })
		Eventually(replicasOf(ns, dep), timeout, poll).Should(Equal(int32(0)))
		Eventually(func(g Gomega) *metav1.Condition {
			return meta.FindStatusCondition(getQueue(q)(g).Status.Conditions, dtqv1alpha1.QueueWorkersAvailable)
		}, timeout, poll).Should(HaveField("Reason", dtqv1alpha1.ReasonScaledToZero))

		By("scaling up within seconds of the next task")
		t := testutil.MakeTask("wake-up", ns).Queue("q").Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(replicasOf(ns, dep), 5*time.Second, poll).Should(Equal(int32(1)))
		DeferCleanup(startWorker(ns, "q"))
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
	})

	It("promotes delayed tasks from the manager, with no worker running", func() {
		ns := newNamespace("delay")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Replicas(0, 2).Obj())).To(Succeed())
		t := testutil.MakeTask("later", ns).Queue("q").Delay(time.Second).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskPending))
		Eventually(func() (broker.State, error) {
			info, err := engine.GetTask(ctx, ref, string(t.UID))
			return info.State, err
		}, timeout, poll).Should(Equal(broker.StateQueued))
		Eventually(replicasOf(ns, "q-workers"), 5*time.Second, poll).Should(Equal(int32(1)))
	})
})

func patchQueue(q *dtqv1alpha1.Queue, mutate func(*dtqv1alpha1.Queue)) {
	cur := &dtqv1alpha1.Queue{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(q), cur)).To(Succeed())
	base := client.MergeFrom(cur.DeepCopy())
	mutate(cur)
	Expect(k8sClient.Patch(ctx, cur, base)).To(Succeed())
}
