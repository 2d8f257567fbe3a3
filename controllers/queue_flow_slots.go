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

	ctrl "sigs.k8s.io/controller-runtime"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// checkFlowSlots runs the engine's slot check (ReconcileFlowSlots: a slot
// whose task is not Running is given back) on every Queue with
// spec.flowControl, on each resync. Every way out of Running gives its slot
// back in the same script, so the check finds nothing in normal operation; it
// is the safety net that makes a leaked slot a logged, repaired event
// instead of a key stuck at its cap. Queues without flow control cost
// nothing.
func (l *queueLoops) checkFlowSlots(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("flow-slots")
	var queues dtqv1alpha1.QueueList
	if err := l.client.List(ctx, &queues); err != nil {
		log.Error(err, "List Queues")
		return
	}
	for i := range queues.Items {
		if queues.Items[i].Spec.FlowControl == nil {
			continue
		}
		ref := queueRefOf(&queues.Items[i])
		n, err := l.engine.ReconcileFlowSlots(ctx, ref)
		switch {
		case err != nil:
			log.Error(err, "Check flow control slots", "namespace", ref.Namespace, "queue", ref.Name)
		case n > 0:
			log.Info("Gave back flow control slots held by tasks not running", "namespace", ref.Namespace, "queue", ref.Name, "slots", n)
		}
	}
}
