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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// QueueSpec is the desired state of a Queue: its workers, their scaling and the
// limits the engine enforces on its tasks.
// +kubebuilder:validation:XValidation:rule="!has(self.heartbeatInterval) || !has(self.visibilityTimeout) || !self.heartbeatInterval.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') || !self.visibilityTimeout.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') || duration(self.heartbeatInterval) < duration(self.visibilityTimeout)",message="heartbeatInterval must be less than visibilityTimeout",fieldPath=".heartbeatInterval"
type QueueSpec struct {
	// workerTemplate is the pod template of the worker Deployment. Containers
	// may be left empty to run the reference worker image; the operator injects
	// the worker SDK's DTQ_* environment into the first container.
	// The schema is not inlined (it would make the CRD 600 KB); the API server
	// validates the template when the operator creates the Deployment, and a
	// rejection is reported in the Queue's Ready condition.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	WorkerTemplate corev1.PodTemplateSpec `json:"workerTemplate,omitzero"`

	// concurrency is the number of tasks one worker runs at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=4
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`

	// scaling sizes the worker Deployment from the backlog.
	// +kubebuilder:default={}
	// +optional
	Scaling QueueScaling `json:"scaling,omitzero"`

	// visibilityTimeout is how long a delivered task may go without a heartbeat
	// before another worker reclaims it.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="visibilityTimeout must be a duration from 1s to 1h, such as 30s"
	// +optional
	VisibilityTimeout Duration `json:"visibilityTimeout,omitzero"`

	// heartbeatInterval is how often workers refresh their in-flight tasks; it
	// must be less than visibilityTimeout.
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('100ms') && duration(self) <= duration('30m')",message="heartbeatInterval must be a duration from 100ms to 30m, such as 5s"
	// +optional
	HeartbeatInterval Duration `json:"heartbeatInterval,omitzero"`

	// taskTimeout is the handler deadline of tasks that set none (at most 1h).
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="taskTimeout must be a duration from 1s to 1h, such as 30s"
	// +optional
	TaskTimeout Duration `json:"taskTimeout,omitzero"`

	// retry is the retry policy of retryable failures.
	// +kubebuilder:default={}
	// +optional
	Retry RetryPolicy `json:"retry,omitzero"`

	// maxDepth is the admission gate: submissions are refused (HTTP 429
	// QUEUE_FULL) while the queue's unfinished tasks (queued, in flight,
	// delayed and retrying) reach it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	// +kubebuilder:default=10000
	// +optional
	MaxDepth int64 `json:"maxDepth,omitempty"`

	// maxPayloadBytes limits a task's payload, measured as compact JSON.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +kubebuilder:default=262144
	// +optional
	MaxPayloadBytes int64 `json:"maxPayloadBytes,omitempty"`

	// idempotencyTTL is how long an idempotency record lives after its task
	// ends (it never expires before): the window in which the same key maps
	// to the same logical task.
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('8760h')",message="idempotencyTTL must be a duration from 1s to 8760h, such as 24h"
	// +optional
	IdempotencyTTL Duration `json:"idempotencyTTL,omitzero"`

	// taskRetention is how long task records stay readable in Redis after the
	// task finishes; waiting, delayed and retrying tasks never expire.
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('8760h')",message="taskRetention must be a duration from 1s to 8760h, such as 168h"
	// +optional
	TaskRetention Duration `json:"taskRetention,omitzero"`

	// resultRetention is how long handler results stay readable.
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('8760h')",message="resultRetention must be a duration from 1s to 8760h, such as 1h"
	// +optional
	ResultRetention Duration `json:"resultRetention,omitzero"`

	// deadLetter configures where exhausted tasks go.
	// +kubebuilder:default={}
	// +optional
	DeadLetter DeadLetterPolicy `json:"deadLetter,omitzero"`

	// durability says whose acknowledgement a submission and a completion
	// wait for before they are answered.
	// +kubebuilder:default={}
	// +optional
	Durability QueueDurability `json:"durability,omitzero"`

	// idempotency says what a submission gets when its idempotency key
	// belongs to a task submitted with another type or payload.
	// +kubebuilder:default={}
	// +optional
	Idempotency QueueIdempotency `json:"idempotency,omitzero"`

	// ttlSecondsAfterFinished is the default lifetime of finished Task objects of
	// this queue; a Task's own value wins. Unset keeps finished Tasks.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// paused stops workers from starting new tasks; submissions are still accepted.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// handler says how the queue's tasks reach their handler. Unset, the
	// worker container runs Go handlers linked with the worker SDK
	// (docs/worker.md); handler.http delivers each task to the first
	// container of workerTemplate over HTTP on localhost, through a delivery
	// sidecar the operator adds to the pod (docs/http-handlers.md).
	// +optional
	Handler *QueueHandler `json:"handler,omitempty"`

	// flowControl limits the queue's task starts and running tasks across
	// all of its workers, per queue and per flow key, and shares them between
	// keys (docs/flow-control.md). Unset, tasks start in priority and
	// submission order as fast as workers take them. Changes apply to the
	// next start, without restarting workers.
	// +optional
	FlowControl *FlowControl `json:"flowControl,omitempty"`
}

// QueueHandler names the handler of a queue's tasks.
// +kubebuilder:validation:XValidation:rule="has(self.http)",message="handler.http is required: it is the only handler kind"
type QueueHandler struct {
	// http delivers each task as POST http://127.0.0.1:<port><path> to the
	// app container (the first container of workerTemplate).
	// +optional
	HTTP *HTTPHandler `json:"http,omitempty"`
}

// HTTPHandler is the app container's endpoint that tasks are delivered to.
// The request is cancelled at the task's deadline (taskTimeout, or the
// task's own timeout): there is no separate request timeout.
// +kubebuilder:validation:XValidation:rule="self.port != 8080 && self.port != 8081",message="handler.http.port must not be 8080 or 8081: the delivery sidecar serves its metrics and its API on them"
type HTTPHandler struct {
	// port is the app container's port on 127.0.0.1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`

	// path is the request path tasks are POSTed to.
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.contains('?') && !self.contains('#') && !self.contains(' ')",message="handler.http.path must start with '/' and hold no query, fragment or space, such as /tasks"
	// +optional
	Path string `json:"path,omitempty"`

	// concurrency caps the requests one pod has open at once; unset, the
	// queue's concurrency.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Concurrency *int32 `json:"concurrency,omitempty"`
}

