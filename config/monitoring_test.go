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

// Package config holds no code: its tests check the manifests in this
// directory (kustomize builds, the Prometheus rules and the Grafana dashboard
// against docs/metrics.md).
package config

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/dtq-dev/dtq/controllers"
)

// documentedSeries reads the series tables of docs/metrics.md: name -> type.
func documentedSeries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(dtq_[a-z_]+)` \\| (counter|gauge|histogram) \\|")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = m[2]
	}
	if len(out) < 20 {
		t.Fatalf("found %d series in docs/metrics.md: is the table format still | `name` | type |?", len(out))
	}
	return out
}

// seriesOf parses a PromQL expression and returns the metric names it selects,
// a histogram's _bucket, _sum and _count as the histogram's name.
func seriesOf(t *testing.T, expr string, docs map[string]string) ([]string, error) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && docs[base] == "histogram" {
					name = base
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// checkSeries fails for a name that is not a documented dtq series.
func checkSeries(t *testing.T, where string, names []string, docs map[string]string, used map[string]bool) {
	t.Helper()
	if len(names) == 0 {
		t.Errorf("%s selects no series", where)
	}
	for _, n := range names {
		if _, ok := docs[n]; !ok {
			t.Errorf("%s uses %s, which docs/metrics.md does not list (is it exported?)", where, n)
		}
		used[n] = true
	}
}

type promRule struct {
	Spec struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
}

// The alerts parse with Prometheus' own PromQL parser and use only exported
// series; the ones the issue asks for are there.
func TestPrometheusRules(t *testing.T) {
	docs := documentedSeries(t)
	data, err := os.ReadFile(filepath.Join("prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr promRule
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatalf("rules.yaml: %v", err)
	}
	used := map[string]bool{}
	var alerts []string
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			names, err := seriesOf(t, r.Expr, docs)
			if err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
				continue
			}
			checkSeries(t, "alert "+r.Alert, names, docs, used)
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s needs a severity label, a summary and a description", r.Alert)
			}
		}
	}
	for _, want := range []string{"DtqOldestQueuedTaskTooOld", "DtqDeadLettersGrowing", "DtqNoReadyWorkers", "DtqRedisErrors", "DtqScheduleMissedSlots"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s (have %v)", want, alerts)
		}
	}
}

// grafanaVar matches the dashboard variables and Grafana's interval macros.
var grafanaVar = regexp.MustCompile(`\$(__rate_interval|__interval|__range|[a-z_]+)`)

// Every panel query and variable query of the dashboard parses as PromQL
// (with Grafana's variables substituted) and uses only exported series; the
// panels cover what the issue asks for.
func TestGrafanaDashboard(t *testing.T) {
	docs := documentedSeries(t)
	data, err := os.ReadFile(filepath.Join("grafana", "dtq-queues.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string
		Title      string
		Templating struct {
			List []struct {
				Name       string
				Type       string
				Definition string
			}
		}
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	substitute := func(expr string) string {
		return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
			if strings.HasPrefix(v, "$__") {
				return "5m"
			}
			return ".*"
		})
	}
	used := map[string]bool{}
	labelValues := regexp.MustCompile(`^label_values\((.+), *[a-z_]+\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		names, err := seriesOf(t, substitute(m[1]), docs)
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
		}
		checkSeries(t, "variable "+v.Name, names, docs, used)
	}
	var titles []string
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names, err := seriesOf(t, substitute(tg.Expr), docs)
			if err != nil {
				t.Errorf("panel %q: %q: %v", p.Title, tg.Expr, err)
				continue
			}
			checkSeries(t, "panel "+p.Title, names, docs, used)
		}
	}
	for _, want := range []string{"Backlog by queue", "Submissions", "Tasks finished", "Submit to start", "Submit to finish",
		"Failures", "Dead letters", "Worker replicas", "Slot utilisation", "Redis errors"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q (have %v)", want, titles)
		}
	}
	t.Logf("the dashboard uses %d of the %d documented series", len(used), len(docs))
}

// copyConfig copies this directory into an in-memory file system at /config,
// applying edit to each file's text (by path relative to config/).
func copyConfig(t *testing.T, edit func(path, text string) string) filesys.FileSystem {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".json") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(filepath.Join("/config", path), []byte(edit(path, string(data))))
	})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

// uncomment removes the leading "#" of the lines of text that equal one of
// lines, and of every line from a line equal to from up to (not including)
// the first line after it that starts with until.
func uncomment(text string, lines []string, from, until string) string {
	out := strings.Split(text, "\n")
	inBlock := false
	for i, l := range out {
		switch {
		case from != "" && l == from:
			inBlock = true
		case inBlock && strings.HasPrefix(l, until):
			inBlock = false
		}
		if (inBlock || slices.Contains(lines, l)) && strings.HasPrefix(l, "#") {
			out[i] = l[1:]
		}
	}
	return strings.Join(out, "\n")
}

