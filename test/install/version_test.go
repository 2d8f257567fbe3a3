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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/dtq-dev/dtq/internal/version"
)

// dtqImages is the repository of dtq's images.
const dtqImages = "ghcr.io/dtq-dev/"

// TestImagesPinnedToVersion: dist/install.yaml and the chart (defaults, and
// the API on) name dtq's images by the tag of pkg/version/VERSION
// (v<version>), never latest, and the chart's version and appVersion are that
// version.
func TestImagesPinnedToVersion(t *testing.T) {
	for name, objs := range map[string][]*unstructured.Unstructured{
		"dist/install.yaml":  installYAML(t),
		"chart":              render(t, ""),
		"chart with the API": render(t, "api.enabled=true"),
	} {
		refs, problems := imageProblems(objs, version.Tag())
		for _, p := range problems {
			t.Errorf("%s: %s", name, p)
		}
		if len(refs) == 0 {
			t.Errorf("%s names no dtq image", name)
		}
		t.Logf("%s: %s", name, strings.Join(refs, ", "))
	}

	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != version.Version || chart.AppVersion != version.Tag() {
		t.Errorf("Chart.yaml: version %q, appVersion %q; want %q and %q (make chart)", chart.Version, chart.AppVersion, version.Version, version.Tag())
	}
}

// TestImageProblemsReportsPlantedFaults: the check of
// TestImagesPinnedToVersion finds a latest tag, another version's tag, an
// untagged image and a --worker-image flag of another version.
func TestImageProblemsReportsPlantedFaults(t *testing.T) {
	pod := func(image string, args ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"kind": "Deployment", "metadata": map[string]any{"name": "d"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "c", "image": image, "args": args}},
			}}},
		}}
	}
	cases := map[string]struct {
		obj  *unstructured.Unstructured
		want string
	}{
		"good":              {pod(dtqImages+"dtq-manager:v1.2.3", "--worker-image="+dtqImages+"dtq-worker:v1.2.3"), ""},
		"latest":            {pod(dtqImages + "dtq-manager:latest"), ":latest"},
		"another version":   {pod(dtqImages + "dtq-manager:v1.2.2"), "v1.2.2"},
		"untagged":          {pod(dtqImages + "dtq-manager"), "dtq-manager"},
		"worker image flag": {pod(dtqImages+"dtq-manager:v1.2.3", "--worker-image="+dtqImages+"dtq-worker:latest"), ":latest"},
		"another registry":  {pod("example.com/app:latest"), ":latest"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, problems := imageProblems([]*unstructured.Unstructured{tc.obj}, "v1.2.3")
			got := strings.Join(problems, "\n")
			if tc.want == "" && got != "" {
				t.Fatalf("good object reported:\n%s", got)
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("planted fault not reported: want %q in %q", tc.want, got)
			}
		})
	}
}

// imageProblems walks every string of objs: any that names a dtq image (an
// image field or a flag such as --worker-image=) must end in :tag, and none
// may name a :latest image. It returns the dtq image references it found.
func imageProblems(objs []*unstructured.Unstructured, tag string) (refs, problems []string) {
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(where+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", where, i), x)
			}
		case string:
			if strings.HasSuffix(v, ":latest") {
				problems = append(problems, fmt.Sprintf("%s: %q names a :latest image", where, v))
			}
			if i := strings.Index(v, dtqImages); i >= 0 {
				ref := v[i:]
				refs = append(refs, ref)
				if !strings.HasSuffix(ref, ":"+tag) {
					problems = append(problems, fmt.Sprintf("%s: %q is not tagged %s", where, ref, tag))
				}
			}
		}
	}
	for _, o := range objs {
		walk(o.GetKind()+"/"+o.GetName(), o.Object)
	}
	return refs, problems
}
