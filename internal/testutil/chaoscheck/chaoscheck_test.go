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

package chaoscheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
)

func TestCheck(t *testing.T) {
	ex := func(key, task string, attempt int) demo.ChaosExecution {
		return demo.ChaosExecution{Key: key, TaskID: task, Attempt: attempt, Worker: "w"}
	}
	ok := func(key string, attempt int, ids ...string) Logical {
		return Logical{Key: key, TaskIDs: ids, Succeeded: true, Attempt: attempt, MaxAttempts: 3}
	}
	type counts struct{ Lost, Duplicated, Redeliveries, OverBudget int }
	for name, tc := range map[string]struct {
		tasks   []Logical
		log     []demo.ChaosExecution
		effects map[string]int64
		want    counts
	}{
		"clean, a twin submission, a redelivery": {
			tasks:   []Logical{ok("a", 1, "t1", "t1"), ok("b", 2, "t2")},
			log:     []demo.ChaosExecution{ex("a", "t1", 1), ex("b", "t2", 1), ex("b", "t2", 2), ex("other", "t9", 1)},
			effects: map[string]int64{"a": 1, "b": 2},
			want:    counts{Redeliveries: 1},
		},
		"two task IDs for one key": {
			tasks: []Logical{ok("a", 1, "t1", "t2")},
			log:   []demo.ChaosExecution{ex("a", "t1", 1), ex("a", "t2", 1)},
			want:  counts{Duplicated: 1, Redeliveries: 1},
		},
		"a second task only the log knows": {
			tasks: []Logical{ok("a", 1, "t1")},
			log:   []demo.ChaosExecution{ex("a", "t1", 1), ex("a", "t3", 1)},
			want:  counts{Duplicated: 1, Redeliveries: 1},
		},
		"one attempt ran twice": {
			tasks: []Logical{ok("a", 1, "t1")},
			log:   []demo.ChaosExecution{ex("a", "t1", 1), ex("a", "t1", 1)},
			want:  counts{Duplicated: 1, Redeliveries: 1},
		},
		"ran after it ended": {
			tasks: []Logical{ok("a", 1, "t1")},
			log:   []demo.ChaosExecution{ex("a", "t1", 1), ex("a", "t1", 2)},
			want:  counts{Duplicated: 1, Redeliveries: 1},
		},
		"effect the log cannot explain": {
			tasks:   []Logical{ok("a", 1, "t1")},
			log:     []demo.ChaosExecution{ex("a", "t1", 1)},
			effects: map[string]int64{"a": 2},
			want:    counts{Duplicated: 1},
		},
		"not succeeded": {
			tasks: []Logical{{Key: "a", TaskIDs: []string{"t1"}, Attempt: 3, MaxAttempts: 3}},
			log:   []demo.ChaosExecution{ex("a", "t1", 1)},
			want:  counts{Lost: 1},
		},
		"succeeded without an execution": {
			tasks: []Logical{ok("a", 1, "t1")},
			want:  counts{Lost: 1},
		},
		"run again after a dead letter: each run's attempts once": {
			tasks: []Logical{{Key: "a", TaskIDs: []string{"t1"}, Succeeded: true, Attempt: 1, MaxAttempts: 2, EarlierRuns: []int{2}}},
			log:   []demo.ChaosExecution{ex("a", "t1", 1), ex("a", "t1", 2), ex("a", "t1", 1)},
			want:  counts{Redeliveries: 2},
		},
		"run again, but one attempt ran once more than the runs": {
			tasks: []Logical{{Key: "a", TaskIDs: []string{"t1"}, Succeeded: true, Attempt: 1, MaxAttempts: 2, EarlierRuns: []int{2}}},
			log:   []demo.ChaosExecution{ex("a", "t1", 1), ex("a", "t1", 2), ex("a", "t1", 1), ex("a", "t1", 1)},
			want:  counts{Duplicated: 1, Redeliveries: 3},
		},
		"run again, and an attempt after the last run ended": {
			tasks: []Logical{{Key: "a", TaskIDs: []string{"t1"}, Succeeded: true, Attempt: 1, MaxAttempts: 2, EarlierRuns: []int{2}}},
			log:   []demo.ChaosExecution{ex("a", "t1", 1), ex("a", "t1", 2), ex("a", "t1", 1), ex("a", "t1", 2)},
			want:  counts{Duplicated: 1, Redeliveries: 3},
		},
		"over maxAttempts": {
			tasks: []Logical{ok("a", 4, "t1")},
			log:   []demo.ChaosExecution{ex("a", "t1", 1), ex("a", "t1", 2), ex("a", "t1", 3), ex("a", "t1", 4)},
			want:  counts{Redeliveries: 3, OverBudget: 1},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := Check(tc.tasks, tc.log, tc.effects)
			got := counts{r.Lost, r.Duplicated, r.Redeliveries, r.OverBudget}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("counts (-want +got):\n%s\n%s\n%s", diff, r, r.Details(10))
			}
			if r.Accepted != len(tc.tasks) || r.OK() != (got.Lost+got.Duplicated+got.OverBudget == 0) {
				t.Fatalf("%s ok=%v", r, r.OK())
			}
		})
	}
}

func TestFromTasks(t *testing.T) {
	task := func(name, key, id string, state dtqv1alpha1.TaskState, attempt int32) *dtqv1alpha1.Task {
		return &dtqv1alpha1.Task{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       dtqv1alpha1.TaskSpec{IdempotencyKey: key},
			Status:     dtqv1alpha1.TaskStatus{TaskID: id, State: state, Attempt: attempt},
		}
	}
	original := task("a", "k1", "t1", dtqv1alpha1.TaskSucceeded, 1)
	original.Spec.MaxAttempts = ptr.To[int32](2)
	original.Status.History = []dtqv1alpha1.TaskRun{{State: dtqv1alpha1.TaskDeadLettered, Attempts: 2}}
	twin := task("a-twin", "k1", "t9", dtqv1alpha1.TaskSucceeded, 1)
	twin.Status.Idempotency = &dtqv1alpha1.TaskIdempotency{Key: "k1", TaskID: "t1", Duplicate: true}
	pending := task("b", "k0", "t2", dtqv1alpha1.TaskRetrying, 3)

	got := FromTasks([]*dtqv1alpha1.Task{twin, original, pending}, 10)
	want := []Logical{
		{Key: "k0", TaskIDs: []string{"t2"}, Attempt: 3, MaxAttempts: 10},
		{Key: "k1", TaskIDs: []string{"t1", "t1"}, Succeeded: true, Attempt: 1, MaxAttempts: 2, EarlierRuns: []int{2}},
	}
	if d := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("FromTasks (-want +got):\n%s", d)
	}
}
