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

// Package install_test checks what a platform team installs: the Helm chart
// (dist/chart) and dist/install.yaml are applied with server-side dry run to a
// real API server (envtest) with the CRDs installed, and the chart's defaults
// are checked against config/, which install.yaml is built from.
package install_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
)

// monitoringModule holds the Prometheus Operator's CRDs. The chart's
// ServiceMonitor and PodMonitor are checked against their real schema: the
// test takes the two CRDs from this module at this version (`go mod download`
// from the module proxy into the module cache, like any dependency).
const monitoringModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

var (
	k8sClient    client.Client
	restWarnings = &warnings{}
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	crds, err := monitoringCRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "install test:", err)
		return 1
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: envtestutil.AssetsDir(),
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true},
		// A safety net, not a goal: the default 20 s is short on 2 cores shared with other test runs.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "install test: start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	cfg.WarningHandlerWithContext = restWarnings
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if k8sClient, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "install test:", err)
		return 1
	}
	return m.Run()
}

// monitoringCRDs returns the paths of the ServiceMonitor and PodMonitor CRDs.
func monitoringCRDs() ([]string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", monitoringModule).Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s: %w", monitoringModule, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" {
		return nil, fmt.Errorf("go mod download %s: %w %s", monitoringModule, err, mod.Error)
	}
	dir := filepath.Join(mod.Dir, "example", "prometheus-operator-crd")
	return []string{
		filepath.Join(dir, "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(dir, "monitoring.coreos.com_podmonitors.yaml"),
	}, nil
}

// TestChartDryRun renders the chart (after helm lint --strict) with each set
// of values and applies every object with server-side dry run: the API server
// must accept each one without a warning. want lists objects the values must
// produce, so a scenario cannot pass by rendering nothing.
func TestChartDryRun(t *testing.T) {
	cases := map[string]struct {
		set  string
		want []string
	}{
		"defaults": {
			want: []string{"CustomResourceDefinition tasks.dtq.dev", "Deployment dtq-controller-manager", "Service dtq-controller-manager-metrics-service"},
		},
		"api and metrics": {
			set: "api.enabled=true,metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true",
			want: []string{"Deployment dtq-api", "Service dtq-api", "PodDisruptionBudget dtq-api", "ClusterRole dtq-api-role",
				"ServiceMonitor dtq-controller-manager-metrics-monitor", "ServiceMonitor dtq-api", "PodMonitor dtq-workers"},
		},
		// Every value the templates branch on.
		"every option": {
			set: strings.Join([]string{
				"api.enabled=true", "api.tls.secretName=dtq-api-tls", "api.service.type=LoadBalancer", "api.args[0]=--v=2",
				"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.interval=30s", "metrics.serviceMonitor.labels.release=prom",
				"metrics.podMonitor.enabled=true", "metrics.podMonitor.interval=15s",
				"redis.url=rediss+sentinel://sentinel.example:26380/0?master_name=dtq", "redis.username=dtq",
				"redis.passwordSecret.name=dtq-redis-password", "redis.tls.caSecret.name=dtq-redis-ca",
				"workers.redisURL=redis+cluster://redis-0.redis:6379", "workers.redisSecret=dtq-redis/url",
				"workers.image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				"manager.args[0]=--routine-task-events", "manager.image.tag=v0.1.0", "manager.podLabels.team=queues",
				"manager.nodeSelector.kubernetes\\.io/os=linux", "manager.priorityClassName=system-cluster-critical",
				"imagePullSecrets[0].name=regcred", "rbac.helpers=false",
			}, ","),
			want: []string{"Secret dtq-redis", "Deployment dtq-api", "Deployment dtq-controller-manager"},
		},
		"without CRDs and metrics": {
			set:  "crds.install=false,metrics.enabled=false",
			want: []string{"Deployment dtq-controller-manager"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			objs := render(t, tc.set)
			requireObjects(t, objs, tc.want)
			prepare(ctx, t, objs)
			if problems := dryRun(ctx, objs); len(problems) > 0 {
				t.Fatalf("helm template --set %q: the API server did not accept every object:\n%s", tc.set, strings.Join(problems, "\n"))
			}
			t.Logf("accepted %d objects: %s", len(objs), strings.Join(ids(objs), ", "))
		})
	}
}

