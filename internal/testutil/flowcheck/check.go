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
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Rate is a rate limit: at most Burst + t*Limit/Period starts in any window
// of length t.
type Rate struct {
	Limit  int64
	Period time.Duration
	Burst  int64
}

// Span is when one start happened, as closely as it is known: not before
// From, not after To. A handler's own start time is its To; the engine
// admitted the attempt a little earlier, after the claim call that admitted
// it was sent (its From). The two differ by the round trip and the wait for
// a goroutine, which on a loaded machine reaches tens of milliseconds.
type Span struct{ From, To time.Time }

// RateReport is the window that exceeds the limit the most (or comes
// closest to it).
type RateReport struct {
	Starts  int
	Excess  float64 // Count - Allowed in the worst window; above 0 is a violation
	From    time.Time
	To      time.Time // the worst window
	Count   int       // starts certainly in it
	Allowed float64
}

// OK reports whether no window holds more starts than the limit allows.
func (r RateReport) OK() bool { return r.Excess <= 0 }

func (r RateReport) String() string {
	return fmt.Sprintf("%d starts; worst window %v long (from %s) certainly holds %d starts against %.2f allowed (excess %.2f)",
		r.Starts, r.To.Sub(r.From), r.From.Format("15:04:05.000"), r.Count, r.Allowed, r.Excess)
}

// CheckRate finds the window [x, y] that most exceeds the limit with the
// starts certainly in it: those whose whole span lies inside. (With spans of
// no length, every window between two starts.) x is some span's From and y
// some span's To. Sweeping y over the Tos in order, each span that ends by
// y adds one start to every x at or before its From; a tree over the Froms
// keeps count(x)*Period + x*Limit and answers the best x <= y, whose excess
// (times Period) is that minus y*Limit + Burst*Period: O(n log n), in
// integers (nanoseconds), so a window exactly at the limit is not a violation.
func CheckRate(spans []Span, lim Rate) RateReport {
	if len(spans) == 0 {
		return RateReport{}
	}
	base := slices.MinFunc(spans, func(a, b Span) int { return a.From.Compare(b.From) }).From
	ns := func(t time.Time) int64 { return int64(t.Sub(base)) }
	froms := make([]int64, len(spans))
	for i, sp := range spans {
		froms[i] = ns(sp.From)
	}
	slices.Sort(froms)
	froms = slices.Compact(froms)
	init := make([]int64, len(froms))
	for i, x := range froms {
		init[i] = x * lim.Limit
	}
	t := newMaxTree(init)
	byTo := slices.SortedFunc(slices.Values(spans), func(a, b Span) int { return a.To.Compare(b.To) })
	period := int64(lim.Period)
	worst := int64(math.MinInt64)
	r := RateReport{Starts: len(spans)}
	for _, sp := range byTo {
		x, _ := slices.BinarySearch(froms, ns(sp.From))
		t.addPrefix(x, period) // froms[x] is the span's own From
		y := ns(sp.To)
		last, _ := slices.BinarySearch(froms, y+1) // the froms <= y
		best, at := t.maxPrefix(last - 1)
		if at < 0 {
			continue
		}
		if e := best - y*lim.Limit - lim.Burst*period; e > worst {
			worst = e
			r.From, r.To = base.Add(time.Duration(froms[at])), sp.To
			r.Count = int((best - froms[at]*lim.Limit) / period)
		}
	}
	r.Excess = float64(worst) / float64(period)
	r.Allowed = float64(r.Count) - r.Excess
	return r
}

// maxTree is a segment tree over values v[0..n): add v to a prefix, and the
// maximum of a prefix with its index.
type maxTree struct {
	n    int
	top  []int64 // the node range's maximum, its own pending add included
	arg  []int   // where it is
	lazy []int64 // added to the whole node range, not yet to its children
}

func newMaxTree(v []int64) *maxTree {
	t := &maxTree{n: len(v), top: make([]int64, 4*len(v)), arg: make([]int, 4*len(v)), lazy: make([]int64, 4*len(v))}
	var build func(node, lo, hi int)
	build = func(node, lo, hi int) {
		if lo == hi {
			t.top[node], t.arg[node] = v[lo], lo
			return
		}
		mid := (lo + hi) / 2
		build(2*node, lo, mid)
		build(2*node+1, mid+1, hi)
		t.pull(node)
	}
	build(1, 0, t.n-1)
	return t
}

