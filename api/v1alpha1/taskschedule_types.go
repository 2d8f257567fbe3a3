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

// ConcurrencyPolicy says what a slot does while an earlier run is unfinished.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	// ConcurrencyAllow runs the slot beside the unfinished runs.
	ConcurrencyAllow ConcurrencyPolicy = "Allow"
	// ConcurrencyForbid skips the slot (counted in status.skippedSlots).
	ConcurrencyForbid ConcurrencyPolicy = "Forbid"
	// ConcurrencyReplace cancels the unfinished runs (spec.cancel) and runs the slot.
	ConcurrencyReplace ConcurrencyPolicy = "Replace"
)

// Defaults of the TaskSchedule fields, as the CRD's markers set them: the
// controller and kubectl dtq use these where a field is unset (an object
// read from a client that does not default, or a test).
const (
	DefaultCatchUpMaxRuns             = 10
	DefaultSuccessfulRunsHistoryLimit = 3
	DefaultFailedRunsHistoryLimit     = 1
	// MaxStartingDeadlineSeconds is startingDeadlineSeconds' maximum: a year.
	MaxStartingDeadlineSeconds = 365 * 24 * 60 * 60
	// MaxTriggerRunsPerReconcile bounds the manual runs one reconcile creates
	// for a triggerGeneration raised by more than one.
	MaxTriggerRunsPerReconcile = 10
)

// CatchUpPolicy says which late slots run when the schedule is handled late
// (manager down, not elected, clock jumped forward).
// +kubebuilder:validation:Enum=Skip;RunLatest;RunAll
type CatchUpPolicy string

const (
	// CatchUpSkip runs no late slot.
	CatchUpSkip CatchUpPolicy = "Skip"
	// CatchUpRunLatest runs the newest late slot.
	CatchUpRunLatest CatchUpPolicy = "RunLatest"
	// CatchUpRunAll runs the newest catchUp.maxRuns late slots, oldest first.
	CatchUpRunAll CatchUpPolicy = "RunAll"
)

// CatchUp is the policy for late slots: slots the controller reaches more
// than a minute after their time but within startingDeadlineSeconds.
type CatchUp struct {
	// policy is Skip, RunLatest (the default) or RunAll.
	// +kubebuilder:default=RunLatest
	// +optional
	Policy CatchUpPolicy `json:"policy,omitempty"`

	// maxRuns bounds how many late slots RunAll runs at once (the newest
	// ones); the others are counted as missed.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=10
	// +optional
	MaxRuns int32 `json:"maxRuns,omitempty"`
}

