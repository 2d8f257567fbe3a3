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
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// Field indexes on Tasks, so events and Queue changes reach the right Tasks
// without listing a namespace.
const (
	// indexTaskID maps a Redis task ID (the Task's UID) to its Task.
	indexTaskID = "metadata.uid"
	// indexMirrorOf maps an original's task ID to the duplicate Tasks mirroring
	// it that may still change: the unfinished ones, and the Failed or
	// DeadLettered ones, which follow it when it runs again.
	indexMirrorOf = "status.idempotency.taskID"
	// indexWaitingQueue maps a queue name to the Tasks not yet submitted to it.
	indexWaitingQueue = "spec.queue/unsubmitted"
)

func setupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	for name, fn := range map[string]client.IndexerFunc{
		indexTaskID: func(o client.Object) []string { return []string{string(o.GetUID())} },
		indexMirrorOf: func(o client.Object) []string {
			t := o.(*dtqv1alpha1.Task)
			if i := t.Status.Idempotency; i != nil && i.Duplicate && i.TaskID != "" && (!t.Status.State.Finished() || failedRun(t.Status.State)) {
				return []string{i.TaskID}
			}
			return nil
		},
		indexWaitingQueue: func(o client.Object) []string {
			t := o.(*dtqv1alpha1.Task)
			if t.Status.TaskID == "" && t.Status.Idempotency == nil && !t.Status.State.Finished() {
				return []string{t.Spec.Queue}
			}
			return nil
		},
	} {
		if err := idx.IndexField(ctx, &dtqv1alpha1.Task{}, name, fn); err != nil {
			return fmt.Errorf("index tasks by %s: %w", name, err)
		}
	}
	return nil
}
