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

// Package schedule computes the slots of a TaskSchedule: the instants a
// five-field cron expression names in an IANA time zone, with a defined rule
// for the hour that repeats and the hour that is skipped when daylight-saving
// time changes (docs/schedules.md, "Daylight-saving time").
//
// The rule is cron's (Vixie cron, cronie): an expression whose minute or hour
// field is a wildcard ("*/15 * * * *", "30 * * * *") is interval-like and
// follows real time: it fires in both copies of a repeated hour and not in a
// skipped one. Any other expression names wall-clock times ("30 2 * * *"):
// a time that occurs twice fires once, at its first occurrence, and a time
// that does not exist fires at the first instant after the gap (03:00 local
// when 02:00 jumps to 03:00); several such times collapse into that one slot.
package schedule

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
	_ "time/tzdata" // the manager's image has no zoneinfo; the API admits Go's zones

	"github.com/robfig/cron/v3"
)

// Schedule is a parsed cron expression in a time zone.
type Schedule struct {
	spec *cron.SpecSchedule
	loc  *time.Location
	// wall is true for expressions that name wall-clock times (no wildcard
	// in the minute or hour field): they are computed on local wall time.
	wall bool
}

// Parse parses a standard five-field expression or an @macro (@every is
// refused: its slots would depend on when it was parsed) in zone, "" = UTC.
func Parse(expr, zone string) (*Schedule, error) {
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "@every") || strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("schedule %q: only five fields or @yearly, @monthly, @weekly, @daily, @hourly", expr)
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", expr, err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("schedule %q: not a cron expression", expr)
	}
	if zone == "" {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", zone, err)
	}
	wall := !wildcard(expr)
	// robfig reads t in spec.Location: wall-clock expressions step through
	// local wall times written as UTC (no transitions), the others through
	// the zone itself.
	spec.Location = loc
	if wall {
		spec.Location = time.UTC
	}
	return &Schedule{spec: spec, loc: loc, wall: wall}, nil
}

// wildcard reports whether the minute or hour field starts with "*" (cron's
// MIN_STAR / HR_STAR); @hourly is "0 * * * *".
func wildcard(expr string) bool {
	if expr == "@hourly" {
		return true
	}
	f := strings.Fields(expr)
	return len(f) == 5 && (strings.HasPrefix(f[0], "*") || strings.HasPrefix(f[1], "*"))
}

// Location is the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next is the first slot strictly after t, or the zero time when there is
// none within five years.
func (s *Schedule) Next(t time.Time) time.Time {
	if !s.wall {
		return s.spec.Next(t)
	}
	// Wall-clock expressions step through local wall times (as if UTC, which
	// has no transitions) and map each to its instant; a time in a gap maps
	// to the end of the gap, so several may map to one instant: the first
	// one strictly after t wins.
	w := wallOf(t.In(s.loc))
	// The wall time of t may repeat later (t in the first copy of a repeated
	// hour), so start one transition's worth earlier and skip what is not after t.
	w = w.Add(-3 * time.Hour)
	for range 10000 {
		w = s.spec.Next(w)
		if w.IsZero() {
			return time.Time{}
		}
		if at := s.resolve(w); at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// wallOf is t's local wall-clock reading as a UTC time.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// resolve maps a wall time (as UTC) to the instant it names in s.loc: the
// first occurrence when it occurs twice, the end of the gap when it does not
// occur at all.
func (s *Schedule) resolve(w time.Time) time.Time {
	var first, gapStart time.Time
	// Any instant with wall time w lies within 14h of w read as UTC; the
	// offsets in force at both ends cover a transition in between.
	for _, probe := range []time.Duration{-14 * time.Hour, 0, 14 * time.Hour} {
		_, off := w.Add(probe).In(s.loc).Zone()
		at := w.Add(-time.Duration(off) * time.Second)
		if wallOf(at.In(s.loc)).Equal(w) {
			if first.IsZero() || at.Before(first) {
				first = at
			}
		} else if gapStart.IsZero() || at.Before(gapStart) {
			gapStart = at
		}
	}
	if !first.IsZero() {
		return first
	}
	// w falls in a gap: the zone in force at gapStart ends where the gap does.
	_, end := gapStart.In(s.loc).ZoneBounds()
	if end.IsZero() {
		return gapStart
	}
	return end
}

// Slots are the slots in (after, until]: count of them and the newest
// keep (oldest first). It stops counting at limit.
func (s *Schedule) Slots(after, until time.Time, keep, limit int) (newest []time.Time, count int) {
	for t := s.Next(after); !t.IsZero() && !t.After(until) && count < limit; t = s.Next(t) {
		count++
		newest = append(newest, t)
		if len(newest) > keep {
			newest = newest[1:]
		}
	}
	return newest, count
}

// Jitter is the delay of slot's run, in [0, max): derived from the schedule's
// UID and the slot alone, so every manager computes the same one.
func Jitter(uid string, slot time.Time, maxJitter time.Duration) time.Duration {
	secs := uint64(maxJitter / time.Second)
	if secs == 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(slot.Unix()))
	_, _ = h.Write(b[:])
	return time.Duration(h.Sum64()%secs) * time.Second
}
