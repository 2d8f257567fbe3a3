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

package delivery

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/worker"
)

// A Retry-After too large for a time.Duration is past any deadline: the
// attempt fails and is retried with backoff; it does not wrap to a negative
// wait (which resent the attempt every millisecond until its deadline).
func TestRetryAfterPastAnyDeadline(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, v := range []string{"9999999999", "9223372036854775807"} {
		o := outcomeOf(answer{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {v}}}, now, now.Add(time.Minute))
		if o.again != 0 || o.err == nil || errors.Is(o.err, worker.SkipRetry) {
			t.Errorf("Retry-After: %s: send again after %v, error %v; want no resend, a retryable error", v, o.again, o.err)
		}
	}
}
