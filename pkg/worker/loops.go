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

// The Server's loops: reading and dispatching within the free slots, the
// delay/retry scheduler, heartbeats, and cancel polling.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/version"
	"github.com/dtq-dev/dtq/pkg/wait"
)

// ---- slots ----

func (s *Server) tryAcquire() bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) release(n int) {
	for range n {
		<-s.sem
	}
}

// ---- loops ----

// readLoop holds one slot per entry it asks for, so it never reads more than
// the free slots (the original prefetched per band). New entries are read and
// started in one engine call (ReadStart), so a slot waits for two round trips
// per task (read+start, complete) instead of three; entries that do not run
// give their slot back at once. The read blocks in Redis, so an idle worker
// picks up a new entry as soon as it is added. Every
// max(0.5s, visibility timeout/2), jittered, the slots first go to reclaiming
// entries idle longer than the visibility timeout (a dead worker's).
func (s *Server) readLoop(stop <-chan struct{}) {
	bo := newBackoff()
	period := max(500*time.Millisecond, s.cfg.VisibilityTimeout/2)
	nextReclaim := time.Now().Add(wait.Jitter(period, 0.2))
	s.reclaimAt.Store(nextReclaim.UnixNano())
	for {
		select {
		case s.sem <- struct{}{}:
		case <-stop:
			return
		}
		select { // a stop that raced with the slot
		case <-stop:
			s.release(1)
			return
		default:
		}
		if !s.waitHold(stop) {
			s.release(1)
			return
		}
		n := 1
		for n < s.cfg.Concurrency && s.tryAcquire() {
			n++
		}
		if time.Now().After(nextReclaim) {
			nextReclaim = time.Now().Add(wait.Jitter(period, 0.2))
			s.reclaimAt.Store(nextReclaim.UnixNano())
			sent := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			ds, err := s.b.Reclaim(ctx, s.q, s.cfg.WorkerID, s.cfg.VisibilityTimeout, n)
			cancel()
			if err != nil {
				s.log.Warn("Reclaim", "error", err)
			}
			if len(ds) > 0 {
				es := make([]*execution, len(ds))
				for i, d := range ds {
					s.log.Info("Reclaimed entry", "task_id", d.TaskID, "attempt", d.Attempt)
					es[i] = &execution{d: d, fresh: sent}
				}
				s.dispatchAll(es, n)
				continue
			}
		}
		began := time.Now()
		// Run's context: a read waiting when the drain begins starts nothing
		// after it wakes (a task a handler hands back as the drain begins
		// would otherwise be read again by this worker).
		ctx, cancel := context.WithTimeout(s.runCtx, readBlock+opTimeout)
		ds, err := s.b.ReadStart(ctx, s.q, s.cfg.WorkerID, s.cfg.WorkerID, n, min(readBlock, max(time.Millisecond, time.Until(nextReclaim))))
		cancel()
		if err != nil && s.draining() {
			s.release(n)
			return
		}
		if err != nil {
			s.release(n)
			s.log.Warn("Read", "error", err)
			if !sleepStop(stop, bo.Next()) {
				return
			}
			continue
		}
		bo.Reset()
		// A blocking read delivers when an entry arrives, so the entries'
		// idle time started after began; began is the safe lower bound.
		s.dispatchStarted(ds, n, began)
		if len(ds) == 0 && time.Since(began) < time.Millisecond {
			// Read returned at once with nothing: do not spin.
			if !sleepStop(stop, 10*time.Millisecond) {
				return
			}
		}
	}
}

// waitHold waits while cfg.Hold holds; false when stop closed first.
func (s *Server) waitHold(stop <-chan struct{}) bool {
	for s.holding() {
		if !sleepStop(stop, holdPoll) {
			return false
		}
	}
	return true
}

// dispatchAll runs es holding n slots: extra slots are released; an
// execution beyond n (an engine returning more than asked) waits for a slot.
func (s *Server) dispatchAll(es []*execution, n int) {
	for i, e := range es {
		if i >= n {
			s.sem <- struct{}{}
		}
		s.dispatchExec(e)
	}
	if len(es) < n {
		s.release(n - len(es))
	}
}

// dispatchStarted runs the entries ReadStart started (at fresh or later),
// holding n slots: an entry that does not run (already acknowledged by the
// read) or failed to start (left pending for reclaim) gives its slot back at
// once.
func (s *Server) dispatchStarted(ss []broker.Started, n int, fresh time.Time) {
	run := make([]*execution, 0, len(ss))
	for i := range ss {
		if e := s.toRun(&ss[i], fresh); e != nil {
			run = append(run, e)
		}
	}
	s.dispatchAll(run, n)
}

