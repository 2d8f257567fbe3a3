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
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// A burst of 2,000 tasks: worker processes scale up, drain the queue and
// scale back down to the Queue's minimum.
func TestBurstScalesUpAndDown(t *testing.T) {
	const n = 2000
	e := single
	ns := e.namespace(t, "e2e-burst")
	e.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		s.Concurrency = 10
		s.Scaling.MinReplicas = ptr.To[int32](1)
		s.Scaling.MaxReplicas = 4
		s.Scaling.TargetBacklogPerWorker = 50
		s.Scaling.ScaleDownStabilization = dur(5 * time.Second)
	})
	var tasks []*dtqv1alpha1.Task
	for i := range n {
		tasks = append(tasks, newTask(fmt.Sprintf("burst-%04d", i), ns, "burst", "sleep", map[string]float64{"seconds": 0.1}).Obj())
	}

	peak := watchPeak(t, e, ns)
	start := time.Now()
	e.createAll(t, tasks)
	t.Logf("%d tasks created in %v", n, time.Since(start).Round(time.Millisecond))
	got := e.waitTerminal(t, ns, "burst", n, 6*time.Minute)
	drained := time.Since(start)
	for _, task := range got {
		if task.Status.State != dtqv1alpha1.TaskSucceeded {
			t.Errorf("want Succeeded: %s", describe(task))
		}
	}
	if p := peak(); p < 2 {
		t.Errorf("peak of %d worker processes during the burst, want a scale-up to at least 2", p)
	} else {
		t.Logf("%d tasks Succeeded in %v, peak %d worker processes", n, drained.Round(time.Millisecond), p)
	}

	// Back to the minimum once the stabilization window has passed.
	must(t, poll(t.Context(), 2*time.Minute, func() error {
		var d appsv1.Deployment
		if err := e.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "q-workers"}, &d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Status.ReadyReplicas != 1 || e.workerPods(ns) != 1 {
			return fmt.Errorf("deployment replicas %v ready %d, %d worker processes; want 1",
				ptr.Deref(d.Spec.Replicas, -1), d.Status.ReadyReplicas, e.workerPods(ns))
		}
		return nil
	}))
	t.Logf("scaled down to 1 worker %v after the drain", (time.Since(start) - drained).Round(time.Millisecond))
}

// watchPeak samples the number of the Queue's worker processes until the
// test ends and returns a function reporting the peak so far.
func watchPeak(t *testing.T, e *env, ns string) func() int {
	var mu sync.Mutex
	peak := 0
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			n := e.workerPods(ns)
			mu.Lock()
			peak = max(peak, n)
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