// QueueScaling sizes the worker Deployment:
// desired = clamp(ceil((queued + inFlight) / targetBacklogPerWorker), minReplicas, maxReplicas).
// With spec.flowControl, only the waiting tasks the limits let start count
// (status.flow.admissible), and the count is capped by what the limits can
// use: maxConcurrency, and rateLimit times the mean execution time plus a
// quarter, divided by each worker's concurrency (docs/flow-control.md).
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
type QueueScaling struct {
	// mode says who sets the worker Deployment's replica count: Backlog (the
	// operator, from the backlog and the fields below) or External (an HPA or
	// another controller; the operator never writes spec.replicas, and the
	// fields below are unused).
	// +kubebuilder:default=Backlog
	// +optional
	Mode ScalingMode `json:"mode,omitempty"`

	// minReplicas is the floor; 0 scales to zero when the queue is idle.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the ceiling.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=10
	// +optional
	MaxReplicas int32 `json:"maxReplicas,omitempty"`

	// targetBacklogPerWorker is the backlog one worker is expected to absorb.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +kubebuilder:default=100
	// +optional
	TargetBacklogPerWorker int32 `json:"targetBacklogPerWorker,omitempty"`

	// scaleDownStabilization is how long the desired count must stay lower
	// before workers are removed. Scale-up is immediate.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="scaleDownStabilization must be a duration from 0s to 1h, such as 60s"
	// +optional
	ScaleDownStabilization Duration `json:"scaleDownStabilization,omitzero"`
}

