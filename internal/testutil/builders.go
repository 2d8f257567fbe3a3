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

// Package testutil builds test objects: testutil.MakeTask("t", "ns").Queue("q").Obj().
package testutil

import (
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// TaskWrapper builds a Task.
type TaskWrapper struct{ dtqv1alpha1.Task }

// MakeTask returns a Task of type echo on queue "default".
func MakeTask(name, namespace string) *TaskWrapper {
	return &TaskWrapper{dtqv1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       dtqv1alpha1.TaskSpec{Queue: "default", Type: "echo"},
	}}
}

func (w *TaskWrapper) Queue(q string) *TaskWrapper { w.Spec.Queue = q; return w }
func (w *TaskWrapper) Type(t string) *TaskWrapper  { w.Spec.Type = t; return w }
func (w *TaskWrapper) Key(k string) *TaskWrapper   { w.Spec.IdempotencyKey = k; return w }
func (w *TaskWrapper) Priority(p int32) *TaskWrapper {
	w.Spec.Priority = ptr.To(p)
	return w
}
func (w *TaskWrapper) MaxAttempts(n int32) *TaskWrapper {
	w.Spec.MaxAttempts = ptr.To(n)
	return w
}
func (w *TaskWrapper) Timeout(d time.Duration) *TaskWrapper {
	w.Spec.Timeout = &metav1.Duration{Duration: d}
	return w
}
func (w *TaskWrapper) Delay(d time.Duration) *TaskWrapper {
	w.Spec.Delay = &metav1.Duration{Duration: d}
	return w
}
func (w *TaskWrapper) TTLAfterFinished(s int32) *TaskWrapper {
	w.Spec.TTLSecondsAfterFinished = ptr.To(s)
	return w
}
func (w *TaskWrapper) TTL(d time.Duration) *TaskWrapper {
	w.Spec.TTL = &metav1.Duration{Duration: d}
	return w
}
func (w *TaskWrapper) Cancel() *TaskWrapper          { w.Spec.Cancel = true; return w }
func (w *TaskWrapper) FlowKey(k string) *TaskWrapper { w.Spec.FlowKey = k; return w }

// Payload sets the payload to v encoded as JSON.
func (w *TaskWrapper) Payload(v any) *TaskWrapper {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Spec.Payload = &runtime.RawExtension{Raw: raw}
	return w
}

// Obj returns the Task.
func (w *TaskWrapper) Obj() *dtqv1alpha1.Task { return &w.Task }

// QueueWrapper builds a Queue.
type QueueWrapper struct{ dtqv1alpha1.Queue }

// MakeQueue returns a Queue with the API's defaults left to the server.
func MakeQueue(name, namespace string) *QueueWrapper {
	return &QueueWrapper{dtqv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}}
}

func (w *QueueWrapper) Replicas(min, max int32) *QueueWrapper {
	w.Spec.Scaling.MinReplicas = ptr.To(min)
	w.Spec.Scaling.MaxReplicas = max
	return w
}
func (w *QueueWrapper) TargetBacklog(n int32) *QueueWrapper {
	w.Spec.Scaling.TargetBacklogPerWorker = n
	return w
}
func (w *QueueWrapper) Timeouts(visibility, heartbeat time.Duration) *QueueWrapper {
	w.Spec.VisibilityTimeout = dtqv1alpha1.NewDuration(visibility)
	w.Spec.HeartbeatInterval = dtqv1alpha1.NewDuration(heartbeat)
	return w
}
func (w *QueueWrapper) Paused(p bool) *QueueWrapper { w.Spec.Paused = p; return w }
func (w *QueueWrapper) ScaleDownAfter(d time.Duration) *QueueWrapper {
	w.Spec.Scaling.ScaleDownStabilization = dtqv1alpha1.NewDuration(d)
	return w
}
func (w *QueueWrapper) IdempotencyTTL(d time.Duration) *QueueWrapper {
	w.Spec.IdempotencyTTL = dtqv1alpha1.NewDuration(d)
	return w
}
func (w *QueueWrapper) OnMismatch(p dtqv1alpha1.IdempotencyMismatchPolicy) *QueueWrapper {
	w.Spec.Idempotency.OnMismatch = p
	return w
}
func (w *QueueWrapper) RetryDelays(base, max time.Duration) *QueueWrapper {
	w.Spec.Retry.BaseDelay = dtqv1alpha1.NewDuration(base)
	w.Spec.Retry.MaxDelay = dtqv1alpha1.NewDuration(max)
	return w
}
func (w *QueueWrapper) DeadLetter(enabled bool) *QueueWrapper {
	w.Spec.DeadLetter.Enabled = ptr.To(enabled)
	return w
}
func (w *QueueWrapper) MaxDepth(n int64) *QueueWrapper        { w.Spec.MaxDepth = n; return w }
func (w *QueueWrapper) MaxPayloadBytes(n int64) *QueueWrapper { w.Spec.MaxPayloadBytes = n; return w }
func (w *QueueWrapper) Concurrency(n int32) *QueueWrapper     { w.Spec.Concurrency = n; return w }
func (w *QueueWrapper) TaskTimeout(d time.Duration) *QueueWrapper {
	w.Spec.TaskTimeout = dtqv1alpha1.NewDuration(d)
	return w
}
func (w *QueueWrapper) FlowControl(fc *dtqv1alpha1.FlowControl) *QueueWrapper {
	w.Spec.FlowControl = fc
	return w
}
func (w *QueueWrapper) TTLAfterFinished(s int32) *QueueWrapper {
	w.Spec.TTLSecondsAfterFinished = ptr.To(s)
	return w
}

// Obj returns the Queue.
func (w *QueueWrapper) Obj() *dtqv1alpha1.Queue { return &w.Queue }
