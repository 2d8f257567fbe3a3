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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TaskSpec is one unit of work. Everything but cancel and retryGeneration is
// immutable: a Task is a request, and changing a request after submission would
// make its idempotency meaningless.
// +kubebuilder:validation:XValidation:rule="!(has(self.delay) && has(self.notBefore))",message="set at most one of delay and notBefore"
// +kubebuilder:validation:XValidation:rule="has(self.idempotencyKey) == has(oldSelf.idempotencyKey)",message="idempotencyKey is immutable",fieldPath=".idempotencyKey"
// +kubebuilder:validation:XValidation:rule="has(self.payload) == has(oldSelf.payload)",message="payload is immutable",fieldPath=".payload"
// +kubebuilder:validation:XValidation:rule="has(self.flowKey) == has(oldSelf.flowKey)",message="flowKey is immutable",fieldPath=".flowKey"
// +kubebuilder:validation:XValidation:rule="has(self.maxAttempts) == has(oldSelf.maxAttempts) && has(self.timeout) == has(oldSelf.timeout) && has(self.delay) == has(oldSelf.delay) && has(self.notBefore) == has(oldSelf.notBefore) && has(self.ttl) == has(oldSelf.ttl) && has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished)",message="spec fields other than cancel and retryGeneration are immutable"
// +kubebuilder:validation:XValidation:rule="has(self.retryGeneration) || !has(oldSelf.retryGeneration)",message="retryGeneration cannot be removed",fieldPath=".retryGeneration"
type TaskSpec struct {
	// queue is the name of a Queue in the Task's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="queue is immutable"
	Queue string `json:"queue"`

	// type is the handler name a worker dispatches on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable"
	Type string `json:"type"`

	// payload is the handler's input: a JSON object of any shape, limited by the
	// Queue's maxPayloadBytes.
	// It is one atomic value for server-side apply (it is immutable), so its
	// keys are not listed one by one in managedFields.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="payload is immutable"
	// +mapType=atomic
	// +optional
	Payload *runtime.RawExtension `json:"payload,omitempty"`

	// idempotencyKey maps every submission carrying it, on this queue, to one
	// logical task while its record lives (the Queue's idempotencyTTL). A Task
	// re-applied by GitOps, or a second Task with the same key, replays the first
	// one's outcome instead of running again.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="idempotencyKey is immutable"
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`

	// flowKey names the flow the task belongs to (a tenant, a customer, an
	// account of a downstream API): 1 to 128 visible ASCII characters. On a
	// Queue with spec.flowControl, the per-key limits and the fair share
	// between keys apply to each key; on other queues it is stored and
	// inert, so enabling flow control later applies to the waiting tasks.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[!-~]+$')",message="flowKey must be visible ASCII characters: letters, digits and punctuation, no spaces"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="flowKey is immutable"
	// +optional
	FlowKey string `json:"flowKey,omitempty"`

	// priority orders work within the queue: 9 is drained first, 0 last.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9
	// +kubebuilder:default=5
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="priority is immutable"
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// maxAttempts bounds executions, crash redeliveries included; the Queue's
	// retry.maxAttempts applies when unset.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="maxAttempts is immutable"
	// +optional
	MaxAttempts *int32 `json:"maxAttempts,omitempty"`

	// timeout is the handler deadline (at most 1h); the Queue's taskTimeout
	// applies when unset.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1h')",message="timeout must be in (0s, 1h]"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="timeout is immutable"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// delay postpones the first run by this long after submission (at most 30 days).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('720h')",message="delay must be in [0s, 720h]"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="delay is immutable"
	// +optional
	Delay *metav1.Duration `json:"delay,omitempty"`

	// notBefore postpones the first run until this time.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="notBefore is immutable"
	// +optional
	NotBefore *metav1.Time `json:"notBefore,omitempty"`

	// ttl expires the task if it has not started this long after submission,
	// including a task waiting to be retried.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="ttl must be positive"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ttl is immutable"
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// ttlSecondsAfterFinished deletes the Task object this long after it
	// finished; the Queue's value applies when unset. Deleting a finished Task
	// never re-runs it: re-creating it within the idempotency TTL replays it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ttlSecondsAfterFinished is immutable"
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// cancel, set to true, cancels the task: at once when it waits, through its
	// context when it runs.
	// +optional
	Cancel bool `json:"cancel,omitempty"`

	// retryGeneration, raised, runs a task that ended Failed or DeadLettered
	// again, as a dead-letter requeue does: attempt back to 1, the finished run
	// kept in status.history, the idempotency record back to processing. It may
	// only grow, and only while the task is Failed or DeadLettered (the
	// admission policy of config/admission checks the state); each raise is one
	// retry (`kubectl dtq retry` raises it by one). A value set when the Task is
	// created retries nothing.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="retryGeneration may only grow"
	// +optional
	RetryGeneration int64 `json:"retryGeneration,omitempty"`
}

// TaskState is a task's lifecycle state.
// +kubebuilder:validation:Enum=Pending;Queued;Running;Retrying;Succeeded;Failed;DeadLettered;Cancelled;Expired
type TaskState string

const (
	TaskPending      TaskState = "Pending"
	TaskQueued       TaskState = "Queued"
	TaskRunning      TaskState = "Running"
	TaskRetrying     TaskState = "Retrying"
	TaskSucceeded    TaskState = "Succeeded"
	TaskFailed       TaskState = "Failed"
	TaskDeadLettered TaskState = "DeadLettered"
	TaskCancelled    TaskState = "Cancelled"
	TaskExpired      TaskState = "Expired"
)

// Finished reports whether the state is terminal.
func (s TaskState) Finished() bool {
	switch s {
	case TaskSucceeded, TaskFailed, TaskDeadLettered, TaskCancelled, TaskExpired:
		return true
	}
	return false
}

// IdempotencyState is the seed's record vocabulary.
// +kubebuilder:validation:Enum=processing;completed;failed
type IdempotencyState string

const (
	IdempotencyProcessing IdempotencyState = "processing"
	IdempotencyCompleted  IdempotencyState = "completed"
	IdempotencyFailed     IdempotencyState = "failed"
)

// TaskIdempotency reflects the Task's idempotency record.
type TaskIdempotency struct {
	// key is spec.idempotencyKey.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Key string `json:"key,omitempty"`

	// state is the record's state: processing, completed or failed.
	// +optional
	State IdempotencyState `json:"state,omitempty"`

	// taskID is the logical task the key maps to; for a duplicate it is the
	// original's ID, not this Task's.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TaskID string `json:"taskID,omitempty"`

	// duplicate is true when another submission owns the key and this Task
	// mirrors it instead of running.
	// +optional
	Duplicate bool `json:"duplicate,omitempty"`

	// requestMatches, when another submission owns the key, says whether this
	// Task's type and payload (compared as canonical JSON) are that
	// submission's. Unset when this Task owns the key, or when the owner has
	// no fingerprint (submitted by an older release).
	// +optional
	RequestMatches *bool `json:"requestMatches,omitempty"`
}

// Task condition types and reasons.
const (
	// TaskSubmitted is True once the task is in Redis (or mirrors the task that
	// owns its idempotency key).
	TaskSubmitted = "Submitted"
	// TaskSucceededCondition is True when the task succeeded, False with the
	// terminal state as reason when it ended any other way, and absent until it
	// ends: `kubectl wait --for=condition=Succeeded`. It replaces the Complete
	// condition of earlier versions, which was True for every terminal state.
	TaskSucceededCondition = "Succeeded"
	// TaskReconciling is present (True) only while the task is not finished, and
	// TaskStalled (True) only when it ended without success: the abnormal-true
	// conditions that kstatus (Flux health checks, tools built on
	// sigs.k8s.io/cli-utils) reads as InProgress and Failed.
	TaskReconciling = "Reconciling"
	TaskStalled     = "Stalled"
	// TaskRequestMismatch is present (True) only when the Task's idempotency
	// key belongs to a task submitted with another type or payload: reason
	// Replayed when the Task mirrors that task anyway (the Queue's
	// spec.idempotency.onMismatch Replay), IdempotencyKeyMismatch when it was
	// refused (Reject).
	TaskRequestMismatch = "RequestMismatch"

	ReasonSubmitted             = "Submitted"
	ReasonQueueNotFound         = "QueueNotFound"
	ReasonInvalidTask           = "InvalidTask"
	ReasonPayloadTooLarge       = "PayloadTooLarge"
	ReasonQueueFull             = "QueueFull"
	ReasonIdempotencyInProgress = "IdempotencyInProgress"
	ReasonDuplicate             = "Duplicate"
	ReasonReplayed              = "Replayed"
	// ReasonIdempotencyKeyMismatch ends a Task never submitted: its key
	// belongs to a task of another request on a Queue that rejects that.
	ReasonIdempotencyKeyMismatch = "IdempotencyKeyMismatch"
	ReasonCancelledBeforeSubmit  = "CancelledBeforeSubmit"
	// ReasonQueueDeleted is the Event of a Queue whose Redis side was removed
	// (its unfinished tasks cancelled).
	ReasonQueueDeleted = "QueueDeleted"
	// The reason of Succeeded, Reconciling and Stalled is the task's state
	// (Queued, Succeeded, DeadLettered ...), or the Submitted condition's reason
	// while it is False (QueueNotFound, QueueFull; InvalidTask,
	// PayloadTooLarge and IdempotencyKeyMismatch end a task that was never
	// submitted).
)

// TaskStatus is the observed state of a Task. It is one atomic value for
// server-side apply: the controller is its only writer and replaces it whole,
// so managedFields record `f:status` instead of every field and condition,
// which halves the stored object and what the API server decodes, diffs and
// encodes on each status write (docs/benchmarks.md, "The status write's
// managedFields").
// +mapType=atomic
type TaskStatus struct {
	// conditions describe submission and completion.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// state is where the task is in its lifecycle.
	// +optional
	State TaskState `json:"state,omitempty"`

	// taskID is the task's ID in Redis, derived from the object's UID.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TaskID string `json:"taskID,omitempty"`

	// attempt is the current or last attempt: absent until the task first
	// starts, then 1, counting retries and crash redeliveries.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`

	// startedAt is when the latest attempt started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// finishedAt is when the task reached a terminal state.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// workerID is the worker that ran the latest attempt.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	WorkerID string `json:"workerID,omitempty"`

	// result is the handler's JSON result, truncated to 4 KiB.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Result string `json:"result,omitempty"`

	// resultTruncated is true when result was cut.
	// +optional
	ResultTruncated bool `json:"resultTruncated,omitempty"`

	// lastError is the latest failure's message.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`

	// waitReason says why a Queued task of a flow-controlled queue waits
	// (e.g. "key tenant-a at concurrency 3/3"), as of the status' last
	// update; empty in every other state.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	WaitReason string `json:"waitReason,omitempty"`

	// idempotency reflects the idempotency record when spec.idempotencyKey is set.
	// +optional
	Idempotency *TaskIdempotency `json:"idempotency,omitempty"`

	// observedRetryGeneration is the spec.retryGeneration the controller has
	// acted on.
	// +optional
	ObservedRetryGeneration int64 `json:"observedRetryGeneration,omitempty"`

	// history holds the task's earlier runs, oldest first: each time a finished
	// task runs again (spec.retryGeneration, or a dead-letter requeue through
	// the API), the run that ended is added here. The newest 10 are kept.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	History []TaskRun `json:"history,omitempty"`
}

