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

// Package flowcheck is the flow control suite's witness and checkers
// (test/flow, issue 35). The witness is a handler that appends one line when
// an execution starts and one when it ends to a log file of its own process;
// the checkers read the merged logs and never dtq's own counters: how many
// starts fell in every window (a rate limit), how many executions of one key
// overlapped (a concurrency cap), how many starts of another key came
// between a task's submission and its start (and how long it waited), and
// each key's share of the starts (weighted fairness).
//
// A handler's start comes after dtq admitted its attempt and its end before
// the attempt's slot is given back, so a logged execution lies inside the
// lease that admitted it: the checkers can only see fewer overlapping
// executions than dtq held, never more.
package flowcheck

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/dtq-dev/dtq/pkg/worker"
)

// TaskType is the witness handler's task type.
const TaskType = "flow"

// Payload is the witness handler's payload.
type Payload struct {
	Key    string `json:"k,omitempty"`  // the task's flow key, logged with its start
	HoldMs int    `json:"ms,omitempty"` // how long the handler holds before it returns
}

// End says how an execution ended.
type End string

const (
	EndReturned  End = "returned"  // the handler returned after its hold
	EndLeaseLost End = "leaseLost" // its context ended with worker.ErrLeaseLost
	EndCancelled End = "cancelled" // its context ended for another reason (drain, deadline, cancel)
	EndKilled    End = "killed"    // no end line: its process ended (ReadLog's processEnd)
)

// line is one line of the log: an execution's start ("s") or end ("e").
type line struct {
	Event   string `json:"e"`
	At      int64  `json:"t"` // Unix nanoseconds
	TaskID  string `json:"id"`
	Attempt int    `json:"a"`
	Key     string `json:"k,omitempty"`
	FlowKey string `json:"fk,omitempty"`
	Worker  string `json:"w,omitempty"`
	End     End    `json:"how,omitempty"`
}

// Register adds the witness handler to mux. Each execution appends its start
// line (the payload's key, and the flow key the worker SDK delivered) to log, holds for the payload's HoldMs (returning early when its
// context ends), then appends its end line. log must be opened O_APPEND
// (OpenLog): one write per line, so the slots of a process never interleave.
func Register(mux *worker.Mux, log *os.File, workerID string) {
	mux.Handle(TaskType, worker.Typed(func(ctx context.Context, t *worker.Task, p Payload) (any, error) {
		if err := write(log, line{Event: "s", At: time.Now().UnixNano(), TaskID: t.ID, Attempt: t.Attempt, Key: p.Key, FlowKey: t.FlowKey(), Worker: workerID}); err != nil {
			return nil, worker.Retryable(err)
		}
		end, err := EndReturned, hold(ctx, time.Duration(p.HoldMs)*time.Millisecond)
		if err != nil {
			end = EndCancelled
			if errors.Is(err, worker.ErrLeaseLost) {
				end = EndLeaseLost
			}
		}
		if werr := write(log, line{Event: "e", At: time.Now().UnixNano(), TaskID: t.ID, Attempt: t.Attempt, End: end}); werr != nil && err == nil {
			err = worker.Retryable(werr)
		}
		return nil, err
	}))
}

// hold waits d or until ctx ends; it returns ctx's cause then.
func hold(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func write(f *os.File, l line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("flowcheck: append to the log: %w", err)
	}
	return nil
}

// OpenLog opens (creating) a witness log for appending.
func OpenLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// Exec is one execution of the witness handler: one attempt of one task.
type Exec struct {
	TaskID  string
	Attempt int
	Key     string // the payload's: the key the producer gave the task
	FlowKey string // the key the worker SDK delivered (worker.Task.FlowKey)
	Worker  string
	Start   time.Time
	End     time.Time // the end line's time, or processEnd for EndKilled
	How     End
}

// ReadLog reads the executions of one process's log. An execution without an
// end line ended with its process, at processEnd (give the time the process
// was seen gone, or the end of the run for a process still running). A torn
// last line (a process killed in the middle of its write) is skipped.
func ReadLog(path string, processEnd time.Time) ([]Exec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Exec
	open := map[string]int{} // task/attempt -> index in out
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l line
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.TaskID == "" {
			continue
		}
		id := fmt.Sprintf("%s/%d", l.TaskID, l.Attempt)
		switch l.Event {
		case "s":
			open[id] = len(out)
			out = append(out, Exec{TaskID: l.TaskID, Attempt: l.Attempt, Key: l.Key, FlowKey: l.FlowKey, Worker: l.Worker,
				Start: time.Unix(0, l.At), End: processEnd, How: EndKilled})
		case "e":
			if i, ok := open[id]; ok {
				out[i].End, out[i].How = time.Unix(0, l.At), l.End
				delete(open, id)
			}
		}
	}
	return out, sc.Err()
}

// Starts returns the executions' start times, sorted.
func Starts(execs []Exec) []time.Time {
	out := make([]time.Time, len(execs))
	for i, e := range execs {
		out[i] = e.Start
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}
