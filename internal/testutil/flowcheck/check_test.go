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

package flowcheck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func ms(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }

// gcra returns the start times of n starts admitted as early as a limit of
// 200/s with burst 20 allows: 20 at once, then one every 5 ms.
func gcra(n int) []time.Time {
	var out []time.Time
	for i := range n {
		out = append(out, ms(5*float64(max(0, i-19))))
	}
	return out
}

func TestCheckRate(t *testing.T) {
	lim := Rate{Limit: 200, Period: time.Second, Burst: 20}
	tests := map[string]struct {
		spans []Span
		ok    bool
	}{
		"as early as allowed":        {spans: points(gcra(1000)), ok: true},
		"one start more in a window": {spans: points(append(gcra(1000), ms(2500))), ok: false},
		"250 per second":             {spans: points(spaced(1000, 4)), ok: false},
		"200 per second, no burst":   {spans: points(spaced(1000, 5)), ok: true},
		"a second burst after 50 ms": {spans: points(append(gcra(30), repeat(ms(100), 20)...)), ok: false},
		"a burst refilled after 1 s": {spans: points(append(gcra(30), repeat(ms(1250), 20)...)), ok: true},
		// The burst's handlers started 4 ms late, the next one on time: with
		// what is known of the admissions (the claims were sent at 0, 5, 10
		// ...) the window holds no more than allowed.
		"a late burst, seen at the handlers": {spans: points(append(repeat(ms(4), 20), spaced(5, 5)[1:]...)), ok: false},
		"a late burst, admitted at 0": {spans: append(spansOf(repeat(ms(0), 20), repeat(ms(4), 20)),
			spansOf(spaced(5, 5)[1:], spaced(5, 5)[1:])...), ok: true},
		"a second burst, admitted up to 2 ms before": {spans: append(points(gcra(30)),
			spansOf(repeat(ms(98), 20), repeat(ms(100), 20))...), ok: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := CheckRate(tc.spans, lim)
			if r.OK() != tc.ok {
				t.Errorf("OK() = %v, want %v: %s", r.OK(), tc.ok, r)
			}
		})
	}
}

// CheckRate's tree finds what a check of every pair of spans finds.
func TestCheckRateAgainstPairs(t *testing.T) {
	lim := Rate{Limit: 200, Period: time.Second, Burst: 20}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		var spans []Span
		for range n%40 + 1 {
			from := ms(float64(rng.IntN(200)))
			spans = append(spans, Span{From: from, To: from.Add(time.Duration(rng.IntN(10)) * time.Millisecond)})
		}
		var want int64 = math.MinInt64
		for _, x := range spans {
			for _, y := range spans {
				if y.To.Before(x.From) {
					continue
				}
				count := int64(0)
				for _, s := range spans {
					if !s.From.Before(x.From) && !s.To.After(y.To) {
						count++
					}
				}
				want = max(want, count*int64(time.Second)-int64(y.To.Sub(x.From))*lim.Limit-lim.Burst*int64(time.Second))
			}
		}
		if got := CheckRate(spans, lim); got.Excess != float64(want)/float64(time.Second) {
			t.Fatalf("spans %v: excess %v, want %v", spans, got.Excess, float64(want)/float64(time.Second))
		}
	}
}

func points(ts []time.Time) []Span { return spansOf(ts, ts) }

func spansOf(from, to []time.Time) []Span {
	out := make([]Span, len(from))
	for i := range out {
		out[i] = Span{From: from[i], To: to[i]}
	}
	return out
}

func spaced(n int, everyMs float64) []time.Time {
	var out []time.Time
	for i := range n {
		out = append(out, ms(everyMs*float64(i)))
	}
	return out
}

func repeat(at time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = at
	}
	return out
}

func TestCountIn(t *testing.T) {
	if n := CountIn(gcra(1000), t0, time.Second); n != 219 {
		t.Errorf("CountIn over the first second = %d, want 219 (20 + 199)", n)
	}
}

func exec(task string, attempt int, key string, from, to float64, how End) Exec {
	return Exec{TaskID: task, Attempt: attempt, Key: key, Start: ms(from), End: ms(to), How: how}
}