// toRun returns the execution of an entry a read started (at fresh or
// later), nil when it does not run.
func (s *Server) toRun(st *broker.Started, fresh time.Time) *execution {
	switch {
	case st.Err != nil:
		// The entry stays pending; it is reclaimed after the visibility timeout.
		s.log.Warn("Start", "task_id", st.TaskID, "attempt", st.Attempt, "message_id", st.MessageID, "error", st.Err)
	case !st.Run:
		s.notRun(st.Delivery, st.StartResult)
	default:
		return &execution{d: st.Delivery, started: &st.StartResult, attempt: st.Task.Attempt, fresh: fresh}
	}
	return nil
}

// readsNext reports whether an executor should read its next entry with its
// completion: the worker reads (no drain), nothing holds it (Config.Hold),
// and no reclaim is due (readLoop needs free slots for it).
func (s *Server) readsNext() bool {
	return !s.draining() && !s.holding() && time.Now().UnixNano() < s.reclaimAt.Load()
}

func (s *Server) notRun(d broker.Delivery, sr broker.StartResult) {
	s.log.Debug("Entry not run", "task_id", d.TaskID, "attempt", d.Attempt, "message_id", d.MessageID, "reason", sr.Reason, "state", string(sr.Task.State))
	if sr.Task.State == broker.StateDeadLettered {
		s.metricsOf(sr.Task.Type).DeadLettered()
	}
}

// schedulerLoop promotes due delayed and retrying tasks. PromoteDue is one
// atomic script, so every worker runs it and none needs a leader lock.
func (s *Server) schedulerLoop(stop <-chan struct{}) {
	bo := newBackoff()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		moved, next, err := s.b.PromoteDue(ctx, s.q, promoteLimit)
		cancel()
		pause := maxPromoteWait
		switch {
		case err != nil:
			s.log.Warn("Promote due tasks", "error", err)
			pause = bo.Next()
		case moved >= promoteLimit:
			pause = 0
			bo.Reset()
		case !next.IsZero():
			pause = min(maxPromoteWait, max(5*time.Millisecond, time.Until(next)))
			bo.Reset()
		}
		if pause == 0 {
			select {
			case <-stop:
				return
			default:
				continue
			}
		}
		t := time.NewTimer(wait.Jitter(pause, 0.05))
		select {
		case <-stop:
			t.Stop()
			return
		case <-s.promoteNow:
			t.Stop()
			// a retry was just scheduled: its due time may be sooner than pause
		case <-t.C:
		}
	}
}

func (s *Server) pokeScheduler() {
	select {
	case s.promoteNow <- struct{}{}:
	default:
	}
}

// heartbeatLoop writes the worker record and touches every in-flight entry so
// the visibility timeout never reclaims a live worker's work. It also enforces
// the lease: an execution whose entry was not kept fresh for a visibility
// timeout (Redis unreachable, or this process paused) may already run on a
// peer, and one the touch reports taken over does, so their handlers are
// cancelled and left to that redelivery (never completed from here).
//
// The check runs every interval even while a heartbeat hangs (Redis
// unreachable), so each heartbeat runs on a goroutine of its own, one at a
// time.
func (s *Server) heartbeatLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	inFlight := make(chan struct{}, 1)
	for {
		if wait.Sleep(ctx, wait.Jitter(s.cfg.HeartbeatInterval, 0.1)) != nil {
			return
		}
		s.expireLeases()
		select {
		case inFlight <- struct{}{}:
			wg.Go(func() {
				defer func() { <-inFlight }()
				s.heartbeat(ctx)
			})
		default: // the previous heartbeat still waits for Redis
		}
	}
}