func (t *maxTree) pull(node int) {
	l, r := 2*node, 2*node+1
	if t.top[r] > t.top[l] {
		t.top[node], t.arg[node] = t.top[r]+t.lazy[node], t.arg[r]
	} else {
		t.top[node], t.arg[node] = t.top[l]+t.lazy[node], t.arg[l]
	}
}

// addPrefix adds d to v[0..hi].
func (t *maxTree) addPrefix(hi int, d int64) {
	var rec func(node, lo, up int)
	rec = func(node, lo, up int) {
		if lo > hi {
			return
		}
		if up <= hi {
			t.top[node] += d
			t.lazy[node] += d
			return
		}
		mid := (lo + up) / 2
		rec(2*node, lo, mid)
		rec(2*node+1, mid+1, up)
		t.pull(node)
	}
	rec(1, 0, t.n-1)
}

// maxPrefix returns the largest of v[0..hi] and its index (-1 when hi < 0).
func (t *maxTree) maxPrefix(hi int) (int64, int) {
	var rec func(node, lo, up int) (int64, int)
	rec = func(node, lo, up int) (int64, int) {
		if lo > hi {
			return math.MinInt64, -1
		}
		if up <= hi {
			return t.top[node], t.arg[node]
		}
		mid := (lo + up) / 2
		a, ai := rec(2*node, lo, mid)
		b, bi := rec(2*node+1, mid+1, up)
		if b > a {
			a, ai = b, bi
		}
		if ai < 0 {
			return a, ai
		}
		return a + t.lazy[node], ai
	}
	return rec(1, 0, t.n-1)
}

// CountIn returns how many of the starts lie in [from, from+d).
func CountIn(starts []time.Time, from time.Time, d time.Duration) int {
	n := 0
	for _, s := range starts {
		if !s.Before(from) && s.Before(from.Add(d)) {
			n++
		}
	}
	return n
}

// Overlap is a moment when more executions of one key held their leases
// than the cap allows.
type Overlap struct {
	Key   string
	At    time.Time
	Execs []Exec
}

func (o Overlap) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %q: %d executions at %s:", o.Key, len(o.Execs), o.At.Format("15:04:05.000000"))
	for _, e := range o.Execs {
		fmt.Fprintf(&b, " [%s/%d on %s %s-%s %s]", e.TaskID, e.Attempt, e.Worker,
			e.Start.Format("05.000000"), e.End.Format("05.000000"), e.How)
	}
	return b.String()
}

// ConcurrencyReport is what CheckKeyConcurrency found.
type ConcurrencyReport struct {
	Executions int
	Keys       int
	Killed     int // executions whose process was killed under them
	LeaseLost  int // executions that lost their lease and were cancelled
	Max        int // most executions of one key holding their leases at once
	MaxKey     string
	Violations int       // starts that took a key above the cap
	Examples   []Overlap // the first of them of the first few keys
}

// OK reports whether no key ever ran above the cap.
func (r ConcurrencyReport) OK() bool { return r.Violations == 0 }

func (r ConcurrencyReport) String() string {
	return fmt.Sprintf("%d executions of %d keys (%d killed with their process, %d lost their lease); "+
		"most at once of one key %d (%q); %d starts above the cap", r.Executions, r.Keys, r.Killed, r.LeaseLost, r.Max, r.MaxKey, r.Violations)
}

// Details lists the examples, one per line.
func (r ConcurrencyReport) Details() string {
	lines := make([]string, len(r.Examples))
	for i, o := range r.Examples {
		lines[i] = o.String()
	}
	return strings.Join(lines, "\n")
}