func build(t *testing.T, fsys filesys.FileSystem, dir string) resmap.ResMap {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return rm
}

// find returns the object of kind and name as a map, failing when absent.
func find(t *testing.T, rm resmap.ResMap, kind, name string) map[string]any {
	t.Helper()
	for _, r := range rm.Resources() {
		if r.GetKind() == kind && r.GetName() == name {
			m, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no %s %s in the build", kind, name)
	return nil
}

// field walks m along keys (a string is a map key, an int a list index).
func field(m any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			mm, _ := m.(map[string]any)
			m = mm[k]
		case int:
			l, _ := m.([]any)
			if k >= len(l) {
				return nil
			}
			m = l[k]
		}
	}
	return m
}

// config/default builds as shipped, and with the Prometheus and cert-manager
// sections enabled the way its comments say: the ServiceMonitor selects the
// metrics Service with the queue labels kept and the TLS server name set, the
// PodMonitor selects the worker pods, and the manager gets the certificate
// flag it defines (cmd/manager's TestConfigPassesOnlyKnownFlags).
func TestKustomizeMonitoring(t *testing.T) {
	build(t, copyConfig(t, func(_, s string) string { return s }), "/config/default")

	fsys := copyConfig(t, func(path, s string) string {
		switch path {
		case filepath.Join("default", "kustomization.yaml"):
			return uncomment(s, []string{"#- ../prometheus", "#- ../certmanager",
				"#- path: cert_metrics_manager_patch.yaml", "#  target:", "#    kind: Deployment"},
				"#replacements:", "# - source: # Uncomment the following block if you have any webhook")
		case filepath.Join("prometheus", "kustomization.yaml"):
			return uncomment(s, []string{"#patches:", "#  - path: monitor_tls_patch.yaml", "#    target:", "#      kind: ServiceMonitor"}, "", "")
		}
		return s
	})
	rm := build(t, fsys, "/config/default")
	const svc = "dtq-controller-manager-metrics-service"
	sm := find(t, rm, "ServiceMonitor", "dtq-controller-manager-metrics-monitor")
	ep := field(sm, "spec", "endpoints", 0)
	if field(ep, "honorLabels") != true || field(ep, "port") != "https" {
		t.Errorf("ServiceMonitor endpoint %v: want honorLabels true on port https", ep)
	}
	if got := field(ep, "tlsConfig", "serverName"); got != svc+".dtq-system.svc" {
		t.Errorf("ServiceMonitor TLS server name %v", got)
	}
	service := find(t, rm, "Service", svc)
	for k, v := range field(sm, "spec", "selector", "matchLabels").(map[string]any) {
		if field(service, "metadata", "labels", k) != v {
			t.Errorf("the ServiceMonitor selects %s=%v; the metrics Service is labelled %v", k, v, field(service, "metadata", "labels"))
		}
	}
	if field(service, "spec", "ports", 0, "name") != "https" {
		t.Errorf("metrics Service ports %v", field(service, "spec", "ports"))
	}
	pm := find(t, rm, "PodMonitor", "dtq-workers")
	if field(pm, "spec", "selector", "matchExpressions", 0, "key") != controllers.LabelQueue ||
		field(pm, "spec", "podMetricsEndpoints", 0, "port") != "metrics" || field(pm, "spec", "namespaceSelector", "any") != true {
		t.Errorf("PodMonitor spec %v: want every namespace's pods labelled %s, port metrics", field(pm, "spec"), controllers.LabelQueue)
	}
	find(t, rm, "PrometheusRule", "dtq-alerts")
	cert := find(t, rm, "Certificate", "dtq-metrics-certs")
	if got := field(cert, "spec", "dnsNames", 0); got != svc+".dtq-system.svc" {
		t.Errorf("certificate DNS name %v", got)
	}
	args := field(find(t, rm, "Deployment", "dtq-controller-manager"), "spec", "template", "spec", "containers", 0, "args")
	if !slices.Contains(args.([]any), "--metrics-cert-path=/tmp/k8s-metrics-server/metrics-certs") {
		t.Errorf("manager args %v lack --metrics-cert-path", args)
	}

	cms := build(t, fsys, "/config/grafana")
	cm := find(t, cms, "ConfigMap", "dtq-grafana-dashboard")
	dash, _ := os.ReadFile(filepath.Join("grafana", "dtq-queues.json"))
	if field(cm, "metadata", "labels", "grafana_dashboard") != "1" || field(cm, "data", "dtq-queues.json") != string(dash) {
		t.Errorf("dashboard ConfigMap: labels %v, data keys %v", field(cm, "metadata", "labels"), field(cm, "data"))
	}
}
