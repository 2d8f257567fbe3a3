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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
)

// rawQueue is a Queue built from JSON text, as kubectl would send it, so
// values a typed Go object cannot hold ("banana") reach the API server.
func rawQueue(ns, name, specJSON string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	text := fmt.Sprintf(`{"apiVersion":"dtq.dev/v1alpha1","kind":"Queue","metadata":{"name":%q,"namespace":%q},"spec":%s}`, name, ns, specJSON)
	Expect(json.Unmarshal([]byte(text), &u.Object)).To(Succeed())
	return u
}

// specWith is a Queue spec JSON with the duration at path (e.g.
// "spec.retry.maxDelay") set to value, plus the values the cross-field rules
// need when value is valid (heartbeatInterval < visibilityTimeout,
// baseDelay <= maxDelay).
func specWith(path, value string) string {
	spec := map[string]any{"visibilityTimeout": "1h", "heartbeatInterval": "100ms",
		"retry": map[string]any{"baseDelay": "10ms", "maxDelay": "24h"}}
	parts := strings.Split(strings.TrimPrefix(path, "spec."), ".")
	m := spec
	for _, p := range parts[:len(parts)-1] {
		if m[p] == nil {
			m[p] = map[string]any{}
		}
		m = m[p].(map[string]any)
	}
	m[parts[len(parts)-1]] = value
	b, _ := json.Marshal(spec)
	return string(b)
}

var _ = Describe("Queue duration validation", func() {
	const ns = "durations"
	var seq int
	BeforeEach(func() {
		err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
	})
	create := func(path, value string) error {
		seq++
		return k8sClient.Create(ctx, rawQueue(ns, fmt.Sprintf("q%d", seq), specWith(path, value)))
	}

	It("refuses a malformed, negative, zero or huge value of every duration field, naming the field", func() {
		for _, b := range dtqv1alpha1.QueueDurationBounds {
			bad := []string{"banana", "-1h", "300000h", "1e3s", "99999999999999h"}
			if b.Min > 0 {
				bad = append(bad, "0s")
			}
			for _, v := range bad {
				err := create(b.Path, v)
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s=%q: expected Invalid, got %v", b.Path, v, err)
				Expect(err.Error()).To(ContainSubstring(b.Path), "%s=%q", b.Path, v)
			}
		}
	})

	It("accepts each bound of QueueDurationBounds and refuses just past it (the CEL rules and the Go table agree)", func() {
		for _, b := range dtqv1alpha1.QueueDurationBounds {
			for _, d := range []time.Duration{b.Min, b.Max} {
				Expect(create(b.Path, d.String())).To(Succeed(), "%s=%v", b.Path, d)
			}
			for _, d := range []time.Duration{b.Min - time.Millisecond, b.Max + time.Millisecond} {
				err := create(b.Path, d.String())
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s=%v: expected Invalid, got %v", b.Path, d, err)
				Expect(err.Error()).To(ContainSubstring(b.Path))
			}
		}
	})
})

// A Queue stored before the CRD had its duration rules (here: stored while a
// copy of the CRD without them is installed) must not stop the manager from
// serving the other Queues, and is itself flagged.
var _ = Describe("A Queue stored before the duration rules", Serial, func() {
	It("is flagged InvalidConfig while the manager keeps reconciling every other Queue", func() {
		ns := newNamespace("legacy")
		crds := crdClient()
		key := client.ObjectKey{Name: "queues.dtq.dev"}
		withRules := &apiextensionsv1.CustomResourceDefinition{}
		Expect(crds.Get(ctx, key, withRules)).To(Succeed())
		setSchema := func(from *apiextensionsv1.CustomResourceDefinition) {
			Eventually(func() error {
				cur := &apiextensionsv1.CustomResourceDefinition{}
				if err := crds.Get(ctx, key, cur); err != nil {
					return err
				}
				cur.Spec.Versions = from.DeepCopy().Spec.Versions
				return crds.Update(ctx, cur)
			}, timeout, poll).Should(Succeed())
		}
		DeferCleanup(setSchema, withRules)

		By("installing the CRD without validation rules, as an older release had it")
		older := withRules.DeepCopy()
		for i := range older.Spec.Versions {
			dropValidations(older.Spec.Versions[i].Schema.OpenAPIV3Schema)
		}
		setSchema(older)
		bad := rawQueue(ns, "bad", `{"idempotencyTTL":"banana","retry":{"maxDelay":"-1h"}}`)
		Eventually(func() error { return k8sClient.Create(ctx, bad.DeepCopy()) }, timeout, poll).Should(Succeed())

		By("installing the CRD of this release again")
		setSchema(withRules)
		Eventually(func() bool {
			return apierrors.IsInvalid(k8sClient.Create(ctx, rawQueue(ns, "probe", `{"idempotencyTTL":"banana"}`)))
		}, timeout, poll).Should(BeTrue())

		By("creating a good Queue next to the bad one")
		good := testutil.MakeQueue("good", ns).Obj()
		Expect(k8sClient.Create(ctx, good)).To(Succeed())
		Eventually(getDeployment(ns, "good-workers"), timeout, poll).ShouldNot(BeNil())
		Eventually(func(g Gomega) {
			g.Expect(meta.IsStatusConditionTrue(getQueue(good)(g).Status.Conditions, dtqv1alpha1.QueueReady)).To(BeTrue())
		}, timeout, poll).Should(Succeed())

		By("flagging the bad Queue and leaving it unapplied")
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(getQueue(&dtqv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}})(g).Status.Conditions, dtqv1alpha1.QueueReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(dtqv1alpha1.ReasonInvalidConfig))
			g.Expect(c.Message).To(And(ContainSubstring(`spec.idempotencyTTL: "banana"`), ContainSubstring("spec.retry.maxDelay: -1h")))
		}, timeout, poll).Should(Succeed())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bad-workers"}, &appsv1.Deployment{}))).To(BeTrue())

		By("reading the stored value back unchanged")
		got := &dtqv1alpha1.Queue{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bad"}, got)).To(Succeed())
		Expect(got.Spec.IdempotencyTTL.Malformed()).To(Equal(`"banana"`))
	})
})

// crdClient reads and writes CustomResourceDefinitions.
func crdClient() client.Client {
	s := runtime.NewScheme()
	Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: s})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// dropValidations removes every CEL rule and string length limit of a schema.
func dropValidations(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.XValidations, s.MaxLength = nil, nil
	for k, p := range s.Properties {
		dropValidations(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		dropValidations(s.Items.Schema)
	}
}
