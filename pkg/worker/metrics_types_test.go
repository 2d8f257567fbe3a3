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

package worker_test

import (
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/dtq-dev/dtq/pkg/worker/workertest"
)

// A flood of tasks of random types (each fails: no handler) adds no metric
// series: unregistered types share the task_type value "other".
func TestMetricsTaskTypeIsBounded(t *testing.T) {
	t.Parallel()
	h, _ := demoServer(t, workertest.Options{})
	ids := []string{h.Submit(echoType, map[string]int{"n": 1}, workertest.SubmitOptions{})}
	for i := range 40 {
		ids = append(ids, h.Submit(fmt.Sprintf("random-%d", i), nil, workertest.SubmitOptions{}))
	}
	for _, id := range ids {
		h.Wait(id, waitFor)
	}
	var types []string
	for _, m := range regexp.MustCompile(`task_type="([^"]*)"`).FindAllStringSubmatch(scrape(t, h), -1) {
		if !slices.Contains(types, m[1]) {
			types = append(types, m[1])
		}
	}
	slices.Sort(types)
	if !slices.Equal(types, []string{echoType, "other"}) {
		t.Fatalf("task_type values %v, want [echo other]", types)
	}
}
