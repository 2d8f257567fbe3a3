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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

var _ = Describe("TaskSchedule validation", func() {
	It("refuses template labels no Task could carry, with the field named", func() {
		ns := newNamespace("sched-labels")
		for _, labels := range []map[string]dtqv1alpha1.LabelValue{
			{"team": "data platform"}, {"data platform": "x"}, {"team": "-x"}, {"a/b/c": "x"},
		} {
			ts := newSchedule(ns, "labels")
			ts.Spec.Template.Labels = labels
			Expect(k8sClient.Create(ctx, ts)).To(MatchError(ContainSubstring("spec.template.labels")), "%v", labels)
		}
		ts := newSchedule(ns, "labels")
		ts.Spec.Template.Labels = map[string]dtqv1alpha1.LabelValue{"dtq.dev/team": "data-platform", "tier": "", "A_b.c": "x.Y_z"}
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ts)).To(Succeed()) })
	})

	It("refuses a startingDeadlineSeconds over a year, with the field named", func() {
		ns := newNamespace("sched-deadline-max")
		ts := newSchedule(ns, "overflow")
		ts.Spec.StartingDeadlineSeconds = ptr.To(int64(10_000_000_000))
		Expect(k8sClient.Create(ctx, ts)).To(MatchError(ContainSubstring("spec.startingDeadlineSeconds")))
		ts.Spec.StartingDeadlineSeconds = ptr.To(int64(dtqv1alpha1.MaxStartingDeadlineSeconds))
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ts)).To(Succeed()) })
	})

	It("prints the SUSPENDED and ACTIVE columns of a schedule that sets neither", func() {
		ns := newNamespace("sched-columns")
		ts := newSchedule(ns, "columns")
		Expect(k8sClient.Create(ctx, ts)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, ts)).To(Succeed()) })
		Eventually(func(g Gomega) int64 { return scheduleStatus(ts)(g).ObservedGeneration }, timeout, poll).Should(Equal(int64(1)))

		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis/dtq.dev/v1alpha1/namespaces", ns, "taskschedules").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		var table metav1.Table
		Expect(json.Unmarshal(raw, &table)).To(Succeed())
		Expect(table.Rows).To(HaveLen(1))
		cells := map[string]any{}
		for i, c := range table.ColumnDefinitions {
			cells[c.Name] = table.Rows[0].Cells[i]
		}
		columns := map[string]any{"Suspended": cells["Suspended"], "Active": cells["Active"]}
		Expect(columns).To(And(HaveKeyWithValue("Suspended", false), HaveKeyWithValue("Active", BeNumerically(">=", 0))))
	})
})
