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

// Package wait holds the one context-aware sleep and the one backoff of
// dtq's loops. (The API's TokenReview and SubjectAccessReview retries use
// apimachinery's wait.Backoff because k8s.io/apiserver's webhook options take
// that type; the public packages do not import apimachinery for this.)
package wait

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential backoff with jitter: the first Next is Initial,
// each later one Factor (2 when unset) times the one before, capped at Max,
// each spread by ±Jitter (a fraction, 0.2 for ±20%) so that clients that
// failed together do not retry together. Reset starts again at Initial. The
// zero value of the state is ready; a Backoff is not safe for concurrent use.
type Backoff struct {
	Initial, Max time.Duration
	Factor       float64
	Jitter       float64

	cur time.Duration
}

// Next returns the next delay.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Initial
	} else {
		f := b.Factor
		if f == 0 {
			f = 2
		}
		b.cur = time.Duration(float64(b.cur) * f)
	}
	if b.Max > 0 && b.cur > b.Max {
		b.cur = b.Max
	}
	return Jitter(b.cur, b.Jitter)
}

// Reset makes the next Next return Initial (jittered) again.
func (b *Backoff) Reset() { b.cur = 0 }

// Jitter spreads d by ±frac at random.
func Jitter(d time.Duration, frac float64) time.Duration {
	return time.Duration(float64(d) * (1 + frac*(2*rand.Float64()-1)))
}

// Sleep waits d, or until ctx ends, whichever comes first; then it returns
// ctx.Err() (nil when the full d passed). A d <= 0 returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
