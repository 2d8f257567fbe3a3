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

// Package sdk checks what a service pays for importing dtq's Go SDK
// (docs/sdk.md): programs under testdata are built as a user would build
// them, in a module of their own that requires only the SDK module, and their
// dependencies are counted against budgets.
package sdk

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const sdkModule = "github.com/dtq-dev/dtq/pkg"

// Budgets in non-standard-library packages (the program's own excluded). A
// worker compiles at most what asynq's library does (69 packages at
// v0.26.0); a producer, which talks HTTP to the API, fewer.
const (
	workerBudget   = 69
	producerBudget = 40
)

// forbidden are module path prefixes that must not be in an SDK user's build
// list: the operator's world (Kubernetes, Helm, the OpenAPI validator) and
// gRPC, which only an exporter the SDK's caller chooses would bring.
var forbidden = []string{"k8s.io/", "sigs.k8s.io/", "helm.sh/", "google.golang.org/grpc", "github.com/getkin/kin-openapi"}

// program is one of testdata's programs built in a module of its own.
type program struct {
	name     string
	requires []string // module paths whose version the module takes from the repository's go.mod files
	budget   int      // 0: measured for comparison only
}

type measure struct {
	packages  []string // non-standard packages compiled, the program's own excluded
	forbidden []string // modules of the build list that match forbidden
	size      int64    // stripped binary, bytes
}

// violations says what breaks m's budget and the forbidden-module rule.
func (p program) violations(m measure) []string {
	var v []string
	if len(m.packages) > p.budget {
		v = append(v, fmt.Sprintf("%d non-standard packages, budget %d", len(m.packages), p.budget))
	}
	if len(m.forbidden) > 0 {
		v = append(v, "forbidden modules in the build list: "+strings.Join(m.forbidden, ", "))
	}
	return v
}

func TestSDKBudget(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{
		"github.com/hibiken/asynq":                                        moduleVersion(t, filepath.Join(root, "test/bench"), "github.com/hibiken/asynq"),
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp": moduleVersion(t, root, "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"),
	}
	sdk := []string{sdkModule}
	worker := program{name: "worker", requires: sdk, budget: workerBudget}
	producer := program{name: "producer", requires: sdk, budget: producerBudget}
	// The worker plus an OTLP exporter: proof that the check refuses what
	// the SDK must not bring.
	planted := program{name: "planted", requires: append(sdk, "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"), budget: workerBudget}
	asynqWorker := program{name: "asynqworker", requires: []string{"github.com/hibiken/asynq"}}
	asynqProducer := program{name: "asynqproducer", requires: []string{"github.com/hibiken/asynq"}}

	got := map[string]measure{}
	for _, p := range []program{worker, producer, planted, asynqWorker, asynqProducer} {
		got[p.name] = build(t, root, p, versions)
	}
	for _, p := range []program{worker, producer} {
		if v := p.violations(got[p.name]); len(v) > 0 {
			t.Errorf("hello-world %s: %s\npackages:\n  %s", p.name, strings.Join(v, "; "), strings.Join(got[p.name].packages, "\n  "))
		}
	}
	v := planted.violations(got[planted.name])
	if len(v) != 2 {
		t.Errorf("a worker that imports an OTLP exporter must break both rules; the check reported %q", v)
	}
	t.Logf("worker with an OTLP exporter, as the check reports it: %s", strings.Join(v, "; "))
	t.Logf("%-26s %9s %12s", "program", "packages", "stripped")
	for _, row := range []struct{ label, name string }{
		{"dtq worker (pkg/worker)", "worker"}, {"asynq worker", "asynqworker"},
		{"dtq producer (pkg/client)", "producer"}, {"asynq producer", "asynqproducer"},
	} {
		m := got[row.name]
		t.Logf("%-26s %9d %9.1f MiB", row.label, len(m.packages), float64(m.size)/(1<<20))
	}
}

// build writes p's module in a temporary directory, resolves it with the
// repository's SDK module and the versions given, and measures it.
func build(t *testing.T, root string, p program, versions map[string]string) measure {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", p.name, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	goVersion := strings.TrimSpace(run(t, root, "go", "mod", "edit", "-print"))
	for line := range strings.Lines(goVersion) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			goVersion = v
			break
		}
	}
	mod := fmt.Sprintf("module example.com/%s\n\ngo %s\n", p.name, goVersion)
	for _, r := range p.requires {
		if r == sdkModule {
			mod += fmt.Sprintf("\nrequire %s v0.0.0\n\nreplace %s => %s\n", r, r, filepath.Join(root, "pkg"))
			continue
		}
		mod += fmt.Sprintf("\nrequire %s %s\n", r, versions[r])
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "go", "mod", "tidy")
	var m measure
	for _, pkg := range strings.Fields(run(t, dir, "go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")) {
		if pkg != "example.com/"+p.name {
			m.packages = append(m.packages, pkg)
		}
	}
	for _, mp := range strings.Fields(run(t, dir, "go", "list", "-m", "-f", "{{.Path}}", "all")) {
		for _, f := range forbidden {
			if strings.HasPrefix(mp, f) {
				m.forbidden = append(m.forbidden, mp)
			}
		}
	}
	bin := filepath.Join(dir, p.name)
	run(t, dir, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	m.size = fi.Size()
	return m
}

// moduleVersion is the version of module path in dir's build list.
func moduleVersion(t *testing.T, dir, path string) string {
	t.Helper()
	return strings.TrimSpace(run(t, dir, "go", "list", "-m", "-f", "{{.Version}}", path))
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	// A module of its own: no workspace, and the go.mod as written.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, stderr)
	}
	return string(out)
}