func TestCheckKeyConcurrency(t *testing.T) {
	tests := map[string]struct {
		execs      []Exec
		violations int
		max        int
	}{
		"three at once": {execs: []Exec{
			exec("a", 1, "k", 0, 10, EndReturned), exec("b", 1, "k", 1, 10, EndReturned), exec("c", 1, "k", 2, 10, EndReturned),
		}, max: 3},
		"four at once": {execs: []Exec{
			exec("a", 1, "k", 0, 10, EndReturned), exec("b", 1, "k", 1, 10, EndReturned), exec("c", 1, "k", 2, 10, EndReturned),
			exec("d", 1, "k", 9, 12, EndReturned),
		}, violations: 1, max: 4},
		"four at once over two keys": {execs: []Exec{
			exec("a", 1, "k", 0, 10, EndReturned), exec("b", 1, "k", 1, 10, EndReturned), exec("c", 1, "k", 2, 10, EndReturned),
			exec("d", 1, "j", 5, 12, EndReturned),
		}, max: 3},
		"a start at another's end": {execs: []Exec{
			exec("a", 1, "k", 0, 10, EndReturned), exec("b", 1, "k", 1, 10, EndReturned), exec("c", 1, "k", 2, 10, EndReturned),
			exec("d", 1, "k", 10, 12, EndReturned),
		}, max: 3},
		"a killed execution counts until its process ended": {execs: []Exec{
			exec("a", 1, "k", 0, 50, EndKilled),
			exec("b", 1, "k", 20, 40, EndReturned), exec("c", 1, "k", 21, 40, EndReturned), exec("d", 1, "k", 22, 40, EndReturned),
		}, violations: 1, max: 4},
		"a zombie stops counting when its task starts again": {execs: []Exec{
			exec("a", 1, "k", 0, 50, EndLeaseLost), exec("a", 2, "k", 20, 30, EndReturned),
			exec("b", 1, "k", 1, 40, EndReturned), exec("c", 1, "k", 2, 40, EndReturned),
		}, max: 3},
		"a zombie counts until then": {execs: []Exec{
			exec("a", 1, "k", 0, 50, EndLeaseLost), exec("a", 2, "k", 20, 30, EndReturned),
			exec("b", 1, "k", 1, 40, EndReturned), exec("c", 1, "k", 2, 40, EndReturned), exec("d", 1, "k", 15, 16, EndReturned),
		}, violations: 1, max: 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := CheckKeyConcurrency(tc.execs, 3)
			if r.Violations != tc.violations || r.Max != tc.max {
				t.Errorf("got %d violations, max %d; want %d, %d: %s\n%s", r.Violations, r.Max, tc.violations, tc.max, r, r.Details())
			}
		})
	}
}

func TestCheckLatency(t *testing.T) {
	submitted := map[string]time.Time{}
	var execs []Exec
	for i := range 100 {
		id := string(rune('a'+i/26)) + string(rune('a'+i%26))
		submitted[id] = ms(float64(1000 * i))
		execs = append(execs, exec(id, 1, "B", float64(1000*i+i+1), float64(1000*i+50), EndReturned))
	}
	r := CheckLatency(submitted, execs)
	if r.P50 != 50*time.Millisecond || r.P99 != 99*time.Millisecond || r.Max != 100*time.Millisecond {
		t.Errorf("got %s, want p50 50ms, p99 99ms, max 100ms", r)
	}
	submitted["never"] = ms(0)
	submitted["never2"] = ms(0)
	if r := CheckLatency(submitted, execs); r.P99 != Never || r.NotStarted != 2 {
		t.Errorf("with two of 102 never started got %s, want p99 never", r)
	}
}

