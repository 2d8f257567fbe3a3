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

package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// Release hands x's task back to its queue at once, for any worker to read:
// what a draining worker does with the tasks it holds but will not finish,
// instead of leaving them for a peer to reclaim after the visibility timeout.
// consumer is the worker's consumer name (its entry must be pending for it).
//
// ran says whether the handler began: a task whose handler never began goes
// back Queued with the same attempt (the attempt is not counted); one that
// began and was interrupted counts as a crash redelivery does, attempt+1, and
// past MaxAttempts it ends DeadLettered (or Failed) with class WorkerLost. A
// task whose cancel was requested ends Cancelled. The returned state is the
// task's after the call (Queued, Cancelled, DeadLettered or Failed).
//
// Release is fenced like Touch: when x is no longer the task's running
// execution, or its entry is no longer pending for consumer (a peer reclaimed
// it), nothing changes and the error is ErrStaleExecution with the task's
// current state.
func (b *Broker) Release(ctx context.Context, q QueueRef, consumer string, x Execution, ran bool) (State, error) {
	k := keysFor(q)
	now, nowtxt := b.now()
	r := "0"
	if ran {
		r = "1"
	}
	v, err := releaseScript.Run(ctx, b.rdb, k.guarded(k.task(x.TaskID), k.stream(x.Band)),
		k.prefix, consumer, x.MessageID, x.WorkerID, x.Attempt, r, now, nowtxt).Slice()
	if err != nil {
		return "", fmt.Errorf("broker: release %s: %w", x.TaskID, err)
	}
	return staleOr(x, v)
}

// MaxProgressBytes bounds a task's progress value, compact JSON.
const MaxProgressBytes = 1024

// CompactProgress returns progress as compact JSON; an error (ErrInvalidRequest,
// field "progress") when it is not JSON or longer than MaxProgressBytes.
func CompactProgress(progress []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, progress); err != nil || buf.Len() == 0 {
		return nil, &Error{Code: CodeInvalidRequest, Field: "progress", Message: "progress must be JSON"}
	}
	if buf.Len() > MaxProgressBytes {
		return nil, &Error{Code: CodeInvalidRequest, Field: "progress", Limit: MaxProgressBytes,
			Message: fmt.Sprintf("progress is %d bytes of compact JSON, more than %d", buf.Len(), MaxProgressBytes)}
	}
	return buf.Bytes(), nil
}

// Progress records progress (JSON, at most MaxProgressBytes compact) as the
// latest progress of x's task (TaskInfo.Progress, cleared when a new attempt
// starts) and appends a TaskProgress event carrying it. It is fenced like
// Complete: when x is no longer the task's running execution nothing is
// written and the error is ErrStaleExecution. Each call is an events entry:
// callers rate-limit it (pkg/worker writes at most one per task per second).
func (b *Broker) Progress(ctx context.Context, q QueueRef, x Execution, progress []byte) error {
	p, err := CompactProgress(progress)
	if err != nil {
		return err
	}
	k := keysFor(q)
	now, _ := b.now()
	v, err := progressScript.Run(ctx, b.rdb, k.guarded(k.task(x.TaskID)),
		k.prefix, x.MessageID, x.WorkerID, x.Attempt, p, now).Slice()
	if err != nil {
		return fmt.Errorf("broker: progress of %s: %w", x.TaskID, err)
	}
	_, err = staleOr(x, v)
	return err
}

// staleOr maps a fenced script's reply: {state}, or {"stale", state} as
// ErrStaleExecution with the task's current state.
func staleOr(x Execution, v []any) (State, error) {
	if len(v) == 2 && str(v[0]) == "stale" {
		st := State(str(v[1]))
		return st, &Error{Code: CodeStaleExecution, Message: fmt.Sprintf("task %s: execution of attempt %d by %s is stale (task is %q)",
			x.TaskID, x.Attempt, x.WorkerID, st)}
	}
	if len(v) == 0 {
		return "", fmt.Errorf("broker: unexpected reply %v", v)
	}
	return State(str(v[0])), nil
}
