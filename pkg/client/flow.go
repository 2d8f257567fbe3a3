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

package client

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// FlowLimit names a limit of a Queue's flowControl that holds work back.
type FlowLimit string

const (
	LimitRate           FlowLimit = "RateLimit"      // the queue's rateLimit
	LimitMaxConcurrency FlowLimit = "MaxConcurrency" // the queue's maxConcurrency
	LimitKeyConcurrency FlowLimit = "KeyConcurrency" // a key's concurrency cap
	LimitKeyRate        FlowLimit = "KeyRateLimit"   // a key's rateLimit
)

// FlowStats is a flow-controlled queue's state (QueueStats.Flow,
// QueueFlow.Flow): how much of its backlog its limits admit now.
type FlowStats struct {
	// Admissible is the queued tasks the limits would start now (keys not
	// parked, up to each key's free slots); Throttled the queued tasks a
	// limit holds back.
	Admissible int64 `json:"admissible"`
	Throttled  int64 `json:"throttled"`
	// Held is the concurrency slots held: the queue's flow tasks Running.
	Held int64 `json:"held"`
	// ActiveKeys is the keys with queued tasks; ParkedKeys those of them at
	// their concurrency cap or over their rate.
	ActiveKeys int64 `json:"active_keys"`
	ParkedKeys int64 `json:"parked_keys"`
	// LimitedBy names the limits holding work back now, most binding first;
	// empty when none does.
	LimitedBy []FlowLimit `json:"limited_by"`
	// MeanExecSeconds is the mean execution time of the queue's completed
	// attempts; 0 when unknown.
	MeanExecSeconds float64 `json:"mean_exec_seconds"`
}

// KeyFlow is one flow key of a queue: its backlog, the slots it holds and
// its limits.
type KeyFlow struct {
	Key    string `json:"key"` // "" is the key of the tasks without one
	Queued int64  `json:"queued"`
	Held   int64  `json:"held"` // tasks of the key Running
	// Concurrency is the key's cap (perKey.concurrency or its override); 0
	// when it has none.
	Concurrency int64 `json:"concurrency"`
	Weight      int64 `json:"weight"` // its share in Weighted fairness (1 unless overridden)
	// Parked is KeyConcurrency (at its cap) or KeyRateLimit (over its rate,
	// until EligibleAt) while the key steps aside; "" otherwise.
	Parked     FlowLimit  `json:"parked,omitempty"`
	EligibleAt *time.Time `json:"eligible_at,omitempty"`
}

// QueueFlow is a queue's flow control with its busiest keys (Queue.Flow).
type QueueFlow struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	// Flow is nil, and Keys empty, when the Queue has no flowControl.
	Flow *FlowStats `json:"flow,omitempty"`
	// Keys are the busiest keys, most held slots first, then the longest
	// backlog.
	Keys []KeyFlow `json:"keys"`
}

// DefaultFlowTop is how many keys Queue.Flow returns with top 0.
const DefaultFlowTop = 20

// MaxFlowTop is the largest top of Queue.Flow.
const MaxFlowTop = 500

// Flow returns the queue's flow control and its top busiest keys (1..500;
// 0 means 20).
func (q *Queue) Flow(ctx context.Context, top int) (*QueueFlow, error) {
	path := q.path + "/flow"
	if top != 0 {
		path += "?top=" + strconv.Itoa(top)
	}
	var out QueueFlow
	if err := q.c.do(ctx, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
