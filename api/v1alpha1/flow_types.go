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

// Flow control: limits that hold across every worker pod of a Queue, checked
// by the engine where a task starts (docs/flow-control.md).

// MaxFlowKeyLength bounds a flow key (spec.flowKey of a Task, a TaskSchedule
// template's flowKey, overrides[].key), as the engine does.
const MaxFlowKeyLength = 128

// FlowControl is a Queue's limits across all of its workers, and how flow
// keys share it. The engine checks them where a task starts, so a task
// waiting on a limit is never delivered and spends no attempt.
// +kubebuilder:validation:XValidation:rule="has(self.rateLimit) || has(self.maxConcurrency) || has(self.perKey) || has(self.fairness) || (has(self.overrides) && size(self.overrides) > 0)",message="flowControl must set at least one of rateLimit, maxConcurrency, perKey, fairness and overrides"
// +kubebuilder:validation:XValidation:rule="!has(self.fairness) || self.fairness != 'FIFO' || !has(self.overrides) || !self.overrides.exists(o, has(o.weight))",message="overrides[].weight needs fairness Weighted: FIFO gives keys no weights",fieldPath=".overrides"
type FlowControl struct {
	// rateLimit bounds task starts (first attempts, retries and crash
	// redeliveries alike) across all workers of the queue.
	// +optional
	RateLimit *FlowRate `json:"rateLimit,omitempty"`

	// maxConcurrency bounds the tasks Running at once across all workers of
	// the queue. Lowering it never interrupts a running task: it only stops
	// new starts until the running ones fall below it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`

	// perKey are the limits of each flow key (a Task's spec.flowKey; tasks
	// without one share the key ""). A key at its limit steps aside: other
	// keys' tasks start meanwhile.
	// +optional
	PerKey *KeyLimits `json:"perKey,omitempty"`

	// fairness is how keys with waiting tasks in one priority band share the
	// starts: Weighted (each key in proportion to its weight, 1 unless an
	// override says otherwise) or FIFO (the key whose oldest waiting task is
	// oldest goes first). Unset: Weighted. Priorities stay strict between
	// bands, and each key's tasks start in submission order.
	// +optional
	Fairness Fairness `json:"fairness,omitempty"`

	// overrides give single keys their own weight or limits. Weights live
	// only here, on the Queue: a producer cannot raise its own share.
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	Overrides []KeyOverride `json:"overrides,omitempty"`
}

// FlowRate is a rate limit: at most burst + t*limit/period starts in any
// interval of length t (the generic cell rate algorithm, on Redis' clock).
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || self.burst <= self.limit",message="burst must not exceed limit: express a larger burst with a longer period (limit 600, period 1m, burst 500 is 10 per second with bursts of 500)",fieldPath=".burst"
type FlowRate struct {
	// limit is the number of starts per period.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +required
	Limit int32 `json:"limit"`

	// period is the interval limit applies to.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]*[.])?[0-9]+(ns|us|µs|μs|ms|s|m|h))+$') && duration(self) >= duration('10ms') && duration(self) <= duration('24h')",message="period must be a duration from 10ms to 24h, such as 1s"
	// +optional
	Period Duration `json:"period,omitzero"`

	// burst is how many starts may happen at once after an idle spell; 1
	// spaces starts evenly, period/limit apart. At most limit.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +kubebuilder:default=1
	// +optional
	Burst int32 `json:"burst,omitempty"`
}

// KeyLimits are the limits of one flow key.
// +kubebuilder:validation:XValidation:rule="has(self.concurrency) || has(self.rateLimit)",message="perKey must set concurrency or rateLimit"
type KeyLimits struct {
	// concurrency bounds the key's tasks Running at once across all workers.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Concurrency *int32 `json:"concurrency,omitempty"`

	// rateLimit bounds the key's task starts across all workers.
	// +optional
	RateLimit *FlowRate `json:"rateLimit,omitempty"`
}

// KeyOverride is one flow key's weight and limits; a limit it leaves unset
// is perKey's.
// +kubebuilder:validation:XValidation:rule="has(self.weight) || has(self.concurrency) || has(self.rateLimit)",message="an override must set weight, concurrency or rateLimit"
type KeyOverride struct {
	// key is the flow key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[!-~]+$')",message="key must be visible ASCII characters: letters, digits and punctuation, no spaces"
	// +required
	Key string `json:"key"`

	// weight is the key's share under Weighted fairness, against 1 for every
	// key without an override.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Weight int32 `json:"weight,omitempty"`

	// concurrency bounds the key's tasks Running at once, instead of
	// perKey.concurrency.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Concurrency *int32 `json:"concurrency,omitempty"`

	// rateLimit bounds the key's task starts, instead of perKey.rateLimit.
	// +optional
	RateLimit *FlowRate `json:"rateLimit,omitempty"`
}

// Fairness is how flow keys share a priority band.
// +kubebuilder:validation:Enum=Weighted;FIFO
type Fairness string

// Fairness modes.
const (
	// FairnessWeighted shares starts between keys in proportion to their weights.
	FairnessWeighted Fairness = "Weighted"
	// FairnessFIFO starts the key whose oldest waiting task is oldest.
	FairnessFIFO Fairness = "FIFO"
)

// FlowLimit names a limit of flowControl.
// +kubebuilder:validation:Enum=RateLimit;MaxConcurrency;KeyConcurrency;KeyRateLimit
type FlowLimit string

// The limits, as status.flow.limitedBy and the FlowLimited condition's
// reason name them.
const (
	LimitRateLimit      FlowLimit = "RateLimit"      // rateLimit
	LimitMaxConcurrency FlowLimit = "MaxConcurrency" // maxConcurrency
	LimitKeyConcurrency FlowLimit = "KeyConcurrency" // perKey.concurrency or an override's
	LimitKeyRateLimit   FlowLimit = "KeyRateLimit"   // perKey.rateLimit or an override's
)

// QueueFlowStatus is what holds a flow-controlled queue's tasks back, as the
// engine last reported it.
type QueueFlowStatus struct {
	// admissible is the number of waiting tasks the per-key limits let start
	// now; the autoscaler sizes the workers from it and inFlight.
	// +kubebuilder:default=0
	// +optional
	Admissible int64 `json:"admissible"`

	// throttled is the number of waiting tasks held back by a per-key limit.
	// +kubebuilder:default=0
	// +optional
	Throttled int64 `json:"throttled"`

	// heldSlots is the number of concurrency slots held: flow tasks Running.
	// +kubebuilder:default=0
	// +optional
	HeldSlots int64 `json:"heldSlots"`

	// activeKeys is the number of flow keys with waiting tasks.
	// +kubebuilder:default=0
	// +optional
	ActiveKeys int64 `json:"activeKeys"`

	// parkedKeys is the number of keys at their concurrency cap or over
	// their rate.
	// +kubebuilder:default=0
	// +optional
	ParkedKeys int64 `json:"parkedKeys"`

	// limitedBy are the limits holding tasks back now, most binding first.
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	// +optional
	LimitedBy []FlowLimit `json:"limitedBy,omitempty"`
}
