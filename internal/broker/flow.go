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

package broker

import (
	"context"
	"errors"
	"time"
)

// Flow control: limits that hold across every worker of a queue, applied
// inside the claim (docs/flow-control.md). A queue's limits are written by
// EnsureQueue (QueueConfig.Flow) and read by every claim, so a change applies
// at the next claim.

// MaxFlowKeyBytes bounds a flow key.
const MaxFlowKeyBytes = 128

// FlowControl is a queue's flow control.
type FlowControl struct {
	Rate           *FlowRate              // task starts (first attempts and retries) per period across all workers; nil: none
	MaxConcurrency int64                  // tasks Running at once across all workers; 0: none
	PerKey         KeyLimits              // the limits of each flow key (tasks without a key share the key "")
	Fairness       Fairness               // how keys share a priority band
	Overrides      map[string]KeyOverride // keys with their own weight or limits
}

// FlowRate is a rate limit: at most Burst + t*Limit/Period starts in any
// interval of length t (GCRA).
type FlowRate struct {
	Limit  int64         // >= 1
	Period time.Duration // >= 1ms
	Burst  int64         // >= 1
}

// KeyLimits are one key's limits; zero values mean none.
type KeyLimits struct {
	Concurrency int64     // tasks of the key Running at once; 0: none
	Rate        *FlowRate // starts of the key; nil: none
}

// KeyOverride is one key's weight and limits. A zero Weight is 1; a zero
// field of KeyLimits falls back to FlowControl.PerKey.
type KeyOverride struct {
	Weight int64 // 1..1000
	KeyLimits
}

// Fairness is how keys with work in one priority band share it.
type Fairness string

const (
	FairnessWeighted Fairness = "Weighted" // start-time fair queueing by weight (default)
	FairnessFIFO     Fairness = "FIFO"     // the key whose head task is oldest first
)

// FlowLimit names a limit that holds work back.
type FlowLimit string

const (
	LimitRate           FlowLimit = "RateLimit"
	LimitMaxConcurrency FlowLimit = "MaxConcurrency"
	LimitKeyConcurrency FlowLimit = "KeyConcurrency"
	LimitKeyRate        FlowLimit = "KeyRateLimit"
)

// FlowMetrics is a flow-controlled queue's share of QueueMetrics.
type FlowMetrics struct {
	Enabled    bool
	Admissible int64         // queued tasks the limits would admit now (keys not parked, up to each key's free slots)
	Throttled  int64         // queued tasks held back by a limit
	Held       int64         // concurrency slots held: flow tasks Running
	ActiveKeys int64         // keys with queued tasks
	ParkedKeys int64         // keys at their concurrency cap or over their rate
	LimitedBy  []FlowLimit   // the limits holding work back now, most binding first
	MeanExec   time.Duration // mean execution time of completed attempts; 0: unknown
}

// KeyFlow is one flow key's state (Broker.FlowKeys).
type KeyFlow struct {
	Key         string
	Queued      int64
	Held        int64
	Concurrency int64 // the key's cap; 0: none
	Weight      int64
	Parked      FlowLimit // LimitKeyConcurrency or LimitKeyRate while parked; "" otherwise
	EligibleAt  time.Time // when a rate-parked key may start again
}

// FlowKeys returns up to top keys of a flow-controlled queue, busiest first
// (held slots, then backlog).
func (b *Broker) FlowKeys(ctx context.Context, q QueueRef, top int) ([]KeyFlow, error) {
	return nil, errors.New("broker: FlowKeys: not built yet") // replaced by the engine's implementation before merge
}
