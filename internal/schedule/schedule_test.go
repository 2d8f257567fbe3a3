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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// The daylight-saving rows are docs/schedules.md's table. 2026: New York
// springs forward on 8 March (02:00 EST -> 03:00 EDT) and falls back on
// 1 November (02:00 EDT -> 01:00 EST); Berlin on 29 March (02:00 CET -> 03:00
// CEST) and 25 October (03:00 CEST -> 02:00 CET).
func TestSlots(t *testing.T) {
	tests := map[string]struct {
		expr, zone   string
		after, until string
		want         []string
	}{
		"New York spring forward: a daily 02:30 runs at 03:00 EDT that day": {
			"30 2 * * *", "America/New_York", "2026-03-07T17:00:00Z", "2026-03-09T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"},
		},
		"New York spring forward: two times in the gap collapse into one run": {
			"0,30 2 * * *", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-08T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z"},
		},
		"New York spring forward: every 30 minutes follows real time": {
			"*/30 * * * *", "America/New_York", "2026-03-08T06:15:00Z", "2026-03-08T07:45:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"},
		},
		"New York fall back: a daily 01:30 runs once, in EDT": {
			"30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		},
		"New York fall back: every 30 minutes runs in both copies of 01:00-02:00": {
			"*/30 * * * *", "America/New_York", "2026-11-01T04:45:00Z", "2026-11-01T07:45:00Z",
			[]string{
				"2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z",
				"2026-11-01T06:30:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z",
			},
		},
		"Berlin spring forward: a daily 02:30 runs at 03:00 CEST that day": {
			"30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-30T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"},
		},
		"Berlin spring forward: hourly at :30 has no 02:30": {
			"30 * * * *", "Europe/Berlin", "2026-03-28T23:45:00Z", "2026-03-29T02:45:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z", "2026-03-29T02:30:00Z"},
		},
		"Berlin fall back: a daily 02:30 runs once, in CEST": {
			"30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-26T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
		},
		"Berlin fall back: hourly runs in both copies of 02:00": {
			"@hourly", "Europe/Berlin", "2026-10-24T23:30:00Z", "2026-10-25T02:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"},
		},
		"Berlin fall back: nothing after the first 02:30 until the next day, from the second copy": {
			"30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-25T01:40:00Z",
			nil,
		},
		"UTC by default, macros": {
			"@daily", "", "2026-12-01T00:00:00Z", "2026-12-03T00:00:00Z",
			[]string{"2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"},
		},
		"day-of-week names": {
			"0 9 * * MON-FRI", "UTC", "2026-12-04T10:00:00Z", "2026-12-08T10:00:00Z",
			[]string{"2026-12-07T09:00:00Z", "2026-12-08T09:00:00Z"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(tc.expr, tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			slots, n := s.Slots(utc(tc.after), utc(tc.until), 100, 1000)
			var got []string
			for _, sl := range slots {
				got = append(got, sl.UTC().Format(time.RFC3339))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
			if n != len(tc.want) {
				t.Errorf("count = %d, want %d", n, len(tc.want))
			}
		})
	}
}

// A clock that jumps backwards asks for slots after a cursor that is later
// than now: there are none, and the next slot is after the cursor.
func TestBackwardsJumpRefiresNothing(t *testing.T) {
	s, err := Parse("* * * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cursor := utc("2026-12-01T12:00:00Z")
	now := cursor.Add(-time.Hour)
	if slots, n := s.Slots(cursor, now, 10, 1000); n != 0 || len(slots) != 0 {
		t.Errorf("slots after %v until %v = %v", cursor, now, slots)
	}
	if next := s.Next(cursor); !next.Equal(cursor.Add(time.Minute)) {
		t.Errorf("next = %v", next)
	}
}

func TestSlotsKeepsNewestAndCounts(t *testing.T) {
	s, err := Parse("* * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	after := utc("2026-12-01T12:00:00Z")
	slots, n := s.Slots(after, after.Add(10*time.Minute), 3, 1000)
	want := []time.Time{after.Add(8 * time.Minute), after.Add(9 * time.Minute), after.Add(10 * time.Minute)}
	if n != 10 || !cmp.Equal(want, slots) {
		t.Errorf("slots = %v, count %d", slots, n)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ expr, zone string }{
		{"*/0 * * * *", "UTC"},
		{"61 * * * *", "UTC"},
		{"30-10 * * * *", "UTC"},
		{"@every 1m", "UTC"},
		{"* * * *", "UTC"},
		{"* * * * *", "Mars/Olympus_Mons"},
	} {
		if _, err := Parse(tc.expr, tc.zone); err == nil {
			t.Errorf("Parse(%q, %q) succeeded", tc.expr, tc.zone)
		}
	}
}

func TestJitter(t *testing.T) {
	slot := utc("2026-12-01T12:00:00Z")
	a := Jitter("uid-1", slot, time.Minute)
	if a != Jitter("uid-1", slot, time.Minute) {
		t.Error("jitter differs between calls")
	}
	seen := map[time.Duration]bool{}
	for i := range 100 {
		d := Jitter("uid-1", slot.Add(time.Duration(i)*time.Minute), time.Minute)
		if d < 0 || d >= time.Minute {
			t.Fatalf("jitter %v out of [0, 1m)", d)
		}
		seen[d] = true
	}
	if len(seen) < 20 {
		t.Errorf("only %d distinct delays over 100 slots", len(seen))
	}
	if Jitter("uid-1", slot, 0) != 0 {
		t.Error("zero jitter delays")
	}
}