// A trace of key A starting every 12.5 ms for 100 s (4 slots of 50 ms) and
// ten tasks of key B, b0 to b9, submitted at 0, 1 s ... 9 s. fair starts
// each B task 37.5 ms after its submission: two starts of A lie strictly
// between (at 12.5 and 25 ms; those at the submission and at B's start do
// not count).
func TestCheckAhead(t *testing.T) {
	var as []Exec
	for i := range 8000 {
		as = append(as, exec(fmt.Sprint("a", i), 1, "A", 12.5*float64(i), 12.5*float64(i)+50, EndReturned))
	}
	submitted := map[string]time.Time{}
	for k := range 10 {
		submitted[fmt.Sprint("b", k)] = ms(1000 * float64(k))
	}
	b := func(k int, after float64) Exec {
		return exec(fmt.Sprint("b", k), 1, "B", 1000*float64(k)+after, 1000*float64(k)+after+50, EndReturned)
	}
	trace := func(bs ...Exec) []Exec { return append(slices.Clone(as), bs...) }
	var fair []Exec
	for k := range 10 {
		fair = append(fair, b(k, 37.5))
	}
	// fair with task k started "after" ms past its submission instead.
	late := func(k int, after float64) []Exec {
		bs := slices.Clone(fair)
		bs[k] = b(k, after)
		return trace(bs...)
	}
	tests := map[string]struct {
		execs    []Exec
		p50, max int
		maxTask  string
		ok       bool
	}{
		"fair":            {execs: trace(fair...), p50: 2, max: 2, ok: true},
		"b5 at the bound": {execs: late(5, 60), p50: 2, max: 4, maxTask: "b5", ok: true},
		// b5 is planted behind ten starts of A.
		"b5 behind A": {execs: late(5, 130), p50: 2, max: 10, maxTask: "b5", ok: false},
		// b9 never starts: every start of A after 9 s (12.5 ms x 721 up to
		// x 7999) is ahead of it.
		"b9 never started": {execs: trace(fair[:9]...), p50: 2, max: 7279, maxTask: "b9", ok: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := CheckAhead(submitted, tc.execs, "A")
			if r.OK(4) != tc.ok || r.P50 != tc.p50 || r.Max != tc.max || (tc.maxTask != "" && r.MaxTask != tc.maxTask) {
				t.Errorf("got OK(4) %v: %s; want OK(4) %v, p50 %d, max %d (task %q)", r.OK(4), r, tc.ok, tc.p50, tc.max, tc.maxTask)
			}
		})
	}
	if r := CheckAhead(map[string]time.Time{}, as, "A"); r.OK(4) {
		t.Errorf("no tasks: got OK(4): %s", r)
	}
}

func TestCheckShares(t *testing.T) {
	weights := map[string]int64{"a": 5, "b": 3, "c": 2}
	pattern := []string{"a", "b", "a", "c", "a", "b", "a", "c", "b", "a"} // 5:3:2 per 10 starts
	var fair, even []Exec
	for i := range 10000 {
		fair = append(fair, exec("f", i, pattern[i%10], float64(i), float64(i+1), EndReturned))
		even = append(even, exec("e", i, []string{"a", "b", "c"}[i%3], float64(i), float64(i+1), EndReturned))
	}
	if r := CheckShares(fair, weights, ms(0), ms(10000), time.Second, 500*time.Millisecond, 0.03); !r.OK() || r.Windows != 19 {
		t.Errorf("5:3:2 starts: %s", r)
	}
	if r := CheckShares(even, weights, ms(0), ms(10000), time.Second, 500*time.Millisecond, 0.03); r.OK() || r.Violations != r.Windows {
		t.Errorf("1:1:1 starts: %s", r)
	}
}

func TestReadLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	f, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []line{
		{Event: "s", At: ms(0).UnixNano(), TaskID: "a", Attempt: 1, Key: "k", Worker: "w"},
		{Event: "s", At: ms(1).UnixNano(), TaskID: "b", Attempt: 1, Key: "k", Worker: "w"},
		{Event: "e", At: ms(5).UnixNano(), TaskID: "a", Attempt: 1, End: EndLeaseLost},
	} {
		if err := write(f, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.WriteString(`{"e":"e","t":1`); err != nil { // torn by a kill
		t.Fatal(err)
	}
	_ = f.Close()
	got, err := ReadLog(path, ms(9))
	if err != nil {
		t.Fatal(err)
	}
	want := []Exec{
		{TaskID: "a", Attempt: 1, Key: "k", Worker: "w", Start: ms(0), End: ms(5), How: EndLeaseLost},
		{TaskID: "b", Attempt: 1, Key: "k", Worker: "w", Start: ms(1), End: ms(9), How: EndKilled},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || !got[i].End.Equal(want[i].End) || got[i].How != want[i].How || got[i].TaskID != want[i].TaskID {
			t.Errorf("exec %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