// ScalingMode says who sets the worker count.
// +kubebuilder:validation:Enum=Backlog;External
type ScalingMode string

// Scaling modes.
const (
	// ScalingBacklog: the operator scales workers from the backlog.
	ScalingBacklog ScalingMode = "Backlog"
	// ScalingExternal: an HPA or another controller owns the replica count.
	ScalingExternal ScalingMode = "External"
)

// RetryPolicy is the exponential backoff of retryable failures:
// delay = min(maxDelay, baseDelay * 2^(attempt-1)) * (1 ± jitterPercent/100).
// +kubebuilder:validation:XValidation:rule="!has(self.baseDelay) || !has(self.maxDelay) || !self.baseDelay.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') || !self.maxDelay.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') || duration(self.baseDelay) <= duration(self.maxDelay)",message="baseDelay must not exceed maxDelay"
type RetryPolicy struct {
	// maxAttempts is the default number of executions of a task, crash
	// redeliveries included.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=5
	// +optional
	MaxAttempts int32 `json:"maxAttempts,omitempty"`

	// baseDelay is the delay after the first failed attempt.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('10ms') && duration(self) <= duration('24h')",message="baseDelay must be a duration from 10ms to 24h, such as 1s"
	// +optional
	BaseDelay Duration `json:"baseDelay,omitzero"`

	// maxDelay caps the delay.
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('10ms') && duration(self) <= duration('24h')",message="maxDelay must be a duration from 10ms to 24h, such as 60s"
	// +optional
	MaxDelay Duration `json:"maxDelay,omitzero"`

	// jitterPercent spreads each delay by up to this percentage either way.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=20
	// +optional
	JitterPercent *int32 `json:"jitterPercent,omitempty"`
}

// QueueDurability is what the queue's writes wait for. Redis replicates
// asynchronously: a failover of its master loses the writes the promoted
// replica had not received yet, including submissions and completions that
// were already answered. With replicaAcks set, each submission (HTTP API, Go
// client, Task objects) and each completion (the result and the finished
// task's record, written before the worker moves on) waits until that many
// replicas have it (Redis WAIT), and one that they do not acknowledge within
// replicaAckTimeout fails with NOT_REPLICATED (HTTP 503): it is on the master
// and may survive, so retry it with the same idempotency key.
// docs/redis.md ("Failover") has the measured loss with and without it.
type QueueDurability struct {
	// replicaAcks is how many Redis replicas must acknowledge a submission or
	// a completion before it is answered; 0 answers once the master has it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	// +optional
	ReplicaAcks int32 `json:"replicaAcks,omitempty"`

	// replicaAckTimeout is how long a write waits for the replicas'
	// acknowledgement before it fails with NOT_REPLICATED.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('10ms') && duration(self) <= duration('30s')",message="replicaAckTimeout must be a duration from 10ms to 30s, such as 1s"
	// +optional
	ReplicaAckTimeout Duration `json:"replicaAckTimeout,omitzero"`
}

// QueueIdempotency configures the queue's answer to an idempotency key
// reused for a different request: a submission whose task type or payload
// (compared as canonical JSON) differs from those of the task the key's
// record names. docs/idempotency.md has the rule.
type QueueIdempotency struct {
	// onMismatch is what such a submission gets. Replay (the default, the
	// seed's behaviour) answers it as it answers the same request: the
	// original's replay (HTTP 200) or in progress (HTTP 409), with
	// request_matches false; a Task mirrors the original with
	// status.idempotency.requestMatches false and a RequestMismatch
	// condition. Reject refuses it and writes nothing: HTTP 422
	// IDEMPOTENCY_KEY_MISMATCH naming the original task; a Task ends Failed,
	// never submitted, with reason IdempotencyKeyMismatch.
	// +kubebuilder:default=Replay
	// +optional
	OnMismatch IdempotencyMismatchPolicy `json:"onMismatch,omitempty"`
}