// CheckKeyConcurrency sweeps each key's executions in time and counts those
// holding their leases at once against limit. An execution holds its lease
// from its start to its end, at the latest until the next attempt of its task
// starts: a task is started again only after its earlier attempt's lease
// ended (the attempt finished, or its lease expired and the task was
// reclaimed), so an execution that ran on after losing its lease (a zombie)
// stops counting there, and one killed with its process counts until the
// process was gone. At one instant ends come before starts.
func CheckKeyConcurrency(execs []Exec, limit int) ConcurrencyReport {
	r := ConcurrencyReport{Executions: len(execs)}
	execs = leaseEnds(execs)
	type event struct {
		at    time.Time
		delta int
		i     int
	}
	byKey := map[string][]event{}
	for i, e := range execs {
		byKey[e.Key] = append(byKey[e.Key], event{e.Start, +1, i}, event{e.End, -1, i})
		switch e.How {
		case EndKilled:
			r.Killed++
		case EndLeaseLost:
			r.LeaseLost++
		}
	}
	r.Keys = len(byKey)
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		evs := byKey[k]
		slices.SortFunc(evs, func(a, b event) int {
			return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.delta, b.delta))
		})
		active := map[int]bool{}
		for _, ev := range evs {
			if ev.delta < 0 {
				delete(active, ev.i)
				continue
			}
			active[ev.i] = true
			if len(active) > r.Max {
				r.Max, r.MaxKey = len(active), k
			}
			if len(active) > limit {
				r.Violations++
				if len(r.Examples) < 5 && (len(r.Examples) == 0 || r.Examples[len(r.Examples)-1].Key != k) {
					o := Overlap{Key: k, At: ev.at}
					for i := range active {
						o.Execs = append(o.Execs, execs[i])
					}
					slices.SortFunc(o.Execs, func(a, b Exec) int { return a.Start.Compare(b.Start) })
					r.Examples = append(r.Examples, o)
				}
			}
		}
	}
	return r
}

// leaseEnds returns a copy of execs whose End is at most the start of the
// next attempt of the same task.
func leaseEnds(execs []Exec) []Exec {
	out := slices.Clone(execs)
	byTask := map[string][]int{}
	for i, e := range out {
		byTask[e.TaskID] = append(byTask[e.TaskID], i)
	}
	for _, is := range byTask {
		slices.SortFunc(is, func(a, b int) int { return out[a].Start.Compare(out[b].Start) })
		for n := 0; n+1 < len(is); n++ {
			if e, next := &out[is[n]], out[is[n+1]].Start; next.Before(e.End) {
				e.End = next
			}
		}
	}
	return out
}

// Never is the latency of a task that did not start.
const Never = time.Duration(math.MaxInt64)

// LatencyReport is the submit-to-start latency of a set of tasks.
type LatencyReport struct {
	Tasks      int
	NotStarted int
	P50, P99   time.Duration // Never when the quantile falls on a task that did not start
	Max        time.Duration
}

func (r LatencyReport) String() string {
	f := func(d time.Duration) string {
		if d == Never {
			return "never"
		}
		return d.Round(10 * time.Microsecond).String()
	}
	return fmt.Sprintf("%d tasks, %d never started; submit to start p50 %s, p99 %s, max %s", r.Tasks, r.NotStarted, f(r.P50), f(r.P99), f(r.Max))
}

// CheckLatency measures, for each submitted task (ID -> when its submission
// was sent), the time to the first start of it in execs. Quantiles are by
// nearest rank (the p99 of 60 tasks is the slowest), a task that never
// started counting as the slowest.
func CheckLatency(submitted map[string]time.Time, execs []Exec) LatencyReport {
	first := map[string]time.Time{}
	for _, e := range execs {
		if _, ok := submitted[e.TaskID]; !ok {
			continue
		}
		if s, ok := first[e.TaskID]; !ok || e.Start.Before(s) {
			first[e.TaskID] = e.Start
		}
	}
	ds := make([]time.Duration, 0, len(submitted))
	for id, at := range submitted {
		if s, ok := first[id]; ok {
			ds = append(ds, s.Sub(at))
		} else {
			ds = append(ds, Never)
		}
	}
	slices.Sort(ds)
	r := LatencyReport{Tasks: len(ds), NotStarted: len(submitted) - len(first)}
	if len(ds) > 0 {
		r.P50, r.P99, r.Max = quantile(ds, 0.50), quantile(ds, 0.99), ds[len(ds)-1]
	}
	return r
}

func quantile[T any](sorted []T, q float64) T {
	return sorted[max(0, int(math.Ceil(q*float64(len(sorted))))-1)]
}

// AheadReport is how many starts of one key came after each of a set of
// tasks was queued and before it started: the work that went ahead of it.
type AheadReport struct {
	Key        string // whose starts are counted
	Tasks      int
	NotStarted int // counted to the end of the record
	P50, Max   int // starts of Key ahead of a task (nearest rank)
	MaxTask    string
}

// OK reports whether no task had more than bound starts of Key ahead of it.
func (r AheadReport) OK(bound int) bool { return r.Tasks > 0 && r.Max <= bound }

func (r AheadReport) String() string {
	return fmt.Sprintf("%d tasks, %d never started; starts of key %q after a task was queued, before it started: p50 %d, max %d (task %s)",
		r.Tasks, r.NotStarted, r.Key, r.P50, r.Max, r.MaxTask)
}

