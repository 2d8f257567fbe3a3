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
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
)

func queueCondition(q *dtqv1alpha1.Queue, typ string) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		c := meta.FindStatusCondition(getQueue(q)(g).Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), "no %s condition", typ)
		return c
	}
}

// someonesDeployment is a Deployment the Queue does not own.
func someonesDeployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": "theirs"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "theirs:1"}}},
			},
		},
	}
}

var _ = Describe("Worker Deployment ownership", func() {
	DescribeTable("leaves a <queue>-workers Deployment it does not control untouched, with DeploymentConflict",
		func(labels map[string]string) {
			ns := newNamespace("conflict")
			theirs := someonesDeployment(ns, "q-workers", labels)
			Expect(k8sClient.Create(ctx, theirs)).To(Succeed())
			q := testutil.MakeQueue("q", ns).Obj()
			Expect(k8sClient.Create(ctx, q)).To(Succeed())

			Eventually(queueCondition(q, dtqv1alpha1.QueueReady), timeout, poll).Should(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", dtqv1alpha1.ReasonDeploymentConflict)))
			Consistently(func(g Gomega) {
				d := getDeployment(ns, "q-workers")(g)
				g.Expect(d.ResourceVersion).To(Equal(theirs.ResourceVersion), "the Deployment was written")
				g.Expect(d.OwnerReferences).To(BeEmpty())
			}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
		},
		Entry("without the Queue label (outside the manager's cache)", nil),
		Entry("with the Queue label", map[string]string{LabelQueue: "q"}),
	)

	It("says on the Queue when the API server forbids its worker Deployment (here a ResourceQuota)", func() {
		ns := newNamespace("forbidden")
		hard := corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-deployments", Namespace: ns},
			Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		Expect(k8sClient.Create(ctx, rq)).To(Succeed())
		// No quota controller runs in envtest: write the status it would.
		rq.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}}
		Expect(k8sClient.Status().Update(ctx, rq)).To(Succeed())
		q := testutil.MakeQueue("q", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(queueCondition(q, dtqv1alpha1.QueueReady), timeout, poll).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", dtqv1alpha1.ReasonDeploymentForbidden),
			HaveField("Message", ContainSubstring("exceeded quota"))))
	})

	It("keeps kubectl rollout restart's annotation and other managers' fields across a scale change", func() {
		ns := newNamespace("restart")
		q := testutil.MakeQueue("q", ns).Replicas(1, 3).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(replicasOf(ns, "q-workers"), timeout, poll).Should(Equal(int32(1)))

		By("restarting as kubectl rollout restart does, and labelling as another controller")
		d := getDeployment(ns, "q-workers")(Default)
		restart := []byte(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-11-30T10:00:00Z"}}}}}`)
		Expect(k8sClient.Patch(ctx, d, client.RawPatch(types.StrategicMergePatchType, restart), client.FieldOwner("kubectl-rollout"))).To(Succeed())
		label := []byte(`{"metadata":{"labels":{"team":"billing"}}}`)
		Expect(k8sClient.Patch(ctx, d, client.RawPatch(types.MergePatchType, label), client.FieldOwner("other-controller"))).To(Succeed())

		By("scaling the workers")
		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.Scaling.MinReplicas = ptr.To(int32(2)) })
		Eventually(replicasOf(ns, "q-workers"), timeout, poll).Should(Equal(int32(2)))
		d = getDeployment(ns, "q-workers")(Default)
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue("kubectl.kubernetes.io/restartedAt", "2026-11-30T10:00:00Z"))
		Expect(d.Labels).To(HaveKeyWithValue("team", "billing"))

		By("changing the worker template")
		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.Concurrency = 9 })
		Eventually(func(g Gomega) []corev1.EnvVar {
			return getDeployment(ns, "q-workers")(g).Spec.Template.Spec.Containers[0].Env
		}, timeout, poll).Should(ContainElement(And(HaveField("Name", "DTQ_WORKER_CONCURRENCY"), HaveField("Value", "9"))))
		d = getDeployment(ns, "q-workers")(Default)
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue("kubectl.kubernetes.io/restartedAt", "2026-11-30T10:00:00Z"))
		Expect(d.Labels).To(HaveKeyWithValue("team", "billing"))
	})

	It("leaves the replica count to an HPA when scaling.mode is External", func() {
		ns := newNamespace("hpa")
		// A 1 ms window: the Backlog autoscaler would take the count back at once.
		q := testutil.MakeQueue("q", ns).ScaleDownAfter(time.Millisecond).Obj()
		q.Spec.Scaling.Mode = dtqv1alpha1.ScalingExternal
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(getDeployment(ns, "q-workers"), timeout, poll).ShouldNot(BeNil())

		By("scaling through the scale subresource, as the HPA controller does")
		d := getDeployment(ns, "q-workers")(Default)
		scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
		Expect(k8sClient.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale), client.FieldOwner("horizontal-pod-autoscaler"))).To(Succeed())
		Eventually(func(g Gomega) int32 { return getQueue(q)(g).Status.DesiredWorkers }, timeout, poll).Should(Equal(int32(4)))

		By("changing the worker template: the operator applies it and keeps the HPA's count")
		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.Concurrency = 9 })
		Eventually(func(g Gomega) []corev1.EnvVar {
			return getDeployment(ns, "q-workers")(g).Spec.Template.Spec.Containers[0].Env
		}, timeout, poll).Should(ContainElement(And(HaveField("Name", "DTQ_WORKER_CONCURRENCY"), HaveField("Value", "9"))))
		Consistently(replicasOf(ns, "q-workers"), 2*time.Second, 200*time.Millisecond).Should(Equal(int32(4)))
	})

	It("replaces a workerTemplate's DTQ_QUEUE_NAMESPACE and DTQ_QUEUE_NAME and says so", func() {
		ns := newNamespace("envover")
		q := testutil.MakeQueue("q", ns).Obj()
		q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "worker", Image: "mine:1", Env: []corev1.EnvVar{
			{Name: "DTQ_QUEUE_NAMESPACE", Value: "victim"}, {Name: "DTQ_QUEUE_NAME", Value: "payments"},
		}}}
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(func(g Gomega) []corev1.EnvVar {
			return getDeployment(ns, "q-workers")(g).Spec.Template.Spec.Containers[0].Env
		}, timeout, poll).Should(And(
			ContainElement(And(HaveField("Name", "DTQ_QUEUE_NAMESPACE"), HaveField("Value", ns))),
			ContainElement(And(HaveField("Name", "DTQ_QUEUE_NAME"), HaveField("Value", "q"))),
			Not(ContainElement(HaveField("Value", "victim"))),
			Not(ContainElement(HaveField("Value", "payments"))),
		))
		Eventually(queueCondition(q, dtqv1alpha1.QueueWorkerEnvOverridden), timeout, poll).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", dtqv1alpha1.ReasonEnvOverridden),
			HaveField("Message", And(ContainSubstring("DTQ_QUEUE_NAMESPACE"), ContainSubstring("DTQ_QUEUE_NAME")))))
	})
})
