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

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/controllers"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
)

// The sample TaskSchedule (config/samples, every minute) on the dev stack,
// its Task pointed at the chaos handler, whose append-only log records every
// execution: each slot's run and the run `kubectl dtq schedule trigger` adds
// executed exactly once, counted from that log, not from a guarded counter.
func TestSchedule(t *testing.T) {
	ns := single.namespace(t, "e2e-schedule")
	chaosQueue(t, single, ns)
	data, err := os.ReadFile(filepath.Join(envtestutil.RepoRoot(), "config", "samples", "dtq_v1alpha1_taskschedule.yaml"))
	must(t, err)
	ts := &dtqv1alpha1.TaskSchedule{}
	must(t, yaml.UnmarshalStrict(data, ts))
	key := ns + "/heartbeat"
	ts.Namespace = ns
	ts.Spec.Template.Queue, ts.Spec.Template.Type = "q", demo.Chaos
	ts.Spec.Template.Payload = &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"key":%q}`, key))}
	ts.Spec.SuccessfulRunsHistoryLimit = nil // the default, 3, keeps what this test counts
	c := single.stack.Client
	must(t, c.Create(t.Context(), ts))
	t.Cleanup(func() { _ = c.Delete(t.Context(), ts) })

	want(t, "schedule list", dtq(t, ns, "schedule", "list"), 0, `^NAME +SCHEDULE +TIME ZONE +SUSPENDED +LAST RUN +NEXT RUN +ACTIVE +AGE\nheartbeat +\* \* \* \* \* +Europe/Berlin +`, `^$`)
	want(t, "schedule get", dtq(t, ns, "schedule", "get", "heartbeat"), 0,
		`(?s)Schedule: +\* \* \* \* \* \(Europe/Berlin\).*Next runs: *\n(  \d{4}-\d\d-\d\d \d\d:\d\d CES?T \w{3} +\(.*\)\n){5}$`, `^$`)

	// Two slots run (up to three minutes), then one manual trigger.
	succeeded := func(n int) func() error {
		return func() error {
			runs, err := scheduleRuns(t, ns)
			if err != nil {
				return err
			}
			done := 0
			for _, r := range runs {
				if r.Status.State == dtqv1alpha1.TaskSucceeded {
					done++
				}
			}
			if done < n {
				return fmt.Errorf("%d of the schedule's runs succeeded, want %d", done, n)
			}
			return nil
		}
	}
	must(t, poll(t.Context(), 3*time.Minute, succeeded(2)))
	want(t, "schedule trigger", dtq(t, ns, "schedule", "trigger", "heartbeat"), 0, `^taskschedule\.dtq\.dev/heartbeat triggered\n$`, `^$`)
	must(t, poll(t.Context(), time.Minute, func() error {
		runs, err := scheduleRuns(t, ns)
		if err != nil {
			return err
		}
		if r, ok := runs["heartbeat-manual-1"]; !ok || r.Status.State != dtqv1alpha1.TaskSucceeded {
			return fmt.Errorf("the manual run has not succeeded")
		}
		return nil
	}))
	want(t, "schedule suspend", dtq(t, ns, "schedule", "suspend", "heartbeat"), 0, `^taskschedule\.dtq\.dev/heartbeat suspended\n$`, `^$`)

	// Count executions per slot from the chaos log: every line of this key
	// is one execution; its task ID names the Task, and the Task its slot.
	runs, err := scheduleRuns(t, ns)
	must(t, err)
	slotOf := map[string]string{} // task ID -> slot, or "manual-N"
	for _, r := range runs {
		if r.Status.State != dtqv1alpha1.TaskSucceeded {
			continue
		}
		slot := r.Annotations[controllers.AnnotationSlot]
		if slot == "" {
			slot = "manual-" + r.Annotations[controllers.AnnotationTrigger]
		}
		slotOf[r.Status.TaskID] = slot
	}
	log, err := demo.ReadChaosLog(chaosLog)
	must(t, err)
	perSlot := map[string]int{}
	for _, e := range log {
		if e.Key != key {
			continue
		}
		slot, ok := slotOf[e.TaskID]
		if !ok {
			// An execution of a run whose Task is unfinished or was deleted
			// (history limit): count it under its task ID.
			slot = "task " + e.TaskID
		}
		perSlot[slot]++
	}
	manual := 0
	for slot, n := range perSlot {
		if n != 1 {
			t.Errorf("%s ran %d times, want 1", slot, n)
		}
		if strings.HasPrefix(slot, "manual-") {
			manual++
		}
	}
	if len(perSlot) < 3 || manual != 1 {
		t.Errorf("executions per slot %v: want at least 2 slots and 1 manual run", perSlot)
	}
	st := &dtqv1alpha1.TaskSchedule{}
	must(t, c.Get(t.Context(), client.ObjectKeyFromObject(ts), st))
	status, _ := json.Marshal(st.Status)
	t.Logf("executions per slot %v; status %s", perSlot, status)
	if st.Status.MissedSlots != 0 {
		t.Errorf("status.missedSlots = %d, want 0", st.Status.MissedSlots)
	}
}

func scheduleRuns(t *testing.T, ns string) (map[string]*dtqv1alpha1.Task, error) {
	var list dtqv1alpha1.TaskList
	if err := single.stack.Client.List(t.Context(), &list, client.InNamespace(ns),
		client.MatchingLabels{controllers.LabelSchedule: "heartbeat"}); err != nil {
		return nil, err
	}
	out := map[string]*dtqv1alpha1.Task{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}
