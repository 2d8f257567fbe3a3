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
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

const (
	timeout = 20 * time.Second
	poll    = 50 * time.Millisecond
)

func condition(t *dtqv1alpha1.Task, typ string) *metav1.Condition {
	return meta.FindStatusCondition(t.Status.Conditions, typ)
}

var _ = Describe("Task controller", func() {
	It("runs a Task to Succeeded and reflects the idempotency record as completed", func() {
		ns := newNamespace("succeed")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))

		t := testutil.MakeTask("hello", ns).Queue("q").Key("order-1").Payload(map[string]any{"hello": "world"}).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())

		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		got := getTask(t)(Default)
		Expect(got.Status.TaskID).To(Equal(string(got.UID)))
		Expect(got.Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{
			Key: "order-1", State: dtqv1alpha1.IdempotencyCompleted, TaskID: string(got.UID)}))
		Expect(got.Status.Attempt).To(Equal(int32(1)))
		Expect(got.Status.WorkerID).To(HavePrefix("test-worker-"))
		Expect(got.Status.FinishedAt).NotTo(BeNil())
		Expect(got.Status.Result).To(MatchJSON(`{"hello":"world"}`))
		Expect(condition(got, dtqv1alpha1.TaskSubmitted)).To(HaveField("Status", metav1.ConditionTrue))
		Expect(condition(got, dtqv1alpha1.TaskSucceededCondition)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", "Succeeded"),
			HaveField("ObservedGeneration", got.Generation)))
		Expect(condition(got, dtqv1alpha1.TaskReconciling)).To(BeNil())
		Expect(condition(got, dtqv1alpha1.TaskStalled)).To(BeNil())
		Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))

		By("showing the idempotency state in the printer columns")
		cells := tableRow(ns, "hello")
		Expect(cells).To(HaveKeyWithValue("State", "Succeeded"))
		Expect(cells).To(HaveKeyWithValue("Idempotency", "completed"))
	})

	It("maps two Tasks with one key to one logical task: in progress, then a duplicate replay", func() {
		ns := newNamespace("dup")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))

		first := testutil.MakeTask("first", ns).Queue("q").Type("count").Key("same").
			Payload(map[string]any{"name": ns, "holdMs": 2500}).Obj()
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Eventually(func() int64 { return runCount(ns) }, timeout, poll).Should(Equal(int64(1)))

		second := testutil.MakeTask("second", ns).Queue("q").Type("count").Key("same").
			Payload(map[string]any{"name": ns, "holdMs": 2500}).Obj()
		Expect(k8sClient.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getTask(second)(g)
			g.Expect(condition(got, dtqv1alpha1.TaskSubmitted)).To(HaveField("Reason", dtqv1alpha1.ReasonIdempotencyInProgress))
			g.Expect(got.Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{
				Key: "same", State: dtqv1alpha1.IdempotencyProcessing, TaskID: string(first.UID), Duplicate: true, RequestMatches: ptr.To(true)}))
		}, timeout, poll).Should(Succeed())

		Eventually(getTask(second), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		got, orig := getTask(second)(Default), getTask(first)(Default)
		Expect(got.Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{
			Key: "same", State: dtqv1alpha1.IdempotencyCompleted, TaskID: string(first.UID), Duplicate: true, RequestMatches: ptr.To(true)}))
		Expect(got.Status.Result).To(Equal(orig.Status.Result))
		Expect(got.Status.TaskID).To(BeEmpty(), "a duplicate has no task of its own")
		Expect(condition(got, dtqv1alpha1.TaskSubmitted)).To(HaveField("Reason", dtqv1alpha1.ReasonDuplicate))
		Expect(runCount(ns)).To(Equal(int64(1)))
		_, err := engine.GetTask(ctx, broker.QueueRef{Namespace: ns, Name: "q"}, string(second.UID))
		Expect(err).To(MatchError(broker.ErrTaskNotFound))
	})

	It("replays a Task deleted and re-created by GitOps within the TTL, and runs it again after", func() {
		ns := newNamespace("gitops")
		const ttl = 5 * time.Second
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).IdempotencyTTL(ttl).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))
		manifest := func() *dtqv1alpha1.Task {
			return testutil.MakeTask("sync-me", ns).Queue("q").Type("count").Key("gitops-1").
				Payload(map[string]any{"name": ns}).Obj()
		}
		recreate := func() *dtqv1alpha1.Task {
			t := manifest()
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, t))).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), &dtqv1alpha1.Task{}))
			}, timeout, poll).Should(BeTrue())
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			return t
		}

		t := recreate()
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		originalID := string(t.UID)

		t = recreate()
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		Expect(getTask(t)(Default).Status.Idempotency).To(Equal(&dtqv1alpha1.TaskIdempotency{
			Key: "gitops-1", State: dtqv1alpha1.IdempotencyCompleted, TaskID: originalID, Duplicate: true, RequestMatches: ptr.To(true)}))
		Expect(runCount(ns)).To(Equal(int64(1)))

		By("waiting for the idempotency record to expire")
		Eventually(func() error {
			_, err := engine.Idempotency(ctx, broker.QueueRef{Namespace: ns, Name: "q"}, "gitops-1")
			return err
		}, 2*ttl, 100*time.Millisecond).Should(MatchError(broker.ErrTaskNotFound))
		t = recreate()
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		got := getTask(t)(Default)
		Expect(got.Status.Idempotency.Duplicate).To(BeFalse())
		Expect(got.Status.Idempotency.TaskID).To(Equal(string(got.UID)))
		Expect(runCount(ns)).To(Equal(int64(2)))
	})

	It("cancels a Task through spec.cancel", func() {
		ns := newNamespace("cancel")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		t := testutil.MakeTask("stop-me", ns).Queue("q").Key("c").Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskQueued))

		got := getTask(t)(Default)
		got.Spec.Cancel = true
		Expect(k8sClient.Update(ctx, got)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskCancelled))
		got = getTask(t)(Default)
		Expect(got.Status.Idempotency.State).To(Equal(dtqv1alpha1.IdempotencyFailed))
		Expect(condition(got, dtqv1alpha1.TaskSucceededCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", "Cancelled"), HaveField("ObservedGeneration", got.Generation)))
		Expect(condition(got, dtqv1alpha1.TaskStalled)).To(HaveField("Reason", "Cancelled"))
	})

	It("cancels the task of a deleted unfinished Task and never runs it", func() {
		ns := newNamespace("delete")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		t := testutil.MakeTask("drop-me", ns).Queue("q").Type("count").Payload(map[string]any{"name": ns}).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		Eventually(func() error { _, err := engine.GetTask(ctx, ref, string(t.UID)); return err }, timeout, poll).Should(Succeed())

		Expect(k8sClient.Delete(ctx, t)).To(Succeed())
		Eventually(func() broker.State {
			info, _ := engine.GetTask(ctx, ref, string(t.UID))
			return info.State
		}, timeout, poll).Should(Equal(broker.StateCancelled))
		DeferCleanup(startWorker(ns, "q"))
		Consistently(func() int64 { return runCount(ns) }, time.Second, poll).Should(BeZero())
	})

	It("waits for a Queue that does not exist yet and proceeds when it appears", func() {
		ns := newNamespace("late")
		t := testutil.MakeTask("early", ns).Queue("late").Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(func(g Gomega) {
			got := getTask(t)(g)
			g.Expect(got.Status.State).To(Equal(dtqv1alpha1.TaskPending))
			g.Expect(condition(got, dtqv1alpha1.TaskSubmitted)).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", dtqv1alpha1.ReasonQueueNotFound)))
		}, timeout, poll).Should(Succeed())

		Expect(k8sClient.Create(ctx, testutil.MakeQueue("late", ns).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "late"))
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
	})

	It("fails a Task whose payload is too large with a condition, without submitting it", func() {
		ns := newNamespace("invalid")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).MaxPayloadBytes(64).Obj())).To(Succeed())
		t := testutil.MakeTask("big", ns).Queue("q").Payload(map[string]any{"blob": strings.Repeat("x", 200)}).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskFailed))
		got := getTask(t)(Default)
		Expect(condition(got, dtqv1alpha1.TaskSucceededCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", dtqv1alpha1.ReasonPayloadTooLarge)))
		Expect(condition(got, dtqv1alpha1.TaskSubmitted)).To(HaveField("Status", metav1.ConditionFalse))
		Expect(got.Status.LastError).To(ContainSubstring("PAYLOAD_TOO_LARGE"))
		_, err := engine.GetTask(ctx, broker.QueueRef{Namespace: ns, Name: "q"}, string(t.UID))
		Expect(err).To(MatchError(broker.ErrTaskNotFound))
	})

	It("holds a Task back while its Queue is full and submits it when there is room", func() {
		ns := newNamespace("full")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).MaxDepth(1).Obj())).To(Succeed())
		first := testutil.MakeTask("first", ns).Queue("q").Obj()
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Eventually(getTask(first), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskQueued))
		second := testutil.MakeTask("second", ns).Queue("q").Obj()
		Expect(k8sClient.Create(ctx, second)).To(Succeed())
		Eventually(func(g Gomega) *metav1.Condition {
			return condition(getTask(second)(g), dtqv1alpha1.TaskSubmitted)
		}, timeout, poll).Should(HaveField("Reason", dtqv1alpha1.ReasonQueueFull))

		DeferCleanup(startWorker(ns, "q"))
		Eventually(getTask(second), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
	})

	It("deletes a finished Task after ttlSecondsAfterFinished", func() {
		ns := newNamespace("ttl")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).TTLAfterFinished(1).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))
		t := testutil.MakeTask("short-lived", ns).Queue("q").Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(t), &dtqv1alpha1.Task{}))
		}, timeout, poll).Should(BeTrue())
	})
})

