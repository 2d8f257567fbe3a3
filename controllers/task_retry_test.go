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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// raiseRetry raises a Task's spec.retryGeneration by one, as `kubectl dtq retry` does.
func raiseRetry(t *dtqv1alpha1.Task) error {
	got := &dtqv1alpha1.Task{}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(t), got); err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(got.DeepCopy(), client.MergeFromWithOptimisticLock{})
	got.Spec.RetryGeneration++
	return k8sClient.Patch(ctx, got, patch)
}

// openGate opens the gate named after namespace ns for its tasks.
func openGate(ns string) {
	Expect(rdb.Set(ctx, demo.GateKey(ns, ns), 1, 0).Err()).To(Succeed())
}

var _ = Describe("Task retry", func() {
	It("runs a DeadLettered Task again on spec.retryGeneration, keeps the ended run, and its mirror follows", func() {
		ns := newNamespace("retry")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).RetryDelays(100*time.Millisecond, time.Second).Obj())).To(Succeed())
		stopWorker := startWorker(ns, "q")
		orig := testutil.MakeTask("orig", ns).Queue("q").Type(demo.Gate).Key("deploy").MaxAttempts(2).
			Payload(demo.GatePayload{Name: ns}).Obj()
		Expect(k8sClient.Create(ctx, orig)).To(Succeed())
		Eventually(getTask(orig), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskDeadLettered))
		mirror := testutil.MakeTask("mirror", ns).Queue("q").Type(demo.Gate).Key("deploy").Payload(demo.GatePayload{Name: ns}).Obj()
		Expect(k8sClient.Create(ctx, mirror)).To(Succeed())
		Eventually(getTask(mirror), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskDeadLettered))
		dead := getTask(orig)(Default)
		Expect(condition(dead, dtqv1alpha1.TaskSucceededCondition)).To(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", "DeadLettered")))

		By("retrying with no worker: the Task is Queued again at once, its record processing")
		stopWorker()
		Expect(raiseRetry(orig)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getTask(orig)(g)
			g.Expect(got.Status.State).To(Equal(dtqv1alpha1.TaskQueued))
			g.Expect(got.Status.ObservedRetryGeneration).To(Equal(int64(1)))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.Attempt).To(Equal(int32(1)))
			g.Expect(got.Status.Idempotency.State).To(Equal(dtqv1alpha1.IdempotencyProcessing))
			g.Expect(condition(got, dtqv1alpha1.TaskSucceededCondition)).To(BeNil())
			g.Expect(condition(got, dtqv1alpha1.TaskReconciling)).To(HaveField("Reason", "Queued"))
		}, timeout, poll).Should(Succeed())
		Eventually(getTask(mirror), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskQueued))
		rec, err := engine.Idempotency(ctx, ref, "deploy")
		Expect(err).NotTo(HaveOccurred())
		Expect(rec.State).To(Equal(broker.IdempotencyProcessing))

		By("opening the gate and starting a worker: it succeeds on attempt 1 of its second run")
		openGate(ns)
		DeferCleanup(startWorker(ns, "q"))
		Eventually(getTask(orig), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		got := getTask(orig)(Default)
		Expect(got.Status.Attempt).To(Equal(int32(1)))
		Expect(got.Status.Idempotency.State).To(Equal(dtqv1alpha1.IdempotencyCompleted))
		Expect(got.Status.History).To(HaveLen(1))
		Expect(got.Status.History[0]).To(And(HaveField("State", dtqv1alpha1.TaskDeadLettered), HaveField("Attempts", int32(2)),
			HaveField("LastError", ContainSubstring("closed")), HaveField("FinishedAt", Not(BeNil()))))
		Expect(condition(got, dtqv1alpha1.TaskSucceededCondition)).To(HaveField("Status", metav1.ConditionTrue))
		info, err := engine.GetTask(ctx, ref, string(orig.UID))
		Expect(err).NotTo(HaveOccurred())
		Expect(info.PrevAttempts).To(Equal(2))

		Eventually(getTask(mirror), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		m := getTask(mirror)(Default)
		Expect(m.Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{
			Key: "deploy", State: dtqv1alpha1.IdempotencyCompleted, TaskID: string(orig.UID), Duplicate: true, RequestMatches: ptr.To(true)}))
		Expect(m.Status.Result).To(Equal(got.Status.Result))
		Expect(m.Status.History).To(ConsistOf(HaveField("State", dtqv1alpha1.TaskDeadLettered)))

		By("refusing a retry of the Succeeded task at admission (config/admission)")
		Eventually(func() error { return raiseRetry(orig) }, timeout, poll).Should(
			MatchError(ContainSubstring("cannot retry a task that is Succeeded: only a Failed or DeadLettered task can be retried")))
	})

	It("runs a Failed Task again (no dead-letter queue), retrying a mirror retries its original", func() {
		ns := newNamespace("retry-failed")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).DeadLetter(false).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))
		orig := testutil.MakeTask("orig", ns).Queue("q").Type(demo.Gate).Key("k").MaxAttempts(1).
			Payload(demo.GatePayload{Name: ns}).Obj()
		Expect(k8sClient.Create(ctx, orig)).To(Succeed())
		Eventually(getTask(orig), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskFailed))
		mirror := testutil.MakeTask("mirror", ns).Queue("q").Type(demo.Gate).Key("k").Payload(demo.GatePayload{Name: ns}).Obj()
		Expect(k8sClient.Create(ctx, mirror)).To(Succeed())
		Eventually(getTask(mirror), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskFailed))

		openGate(ns)
		Expect(raiseRetry(mirror)).To(Succeed())
		for _, t := range []*dtqv1alpha1.Task{orig, mirror} {
			Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
			Expect(getTask(t)(Default).Status.History).To(ConsistOf(HaveField("State", dtqv1alpha1.TaskFailed)))
		}
		Expect(getTask(mirror)(Default).Status.TaskID).To(BeEmpty(), "the mirror still has no task of its own")
	})

	It("retries nothing for a retryGeneration the Task was created with, and follows a dead-letter requeue made in the engine (the HTTP API's path)", func() {
		ns := newNamespace("requeue")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))
		t := testutil.MakeTask("gated", ns).Queue("q").Type(demo.Gate).MaxAttempts(1).Payload(demo.GatePayload{Name: ns}).Obj()
		t.Spec.RetryGeneration = 3 // applied from Git after earlier retries, say
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskDeadLettered))
		Consistently(func(g Gomega) {
			got := getTask(t)(g)
			g.Expect(got.Status.State).To(Equal(dtqv1alpha1.TaskDeadLettered))
			g.Expect(got.Status.History).To(BeEmpty())
			g.Expect(got.Status.ObservedRetryGeneration).To(Equal(int64(3)))
		}, time.Second, poll).Should(Succeed())

		openGate(ns)
		_, err := engine.Requeue(ctx, ref, string(t.UID))
		Expect(err).NotTo(HaveOccurred())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		got := getTask(t)(Default)
		Expect(got.Status.History).To(ConsistOf(HaveField("State", dtqv1alpha1.TaskDeadLettered)))
		Expect(got.Status.ObservedRetryGeneration).To(Equal(int64(3)))
	})

	It("submits a Task rejected at submission again when retried", func() {
		ns := newNamespace("retry-invalid")
		q := testutil.MakeQueue("q", ns).MaxPayloadBytes(64).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))
		t := testutil.MakeTask("big", ns).Queue("q").Payload(map[string]any{"blob": "0123456789012345678901234567890123456789012345678901234567890123456789"}).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskFailed))

		got := getQueue(q)(Default)
		raised := got.DeepCopy()
		raised.Spec.MaxPayloadBytes = 1024
		// A merge patch: the Queue controller's own writes (finalizer,
		// status) would make an Update conflict.
		Expect(k8sClient.Patch(ctx, raised, client.MergeFrom(got))).To(Succeed())
		Eventually(func(g Gomega) bool { // the Queue controller wrote the new limit to Redis
			q := getQueue(q)(g)
			return q.Status.ObservedGeneration == q.Generation
		}, timeout, poll).Should(BeTrue())
		Expect(raiseRetry(t)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		done := getTask(t)(Default)
		Expect(done.Status.TaskID).To(Equal(string(t.UID)))
		Expect(done.Status.History).To(ConsistOf(And(HaveField("State", dtqv1alpha1.TaskFailed), HaveField("Attempts", int32(0)))))
		Expect(condition(done, dtqv1alpha1.TaskSubmitted)).To(HaveField("Status", metav1.ConditionTrue))
	})
})
