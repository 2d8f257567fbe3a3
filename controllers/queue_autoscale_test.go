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
	"testing"
	"time"

	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// TestWantedReplicasFlow is the autoscaler on flow-controlled queues. The
// first two cases are issue 35's acceptance; today's formula
// (ceil((queued + inFlight) / targetBacklogPerWorker)) gives 100 for both.
func TestWantedReplicasFlow(t *testing.T) {
	rate := func(limit int32, period time.Duration) *dtqv1alpha1.FlowRate {
		return &dtqv1alpha1.FlowRate{Limit: limit, Period: dtqv1alpha1.NewDuration(period), Burst: 1}
	}
	queue := func(minR, maxR, slots int32, fc *dtqv1alpha1.FlowControl) *dtqv1alpha1.Queue {
		return testutil.MakeQueue("q", "ns").Replicas(minR, maxR).TargetBacklog(100).Concurrency(slots).FlowControl(fc).Obj()
	}
	withHTTPConcurrency := func(q *dtqv1alpha1.Queue, n int32) *dtqv1alpha1.Queue {
		q.Spec.Handler = &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8000, Concurrency: ptr.To(n)}}
		return q
	}
	rate50 := &dtqv1alpha1.FlowControl{RateLimit: rate(50, time.Second)}
	keyCap2 := &dtqv1alpha1.FlowControl{PerKey: &dtqv1alpha1.KeyLimits{Concurrency: ptr.To[int32](2)}}
	maxConc10 := &dtqv1alpha1.FlowControl{MaxConcurrency: ptr.To[int32](10)}
	// backlog is a queue whose limits let admissible of queued start now.
	backlog := func(queued, admissible, inFlight int64, meanExec time.Duration) broker.QueueStats {
		return broker.QueueStats{Queued: queued, InFlight: inFlight,
			Flow: broker.FlowMetrics{Enabled: true, Admissible: admissible, Throttled: queued - admissible, Held: inFlight, MeanExec: meanExec}}
	}
	for name, tc := range map[string]struct {
		queue  *dtqv1alpha1.Queue
		stats  broker.QueueStats
		want   int32
		wantBy dtqv1alpha1.FlowLimit
	}{
		// ceil(ceil(50/s x 1s x 5/4) / 4 slots) = ceil(63 / 4) = 16.
		"rate 50/s, 1s tasks, 4 slots, 100000 queued, max 100: about 16": {
			queue(1, 100, 4, rate50), backlog(100000, 100000, 50, time.Second), 16, dtqv1alpha1.LimitRateLimit},
		// admissible 0 + inFlight 6: ceil(6 / 100) = 1, the minimum.
		"three keys capped at 2, 30000 queued: the minimum": {
			queue(1, 100, 4, keyCap2), backlog(29994, 0, 6, time.Second), 1, ""},
		"rate without execution data: the backlog decides": {
			queue(1, 100, 4, rate50), backlog(100000, 100000, 0, 0), 100, ""},
		"maxConcurrency 10 over 4 slots: 3": {
			queue(1, 100, 4, maxConc10), backlog(5000, 5000, 10, time.Second), 3, dtqv1alpha1.LimitMaxConcurrency},
		"rate and maxConcurrency: the smaller binds": {
			queue(1, 100, 4, &dtqv1alpha1.FlowControl{RateLimit: rate(50, time.Second), MaxConcurrency: ptr.To[int32](20)}),
			backlog(5000, 5000, 20, time.Second), 5, dtqv1alpha1.LimitMaxConcurrency},
		"120 per minute, 30s tasks: ceil(ceil(2/s x 30s x 5/4) / 4) = 19": {
			queue(1, 100, 4, &dtqv1alpha1.FlowControl{RateLimit: rate(120, time.Minute)}), backlog(9000, 9000, 0, 30*time.Second), 19, dtqv1alpha1.LimitRateLimit},
		"a cap above the backlog's count does not raise it": {
			queue(1, 100, 4, rate50), backlog(150, 150, 50, time.Second), 2, ""},
		"the HTTP handler's concurrency is a worker's slots": {
			withHTTPConcurrency(queue(1, 100, 4, maxConc10), 2), backlog(5000, 5000, 10, time.Second), 5, dtqv1alpha1.LimitMaxConcurrency},
		"the minimum wins over a cap": {
			queue(5, 100, 4, maxConc10), backlog(5000, 5000, 10, time.Second), 5, ""},
		"the maximum wins under a cap": {
			queue(1, 10, 4, rate50), backlog(100000, 100000, 50, time.Second), 10, ""},
		"paused: in flight only": {
			queue(0, 100, 4, keyCap2), func() broker.QueueStats { s := backlog(30000, 600, 0, time.Second); s.Paused = true; return s }(), 0, ""},
		"flow control in the spec, none in Redis yet: queued counts": {
			queue(1, 100, 4, keyCap2), broker.QueueStats{Queued: 300}, 3, ""},
		"no flow control: today's formula": {
			queue(1, 100, 4, nil), broker.QueueStats{Queued: 30000, InFlight: 6}, 100, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, by := wantedReplicas(tc.queue, tc.stats)
			if got != tc.want || by != tc.wantBy {
				t.Errorf("wantedReplicas = %d capped by %q, want %d capped by %q", got, by, tc.want, tc.wantBy)
			}
		})
	}
}