var _ = Describe("Manager restart", func() {
	It("converges the status of a Task submitted just before the manager stopped, without ingesting it twice", func() {
		ns := newNamespace("restart")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		q := testutil.MakeQueue("q", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(func(g Gomega) *metav1.Condition {
			return meta.FindStatusCondition(getQueue(q)(g).Status.Conditions, dtqv1alpha1.QueueReady)
		}, timeout, poll).Should(HaveField("Status", metav1.ConditionTrue))

		By("running a manager that submits but never gets to write status")
		stopManager()
		stopManager = nil
		DeferCleanup(func() {
			if stopManager == nil {
				stopManager = startManager(Options{})
			}
		})
		stopFirst := startManager(Options{CoalesceWindow: time.Hour})
		t := testutil.MakeTask("survivor", ns).Queue("q").Type("count").Key("restart").Payload(map[string]any{"name": ns}).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(func() error { _, err := engine.GetTask(ctx, ref, string(t.UID)); return err }, timeout, poll).Should(Succeed())
		stopFirst()
		Expect(getTask(t)(Default).Status.State).To(BeEmpty())

		By("starting a new manager and a worker")
		stopManager = startManager(Options{})
		DeferCleanup(startWorker(ns, "q"))
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		Expect(runCount(ns)).To(Equal(int64(1)))
		evs, err := engine.ReadEvents(ctx, ref, "0", 1000, 0)
		Expect(err).NotTo(HaveOccurred())
		queued := 0
		for _, ev := range evs {
			if ev.Type == broker.EventQueued && ev.TaskID == string(t.UID) {
				queued++
			}
		}
		Expect(queued).To(Equal(1), "the task was ingested once")
	})
})

// tableRow reads a Task through the API server's Table rendering (what kubectl
// get prints) and returns its cells by column name.
func tableRow(ns, name string) map[string]any {
	hc, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimSuffix(cfg.Host, "/")+"/apis/dtq.dev/v1alpha1/namespaces/"+ns+"/tasks/"+name, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	var table metav1.Table
	Expect(json.NewDecoder(resp.Body).Decode(&table)).To(Succeed())
	Expect(table.Rows).To(HaveLen(1))
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		cells[c.Name] = table.Rows[0].Cells[i]
	}
	return cells
}
