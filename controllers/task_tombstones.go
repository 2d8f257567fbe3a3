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
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dtq-dev/dtq/pkg/broker"
)

type workqueueT = workqueue.TypedRateLimitingInterface[reconcile.Request]

// tombstone is the Redis task of a deleted, unfinished Task.
type tombstone struct {
	queue broker.QueueRef
	id    string
}

// tombstones hold deleted Tasks' tasks until Reconcile has cancelled them, so a
// failed cancel is retried by the work queue like any reconcile error. Deletes
// missed while no manager ran are caught by the orphan sweep of the queue
// loops (sweepOrphans), when the manager starts and on every resync.
type tombstones struct {
	mu sync.Mutex
	m  map[types.NamespacedName][]tombstone
}

func newTombstones() *tombstones { return &tombstones{m: map[types.NamespacedName][]tombstone{}} }

func (t *tombstones) add(key types.NamespacedName, ts tombstone) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[key] = append(t.m[key], ts)
}

func (t *tombstones) take(key types.NamespacedName) []tombstone {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := t.m[key]
	delete(t.m, key)
	return ts
}

// cancelDeleted cancels the tasks of deleted Tasks with this name. Deleting a
// Task never creates or re-runs work; a task that already finished, or that
// never existed (a duplicate mirroring another Task), is left alone.
func (r *TaskReconciler) cancelDeleted(ctx context.Context, key types.NamespacedName) error {
	var errs []error
	for _, ts := range r.tombstones.take(key) {
		state, err := r.Engine.Cancel(ctx, ts.queue, ts.id)
		switch {
		case err == nil:
			ctrl.LoggerFrom(ctx).Info("Cancelled the task of a deleted Task", "task_id", ts.id, "queue", ts.queue.Name, "state", state)
		case errors.Is(err, broker.ErrTaskNotFound), errors.Is(err, broker.ErrTaskTerminal), errors.Is(err, broker.ErrQueueNotFound):
		default:
			r.tombstones.add(key, ts)
			errs = append(errs, fmt.Errorf("cancel task %s of deleted Task: %w", ts.id, err))
		}
	}
	return errors.Join(errs...)
}
