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
	"time"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// Scaling defaults for a Queue built in Go (the API server defaults them).
const (
	defaultMinReplicas   = 1
	defaultMaxReplicas   = 10
	defaultTargetBacklog = 100
)

// scaleDecision is the autoscaler's answer.
type scaleDecision struct {
	Replicas       int32      // what the Deployment should run now
	Wanted         int32      // what the backlog asks for
	ScaleDownSince *time.Time // start of a pending scale-down; nil when none
	// Recheck is when the pending scale-down's window ends (0: no pending).
	Recheck time.Duration
	// CappedBy is the flowControl limit that lowered Wanted below what the
	// backlog asks for; empty when none did.
	CappedBy dtqv1alpha1.FlowLimit
}

// flowHeadroom is how much more concurrency than rate x mean execution
// time the workers get (5/4): execution times vary, and a worker slot
// between two tasks starts none.
const flowHeadroomNum, flowHeadroomDen = 5, 4

// wantedReplicas is clamp(ceil(backlog / targetBacklogPerWorker), min, max),
// where backlog is queued + inFlight; a paused queue keeps its in-flight
// workers only. On a flow-controlled queue the backlog is the waiting tasks
// the limits let start (admissible) + inFlight, and the count is capped by
// the workers the queue-wide limits can keep busy (flowWorkerCap), so work a
// limit holds back adds no workers. It returns the limit that capped the
// count, or "" when none did or minReplicas or maxReplicas decided it.
func wantedReplicas(q *dtqv1alpha1.Queue, st broker.QueueStats) (int32, dtqv1alpha1.FlowLimit) {
	lo, hi, target := scalingBounds(q.Spec.Scaling)
	backlog := st.Queued + st.InFlight
	if st.Flow.Enabled {
		backlog = st.Flow.Admissible + st.InFlight
	}
	if st.Paused {
		backlog = st.InFlight
	}
	want := ceilDiv(backlog, int64(target))
	var by dtqv1alpha1.FlowLimit
	if capWorkers, limit := flowWorkerCap(q, st.Flow.MeanExec); limit != "" && capWorkers < want {
		want, by = capWorkers, limit
	}
	clamped := min(max(want, int64(lo)), int64(hi))
	if clamped != want { // minReplicas or maxReplicas decides, not the limit
		by = ""
	}
	return int32(clamped), by
}

// flowWorkerCap is the most workers the queue-wide limits of q can keep
// busy: ceil(useful / slots per worker), useful = min(maxConcurrency,
// ceil(rate x meanExec x 5/4)), each term only when its limit is set, the
// rate's only when meanExec (the engine's mean execution time) is known. It
// returns the binding limit, or "" when neither applies. Per-key limits need
// no cap here: they are already inside the admissible count.
func flowWorkerCap(q *dtqv1alpha1.Queue, meanExec time.Duration) (int64, dtqv1alpha1.FlowLimit) {
	fc := q.Spec.FlowControl
	if fc == nil {
		return 0, ""
	}
	var useful int64
	var by dtqv1alpha1.FlowLimit
	if fc.MaxConcurrency != nil {
		useful, by = int64(*fc.MaxConcurrency), dtqv1alpha1.LimitMaxConcurrency
	}
	if r := flowRate(fc.RateLimit); r != nil && meanExec > 0 {
		// limit x meanExec / period in microseconds: at most 1e6 x 3.6e9 x 5,
		// far from overflowing.
		busy := ceilDiv(r.Limit*meanExec.Microseconds()*flowHeadroomNum, r.Period.Microseconds()*flowHeadroomDen)
		if by == "" || busy < useful {
			useful, by = max(busy, 1), dtqv1alpha1.LimitRateLimit
		}
	}
	if by == "" {
		return 0, ""
	}
	return ceilDiv(useful, int64(workerSlots(q))), by
}

// workerSlots is how many tasks one worker pod runs at once: the HTTP
// handler's concurrency when set, else the queue's.
func workerSlots(q *dtqv1alpha1.Queue) int32 {
	if h := q.Spec.Handler; h != nil && h.HTTP != nil && h.HTTP.Concurrency != nil {
		return max(*h.HTTP.Concurrency, 1)
	}
	if q.Spec.Concurrency > 0 {
		return q.Spec.Concurrency
	}
	return worker.DefaultConcurrency
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func scalingBounds(s dtqv1alpha1.QueueScaling) (lo, hi, target int32) {
	lo, hi, target = defaultMinReplicas, s.MaxReplicas, s.TargetBacklogPerWorker
	if s.MinReplicas != nil {
		lo = *s.MinReplicas
	}
	if hi <= 0 {
		hi = max(defaultMaxReplicas, lo)
	}
	if target <= 0 {
		target = defaultTargetBacklog
	}
	return lo, hi, target
}

// decideScale scales up at once and down only after the wanted count has
// stayed below the current one for the stabilization window (since is when it
// first did, kept in the Queue's status so a restart does not reset it).
func decideScale(q *dtqv1alpha1.Queue, st broker.QueueStats, current int32, since *time.Time, now time.Time) scaleDecision {
	s := q.Spec.Scaling
	want, by := wantedReplicas(q, st)
	lo, hi, _ := scalingBounds(s)
	current = min(max(current, lo), hi) // a changed min/max applies at once
	if want >= current {
		return scaleDecision{Replicas: want, Wanted: want, CappedBy: by}
	}
	window := s.ScaleDownStabilization.Duration
	if since == nil {
		since = &now
	}
	if left := since.Add(window).Sub(now); left > 0 {
		return scaleDecision{Replicas: current, Wanted: want, ScaleDownSince: since, Recheck: left, CappedBy: by}
	}
	return scaleDecision{Replicas: want, Wanted: want, CappedBy: by}
}
