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

package worker

// Progress reports of running tasks: Task.ReportProgress, written to the
// engine (Broker.Progress) at most once per progressInterval per execution.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
)

// MaxProgressBytes bounds a progress value, as compact JSON.
const MaxProgressBytes = broker.MaxProgressBytes

// progressInterval is the shortest time between two progress writes of one
// execution; reports in between are coalesced to the latest.
const progressInterval = time.Second

// progress is an execution's progress reporting state, guarded by Server.mu.
type progress struct {
	last    time.Time       // of the latest write
	pending json.RawMessage // the latest report not written yet
	timer   *time.Timer     // writes pending when the interval has passed
}

// ReportProgress records v, encoded as JSON (json.RawMessage as is; at most
// MaxProgressBytes compact), as the task's progress: the task's latest
// progress (the HTTP API's task view, reset when a new attempt starts) and a
// TaskProgress event on its queue's event stream (kubectl dtq events, the
// API's events, the console's task page).
//
// Writes are rate-limited per execution: the first report is written at once,
// and later ones at most once per second, coalesced to the latest value (a
// handler reporting in a tight loop costs one write a second). A report
// coalesced into a later write returns nil at once; one still waiting when
// the handler returns is dropped (the task's outcome follows).
//
// Only the execution that holds the task's lease can write: after the lease
// was lost (another worker runs the task), ReportProgress returns
// ErrLeaseLost. A value that is not JSON or too large returns an error and
// writes nothing. Outside a Server (a Task built by workertest) it only
// checks v.
func (t *Task) ReportProgress(ctx context.Context, v any) error {
	data, err := marshalResult(v)
	if err == nil && data == nil {
		data = json.RawMessage("null")
	}
	if err == nil {
		data, err = broker.CompactProgress(data)
	}
	if err != nil {
		return fmt.Errorf("worker: progress: %w", err)
	}
	if t.srv == nil {
		return nil
	}
	return t.srv.reportProgress(ctx, t.exec, data)
}

// reportProgress writes data as e's progress now, or coalesces it into the
// write due when the interval since the last has passed.
func (s *Server) reportProgress(ctx context.Context, e *execution, data json.RawMessage) error {
	s.mu.Lock()
	if e.returned {
		s.mu.Unlock()
		return nil
	}
	p := &e.progress
	if wait := progressInterval - time.Since(p.last); wait > 0 {
		p.pending = data
		if p.timer == nil {
			p.timer = time.AfterFunc(wait, func() { s.flushProgress(e) })
		}
		s.mu.Unlock()
		return nil
	}
	p.last = time.Now()
	x := s.execution(e)
	s.mu.Unlock()
	return s.writeProgress(ctx, x, data)
}

// flushProgress writes e's pending progress, unless its handler returned.
func (s *Server) flushProgress(e *execution) {
	s.mu.Lock()
	p := &e.progress
	data := p.pending
	p.pending, p.timer = nil, nil
	if e.returned || data == nil {
		s.mu.Unlock()
		return
	}
	p.last = time.Now()
	x := s.execution(e)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.writeProgress(ctx, x, data); err != nil {
		s.logFor(e).Debug("Progress not written", "error", err)
	}
}

// stopProgress drops e's pending progress; call with s.mu held once its
// handler returned.
func (e *execution) stopProgress() {
	if e.progress.timer != nil {
		e.progress.timer.Stop()
		e.progress.timer, e.progress.pending = nil, nil
	}
}

func (s *Server) writeProgress(ctx context.Context, x broker.Execution, data json.RawMessage) error {
	err := s.b.Progress(ctx, s.q, x, data)
	if errors.Is(err, broker.ErrStaleExecution) {
		return ErrLeaseLost
	}
	return err
}