// TaskRun is one finished run of a task that was run again.
type TaskRun struct {
	// state is how the run ended.
	// +required
	State TaskState `json:"state"`

	// attempts is how many attempts the run made.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// finishedAt is when the run ended.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`

	// lastError is the run's last failure message.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// Task is a unit of work submitted to a Queue.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dt,categories=dtq
// +kubebuilder:selectablefield:JSONPath=`.spec.queue`
// +kubebuilder:selectablefield:JSONPath=`.spec.type`
// +kubebuilder:selectablefield:JSONPath=`.spec.idempotencyKey`
// +kubebuilder:selectablefield:JSONPath=`.spec.flowKey`
// +kubebuilder:selectablefield:JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queue`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Idempotency",type=string,JSONPath=`.status.idempotency.state`
// +kubebuilder:printcolumn:name="Duplicate",type=boolean,JSONPath=`.status.idempotency.duplicate`,priority=1
// +kubebuilder:printcolumn:name="Request Matches",type=boolean,JSONPath=`.status.idempotency.requestMatches`,priority=1
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempt`
// +kubebuilder:printcolumn:name="Worker",type=string,JSONPath=`.status.workerID`,priority=1
// +kubebuilder:printcolumn:name="Flow Key",type=string,JSONPath=`.spec.flowKey`,priority=1
// +kubebuilder:printcolumn:name="Waiting On",type=string,JSONPath=`.status.waitReason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Task struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the work to do.
	// +required
	Spec TaskSpec `json:"spec"`

	// status is the observed state of the task. It reads as observedGeneration
	// 0 until the controller first writes it, so status tools (kstatus) see a
	// new Task as in progress, not as done.
	// +kubebuilder:default={observedGeneration: 0}
	// +optional
	Status TaskStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TaskList contains a list of Task.
type TaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Task `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &Task{}, &TaskList{})
		return nil
	})
}