// TestInstallYAMLDryRun applies every object of dist/install.yaml with
// server-side dry run.
func TestInstallYAMLDryRun(t *testing.T) {
	ctx := context.Background()
	objs := installYAML(t)
	requireObjects(t, objs, []string{"Namespace dtq-system", "CustomResourceDefinition queues.dtq.dev", "Deployment dtq-controller-manager"})
	prepare(ctx, t, objs)
	if problems := dryRun(ctx, objs); len(problems) > 0 {
		t.Fatalf("dist/install.yaml: the API server did not accept every object:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("accepted %d objects: %s", len(objs), strings.Join(ids(objs), ", "))
}

// TestChartRejectsBadValues: values that cannot work, or that the chart does
// not know (values.schema.json), fail the render with a message that says why.
func TestChartRejectsBadValues(t *testing.T) {
	cases := map[string]struct{ set, want string }{
		"no Redis":                {"redis.existingSecret=", "set redis.url or redis.existingSecret"},
		"CA without TLS":          {"redis.url=redis://redis:6379/0,redis.tls.caSecret.name=ca", "redis.tls.caSecret needs a TLS redis.url"},
		"CA, cluster without TLS": {"redis.url=redis+cluster://redis:6379,redis.tls.caSecret.name=ca", "redis.tls.caSecret needs a TLS redis.url"},
		"monitor without metrics": {"metrics.enabled=false,metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor needs metrics.enabled"},
		// values.schema.json
		"misspelt value":       {"redis.existingsecret=x", "additional properties 'existingsecret' not allowed"},
		"worker Secret no key": {"workers.redisSecret=dtq-redis", "does not match pattern"},
		"not a Redis URL":      {"redis.url=my-redis:6379", "does not match pattern"},
		"unknown topology":     {"redis.url=redis+ring://redis:6379", "does not match pattern"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := renderChart(tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render --set %q: got error %v, want one containing %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestDryRunReportsFaults shows that dryRun reports each kind of fault the
// tests above rely on it to find: a pod template that breaks the restricted
// Pod Security Standard (a warning), a field the schema does not declare (in
// a built-in kind and in a custom resource), a value the CRD's validation
// refuses, and a bad ServiceMonitor.
func TestDryRunReportsFaults(t *testing.T) {
	ctx := context.Background()
	prepare(ctx, t, installYAML(t))
	cases := map[string]struct {
		obj  *unstructured.Unstructured
		want string
	}{
		"root pod template": {obj(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"root","namespace":"dtq-system"},
			"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
			"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`), "warning: would violate PodSecurity"},
		"undeclared field": {obj(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"x"},"rulez":[]}`), "rejected"},
		"invalid Queue":    {obj(`{"apiVersion":"dtq.dev/v1alpha1","kind":"Queue","metadata":{"name":"q","namespace":"dtq-system"},"spec":{"concurrency":0}}`), "rejected"},
		"bad ServiceMonitor": {obj(`{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","metadata":{"name":"m","namespace":"dtq-system"},
			"spec":{"selector":{},"endpoints":[{"scheme":"gopher"}]}}`), "rejected"},
		"undeclared ServiceMonitor field": {obj(`{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","metadata":{"name":"m","namespace":"dtq-system"},
			"spec":{"selector":{},"endpointz":[]}}`), "field not declared in schema"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			problems := dryRun(ctx, []*unstructured.Unstructured{tc.obj})
			if len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), tc.want) {
				t.Fatalf("planted fault not reported: want %q, got %q", tc.want, problems)
			}
			t.Log(problems)
		})
	}
}

func obj(j string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(j)); err != nil {
		panic(err)
	}
	return u
}

func ids(objs []*unstructured.Unstructured) []string {
	var l []string
	for _, o := range objs {
		l = append(l, o.GetKind()+" "+o.GetName())
	}
	return l
}

func requireObjects(t *testing.T, objs []*unstructured.Unstructured, want []string) {
	t.Helper()
	have := ids(objs)
	for _, w := range want {
		if !slices.Contains(have, w) {
			t.Fatalf("no %s among %v", w, have)
		}
	}
}
