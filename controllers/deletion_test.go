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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// stopTheManager stops the suite's manager for a test; it runs again at the
// test's end if the test did not start it itself.
func stopTheManager() {
	stopManager()
	stopManager = nil
	DeferCleanup(func() {
		if stopManager == nil {
			stopManager = startManager(Options{})
		}
	})
}

func taskState(ref broker.QueueRef, id string) func() broker.State {
	return func() broker.State {
		info, _ := engine.GetTask(ctx, ref, id)
		return info.State
	}
}

var _ = Describe("Deletes while no manager runs", func() {
	It("cancels the task of a Task deleted while the manager was down, when the manager starts", func() {
		ns := newNamespace("orphan")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		gone := testutil.MakeTask("gone", ns).Queue("q").Type("count").Payload(map[string]any{"name": ns}).Obj()
		kept := testutil.MakeTask("kept", ns).Queue("q").Type("count").Payload(map[string]any{"name": ns + "-kept"}).Obj()
		for _, t := range []*dtqv1alpha1.Task{gone, kept} {
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			Eventually(taskState(ref, string(t.UID)), timeout, poll).Should(Equal(broker.StateQueued))
		}
		// A task the HTTP API submitted has no Task: the sweep leaves it alone.
		api, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "count", Payload: []byte(`{"name":"api"}`), Priority: 5})
		Expect(err).NotTo(HaveOccurred())

		By("deleting one Task while no manager runs")
		stopTheManager()
		Expect(k8sClient.Delete(ctx, gone)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(gone), &dtqv1alpha1.Task{}))
		}, timeout, poll).Should(BeTrue())
		Expect(taskState(ref, string(gone.UID))()).To(Equal(broker.StateQueued))

		By("starting the manager again")
		stopManager = startManager(Options{})
		Eventually(taskState(ref, string(gone.UID)), timeout, poll).Should(Equal(broker.StateCancelled))
		Expect(taskState(ref, string(kept.UID))()).To(Equal(broker.StateQueued))
		Expect(taskState(ref, api.Task.ID)()).To(Equal(broker.StateQueued))
		DeferCleanup(startWorker(ns, "q"))
		Eventually(getTask(kept), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		Expect(runCount(ns)).To(BeZero(), "the deleted Task's task never ran")
	})

	It("cancels a forcibly deleted Queue's tasks when the manager starts and says so on its Tasks", func() {
		ns := newNamespace("forced")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		q := testutil.MakeQueue("q", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		t := testutil.MakeTask("stranded", ns).Queue("q").Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskQueued))

		By("deleting the Queue, finalizer and all, while no manager runs")
		stopTheManager()
		Eventually(func(g Gomega) {
			got := getQueue(q)(g)
			got.Finalizers = nil
			g.Expect(k8sClient.Update(ctx, got)).To(Succeed())
		}, timeout, poll).Should(Succeed())
		Expect(k8sClient.Delete(ctx, q)).To(Succeed())

		By("starting the manager again")
		stopManager = startManager(Options{})
		Eventually(taskState(ref, string(t.UID)), timeout, poll).Should(Equal(broker.StateCancelled))
		Eventually(func(g Gomega) {
			got := getTask(t)(g)
			g.Expect(got.Status.State).To(Equal(dtqv1alpha1.TaskCancelled))
			g.Expect(condition(got, dtqv1alpha1.TaskSubmitted)).To(HaveField("Status", metav1.ConditionTrue),
				"a task that is in Redis is never reported as waiting to be submitted")
		}, timeout, poll).Should(Succeed())
	})
})

var _ = Describe("Queue deletion", func() {
	It("cancels the Queue's unfinished tasks, removes its Redis keys and ends its Tasks Cancelled", func() {
		ns := newNamespace("qdelete")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		q := testutil.MakeQueue("q", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(func(g Gomega) []string { return getQueue(q)(g).Finalizers }, timeout, poll).Should(ContainElement(QueueFinalizer))
		queued := testutil.MakeTask("queued", ns).Queue("q").Key("k").Obj()
		delayed := testutil.MakeTask("delayed", ns).Queue("q").Delay(time.Hour).Obj()
		for _, t := range []*dtqv1alpha1.Task{queued, delayed} {
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			Eventually(taskState(ref, string(t.UID)), timeout, poll).ShouldNot(BeEmpty())
		}
		api, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "echo", Priority: 5})
		Expect(err).NotTo(HaveOccurred())

		Expect(k8sClient.Delete(ctx, q)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(q), &dtqv1alpha1.Queue{}))
		}, timeout, poll).Should(BeTrue())
		Expect(rdb.Keys(ctx, broker.KeyPrefix(ref)+"*").Val()).To(BeEmpty())
		_, err = engine.GetTask(ctx, ref, api.Task.ID)
		Expect(err).To(MatchError(broker.ErrTaskNotFound))
		for _, t := range []*dtqv1alpha1.Task{queued, delayed} {
			Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskCancelled))
		}
		Expect(getTask(queued)(Default).Status.Idempotency).To(HaveField("State", dtqv1alpha1.IdempotencyFailed))

		By("never running them when a Queue of the same name comes back")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))
		Consistently(getTask(queued), 2*time.Second, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskCancelled))
		_, err = engine.GetTask(ctx, ref, string(queued.UID))
		Expect(err).To(MatchError(broker.ErrTaskNotFound))
	})
})
