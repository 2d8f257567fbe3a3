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
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// Two Task manifests with one idempotency key and different payloads, on a
// Queue of each spec.idempotency.onMismatch; then the first manifest
// re-applied unchanged. The key's task is submitted through the engine as
// the HTTP API does, with its payload's keys in another order and spaced, so
// the Tasks' payloads, re-encoded by the API server, must match it by value.
var _ = Describe("An idempotency key reused for another request", func() {
	for _, policy := range []dtqv1alpha1.IdempotencyMismatchPolicy{dtqv1alpha1.IdempotencyMismatchReplay, dtqv1alpha1.IdempotencyMismatchReject} {
		It("is shown, and refused under "+string(policy)+", while the same manifest replays cleanly", func() {
			ns := newNamespace("reuse-" + strings.ToLower(string(policy)))
			Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).OnMismatch(policy).Obj())).To(Succeed())
			DeferCleanup(startWorker(ns, "q"))
			ref := broker.QueueRef{Namespace: ns, Name: "q"}
			Eventually(func() error { _, err := engine.QueueConfig(ctx, ref); return err }, timeout, poll).Should(Succeed())

			By("submitting the key's task over the engine, as the HTTP API does")
			res, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "count", IdempotencyKey: "order-7", Priority: 5,
				Payload: json.RawMessage(`{ "n": 1.0, "name": "` + ns + `" }`)})
			Expect(err).NotTo(HaveOccurred())
			owner := res.Task.ID
			Eventually(func() (broker.State, error) {
				t, err := engine.GetTask(ctx, ref, owner)
				return t.State, err
			}, timeout, poll).Should(Equal(broker.StateSucceeded))

			manifest := func(name string, n int) *dtqv1alpha1.Task {
				return testutil.MakeTask(name, ns).Queue("q").Type("count").Key("order-7").
					Payload(map[string]any{"name": ns, "n": n}).Obj()
			}
			same := manifest("same", 1)
			Expect(k8sClient.Create(ctx, same)).To(Succeed())
			Eventually(getTask(same), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
			got := getTask(same)(Default)
			Expect(got.Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{Key: "order-7",
				State: dtqv1alpha1.IdempotencyCompleted, TaskID: owner, Duplicate: true, RequestMatches: ptr.To(true)}))
			Expect(condition(got, dtqv1alpha1.TaskRequestMismatch)).To(BeNil())

			By("creating a second manifest with the key and another payload")
			other := manifest("other", 2)
			Expect(k8sClient.Create(ctx, other)).To(Succeed())
			if policy == dtqv1alpha1.IdempotencyMismatchReplay {
				Eventually(getTask(other), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
				got = getTask(other)(Default)
				Expect(got.Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{Key: "order-7",
					State: dtqv1alpha1.IdempotencyCompleted, TaskID: owner, Duplicate: true, RequestMatches: ptr.To(false)}))
				Expect(condition(got, dtqv1alpha1.TaskRequestMismatch)).To(And(HaveField("Status", metav1.ConditionTrue),
					HaveField("Reason", dtqv1alpha1.ReasonReplayed), HaveField("Message", ContainSubstring(owner))))
				Expect(tableRow(ns, "other")).To(HaveKeyWithValue("Request Matches", false))
			} else {
				Eventually(getTask(other), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskFailed))
				got = getTask(other)(Default)
				Expect(got.Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{Key: "order-7", TaskID: owner,
					RequestMatches: ptr.To(false)}))
				Expect(got.Status.TaskID).To(BeEmpty())
				for _, typ := range []string{dtqv1alpha1.TaskSubmitted, dtqv1alpha1.TaskRequestMismatch, dtqv1alpha1.TaskStalled} {
					Expect(condition(got, typ)).To(And(HaveField("Reason", dtqv1alpha1.ReasonIdempotencyKeyMismatch),
						HaveField("Message", ContainSubstring(owner))), typ)
				}
				Expect(condition(got, dtqv1alpha1.TaskSubmitted)).To(HaveField("Status", metav1.ConditionFalse))
			}
			_, err = engine.GetTask(ctx, ref, string(other.UID))
			Expect(err).To(MatchError(broker.ErrTaskNotFound), "the second manifest's payload never became a task")
			rec, err := engine.Idempotency(ctx, ref, "order-7")
			Expect(err).NotTo(HaveOccurred())
			Expect(rec.TaskID).To(Equal(owner))

			By("re-applying the first manifest unchanged")
			Expect(k8sClient.Delete(ctx, same)).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(same), &dtqv1alpha1.Task{}))
			}, timeout, poll).Should(BeTrue())
			again := manifest("same", 1)
			Expect(k8sClient.Create(ctx, again)).To(Succeed())
			Eventually(getTask(again), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
			got = getTask(again)(Default)
			Expect(got.Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{Key: "order-7",
				State: dtqv1alpha1.IdempotencyCompleted, TaskID: owner, Duplicate: true, RequestMatches: ptr.To(true)}))
			Expect(condition(got, dtqv1alpha1.TaskRequestMismatch)).To(BeNil())
			Expect(runCount(ns)).To(Equal(int64(1)), "the key's task ran once")
		})
	}
})

// A duplicate whose request did not match the key's task's is announced by
// a RequestMismatch warning instead of the Duplicate event.
func TestDuplicateMilestones(t *testing.T) {
	for name, tc := range map[string]struct {
		matches           *bool
		eventType, reason string
	}{
		"matching":   {ptr.To(true), corev1.EventTypeNormal, EventReasonDuplicate},
		"unknown":    {nil, corev1.EventTypeNormal, EventReasonDuplicate},
		"mismatched": {ptr.To(false), corev1.EventTypeWarning, EventReasonRequestMismatch},
	} {
		t.Run(name, func(t *testing.T) {
			idem := &dtqv1alpha1.TaskIdempotency{Key: "k", TaskID: "orig", Duplicate: true, RequestMatches: tc.matches}
			for _, next := range []*dtqv1alpha1.TaskStatus{
				{State: dtqv1alpha1.TaskQueued, Idempotency: idem},
				{State: dtqv1alpha1.TaskSucceeded, Idempotency: &dtqv1alpha1.TaskIdempotency{Key: "k", TaskID: "orig", Duplicate: true,
					State: dtqv1alpha1.IdempotencyCompleted, RequestMatches: tc.matches}},
			} {
				typ, reason, note, ok := milestone(&dtqv1alpha1.TaskStatus{}, next)
				if !ok || typ != tc.eventType || reason != tc.reason || !strings.Contains(note, "orig") {
					t.Errorf("%s: event %s %s %q, want %s %s naming orig", next.State, typ, reason, note, tc.eventType, tc.reason)
				}
			}
		})
	}
}