func (s *Server) heartbeat(ctx context.Context) {
	s.mu.Lock()
	info := broker.WorkerInfo{
		ID: s.cfg.WorkerID, Hostname: s.hostname, Concurrency: s.cfg.Concurrency,
		Active: len(s.inflight), Status: s.statusLocked(), StartedAt: s.startedAt, LastHeartbeat: time.Now(),
		Version: version.Version, Commit: version.Commit,
	}
	var es []*execution
	var xs []broker.Execution
	for _, e := range s.inflight {
		if !e.interrupted && !e.leaseLost && e.attempt > 0 {
			es = append(es, e)
			xs = append(xs, s.execution(e))
		}
	}
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if s.failure() != nil {
		return
	}
	if err := s.b.Heartbeat(cctx, s.q, info, s.cfg.HeartbeatInterval); errors.Is(err, broker.ErrLayoutUnknown) {
		s.fail(err)
		return
	} else if err != nil && ctx.Err() == nil {
		s.log.Warn("Heartbeat", "error", err)
	}
	if len(xs) == 0 {
		return
	}
	sent := time.Now()
	lost, err := s.b.Touch(cctx, s.q, s.cfg.WorkerID, xs)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("Touch in-flight entries", "error", err)
		}
		return
	}
	gone := make(map[string]bool, len(lost))
	for _, x := range lost {
		gone[x.MessageID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range es {
		switch {
		case !gone[e.d.MessageID]:
			if sent.After(e.fresh) {
				e.fresh = sent
			}
		case !e.returned: // a handler that returned is being completed (or was): nothing to stop
			s.loseLease(e, "another worker took the task over")
		}
	}
}

// expireLeases cancels the executions whose entries were not known fresh for
// a visibility timeout: a peer may have reclaimed them.
func (s *Server) expireLeases() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.inflight {
		if e.attempt > 0 && !e.returned && !e.interrupted && !e.leaseLost && time.Since(e.fresh) > s.cfg.VisibilityTimeout {
			s.loseLease(e, "no heartbeat reached Redis for a visibility timeout")
		}
	}
}

// loseLease cancels e's handler with ErrLeaseLost; call with s.mu held.
func (s *Server) loseLease(e *execution, why string) {
	e.leaseLost = true
	if e.cancel != nil {
		e.cancel(ErrLeaseLost)
	}
	s.log.Warn("Lease lost; cancelling the handler and leaving the task to its redelivery",
		"task_id", e.d.TaskID, "attempt", e.attempt, "why", why)
}

// cancelLoop asks, in one call, which in-flight tasks have a cancel request and
// cancels their handlers' contexts.
func (s *Server) cancelLoop(ctx context.Context) {
	for {
		if wait.Sleep(ctx, cancelPoll) != nil {
			return
		}
		s.mu.Lock()
		ids := make([]string, 0, len(s.inflight))
		byID := make(map[string]*execution, len(s.inflight))
		for _, e := range s.inflight {
			if !e.cancelReq {
				ids = append(ids, e.d.TaskID)
				byID[e.d.TaskID] = e
			}
		}
		s.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		req, err := s.b.CancelRequested(cctx, s.q, ids)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("Poll cancel requests", "error", err)
			}
			continue
		}
		s.mu.Lock()
		for _, id := range req {
			if e := byID[id]; e != nil && !e.cancelReq {
				e.cancelReq = true
				if e.cancel != nil {
					e.cancel(ErrCancelRequested)
				}
			}
		}
		s.mu.Unlock()
	}
}

func (s *Server) interruptAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.inflight {
		if !e.interrupted {
			e.interrupted = true
			n++
			if e.cancel != nil {
				e.cancel(ErrInterrupted)
			}
		}
	}
	return n
}

func (s *Server) inflightCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// ---- dispatch ----

// dispatchExec runs e (started by process unless the read started it) on an
// executor goroutine; the caller holds a slot for it, which the executor
// releases when e is done, or passes to the next entry read with e's
// completion (CompleteNext). An executor that finished its execution waits
// executorIdle for the next one before it exits, so under load executions
// reuse goroutines (and their grown stacks) instead of starting one per task.
func (s *Server) dispatchExec(e *execution) {
	s.mu.Lock()
	s.inflight[e.d.MessageID] = e
	s.mu.Unlock()
	s.wg.Add(1)
	select {
	case s.execs <- e:
	default:
		go s.executor(e)
	}
}

const executorIdle = time.Second

func (s *Server) executor(e *execution) {
	idle := time.NewTimer(executorIdle)
	defer idle.Stop()
	for {
		next := s.process(e)
		s.mu.Lock()
		delete(s.inflight, e.d.MessageID)
		if next != nil {
			s.inflight[next.d.MessageID] = next
		}
		s.mu.Unlock()
		if next != nil { // read with e's completion: it keeps e's slot
			e = next
			continue
		}
		s.release(1)
		s.wg.Done()
		idle.Reset(executorIdle)
		select {
		case e = <-s.execs:
		case <-idle.C:
			return
		case <-s.executorsStop:
			return
		}
	}
}

// ---- timing helpers ----

func sleepStop(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// newBackoff is the retry delay of the worker's loops after a Redis error.
func newBackoff() *wait.Backoff {
	return &wait.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.2}
}