// LabelValue is a Kubernetes label value: empty, or at most 63 characters
// [A-Za-z0-9_.-] beginning and ending with an alphanumeric.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// TaskTemplate is the Task each run creates: the fields of a TaskSpec that
// make sense for a run (no idempotencyKey, delay or notBefore: the schedule
// sets the key and the start).
type TaskTemplate struct {
	// labels are added to each run's Task: keys and values as Kubernetes
	// labels take them (the API server refuses others, which no Task could
	// carry).
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches(r'^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && (!k.contains('/') || k.indexOf('/') <= 253))`,message="label keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters [A-Za-z0-9_.-] beginning and ending with an alphanumeric"
	// +optional
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// queue is the name of a Queue in the schedule's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Queue string `json:"queue"`

	// type is the handler name a worker dispatches on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Type string `json:"type"`

	// payload is the handler's input, the same for every run.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Payload *runtime.RawExtension `json:"payload,omitempty"`

	// flowKey is each run's flow key (a Task's spec.flowKey).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[!-~]+$')",message="flowKey must be visible ASCII characters: letters, digits and punctuation, no spaces"
	// +optional
	FlowKey string `json:"flowKey,omitempty"`

	// priority orders work within the queue: 9 is drained first, 0 last.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// maxAttempts bounds executions of one run.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	MaxAttempts *int32 `json:"maxAttempts,omitempty"`

	// timeout is the handler deadline (at most 1h).
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1h')",message="timeout must be in (0s, 1h]"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// ttl expires a run that has not started this long after it may start.
	// A Task's ttl counts from its creation, so a slot's run carries ttl plus
	// its jitter delay: created at its slot or later, it gets at least ttl
	// after its notBefore. A manual run carries ttl as it is.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="ttl must be positive"
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// ttlSecondsAfterFinished deletes a run's Task this long after it finished,
	// whatever the history limits say.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// TaskScheduleSpec is a cron schedule of Tasks.
// +kubebuilder:validation:XValidation:rule="has(self.triggerGeneration) || !has(oldSelf.triggerGeneration)",message="triggerGeneration cannot be removed",fieldPath=".triggerGeneration"
type TaskScheduleSpec struct {
	// schedule is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week; names like MON and JAN allowed) or one of
	// @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly.
	// The API server checks the shape and the ranges; what it cannot check
	// (a step of 0, a range that runs backwards) is reported by the Ready
	// condition with reason InvalidSchedule.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9*?/,-]+\s+[0-9*?/,-]+\s+[0-9*?/,-]+\s+[0-9A-Za-z*?/,-]+\s+[0-9A-Za-z*?/,-]+)$')`,message="schedule must be five cron fields (minute hour day-of-month month day-of-week) or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
	// +kubebuilder:validation:XValidation:rule=`self.startsWith('@') || self.findAll(r'\S+').size() != 5 || (self.findAll(r'\S+')[0].findAll(r'[0-9]+').all(n, int(n) <= 59) && self.findAll(r'\S+')[1].findAll(r'[0-9]+').all(n, int(n) <= 23) && self.findAll(r'\S+')[2].findAll(r'[0-9]+').all(n, int(n) >= 1 && int(n) <= 31) && self.findAll(r'\S+')[3].findAll(r'[0-9]+').all(n, int(n) >= 1 && int(n) <= 12) && self.findAll(r'\S+')[4].findAll(r'[0-9]+').all(n, int(n) <= 6))`,message="schedule has a number out of range: minute 0-59, hour 0-23, day of month 1-31, month 1-12, day of week 0-6"
	Schedule string `json:"schedule"`

	// timeZone is the IANA time zone the schedule is read in, e.g.
	// Europe/Berlin; UTC when unset. The API server accepts only the zones the
	// manager knows (Go's embedded tz database).
	// +optional
	TimeZone TimeZoneName `json:"timeZone,omitempty"`

	// template is the Task each run creates.
	// +required
	Template TaskTemplate `json:"template"`

	// concurrencyPolicy says what a slot does while an earlier run is
	// unfinished: Allow (the default), Forbid (skip the slot) or Replace
	// (cancel the earlier run). Manual triggers ignore it.
	// +kubebuilder:default=Allow
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// startingDeadlineSeconds is, as in a CronJob, how late a slot may still
	// start: a slot the controller reaches more than this after its time is
	// not started, whatever catchUp says, and is counted as missed. Unset,
	// any late slot may start (catchUp decides which).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// catchUp says which late slots run: slots the controller reaches more
	// than a minute after their time (manager down, not elected, clock jumped
	// forward), within startingDeadlineSeconds.
	// +kubebuilder:default={policy: RunLatest, maxRuns: 10}
	// +optional
	CatchUp *CatchUp `json:"catchUp,omitempty"`

	// suspend, true, stops new runs: the slots that pass are counted as
	// skipped (reason Suspended). Resuming runs nothing for them.
	// +kubebuilder:default=false
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// jitter delays each run by up to this long (at most 1h), by an amount
	// derived from the schedule's UID and the slot, so every manager computes
	// the same delay. The run's Task is created at the slot with notBefore set
	// (and template.ttl plus the delay as its ttl).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="jitter must be in [0s, 1h]"
	// +optional
	Jitter *metav1.Duration `json:"jitter,omitempty"`

	// successfulRunsHistoryLimit is how many Succeeded runs' Tasks are kept.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=3
	// +optional
	SuccessfulRunsHistoryLimit *int32 `json:"successfulRunsHistoryLimit,omitempty"`

	// failedRunsHistoryLimit is how many runs' Tasks that finished without
	// success (Failed, DeadLettered, Cancelled, Expired) are kept.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	FailedRunsHistoryLimit *int32 `json:"failedRunsHistoryLimit,omitempty"`

	// triggerGeneration, raised, runs the schedule now, outside the slots: one
	// run per generation raised, run N as Task <schedule>-manual-<N> under the
	// key schedule/<uid>/manual/<N> (`kubectl dtq schedule trigger` raises it
	// by one). A raise by more than 10 runs the newest 10 generations (a
	// Warning Event TriggersCollapsed counts the others). It may only grow and
	// cannot be removed; a value set when the schedule is created runs nothing.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="triggerGeneration may only grow"
	// +optional
	TriggerGeneration int64 `json:"triggerGeneration,omitempty"`
}

// ScheduleRun is a run of the schedule whose Task is unfinished.
type ScheduleRun struct {
	// name is the run's Task.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// slot is the slot the run is for; unset for a manual trigger.
	// +optional
	Slot *metav1.Time `json:"slot,omitempty"`
}

// TaskSchedule condition types and reasons.
const (
	// TaskScheduleReady is True while the schedule parses, its zone loads and
	// its runs' Tasks can be created.
	TaskScheduleReady = "Ready"

	ReasonScheduled = "Scheduled"
	// ReasonInvalidSchedule is also the skip reason of the slots that passed
	// while the schedule was invalid.
	ReasonInvalidSchedule = "InvalidSchedule"
	ReasonSuspended       = "Suspended"
	// ReasonRunCreationFailed: the API server refused a run's Task (a
	// ResourceQuota, an admission policy); the condition's message and a
	// Warning Event say why. The slot is tried again with backoff; once it
	// is late, catchUp and startingDeadlineSeconds decide whether it runs.
	ReasonRunCreationFailed = "RunCreationFailed"

	// Reasons of status.lastSkipReason and of the schedule's Events.
	// ReasonMissedDeadline: the slot was reached more than
	// startingDeadlineSeconds late, or late and not run by the catch-up policy.
	ReasonMissedDeadline = "MissedDeadline"
	// ReasonConcurrencyForbidden: concurrencyPolicy Forbid and a run was unfinished.
	ReasonConcurrencyForbidden = "ConcurrencyForbidden"
	// ReasonRunCreated and ReasonRunReplaced are the Events of a run.
	ReasonRunCreated  = "RunCreated"
	ReasonRunReplaced = "RunReplaced"
	ReasonTriggered   = "Triggered"
	// ReasonTriggersCollapsed: triggerGeneration was raised by more than
	// MaxTriggerRunsPerReconcile; the older generations ran nothing.
	ReasonTriggersCollapsed = "TriggersCollapsed"
)

// TaskScheduleStatus is the observed state of a TaskSchedule.
type TaskScheduleStatus struct {
	// conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastScheduleTime is, as in a CronJob, the slot of the newest run the
	// schedule started (manual runs excluded).
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// lastHandledSlot is the newest slot handled (run, skipped or missed):
	// the controller never handles a slot at or before it again, whatever the
	// clock does. It is written with optimistic concurrency.
	// +optional
	LastHandledSlot *metav1.Time `json:"lastHandledSlot,omitempty"`

	// lastSuccessfulTime is when the newest Succeeded run finished.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// nextScheduleTime is the next slot.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// active lists the runs whose Task is unfinished.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Active []ScheduleRun `json:"active,omitempty"`

	// activeCount is how many runs are unfinished (active lists at most 100).
	// +optional
	ActiveCount int32 `json:"activeCount"`

	// runs counts the slots that ran.
	// +optional
	Runs int64 `json:"runs"`

	// missedSlots counts the slots that passed while no manager handled them in
	// time: reached more than startingDeadlineSeconds late, or late and not
	// run by the catch-up policy.
	// +optional
	MissedSlots int64 `json:"missedSlots"`

	// skippedSlots counts the slots not run by choice or for a cause of the
	// spec: suspend, concurrencyPolicy Forbid, or a schedule the controller
	// could not parse.
	// +optional
	SkippedSlots int64 `json:"skippedSlots"`

	// lastSkipReason is why the newest missed or skipped slot did not run:
	// MissedDeadline, ConcurrencyForbidden, Suspended or InvalidSchedule.
	// +optional
	LastSkipReason string `json:"lastSkipReason,omitempty"`

	// lastSkippedSlot is the newest missed or skipped slot.
	// +optional
	LastSkippedSlot *metav1.Time `json:"lastSkippedSlot,omitempty"`

	// observedTriggerGeneration is the spec.triggerGeneration acted on.
	// +optional
	ObservedTriggerGeneration int64 `json:"observedTriggerGeneration,omitempty"`
}

// TaskSchedule creates a Task for each slot of a cron schedule: exactly one
// per slot, under a deterministic name and the idempotency key
// schedule/<uid>/<slot, RFC 3339 UTC>.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dts,categories=dtq
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name must be at most 52 characters (run names add a suffix)"
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Time Zone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Run",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Next Run",type=string,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.activeCount`
// +kubebuilder:printcolumn:name="Missed",type=integer,JSONPath=`.status.missedSlots`,priority=1
// +kubebuilder:printcolumn:name="Skipped",type=integer,JSONPath=`.status.skippedSlots`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TaskSchedule struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the schedule and the Task each run creates.
	// +required
	Spec TaskScheduleSpec `json:"spec"`

	// status is the observed state of the schedule.
	// +optional
	Status TaskScheduleStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TaskScheduleList contains a list of TaskSchedule.
type TaskScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TaskSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &TaskSchedule{}, &TaskScheduleList{})
		return nil
	})
}
