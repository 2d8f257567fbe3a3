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

	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// queueConfig is the engine config of a Queue. Fields the API server did not
// default (a Queue built in Go) keep the engine's defaults.
func queueConfig(q *dtqv1alpha1.Queue) broker.QueueConfig {
	c := broker.DefaultQueueConfig()
	s := q.Spec
	setInt := func(dst *int64, v int64) {
		if v > 0 {
			*dst = v
		}
	}
	setDur := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	setInt(&c.MaxDepth, s.MaxDepth)
	setInt(&c.MaxPayloadBytes, s.MaxPayloadBytes)
	setInt(&c.DeadLetterMaxLen, s.DeadLetter.MaxLength)
	if s.Retry.MaxAttempts > 0 {
		c.DefaultMaxAttempts = int(s.Retry.MaxAttempts)
	}
	setDur(&c.DefaultTimeout, s.TaskTimeout.Duration)
	setDur(&c.Retry.BaseDelay, s.Retry.BaseDelay.Duration)
	setDur(&c.Retry.MaxDelay, s.Retry.MaxDelay.Duration)
	if s.Retry.JitterPercent != nil {
		c.Retry.Jitter = float64(*s.Retry.JitterPercent) / 100
	}
	setDur(&c.IdempotencyTTL, s.IdempotencyTTL.Duration)
	setDur(&c.TaskRetention, s.TaskRetention.Duration)
	setDur(&c.ResultRetention, s.ResultRetention.Duration)
	setDur(&c.VisibilityTimeout, s.VisibilityTimeout.Duration)
	if s.DeadLetter.Enabled != nil {
		c.DeadLetter = *s.DeadLetter.Enabled
	}
	c.ReplicaAcks = int(s.Durability.ReplicaAcks)
	setDur(&c.ReplicaAckTimeout, s.Durability.ReplicaAckTimeout.Duration)
	c.Flow = flowConfig(s.FlowControl)
	if s.Idempotency.OnMismatch == dtqv1alpha1.IdempotencyMismatchReject {
		c.OnMismatch = broker.MismatchReject
	}
	return c
}

// flowConfig is the engine's flow control of a Queue's spec.flowControl; nil
// when unset, so such a queue runs no flow control code.
func flowConfig(fc *dtqv1alpha1.FlowControl) *broker.FlowControl {
	if fc == nil {
		return nil
	}
	c := &broker.FlowControl{
		Rate:           flowRate(fc.RateLimit),
		MaxConcurrency: int64(ptr.Deref(fc.MaxConcurrency, 0)),
		Fairness:       broker.FairnessWeighted,
	}
	if fc.Fairness == dtqv1alpha1.FairnessFIFO {
		c.Fairness = broker.FairnessFIFO
	}
	if fc.PerKey != nil {
		c.PerKey = keyLimits(fc.PerKey.Concurrency, fc.PerKey.RateLimit)
	}
	if len(fc.Overrides) > 0 {
		c.Overrides = make(map[string]broker.KeyOverride, len(fc.Overrides))
		for _, o := range fc.Overrides {
			c.Overrides[o.Key] = broker.KeyOverride{Weight: int64(max(o.Weight, 1)), KeyLimits: keyLimits(o.Concurrency, o.RateLimit)}
		}
	}
	return c
}

func keyLimits(concurrency *int32, rate *dtqv1alpha1.FlowRate) broker.KeyLimits {
	return broker.KeyLimits{Concurrency: int64(ptr.Deref(concurrency, 0)), Rate: flowRate(rate)}
}

// flowRate is the engine's rate of r, with the CRD's defaults (period 1s,
// burst 1) for a Queue built in Go.
func flowRate(r *dtqv1alpha1.FlowRate) *broker.FlowRate {
	if r == nil {
		return nil
	}
	out := &broker.FlowRate{Limit: int64(r.Limit), Period: r.Period.Duration, Burst: int64(r.Burst)}
	if out.Period <= 0 {
		out.Period = time.Second
	}
	out.Burst = max(out.Burst, 1)
	return out
}

func queueRefOf(q *dtqv1alpha1.Queue) broker.QueueRef {
	return broker.QueueRef{Namespace: q.Namespace, Name: q.Name}
}