// IdempotencyMismatchPolicy is a Queue's answer to an idempotency key reused
// for a different request.
// +kubebuilder:validation:Enum=Replay;Reject
type IdempotencyMismatchPolicy string

const (
	IdempotencyMismatchReplay IdempotencyMismatchPolicy = "Replay"
	IdempotencyMismatchReject IdempotencyMismatchPolicy = "Reject"
)

// DeadLetterPolicy configures the dead-letter stream.
type DeadLetterPolicy struct {
	// enabled sends exhausted tasks to DeadLettered (requeueable); false ends
	// them Failed.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// maxLength is the approximate cap of the dead-letter stream.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	// +kubebuilder:default=10000
	// +optional
	MaxLength int64 `json:"maxLength,omitempty"`
}

// Queue condition types.
const (
	// QueueReady is True when the queue exists in Redis and its workers are reconciled.
	QueueReady = "Ready"
	// QueuePaused mirrors spec.paused once the engine has applied it.
	QueuePaused = "Paused"
	// QueueWorkersAvailable is True when at least the desired number of workers is ready.
	QueueWorkersAvailable = "WorkersAvailable"
	// QueueRedisIsolated is True when the workers reach Redis as their
	// namespace's own ACL user, which can touch only this namespace's keys.
	QueueRedisIsolated = "RedisIsolated"
	// QueueHandlerReachable is False while a worker's delivery sidecar holds
	// delivery: the app answers 404 to every task (a wrong
	// spec.handler.http.path or port), or it is not ready. Set only on
	// Queues with an HTTP handler, and removed with spec.handler.
	QueueHandlerReachable = "HandlerReachable"
	// QueueFlowLimited is True while a limit of spec.flowControl holds
	// waiting tasks back, with the most binding limit as its reason
	// (RateLimit, MaxConcurrency, KeyConcurrency, KeyRateLimit), and False
	// (NotLimited) while none does. Set only on Queues with flowControl, and
	// removed with it.
	QueueFlowLimited = "FlowLimited"
	// QueueWorkerEnvOverridden is True when workerTemplate sets variables the
	// operator owns (the queue's identity, the Redis credential); the
	// operator's values replace them.
	QueueWorkerEnvOverridden = "WorkerEnvOverridden"

	ReasonQueueEnsured     = "QueueEnsured"
	ReasonRedisUnavailable = "RedisUnavailable"
	// ReasonWorkersBehind: spec.flowControl waits until the queue's live
	// workers of an earlier release are rolled (docs/upgrade.md).
	ReasonWorkersBehind      = "WorkersBehind"
	ReasonInvalidConfig      = "InvalidConfig"
	ReasonDeploymentRejected = "DeploymentRejected"
	// ReasonDeploymentForbidden: the API server forbade the worker
	// Deployment's write (the manager's RBAC, a ResourceQuota, an admission
	// policy); retried with backoff.
	ReasonDeploymentForbidden = "DeploymentForbidden"
	ReasonPaused              = "Paused"
	ReasonActive              = "Active"
	ReasonWorkersReady        = "WorkersReady"
	ReasonWorkersStarting     = "WorkersStarting"
	ReasonScaledToZero        = "ScaledToZero"
	// ReasonHandlerNotFound: the app answered 404 to every recent task.
	ReasonHandlerNotFound = "HandlerNotFound"
	// ReasonAppNotReady: the app of a worker has not passed its readiness
	// check (the app container's HTTP readinessProbe, else a connection to
	// the handler's port), or refused a connection since.
	ReasonAppNotReady = "AppNotReady"
	// ReasonHandlerAnswering: no worker holds delivery.
	ReasonHandlerAnswering = "HandlerAnswering"
	// ReasonNotLimited: no limit of spec.flowControl holds tasks back. The
	// reasons of a True FlowLimited condition are the FlowLimit values.
	ReasonNotLimited = "NotLimited"
)

