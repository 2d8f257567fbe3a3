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

package install_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartMatchesConfig: the chart with default values and the HTTP API on
// (config/default includes config/api, which serves HTTPS with the
// certificate of Secret dtq-api-tls; the chart's API is off by default),
// released as "dtq" in dtq-system, installs what dist/install.yaml (config/)
// installs, object for object, except where a value necessarily differs
// (labels, images, the --worker-image flag the chart always passes). When
// config/ changes (a new RBAC rule, a new flag, a new object), this test says
// what the chart lacks.
func TestChartMatchesConfig(t *testing.T) {
	chart := map[string]*unstructured.Unstructured{}
	for _, o := range render(t, "api.enabled=true,api.tls.secretName=dtq-api-tls") {
		chart[key(o)] = o
	}
	seen := map[string]bool{}
	for _, want := range installYAML(t) {
		if want.GetKind() == "Namespace" {
			continue // Helm installs into a namespace that exists (helm install --create-namespace)
		}
		k := key(want)
		seen[k] = true
		got, ok := chart[k]
		if !ok {
			t.Errorf("%s: in dist/install.yaml, not in the chart", k)
			continue
		}
		if want.GetKind() == "CustomResourceDefinition" && got.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s: the chart's CRD lacks helm.sh/resource-policy: keep (helm uninstall would delete every Queue and Task)", k)
		}
		compare := comparisons[want.GetKind()]
		if compare == nil {
			t.Errorf("%s: no comparison for kind %s; add one to comparisons", k, want.GetKind())
			continue
		}
		for _, field := range compare {
			w, _, _ := unstructured.NestedFieldCopy(normalise(want).Object, field...)
			g, _, _ := unstructured.NestedFieldCopy(normalise(got).Object, field...)
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("%s %s: chart differs from dist/install.yaml (-install.yaml +chart):\n%s", k, strings.Join(field, "."), d)
			}
		}
	}
	for k := range chart {
		if !seen[k] {
			t.Errorf("%s: rendered by the chart's defaults, not in dist/install.yaml", k)
		}
	}
}

// comparisons lists, per kind, the fields that must be equal.
var comparisons = map[string][][]string{
	"CustomResourceDefinition":         {{"spec"}},
	"ClusterRole":                      {{"rules"}, {"aggregationRule"}, {"metadata", "labels", "aggregate"}},
	"Role":                             {{"rules"}},
	"ClusterRoleBinding":               {{"roleRef"}, {"subjects"}},
	"RoleBinding":                      {{"roleRef"}, {"subjects"}},
	"ServiceAccount":                   {{"automountServiceAccountToken"}},
	"Service":                          {{"spec", "ports"}, {"spec", "type"}},
	"Deployment":                       {{"spec", "replicas"}, {"spec", "strategy"}, {"spec", "template", "spec"}, {"spec", "template", "metadata", "annotations"}},
	"PodDisruptionBudget":              {{"spec", "minAvailable"}, {"spec", "maxUnavailable"}},
	"ValidatingAdmissionPolicy":        {{"spec"}},
	"ValidatingAdmissionPolicyBinding": {{"spec"}},
}

func key(o *unstructured.Unstructured) string {
	ns := o.GetNamespace()
	if clusterScopedUnknownToKustomize[o.GetKind()] {
		ns = ""
	}
	return o.GetKind() + " " + ns + "/" + o.GetName()
}

// clusterScopedUnknownToKustomize are cluster-scoped kinds that this
// kustomize gives the namespace of config/default anyway (it does not know
// them); the API server ignores a namespace on a cluster-scoped object.
var clusterScopedUnknownToKustomize = map[string]bool{"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// normalise drops what legitimately differs between the chart and
// install.yaml: container images and pull policies (values), the chart's
// --worker-* flags, and labels other than RBAC aggregation labels (gathered
// under metadata.labels.aggregate for comparison).
func normalise(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = o.DeepCopy()
	agg := map[string]any{}
	for k, v := range o.GetLabels() {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
			agg[k] = v
		}
	}
	_ = unstructured.SetNestedField(o.Object, agg, "metadata", "labels", "aggregate")
	if o.GetKind() != "Deployment" {
		return o
	}
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		c := c.(map[string]any)
		delete(c, "image")
		delete(c, "imagePullPolicy")
		var args []any
		old, _ := c["args"].([]any)
		for _, a := range old {
			if !strings.HasPrefix(a.(string), "--worker-") {
				args = append(args, a)
			}
		}
		c["args"] = args
	}
	_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
	return o
}
