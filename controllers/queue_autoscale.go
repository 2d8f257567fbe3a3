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
	"github.com/dtq-dev/dtq/internal/broker"
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
}

// wantedReplicas is clamp(ceil((queued + inFlight) / targetBacklogPerWorker), min, max).
// A paused queue keeps its in-flight workers only.
func wantedReplicas(s dtqv1alpha1.QueueScaling, st broker.QueueStats) int32 {
	lo, hi, target := scalingBounds(s)
	backlog := st.Queued + st.InFlight
	if st.Paused {
		backlog = st.InFlight
	}
	want := (backlog + int64(target) - 1) / int64(target)
	return int32(min(max(want, int64(lo)), int64(hi)))
}

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
func decideScale(s dtqv1alpha1.QueueScaling, st broker.QueueStats, current int32, since *time.Time, now time.Time) scaleDecision {
	want := wantedReplicas(s, st)
	lo, hi, _ := scalingBounds(s)
	current = min(max(current, lo), hi) // a changed min/max applies at once
	if want >= current {
		return scaleDecision{Replicas: want, Wanted: want}
	}
	window := s.ScaleDownStabilization.Duration
	if since == nil {
		since = &now
	}
	if left := since.Add(window).Sub(now); left > 0 {
		return scaleDecision{Replicas: current, Wanted: want, ScaleDownSince: since, Recheck: left}
	}
	return scaleDecision{Replicas: want, Wanted: want}
}
