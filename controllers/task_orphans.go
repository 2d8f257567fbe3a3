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

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// sweepOrphans cancels the unfinished tasks that Task CRs submitted and whose
// Task is gone. A running manager cancels them from the informer's delete
// event (tombstones); a Task deleted while no manager ran left no event, and
// this sweep, run when the manager starts leading and on every resync, is
// what catches it.
//
// The engine's list is read before the Tasks: a task submitted in between
// comes from a Task the cache already holds (the controller read it there),
// so a live Task's task is never taken for an orphan.
func (l *queueLoops) sweepOrphans(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("orphan-sweep")
	var queues dtqv1alpha1.QueueList
	if err := l.client.List(ctx, &queues); err != nil {
		log.Error(err, "List Queues")
		return
	}
	ids := map[broker.QueueRef][]string{}
	for i := range queues.Items {
		ref := queueRefOf(&queues.Items[i])
		got, err := l.engine.TaskCRTasks(ctx, ref)
		if err != nil {
			log.Error(err, "List the tasks of Task CRs", "namespace", ref.Namespace, "queue", ref.Name)
			continue
		}
		ids[ref] = got
	}
	var tasks dtqv1alpha1.TaskList
	if err := l.client.List(ctx, &tasks); err != nil {
		log.Error(err, "List Tasks")
		return
	}
	live := make(map[types.UID]bool, len(tasks.Items))
	for i := range tasks.Items {
		live[tasks.Items[i].UID] = true
	}
	for ref, list := range ids {
		for _, id := range list {
			if live[types.UID(id)] {
				continue
			}
			state, err := l.engine.Cancel(ctx, ref, id)
			switch {
			case err == nil:
				log.Info("Cancelled the task of a Task deleted while no manager ran", "namespace", ref.Namespace, "queue", ref.Name, "task_id", id, "state", state)
			case !errors.Is(err, broker.ErrTaskNotFound) && !errors.Is(err, broker.ErrTaskTerminal):
				log.Error(err, "Cancel an orphaned task", "namespace", ref.Namespace, "queue", ref.Name, "task_id", id)
			}
		}
	}
}