// CheckAhead counts, for each task of queued (ID -> when it was certainly
// queued), the executions of key that started strictly after that and
// before the task's first start in execs; a task that never started counts
// every one that started after it was queued. It counts starts, not time.
func CheckAhead(queued map[string]time.Time, execs []Exec, key string) AheadReport {
	var starts []time.Time // key's
	first := map[string]time.Time{}
	for _, e := range execs {
		if e.Key == key {
			starts = append(starts, e.Start)
		}
		if _, ok := queued[e.TaskID]; !ok {
			continue
		}
		if s, ok := first[e.TaskID]; !ok || e.Start.Before(s) {
			first[e.TaskID] = e.Start
		}
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	r := AheadReport{Key: key, Tasks: len(queued), NotStarted: len(queued) - len(first)}
	ns := make([]int, 0, len(queued))
	for _, id := range slices.Sorted(maps.Keys(queued)) { // ties: the first ID
		at := queued[id]
		from := sort.Search(len(starts), func(i int) bool { return starts[i].After(at) })
		to := len(starts)
		if s, ok := first[id]; ok {
			to = sort.Search(len(starts), func(i int) bool { return !starts[i].Before(s) })
		}
		n := max(0, to-from)
		ns = append(ns, n)
		if n > r.Max || r.MaxTask == "" {
			r.Max, r.MaxTask = n, id
		}
	}
	slices.Sort(ns)
	if len(ns) > 0 {
		r.P50 = quantile(ns, 0.50)
	}
	return r
}

// ShareReport is how far keys' shares of the starts strayed from their
// weights over sliding windows.
type ShareReport struct {
	Windows    int
	Violations int     // windows where a key's share is off by more than the tolerance
	Dev        float64 // the largest |share-want|/want of any key in any window
	// The worst window and key.
	From   time.Time
	Key    string
	Share  float64
	Want   float64
	Starts int // starts in that window
	Totals map[string]int
}

// OK reports whether every key's share was within the tolerance in every window.
func (r ShareReport) OK() bool { return r.Windows > 0 && r.Violations == 0 }

func (r ShareReport) String() string {
	return fmt.Sprintf("%d windows, %d out of tolerance; worst: key %q %.2f%% of %d starts against %.2f%% (%.1f%% off) in the window from %s; totals %v",
		r.Windows, r.Violations, r.Key, 100*r.Share, r.Starts, 100*r.Want, 100*r.Dev, r.From.Format("15:04:05.000"), r.Totals)
}

// CheckShares counts the starts of the weighted keys in every window of
// length window that starts at from + k*step and ends by to, and compares
// each key's share of them with its weight's share: off by more than tol
// (relative: 0.03 is 3% of the weight's share) is a violation. Starts of
// keys without a weight are ignored.
func CheckShares(execs []Exec, weights map[string]int64, from, to time.Time, window, step time.Duration, tol float64) ShareReport {
	var total int64
	for _, w := range weights {
		total += w
	}
	type start struct {
		at  time.Time
		key string
	}
	var ss []start
	r := ShareReport{Totals: map[string]int{}}
	for _, e := range execs {
		if _, ok := weights[e.Key]; ok {
			ss = append(ss, start{e.Start, e.Key})
			r.Totals[e.Key]++
		}
	}
	slices.SortFunc(ss, func(a, b start) int { return a.at.Compare(b.at) })
	for w := from; !w.Add(window).After(to); w = w.Add(step) {
		lo, _ := slices.BinarySearchFunc(ss, w, func(s start, t time.Time) int { return s.at.Compare(t) })
		hi, _ := slices.BinarySearchFunc(ss, w.Add(window), func(s start, t time.Time) int { return s.at.Compare(t) })
		n := map[string]int{}
		for _, s := range ss[lo:hi] {
			n[s.key]++
		}
		r.Windows++
		bad := false
		for k, wt := range weights {
			want := float64(wt) / float64(total)
			share := 0.0
			if hi > lo {
				share = float64(n[k]) / float64(hi-lo)
			}
			dev := math.Abs(share-want) / want
			if dev > tol {
				bad = true
			}
			if dev > r.Dev || r.Key == "" {
				r.Dev, r.From, r.Key, r.Share, r.Want, r.Starts = dev, w, k, share, want, hi-lo
			}
		}
		if bad {
			r.Violations++
		}
	}
	return r
}
