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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
)

// The CRDs' OpenAPI and CEL rules, checked against the real apiserver.
var _ = Describe("CRD validation", Ordered, func() {
	const ns = "validation"

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	})

	It("accepts a minimal Queue and fills in the defaults", func() {
		q := testutil.MakeQueue("defaults", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		got := &dtqv1alpha1.Queue{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(q), got)).To(Succeed())
		s := got.Spec
		Expect(s.Concurrency).To(Equal(int32(4)))
		Expect(s.Scaling.MinReplicas).To(Equal(ptr.To(int32(1))))
		Expect(s.Scaling.MaxReplicas).To(Equal(int32(10)))
		Expect(s.Scaling.TargetBacklogPerWorker).To(Equal(int32(100)))
		Expect(s.Scaling.ScaleDownStabilization.Duration).To(Equal(time.Minute))
		Expect(s.VisibilityTimeout.Duration).To(Equal(30 * time.Second))
		Expect(s.HeartbeatInterval.Duration).To(Equal(5 * time.Second))
		Expect(s.TaskTimeout.Duration).To(Equal(30 * time.Second))
		Expect(s.Retry.MaxAttempts).To(Equal(int32(5)))
		Expect(s.Retry.BaseDelay.Duration).To(Equal(time.Second))
		Expect(s.Retry.MaxDelay.Duration).To(Equal(time.Minute))
		Expect(s.Retry.JitterPercent).To(Equal(ptr.To(int32(20))))
		Expect(s.MaxDepth).To(Equal(int64(10000)))
		Expect(s.MaxPayloadBytes).To(Equal(int64(262144)))
		Expect(s.IdempotencyTTL.Duration).To(Equal(24 * time.Hour))
		Expect(s.TaskRetention.Duration).To(Equal(7 * 24 * time.Hour))
		Expect(s.ResultRetention.Duration).To(Equal(time.Hour))
		Expect(s.DeadLetter.Enabled).To(Equal(ptr.To(true)))
		Expect(s.DeadLetter.MaxLength).To(Equal(int64(10000)))
		Expect(s.Durability.ReplicaAcks).To(BeZero())
		Expect(s.Durability.ReplicaAckTimeout.Duration).To(Equal(time.Second))
		Expect(s.Idempotency.OnMismatch).To(Equal(dtqv1alpha1.IdempotencyMismatchReplay))
		Expect(s.Paused).To(BeFalse())
	})

	It("accepts a valid Task and fills in the defaults", func() {
		t := testutil.MakeTask("valid", ns).Key("order-42").Payload(map[string]any{"a": 1, "nested": map[string]any{"b": []int{1, 2}}}).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		got := &dtqv1alpha1.Task{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), got)).To(Succeed())
		Expect(got.Spec.Priority).To(Equal(ptr.To(int32(5))))
		Expect(got.Spec.IdempotencyKey).To(Equal("order-42"))
		Expect(string(got.Spec.Payload.Raw)).To(MatchJSON(`{"a":1,"nested":{"b":[1,2]}}`))
	})

	DescribeTable("rejects invalid objects with a message naming the field",
		func(obj client.Object, field string) {
			err := k8sClient.Create(ctx, obj)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(field))
		},
		Entry("priority 10", testutil.MakeTask("p10", ns).Priority(10).Obj(), "spec.priority"),
		Entry("negative priority", testutil.MakeTask("pneg", ns).Priority(-1).Obj(), "spec.priority"),
		Entry("maxAttempts 0", testutil.MakeTask("ma0", ns).MaxAttempts(0).Obj(), "spec.maxAttempts"),
		Entry("maxAttempts 11", testutil.MakeTask("ma11", ns).MaxAttempts(11).Obj(), "spec.maxAttempts"),
		Entry("idempotencyKey of 257 characters", testutil.MakeTask("longkey", ns).Key(strings.Repeat("k", 257)).Obj(), "spec.idempotencyKey"),
		Entry("empty type", testutil.MakeTask("notype", ns).Type("").Obj(), "spec.type"),
		Entry("bad queue name", testutil.MakeTask("badq", ns).Queue("Bad_Queue").Obj(), "spec.queue"),
		Entry("payload that is not an object", withPayload(testutil.MakeTask("arr", ns).Obj(), `[1,2]`), "spec.payload"),
		Entry("timeout over an hour", testutil.MakeTask("longto", ns).Timeout(2*time.Hour).Obj(), "spec.timeout"),
		Entry("both delay and notBefore", withNotBefore(testutil.MakeTask("both", ns).Delay(time.Minute).Obj()), "spec"),
		Entry("heartbeat >= visibility timeout", testutil.MakeQueue("hb", ns).Timeouts(5*time.Second, 5*time.Second).Obj(), "spec.heartbeatInterval"),
		Entry("minReplicas > maxReplicas", testutil.MakeQueue("minmax", ns).Replicas(5, 2).Obj(), "spec.scaling"),
		Entry("durability.replicaAcks 6", withDurability("acks6", ns, 6), "spec.durability.replicaAcks"),
		Entry("negative durability.replicaAcks", withDurability("acksneg", ns, -1), "spec.durability.replicaAcks"),
		Entry("queue name that is not a DNS label", testutil.MakeQueue("q.dotted", ns).Obj(), "metadata.name"),
		Entry("handler without http", withHandler("hnone", ns, &dtqv1alpha1.QueueHandler{}), "spec.handler"),
		Entry("handler.http without port", withHandler("hnoport", ns, &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{}}), "spec.handler.http.port"),
		Entry("handler.http port 70000", withHandler("hbigport", ns, &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 70000}}), "spec.handler.http.port"),
		Entry("handler.http on the sidecar's port", withHandler("hsideport", ns, &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8081}}), "handler.http.port"),
		Entry("handler.http path without a slash", withHandler("hpath", ns, &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8000, Path: "tasks"}}), "spec.handler.http.path"),
		Entry("handler.http path with a query", withHandler("hquery", ns, &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8000, Path: "/t?x=1"}}), "spec.handler.http.path"),
		Entry("handler.http concurrency 0", withHandler("hconc", ns, &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8000, Concurrency: ptr.To[int32](0)}}), "spec.handler.http.concurrency"),
	)

	It("accepts an HTTP handler and defaults its path", func() {
		q := withHandler("hok", ns, &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8000}})
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		got := &dtqv1alpha1.Queue{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(q), got)).To(Succeed())
		Expect(got.Spec.Handler.HTTP.Path).To(Equal("/"))
	})

	DescribeTable("keeps the Task spec immutable except cancel and retryGeneration",
		func(name string, mutate func(*dtqv1alpha1.Task), field string) {
			t := testutil.MakeTask(name, ns).Key("k-" + name).Payload(map[string]any{"n": 1}).Obj()
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			// A merge patch carries no resourceVersion, so the Task controller
			// writing status meanwhile cannot turn the rejection into a conflict.
			base := client.MergeFrom(t.DeepCopy())
			mutate(t)
			err := k8sClient.Patch(ctx, t, base)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(field))
		},
		Entry("spec.idempotencyKey", "imm-key", func(t *dtqv1alpha1.Task) { t.Spec.IdempotencyKey = "other" }, "spec.idempotencyKey"),
		Entry("spec.idempotencyKey removed", "imm-key-rm", func(t *dtqv1alpha1.Task) { t.Spec.IdempotencyKey = "" }, "spec.idempotencyKey"),
		Entry("spec.payload", "imm-payload", func(t *dtqv1alpha1.Task) {
			t.Spec.Payload = &runtime.RawExtension{Raw: []byte(`{"n":2}`)}
		}, "spec.payload"),
		Entry("spec.queue", "imm-queue", func(t *dtqv1alpha1.Task) { t.Spec.Queue = "other" }, "spec.queue"),
		Entry("spec.type", "imm-type", func(t *dtqv1alpha1.Task) { t.Spec.Type = "other" }, "spec.type"),
		Entry("spec.priority", "imm-prio", func(t *dtqv1alpha1.Task) { t.Spec.Priority = ptr.To(int32(9)) }, "spec.priority"),
		Entry("spec.maxAttempts added", "imm-ma", func(t *dtqv1alpha1.Task) { t.Spec.MaxAttempts = ptr.To(int32(2)) }, "spec"),
	)

	DescribeTable("lets spec.retryGeneration only grow",
		func(name string, to int64, msg string) {
			t := testutil.MakeTask(name, ns).Obj()
			t.Spec.RetryGeneration = 2
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			base := client.MergeFrom(t.DeepCopy())
			t.Spec.RetryGeneration = to
			err := k8sClient.Patch(ctx, t, base)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(msg))
		},
		Entry("lowered", "retry-lower", int64(1), "retryGeneration may only grow"),
		Entry("removed", "retry-remove", int64(0), "retryGeneration cannot be removed"),
	)

	It("accepts setting spec.cancel", func() {
		t := testutil.MakeTask("cancel-me", ns).Key("cancel-me").Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		base := client.MergeFrom(t.DeepCopy())
		t.Spec.Cancel = true
		Expect(k8sClient.Patch(ctx, t, base)).To(Succeed())
		got := &dtqv1alpha1.Task{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), got)).To(Succeed())
		Expect(got.Spec.Cancel).To(BeTrue())
	})
})

func withPayload(t *dtqv1alpha1.Task, raw string) *dtqv1alpha1.Task {
	t.Spec.Payload = &runtime.RawExtension{Raw: []byte(raw)}
	return t
}

func withNotBefore(t *dtqv1alpha1.Task) *dtqv1alpha1.Task {
	t.Spec.NotBefore = &metav1.Time{Time: time.Now().Add(time.Hour)}
	return t
}

// withHandler is a Queue with an app container and handler h.
func withDurability(name, ns string, replicaAcks int32) *dtqv1alpha1.Queue {
	q := testutil.MakeQueue(name, ns).Obj()
	q.Spec.Durability.ReplicaAcks = replicaAcks
	return q
}

func withHandler(name, ns string, h *dtqv1alpha1.QueueHandler) *dtqv1alpha1.Queue {
	q := testutil.MakeQueue(name, ns).Obj()
	q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1"}}
	q.Spec.Handler = h
	return q
}
