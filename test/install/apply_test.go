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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/strvals"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
)

var chartDir = filepath.Join(envtestutil.RepoRoot(), "dist", "chart")

// release and namespace of the rendered chart: release "dtq" in dtq-system
// gives the names and namespace of dist/install.yaml.
const (
	release   = "dtq"
	namespace = "dtq-system"
)

// render is `helm lint --strict` and `helm template dtq dist/chart -n
// dtq-system --set <set>`, through Helm's Go API.
func render(t *testing.T, set string) []*unstructured.Unstructured {
	t.Helper()
	if err := lintChart(set); err != nil {
		t.Fatal(err)
	}
	objs, err := renderChart(set)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func values(set string) (map[string]any, error) {
	vals := map[string]any{}
	if err := strvals.ParseInto(set, vals); err != nil {
		return nil, fmt.Errorf("--set %s: %w", set, err)
	}
	return vals, nil
}

func lintChart(set string) error {
	vals, err := values(set)
	if err != nil {
		return err
	}
	lint := action.NewLint()
	lint.Strict, lint.Namespace = true, namespace
	res := lint.Run([]string{chartDir}, vals)
	var problems []string
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			problems = append(problems, m.Error())
		}
	}
	for _, err := range res.Errors {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return fmt.Errorf("helm lint --strict --set %q:\n%s", set, strings.Join(problems, "\n"))
	}
	return nil
}

func renderChart(set string) ([]*unstructured.Unstructured, error) {
	vals, err := values(set)
	if err != nil {
		return nil, err
	}
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = release, namespace
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("helm template --set %q: %w", set, err)
	}
	objs, err := decode(strings.NewReader(rel.Manifest))
	if err != nil {
		return nil, fmt.Errorf("helm template --set %q: %w", set, err)
	}
	return objs, nil
}

// installYAML reads dist/install.yaml (`make build-installer`).
func installYAML(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(envtestutil.RepoRoot(), "dist", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("dist/install.yaml: %v", err)
	}
	return objs
}

// decode splits a multi-document YAML stream into objects.
func decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("a document without kind or apiVersion: %v", m)
		}
		objs = append(objs, u)
	}
}

// warnings collects the API server's warnings (a Pod Security violation of a
// pod template is one) so the test can count them as failures.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

// prepare does for real what must exist before objs can be dry-run: their
// namespaces (labelled to enforce and warn on the restricted Pod Security
// Standard, which the manager and API meet) and their CRDs (established).
func prepare(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	namespaces := map[string]bool{}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			namespaces[o.GetNamespace()] = true
		}
		if o.GetKind() == "Namespace" {
			namespaces[o.GetName()] = true
		}
	}
	for ns := range namespaces {
		n := &unstructured.Unstructured{}
		n.SetAPIVersion("v1")
		n.SetKind("Namespace")
		n.SetName(ns)
		n.SetLabels(map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
		})
		if err := k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(n), client.FieldOwner("dtq-install-test-namespaces")); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if err := k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.FieldOwner("dtq-install-test"), client.ForceOwnership); err != nil {
			t.Fatalf("install CRD %s: %v", o.GetName(), err)
		}
		waitEstablished(ctx, t, o.GetName())
	}
}

func waitEstablished(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not established: %v", name, err)
	}
}

// dryRun applies each object with server-side apply and dryRun=All (what
// `kubectl apply --server-side --dry-run=server` does) and returns one line per
// object the API server rejected or warned about. Server-side apply rejects
// fields the schema does not declare.
func dryRun(ctx context.Context, objs []*unstructured.Unstructured) []string {
	var problems []string
	for _, o := range objs {
		id := fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		restWarnings.take()
		err := k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.FieldOwner("dtq-install-test"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: rejected: %v", id, err))
		}
		for _, w := range restWarnings.take() {
			problems = append(problems, fmt.Sprintf("%s: warning: %s", id, w))
		}
	}
	return problems
}
