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

package httpapi_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// client.TaskStatuses is the one list of a task's states. The engine's and
// the Task resource's states agree with it (also on which are terminal),
// and the copies that cannot import it spell it alike: the CRD's enum
// marker, the OpenAPI document's TaskStatus enum and the console's script.
func TestOneListOfTaskStates(t *testing.T) {
	var names, terminal []string
	for _, s := range client.TaskStatuses {
		names = append(names, string(s))
		if s.Terminal() {
			terminal = append(terminal, string(s))
		}
		if broker.State(s).Terminal() != s.Terminal() || dtqv1alpha1.TaskState(s).Finished() != s.Terminal() {
			t.Errorf("%s: terminal in the client %v, in the engine %v, in the Task resource %v",
				s, s.Terminal(), broker.State(s).Terminal(), dtqv1alpha1.TaskState(s).Finished())
		}
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	list := func(path, pattern, sep string) []string {
		t.Helper()
		m := regexp.MustCompile(pattern).FindStringSubmatch(read(path))
		if m == nil {
			t.Fatalf("%s: no match for %s", path, pattern)
		}
		var out []string
		for _, v := range strings.Split(m[1], sep) {
			out = append(out, strings.Trim(strings.TrimSpace(v), "'"))
		}
		return out
	}
	for what, got := range map[string][]string{
		"the CRD enum marker of TaskState": list("api/v1alpha1/task_types.go", `\+kubebuilder:validation:Enum=(\S+)\ntype TaskState string`, ";"),
		"openapi.yaml's TaskStatus enum":   list("internal/httpapi/openapi.yaml", `(?m)^    TaskStatus:\n(?:      .*\n)*?      enum: \[([^\]]+)\]`, ","),
		"console.js STATES":                list("internal/console/static/console.js", `const STATES = \[([^\]]+)\]`, ","),
	} {
		if !slices.Equal(got, names) {
			t.Errorf("%s is %v, want %v", what, got, names)
		}
	}
	if got := list("internal/console/static/console.js", `const TERMINAL = \[([^\]]+)\]`, ","); !slices.Equal(got, terminal) {
		t.Errorf("console.js TERMINAL is %v, want %v", got, terminal)
	}
}
