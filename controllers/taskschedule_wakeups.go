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

package controllers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// scheduleWakeups holds one timer per TaskSchedule, on the reconciler's
// clock, that enqueues the schedule at its next slot. A timer rather than
// RequeueAfter: the work queue's delays run on the real clock, and a test's
// fake clock must be what wakes the schedule. Lost timers (a restart) are
// re-armed by the first reconcile of each schedule.
type scheduleWakeups struct {
	clock  clock.WithDelayedExecution
	ch     chan<- event.TypedGenericEvent[*dtqv1alpha1.TaskSchedule]
	mu     sync.Mutex
	timers map[types.NamespacedName]clock.Timer
}

func newScheduleWakeups(c clock.WithDelayedExecution, ch chan<- event.TypedGenericEvent[*dtqv1alpha1.TaskSchedule]) *scheduleWakeups {
	return &scheduleWakeups{clock: c, ch: ch, timers: map[types.NamespacedName]clock.Timer{}}
}

// at replaces the schedule's timer by one that fires at when.
func (w *scheduleWakeups) at(ts *dtqv1alpha1.TaskSchedule, when time.Time) {
	key := types.NamespacedName{Namespace: ts.Namespace, Name: ts.Name}
	obj := &dtqv1alpha1.TaskSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ts.Namespace, Name: ts.Name}}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.timers[key]; t != nil {
		t.Stop()
	}
	// The send is its own goroutine: a fake clock runs the function with its
	// lock held, and the channel may be full.
	fire := func() { go func() { w.ch <- event.TypedGenericEvent[*dtqv1alpha1.TaskSchedule]{Object: obj} }() }
	d := when.Sub(w.clock.Now())
	if d <= 0 {
		delete(w.timers, key)
		fire()
		return
	}
	w.timers[key] = w.clock.AfterFunc(d, fire)
}

// forget stops the timer of a deleted schedule.
func (w *scheduleWakeups) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.timers[key]; t != nil {
		t.Stop()
		delete(w.timers, key)
	}
}
