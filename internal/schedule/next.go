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

package schedule

import (
	"time"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// NextRuns are the n slots of ts after the later of now and its last slot
// handled, in its time zone: what kubectl dtq schedule get and the HTTP API
// show.
func NextRuns(ts *dtqv1alpha1.TaskSchedule, now time.Time, n int) ([]time.Time, error) {
	s, err := Parse(ts.Spec.Schedule, string(ts.Spec.TimeZone))
	if err != nil {
		return nil, err
	}
	t := now
	if ts.Status.LastHandledSlot != nil && ts.Status.LastHandledSlot.After(now) {
		t = ts.Status.LastHandledSlot.Time
	}
	var out []time.Time
	for range n {
		if t = s.Next(t); t.IsZero() {
			break
		}
		out = append(out, t.In(s.Location()))
	}
	return out, nil
}