// Reasons of the ownership and isolation conditions.
const (
	// ReasonDeploymentConflict: a Deployment named <queue>-workers exists and
	// this Queue does not control it; the operator leaves it untouched.
	ReasonDeploymentConflict = "DeploymentConflict"
	ReasonNamespaceUser      = "NamespaceUser"
	ReasonIsolationDisabled  = "IsolationDisabled"
	// ReasonRedisUserPending: the namespace's Redis user and its Secret are
	// not there yet; workers are created once they are.
	ReasonRedisUserPending = "RedisUserPending"
	ReasonEnvOverridden    = "ReservedEnvOverridden"
	ReasonEnvAsSpecified   = "AsSpecified"
)

// QueueStatus is the observed state of a Queue.
type QueueStatus struct {
	// conditions describe the queue: Ready, Paused, WorkersAvailable,
	// RedisIsolated, WorkerEnvOverridden, HandlerReachable, FlowLimited.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// queued is the number of tasks waiting in the streams.
	// +kubebuilder:default=0
	// +optional
	Queued int64 `json:"queued"`

	// inFlight is the number of tasks delivered to workers and not yet finished.
	// +kubebuilder:default=0
	// +optional
	InFlight int64 `json:"inFlight"`

	// scheduled is the number of delayed and retrying tasks waiting for their time.
	// +kubebuilder:default=0
	// +optional
	Scheduled int64 `json:"scheduled"`

	// deadLettered is the length of the dead-letter stream.
	// +kubebuilder:default=0
	// +optional
	DeadLettered int64 `json:"deadLettered"`

	// desiredWorkers is the replica count the autoscaler chose.
	// +kubebuilder:default=0
	// +optional
	DesiredWorkers int32 `json:"desiredWorkers"`

	// readyWorkers is the number of ready worker pods.
	// +kubebuilder:default=0
	// +optional
	ReadyWorkers int32 `json:"readyWorkers"`

	// workers is readyWorkers/desiredWorkers, for kubectl.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Workers string `json:"workers,omitempty"`

	// lastScaleTime is when the worker count last changed.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`

	// scaleDownSince is when the autoscaler first wanted fewer workers than it
	// runs; workers are removed once that has lasted scaleDownStabilization.
	// Kept in status so a manager restart does not reset the window.
	// +optional
	ScaleDownSince *metav1.Time `json:"scaleDownSince,omitempty"`

	// flow is what holds the queue's tasks back, on Queues with
	// spec.flowControl.
	// +optional
	Flow *QueueFlowStatus `json:"flow,omitempty"`
}

// Queue is a task queue in Redis with an autoscaled worker Deployment.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dq,categories=dtq
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (at most 63 lowercase letters, digits and '-'): workers and Redis keys are named after the queue"
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=`.status.queued`
// +kubebuilder:printcolumn:name="In Flight",type=integer,JSONPath=`.status.inFlight`
// +kubebuilder:printcolumn:name="Scheduled",type=integer,JSONPath=`.status.scheduled`,priority=1
// +kubebuilder:printcolumn:name="Dead",type=integer,JSONPath=`.status.deadLettered`,priority=1
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers`,description="ready/desired"
// +kubebuilder:printcolumn:name="Admissible",type=integer,JSONPath=`.status.flow.admissible`,priority=1,description="waiting tasks the per-key limits let start now (flowControl)"
// +kubebuilder:printcolumn:name="Limited By",type=string,JSONPath=`.status.flow.limitedBy[0]`,priority=1,description="the most binding limit of flowControl"
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Queue struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the queue.
	// +kubebuilder:default={}
	// +optional
	Spec QueueSpec `json:"spec,omitempty"`

	// status is the observed state of the queue.
	// +optional
	Status QueueStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// QueueList contains a list of Queue.
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &Queue{}, &QueueList{})
		return nil
	})
}
