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

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

func TestFlowLimitedMessage(t *testing.T) {
	fc := &dtqv1alpha1.FlowControl{
		RateLimit:      &dtqv1alpha1.FlowRate{Limit: 50, Period: dtqv1alpha1.NewDuration(time.Second), Burst: 1},
		MaxConcurrency: ptr.To[int32](400),
		PerKey: &dtqv1alpha1.KeyLimits{Concurrency: ptr.To[int32](3),
			RateLimit: &dtqv1alpha1.FlowRate{Limit: 600, Period: dtqv1alpha1.NewDuration(time.Minute), Burst: 20}},
	}
	q := testutil.MakeQueue("q", "ns").Concurrency(4).FlowControl(fc).Obj()
	stats := func(queued, admissible int64, limits ...broker.FlowLimit) broker.QueueStats {
		return broker.QueueStats{Queued: queued, Flow: broker.FlowMetrics{Enabled: true, Admissible: admissible, Held: 400,
			ActiveKeys: 12, ParkedKeys: 5, LimitedBy: limits, MeanExec: 1003 * time.Millisecond}}
	}
	for name, tc := range map[string]struct {
		stats broker.QueueStats
		scale scaleDecision
		want  string
	}{
		"rate": {stats(10000, 200, broker.LimitRate), scaleDecision{Wanted: 2},
			"10000 queued, 200 admissible: rate limit 50/1s binds"},
		"rate, capping the workers": {stats(10000, 10000, broker.LimitRate), scaleDecision{Wanted: 16, CappedBy: dtqv1alpha1.LimitRateLimit},
			"10000 queued, 10000 admissible: rate limit 50/1s binds; workers capped at 16: rate limit 50/1s x mean execution 1.003s x 1.25 over 4 slots per worker"},
		"maxConcurrency, capping the workers": {stats(10000, 10000, broker.LimitMaxConcurrency), scaleDecision{Wanted: 100, CappedBy: dtqv1alpha1.LimitMaxConcurrency},
			"10000 queued, 10000 admissible: maxConcurrency 400 (400 slots held) binds; workers capped at 100: maxConcurrency 400 over 4 slots per worker"},
		"key limits, most binding first": {stats(30000, 0, broker.LimitKeyConcurrency, broker.LimitKeyRate), scaleDecision{Wanted: 1},
			"30000 queued, 0 admissible: per-key concurrency 3 (5 of 12 keys parked), then per-key rate limit 600/1m burst 20 (5 of 12 keys parked) binds"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := flowLimitedMessage(q, tc.stats, tc.scale); got != tc.want {
				t.Errorf("flowLimitedMessage =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestFlowStatus(t *testing.T) {
	got := flowStatus(broker.FlowMetrics{Enabled: true, Admissible: 6, Throttled: 29994, Held: 6, ActiveKeys: 3, ParkedKeys: 3,
		LimitedBy: []broker.FlowLimit{broker.LimitKeyConcurrency, broker.LimitRate, broker.LimitKeyRate, broker.LimitMaxConcurrency, broker.LimitRate}})
	want := &dtqv1alpha1.QueueFlowStatus{Admissible: 6, Throttled: 29994, HeldSlots: 6, ActiveKeys: 3, ParkedKeys: 3,
		LimitedBy: []dtqv1alpha1.FlowLimit{dtqv1alpha1.LimitKeyConcurrency, dtqv1alpha1.LimitRateLimit, dtqv1alpha1.LimitKeyRateLimit, dtqv1alpha1.LimitMaxConcurrency}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flowStatus (-want +got):\n%s", diff)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second: "1s", time.Minute: "1m", 90 * time.Minute: "1h30m", 24 * time.Hour: "24h",
		10 * time.Millisecond: "10ms", 61 * time.Second: "1m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
