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

package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// schedule get prints the next five slots in the schedule's zone, across a
// daylight-saving change, after the later of now and the last slot.
func TestDescribeScheduleNextRuns(t *testing.T) {
	ts := &dtqv1alpha1.TaskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "shop"},
		Spec: dtqv1alpha1.TaskScheduleSpec{Schedule: "30 2 * * *", TimeZone: "Europe/Berlin",
			Template: dtqv1alpha1.TaskTemplate{Queue: "q", Type: "report"}},
	}
	now := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	if err := describeSchedule(&out, ts, now); err != nil {
		t.Fatal(err)
	}
	want := `(?s)Schedule: +30 2 \* \* \* \(Europe/Berlin\)\n.*Next runs: *\n` +
		`  2026-03-28 02:30 CET Sat +\(2026-03-28T01:30:00Z, in 13h30m0s\)\n` +
		`  2026-03-29 03:00 CEST Sun +\(2026-03-29T01:00:00Z, in 37h0m0s\)\n` +
		`  2026-03-30 02:30 CEST Mon +\(2026-03-30T00:30:00Z, .*\)\n` +
		`  2026-03-31 02:30 CEST Tue .*\n` +
		`  2026-04-01 02:30 CEST Wed .*\n$`
	if !regexp.MustCompile(want).MatchString(out.String()) {
		t.Errorf("describe:\n%s\nwant matching %s", out.String(), want)
	}
}
