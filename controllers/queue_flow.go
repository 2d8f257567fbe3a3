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
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// maxLimitedBy is status.flow.limitedBy's maxItems: one entry per limit kind.
const maxLimitedBy = 4

// setFlowStatus sets status.flow and the FlowLimited condition of a Queue
// with spec.flowControl from the engine's flow metrics (read with the stats,
// no extra Redis call), and removes both from a Queue without it.
func (r *QueueReconciler) setFlowStatus(next *dtqv1alpha1.QueueStatus, q *dtqv1alpha1.Queue, st broker.QueueStats, scale scaleDecision) {
	fc := q.Spec.FlowControl
	if fc == nil {
		next.Flow = nil
		meta.RemoveStatusCondition(&next.Conditions, dtqv1alpha1.QueueFlowLimited)
		return
	}
	next.Flow = flowStatus(st.Flow)
	if len(next.Flow.LimitedBy) == 0 {
		r.setCondition(next, q, dtqv1alpha1.QueueFlowLimited, metav1.ConditionFalse, dtqv1alpha1.ReasonNotLimited,
			"No limit of flowControl holds tasks back")
		return
	}
	r.setCondition(next, q, dtqv1alpha1.QueueFlowLimited, metav1.ConditionTrue, string(next.Flow.LimitedBy[0]),
		flowLimitedMessage(q, st, scale))
}

// flowStatus is status.flow of the engine's flow metrics.
func flowStatus(f broker.FlowMetrics) *dtqv1alpha1.QueueFlowStatus {
	s := &dtqv1alpha1.QueueFlowStatus{Admissible: f.Admissible, Throttled: f.Throttled, HeldSlots: f.Held,
		ActiveKeys: f.ActiveKeys, ParkedKeys: f.ParkedKeys}
	for _, l := range f.LimitedBy[:min(len(f.LimitedBy), maxLimitedBy)] {
		s.LimitedBy = append(s.LimitedBy, dtqv1alpha1.FlowLimit(l))
	}
	return s
}

// flowLimitedMessage says what holds q's tasks back, e.g. "10000 queued,
// 200 admissible: rate limit 50/1s binds", and, when a limit capped the
// autoscaler, at how many workers.
func flowLimitedMessage(q *dtqv1alpha1.Queue, st broker.QueueStats, scale scaleDecision) string {
	fc, f := q.Spec.FlowControl, st.Flow
	binds := make([]string, 0, len(f.LimitedBy))
	for _, l := range f.LimitedBy {
		d := limitText(fc, dtqv1alpha1.FlowLimit(l))
		switch dtqv1alpha1.FlowLimit(l) {
		case dtqv1alpha1.LimitMaxConcurrency:
			d += fmt.Sprintf(" (%d slots held)", f.Held)
		case dtqv1alpha1.LimitKeyConcurrency, dtqv1alpha1.LimitKeyRateLimit:
			d += fmt.Sprintf(" (%d of %d keys parked)", f.ParkedKeys, f.ActiveKeys)
		}
		binds = append(binds, d)
	}
	msg := fmt.Sprintf("%d queued, %d admissible: %s binds", st.Queued, f.Admissible, strings.Join(binds, ", then "))
	switch scale.CappedBy {
	case dtqv1alpha1.LimitRateLimit:
		msg += fmt.Sprintf("; workers capped at %d: %s x mean execution %s x 1.25 over %d slots per worker",
			scale.Wanted, limitText(fc, scale.CappedBy), shortDuration(f.MeanExec.Round(time.Millisecond)), workerSlots(q))
	case dtqv1alpha1.LimitMaxConcurrency:
		msg += fmt.Sprintf("; workers capped at %d: %s over %d slots per worker", scale.Wanted, limitText(fc, scale.CappedBy), workerSlots(q))
	}
	return msg
}

// limitText names limit l of fc with its value, e.g. "rate limit 50/1s".
func limitText(fc *dtqv1alpha1.FlowControl, l dtqv1alpha1.FlowLimit) string {
	switch l {
	case dtqv1alpha1.LimitRateLimit:
		return "rate limit" + rateText(fc.RateLimit)
	case dtqv1alpha1.LimitMaxConcurrency:
		if fc.MaxConcurrency != nil {
			return fmt.Sprintf("maxConcurrency %d", *fc.MaxConcurrency)
		}
		return "maxConcurrency"
	case dtqv1alpha1.LimitKeyConcurrency:
		if fc.PerKey != nil && fc.PerKey.Concurrency != nil {
			return fmt.Sprintf("per-key concurrency %d", *fc.PerKey.Concurrency)
		}
		return "per-key concurrency"
	case dtqv1alpha1.LimitKeyRateLimit:
		if fc.PerKey != nil {
			return "per-key rate limit" + rateText(fc.PerKey.RateLimit)
		}
		return "per-key rate limit"
	}
	return string(l)
}

// rateText is " 50/1s" (" 50/1s burst 10" with a burst), or "" for nil.
func rateText(r *dtqv1alpha1.FlowRate) string {
	fr := flowRate(r)
	if fr == nil {
		return ""
	}
	s := fmt.Sprintf(" %d/%s", fr.Limit, shortDuration(fr.Period))
	if fr.Burst > 1 {
		s += fmt.Sprintf(" burst %d", fr.Burst)
	}
	return s
}

// shortDuration is d without zero trailing units: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
