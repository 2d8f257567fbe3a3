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

// Package chaoscheck is the checker of the fault suite (test/e2e) and of the
// upgrade test (test/upgrade): from what the submitters were told (FromTasks
// reads it from Task CRs), the chaos handler's execution log
// (demo.ReadChaosLog) and its plain per-key counters (ReadEffects), it counts
// lost and duplicated logical tasks. It trusts neither the engine's
// idempotency records nor IdempotentOperation: the log is written by every
// execution, before its side effect.
package chaoscheck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dtq-dev/dtq/internal/demo"
)

// Logical is one logical task: every submission of one idempotency key, as
// its submitters saw the outcome.
type Logical struct {
	Key string
	// TaskIDs holds the task ID each submission was given (its own, or the
	// one it was told duplicates it).
	TaskIDs []string
	// Succeeded: the submissions report the task Succeeded.
	Succeeded bool
	// Attempt is the final attempt the submissions report.
	Attempt int
	// MaxAttempts bounds the task's executions (per run).
	MaxAttempts int
	// EarlierRuns holds the attempts each earlier run made, oldest first,
	// when the task was run again from attempt 1 (a dead-letter requeue,
	// spec.retryGeneration): a Task's status.history, the API's
	// previous_attempts. Each such run may have executed its attempts once.
	EarlierRuns []int
}

// Report is what Check found. Redeliveries are expected (at-least-once) and
// only counted; Lost, Duplicated and OverBudget must be 0.
type Report struct {
	Accepted     int // logical tasks
	Lost         int // accepted, never succeeded (or "succeeded" without any execution)
	Duplicated   int // two task IDs for one key, or an execution no redelivery explains
	Redeliveries int // executions beyond the first, over all logical tasks
	MaxRuns      int // most executions of one logical task
	OverBudget   int // logical tasks executed more than maxAttempts times (per run)
	Problems     []string
}

// OK reports whether nothing was lost, duplicated or over budget.
func (r Report) OK() bool { return r.Lost == 0 && r.Duplicated == 0 && r.OverBudget == 0 }

// String is the one-line summary the suite logs.
func (r Report) String() string {
	return fmt.Sprintf("accepted %d, lost %d, duplicated %d, redeliveries %d (most executions of one task %d), over maxAttempts %d",
		r.Accepted, r.Lost, r.Duplicated, r.Redeliveries, r.MaxRuns, r.OverBudget)
}

// Details lists up to n problems, one per line.
func (r Report) Details(n int) string {
	return strings.Join(r.Problems[:min(n, len(r.Problems))], "\n")
}

// attemptOf is one attempt of one task ID.
type attemptOf struct {
	task    string
	attempt int
}

// Check compares the logical tasks with the executions logged for their keys
// (log lines of other keys are ignored) and the effect counters
// (demo.ChaosEffectKey, by key; missing means 0). A logical task is
//
//   - lost when it did not end Succeeded, or has no execution in the log;
//   - duplicated when its submissions or executions name two task IDs, when
//     one attempt ran more often than the task's runs explain (once per run
//     that reached it: the final one, and each of EarlierRuns), when an
//     execution ran an attempt after the final one (after the task ended), or
//     when its counter exceeds the executions so explained (an execution the
//     log cannot explain);
//   - over budget when it ran more often than maxAttempts (plus the attempts
//     of its earlier runs).
func Check(tasks []Logical, log []demo.ChaosExecution, effects map[string]int64) Report {
	byKey := map[string][]demo.ChaosExecution{}
	for _, e := range log {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	r := Report{Accepted: len(tasks)}
	for _, lt := range tasks {
		execs := byKey[lt.Key]
		ids := map[string]bool{}
		for _, id := range lt.TaskIDs {
			ids[id] = true
		}
		attempts := map[attemptOf][]string{} // the workers of each execution
		for _, e := range execs {
			ids[e.TaskID] = true
			a := attemptOf{e.TaskID, e.Attempt}
			attempts[a] = append(attempts[a], e.Worker)
		}
		var dup []string
		if len(ids) > 1 {
			dup = append(dup, fmt.Sprintf("%d task IDs %v", len(ids), sorted(ids)))
		}
		explained := 0
		for a, workers := range attempts {
			earlier := runsReaching(lt.EarlierRuns, a.attempt)
			runs := earlier
			if !lt.Succeeded || a.attempt <= lt.Attempt {
				runs++
			}
			n := len(workers)
			explained += min(n, runs)
			switch {
			case n <= runs:
			case lt.Succeeded && a.attempt > lt.Attempt:
				dup = append(dup, fmt.Sprintf("attempt %d ran by %s after the task ended at attempt %d",
					a.attempt, strings.Join(workers[earlier:], ","), lt.Attempt))
			case earlier > 0:
				dup = append(dup, fmt.Sprintf("attempt %s/%d ran %d times in %d runs", a.task, a.attempt, n, runs))
			default:
				dup = append(dup, fmt.Sprintf("attempt %s/%d ran %d times", a.task, a.attempt, n))
			}
		}
		if n := effects[lt.Key]; n > int64(explained) {
			dup = append(dup, fmt.Sprintf("side effect applied %d times by %d attempts", n, explained))
		}
		sort.Strings(dup)
		if len(dup) > 0 {
			r.Duplicated++
			r.Problems = append(r.Problems, fmt.Sprintf("duplicated %s: %s", lt.Key, strings.Join(dup, "; ")))
		}
		switch {
		case !lt.Succeeded:
			r.Lost++
			r.Problems = append(r.Problems, fmt.Sprintf("lost %s: not Succeeded (attempt %d, %d executions)", lt.Key, lt.Attempt, len(execs)))
		case len(execs) == 0:
			r.Lost++
			r.Problems = append(r.Problems, fmt.Sprintf("lost %s: Succeeded without an execution", lt.Key))
		}
		if len(execs) > 1 {
			r.Redeliveries += len(execs) - 1
		}
		r.MaxRuns = max(r.MaxRuns, len(execs))
		budget := lt.MaxAttempts
		for _, n := range lt.EarlierRuns {
			budget += n
		}
		if lt.MaxAttempts > 0 && len(execs) > budget {
			r.OverBudget++
			r.Problems = append(r.Problems, fmt.Sprintf("over budget %s: %d executions, maxAttempts %d, earlier runs %v", lt.Key, len(execs), lt.MaxAttempts, lt.EarlierRuns))
		}
	}
	sort.Strings(r.Problems)
	return r
}

// runsReaching counts the runs that made attempt a.
func runsReaching(runs []int, a int) int {
	n := 0
	for _, made := range runs {
		if a <= made {
			n++
		}
	}
	return n
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
