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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil"
)

// rawObject is a dtq object of kind built from JSON text, as kubectl would
// send it, so values a typed Go object cannot hold reach the API server.
func rawObject(kind, ns, name, specJSON string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	text := fmt.Sprintf(`{"apiVersion":"dtq.dev/v1alpha1","kind":%q,"metadata":{"name":%q,"namespace":%q},"spec":%s}`, kind, name, ns, specJSON)
	Expect(json.Unmarshal([]byte(text), &u.Object)).To(Succeed())
	return u
}

// manyOverrides is an overrides list of n distinct keys.
func manyOverrides(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"key":"k%d","weight":2}`, i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

var _ = Describe("Flow control validation", func() {
	var ns string
	var seq int
	BeforeEach(func() { ns = newNamespace("flowval") })
	name := func() string { seq++; return fmt.Sprintf("o%d", seq) }
	refused := func(err error, field string) {
		GinkgoHelper()
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring(field))
	}

	DescribeTable("refuses a bad spec.flowControl, naming the field",
		func(flowJSON, field string) {
			refused(k8sClient.Create(ctx, rawQueue(ns, name(), `{"flowControl":`+flowJSON+`}`)), field)
		},
		Entry("empty", `{}`, "spec.flowControl"),
		Entry("empty overrides only", `{"overrides":[]}`, "spec.flowControl"),
		Entry("rate limit 0", `{"rateLimit":{"limit":0}}`, "spec.flowControl.rateLimit.limit"),
		Entry("rate limit over 1000000", `{"rateLimit":{"limit":1000001}}`, "spec.flowControl.rateLimit.limit"),
		Entry("rate limit missing", `{"rateLimit":{"period":"1s"}}`, "spec.flowControl.rateLimit.limit"),
		Entry("rate limit as a float", `{"rateLimit":{"limit":2.5}}`, "spec.flowControl.rateLimit.limit"),
		Entry("burst above limit", `{"rateLimit":{"limit":10,"burst":11}}`, "spec.flowControl.rateLimit.burst"),
		Entry("burst 0", `{"rateLimit":{"limit":10,"burst":0}}`, "spec.flowControl.rateLimit.burst"),
		Entry("period not a duration", `{"rateLimit":{"limit":10,"period":"banana"}}`, "spec.flowControl.rateLimit.period"),
		Entry("period under 10ms", `{"rateLimit":{"limit":10,"period":"9ms"}}`, "spec.flowControl.rateLimit.period"),
		Entry("period over 24h", `{"rateLimit":{"limit":10,"period":"25h"}}`, "spec.flowControl.rateLimit.period"),
		Entry("maxConcurrency 0", `{"maxConcurrency":0}`, "spec.flowControl.maxConcurrency"),
		Entry("perKey empty", `{"perKey":{}}`, "spec.flowControl.perKey"),
		Entry("perKey concurrency over 10000", `{"perKey":{"concurrency":10001}}`, "spec.flowControl.perKey.concurrency"),
		Entry("perKey burst above limit", `{"perKey":{"rateLimit":{"limit":1,"burst":2}}}`, "spec.flowControl.perKey.rateLimit.burst"),
		Entry("unknown fairness", `{"fairness":"Random"}`, "spec.flowControl.fairness"),
		Entry("duplicate override key", `{"overrides":[{"key":"a","weight":2},{"key":"a","weight":3}]}`, "spec.flowControl.overrides[1]"),
		Entry("override without a key", `{"overrides":[{"weight":2}]}`, "spec.flowControl.overrides[0].key"),
		Entry("override key with a space", `{"overrides":[{"key":"a b","weight":2}]}`, "spec.flowControl.overrides[0].key"),
		Entry("override key of 129 bytes", `{"overrides":[{"key":"`+strings.Repeat("k", 129)+`","weight":2}]}`, "spec.flowControl.overrides[0].key"),
		Entry("override setting nothing", `{"overrides":[{"key":"a"}]}`, "spec.flowControl.overrides[0]"),
		Entry("override weight 1001", `{"overrides":[{"key":"a","weight":1001}]}`, "spec.flowControl.overrides[0].weight"),
		Entry("override burst above limit", `{"overrides":[{"key":"a","rateLimit":{"limit":3,"burst":4}}]}`, "spec.flowControl.overrides[0].rateLimit.burst"),
		Entry("weights under FIFO", `{"fairness":"FIFO","overrides":[{"key":"a","weight":2}]}`, "spec.flowControl.overrides"),
		Entry("1001 overrides", `{"overrides":`+manyOverrides(1001)+`}`, "spec.flowControl.overrides"),
	)

	It("accepts a full spec.flowControl and defaults period and burst", func() {
		q := testutil.MakeQueue(name(), ns).FlowControl(&dtqv1alpha1.FlowControl{
			RateLimit:      &dtqv1alpha1.FlowRate{Limit: 200},
			MaxConcurrency: ptr.To[int32](400),
			PerKey:         &dtqv1alpha1.KeyLimits{Concurrency: ptr.To[int32](3), RateLimit: &dtqv1alpha1.FlowRate{Limit: 10, Period: dtqv1alpha1.NewDuration(time.Minute), Burst: 10}},
			Fairness:       dtqv1alpha1.FairnessWeighted,
			Overrides: []dtqv1alpha1.KeyOverride{{Key: "tenant-gold", Weight: 5, Concurrency: ptr.To[int32](10)},
				{Key: "tenant-slow", RateLimit: &dtqv1alpha1.FlowRate{Limit: 1, Period: dtqv1alpha1.NewDuration(24 * time.Hour)}}},
		}).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		got := getQueue(q)(Default).Spec.FlowControl
		Expect(got.RateLimit.Period.Duration).To(Equal(time.Second))
		Expect(got.RateLimit.Burst).To(Equal(int32(1)))
		Expect(got.Overrides[1].RateLimit.Burst).To(Equal(int32(1)))
		Expect(k8sClient.Create(ctx, rawQueue(ns, name(), `{"flowControl":{"overrides":`+manyOverrides(1000)+`}}`))).To(Succeed())
		Expect(k8sClient.Create(ctx, rawQueue(ns, name(), `{"flowControl":{"fairness":"FIFO","overrides":[{"key":"a","concurrency":1}]}}`))).To(Succeed())
	})

	It("accepts the sample Queue and Task of config/samples/dtq_v1alpha1_queue_flowcontrol.yaml", func() {
		data, err := os.ReadFile(filepath.Join("..", "config", "samples", "dtq_v1alpha1_queue_flowcontrol.yaml"))
		Expect(err).NotTo(HaveOccurred())
		objs, err := devstack.DecodeManifests(data)
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).To(HaveLen(2))
		for _, o := range objs {
			o.SetNamespace(ns)
			Expect(k8sClient.Create(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		}
	})

	DescribeTable("refuses a bad flow key, naming the field",
		func(kind, specJSON, field string) {
			refused(k8sClient.Create(ctx, rawObject(kind, ns, name(), specJSON)), field)
		},
		Entry("Task: empty", "Task", `{"queue":"q","type":"echo","flowKey":""}`, "spec.flowKey"),
		Entry("Task: 129 bytes", "Task", `{"queue":"q","type":"echo","flowKey":"`+strings.Repeat("k", 129)+`"}`, "spec.flowKey"),
		Entry("Task: a space", "Task", `{"queue":"q","type":"echo","flowKey":"tenant a"}`, "spec.flowKey"),
		Entry("Task: not ASCII", "Task", `{"queue":"q","type":"echo","flowKey":"tenant-ä"}`, "spec.flowKey"),
		Entry("TaskSchedule template: a tab", "TaskSchedule", `{"schedule":"* * * * *","template":{"queue":"q","type":"echo","flowKey":"a\tb"}}`, "spec.template.flowKey"),
	)

	It("accepts a flow key of 128 visible characters on a Task and a TaskSchedule", func() {
		key := strings.Repeat("~", 120) + "tenant-!"
		Expect(k8sClient.Create(ctx, testutil.MakeTask(name(), ns).FlowKey(key).Obj())).To(Succeed())
		Expect(k8sClient.Create(ctx, rawObject("TaskSchedule", ns, name(),
			`{"schedule":"* * * * *","template":{"queue":"q","type":"echo","flowKey":"`+key+`"}}`))).To(Succeed())
	})

	DescribeTable("keeps a Task's flowKey immutable",
		func(from, to string) {
			t := testutil.MakeTask(name(), ns).FlowKey(from).Obj()
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
			// A merge patch carries no resourceVersion: the Task controller
			// writing status meanwhile cannot turn the refusal into a conflict.
			base := client.MergeFrom(t.DeepCopy())
			t.Spec.FlowKey = to
			refused(k8sClient.Patch(ctx, t, base), "spec.flowKey")
		},
		Entry("changed", "tenant-a", "tenant-b"),
		Entry("removed", "tenant-a", ""),
		Entry("added", "", "tenant-a"),
	)
})
