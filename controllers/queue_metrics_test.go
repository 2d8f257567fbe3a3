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

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// queueSeries gathers reg and returns the dtq_queue_ series of namespace ns
// as "name{label=value,...}" (the namespace label left out) -> value.
func queueSeries(g Gomega, reg prometheus.Gatherer, ns string) map[string]float64 {
	mfs, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	return testutil.Series(mfs, "dtq_queue_", ns)
}

var _ = Describe("Queue metrics", func() {
	It("exports every Queue's backlog, counters and workers on the manager's registry", func() {
		ns := newNamespace("metrics")
		q := testutil.MakeQueue("jobs", ns).OnMismatch(dtqv1alpha1.IdempotencyMismatchReject).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(getDeployment(ns, "jobs-workers"), timeout, poll).Should(Not(BeNil()))
		markReady(ns, "jobs-workers")
		ref := broker.QueueRef{Namespace: ns, Name: "jobs"}
		for _, key := range []string{"a", "b", ""} {
			_, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "echo", Priority: 3, IdempotencyKey: key})
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "echo", Priority: 3, IdempotencyKey: "a"})
		Expect(err).To(MatchError(broker.ErrIdempotencyInProgress))
		_, err = engine.Submit(ctx, ref, broker.SubmitRequest{Type: "other", Priority: 3, IdempotencyKey: "a"})
		Expect(err).To(MatchError(broker.ErrIdempotencyKeyMismatch))

		want := map[string]float64{
			"dtq_queue_in_flight_tasks{queue=jobs}":                                         0,
			"dtq_queue_scheduled_tasks{queue=jobs}":                                         0,
			"dtq_queue_dead_lettered_tasks{queue=jobs}":                                     0,
			"dtq_queue_paused{queue=jobs}":                                                  0,
			"dtq_queue_workers_desired{queue=jobs}":                                         1,
			"dtq_queue_workers_ready{queue=jobs}":                                           1,
			"dtq_queue_submissions_total{queue=jobs,result=accepted}":                       3,
			"dtq_queue_submissions_total{queue=jobs,result=duplicate}":                      0,
			"dtq_queue_submissions_refused_total{code=IDEMPOTENCY_IN_PROGRESS,queue=jobs}":  1,
			"dtq_queue_submissions_refused_total{code=IDEMPOTENCY_KEY_MISMATCH,queue=jobs}": 1,
			"dtq_queue_submissions_refused_total{code=QUEUE_FULL,queue=jobs}":               0,
			"dtq_queue_submissions_refused_total{code=PAYLOAD_TOO_LARGE,queue=jobs}":        0,
			"dtq_queue_retries_total{queue=jobs}":                                           0,
			"dtq_queue_redeliveries_total{queue=jobs}":                                      0,
		}
		for p := range broker.Bands {
			want["dtq_queue_queued_tasks{priority="+string(rune('0'+p))+",queue=jobs}"] = 0
		}
		want["dtq_queue_queued_tasks{priority=3,queue=jobs}"] = 3
		for _, st := range finishedStates {
			want["dtq_queue_tasks_finished_total{queue=jobs,state="+string(st)+"}"] = 0
		}
		Eventually(func(g Gomega) {
			got := queueSeries(g, ctrlmetrics.Registry, ns)
			age := got["dtq_queue_oldest_queued_task_age_seconds{queue=jobs}"]
			g.Expect(age).To(BeNumerically(">", 0))
			delete(got, "dtq_queue_oldest_queued_task_age_seconds{queue=jobs}")
			g.Expect(got).To(Equal(want))
		}, timeout, poll).Should(Succeed())

		By("exporting nothing from a manager that is not the leader")
		standby := prometheus.NewPedanticRegistry()
		Expect(standby.Register(newQueueCollector(k8sClient, engine, clock.RealClock{}, make(chan struct{})))).To(Succeed())
		Expect(standby.Register(newScheduleCollector(k8sClient, make(chan struct{})))).To(Succeed())
		mfs, err := standby.Gather()
		Expect(err).NotTo(HaveOccurred())
		Expect(mfs).To(BeEmpty())
	})
})
