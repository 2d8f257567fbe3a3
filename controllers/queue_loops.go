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

package controllers

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/wait"
)

// Timings of the queue loops.
const (
	queueListPeriod  = 2 * time.Second        // how often the set of Queues is re-read
	eventsPoll       = 200 * time.Millisecond // pause between two reads of every queue's events
	eventsBatch      = 500                    // events per queue per read
	promoteMaxSleep  = time.Second            // the scheduler re-checks every queue at least this often
	promoteBatch     = 500                    // schedule members promoted per queue per call
	loopErrorBackoff = 500 * time.Millisecond // a queue whose Redis call failed waits this long
	queueKickEvery   = time.Second            // at most one Queue reconcile per queue per this, from events
)

// queueLoops is the manager's leader-elected Runnable that serves every Queue
// with two loops: the status syncer (reads the queues' events streams and
// wakes the affected Tasks and Queues) and the delay/retry scheduler
// (PromoteDue, so delayed tasks are promoted even when a queue is scaled to
// zero). Each loop is one goroutine that asks Redis about all queues in one
// pipeline per round and never blocks on Redis, so neither goroutines nor
// connections grow with the number of Queues, and the reconcilers and /readyz
// never wait for a connection behind them (docs/benchmarks.md, "Many Queues").
// It also re-reads every unfinished Task each resync period, which covers
// events the syncer missed, has the engine check the held slots of
// flow-controlled queues (checkFlowSlots), and, when it starts and on every
// resync, cancels the tasks whose Task was deleted while no manager ran
// (sweepOrphans).
type queueLoops struct {
	client       client.Client
	engine       Engine
	clock        clock.Clock
	taskEvents   chan<- event.TypedGenericEvent[*dtqv1alpha1.Task]
	queueEvents  chan<- event.TypedGenericEvent[*dtqv1alpha1.Queue]
	resyncPeriod time.Duration

	mu     sync.Mutex
	queues []broker.QueueRef // as last listed; replaced, never modified
}

// NeedLeaderElection: one manager reads events and promotes at a time.
func (l *queueLoops) NeedLeaderElection() bool { return true }

// Start runs the loops until ctx ends.
func (l *queueLoops) Start(ctx context.Context) error {
	l.listQueues(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { l.syncEvents(ctx) })
	wg.Go(func() { l.promote(ctx) })
	list := time.NewTicker(queueListPeriod)
	defer list.Stop()
	resync := time.NewTicker(l.resyncPeriod)
	defer resync.Stop()
	l.sweepOrphans(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-list.C:
			l.listQueues(ctx)
		case <-resync.C:
			l.resync(ctx)
		}
	}
}

// listQueues re-reads the set of Queues; on error the last set stays.
func (l *queueLoops) listQueues(ctx context.Context) {
	var list dtqv1alpha1.QueueList
	if err := l.client.List(ctx, &list); err != nil {
		if ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).WithName("queue-loops").Error(err, "List Queues")
		}
		return
	}
	refs := make([]broker.QueueRef, len(list.Items))
	for i := range list.Items {
		refs[i] = queueRefOf(&list.Items[i])
	}
	l.mu.Lock()
	l.queues = refs
	l.mu.Unlock()
}

func (l *queueLoops) current() []broker.QueueRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queues
}

// eventCursor is the status syncer's state of one queue.
type eventCursor struct {
	after       string    // ID of the last event read
	retryAt     time.Time // after a failed read
	lastKick    time.Time
	pendingKick bool
}

// syncEvents follows every queue's events stream. A queue's first read starts
// from the oldest kept event, so transitions that happened while no manager
// ran still reach their Tasks (a reconcile of an up-to-date Task writes nothing).
func (l *queueLoops) syncEvents(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("status-syncer")
	cursors := map[broker.QueueRef]*eventCursor{}
	for ctx.Err() == nil {
		queues := l.current()
		now := l.clock.Now()
		reads := make([]broker.EventsCursor, 0, len(queues))
		live := make(map[broker.QueueRef]bool, len(queues))
		for _, ref := range queues {
			live[ref] = true
			c := cursors[ref]
			if c == nil {
				c = &eventCursor{after: "0"}
				cursors[ref] = c
			}
			if !now.Before(c.retryAt) {
				reads = append(reads, broker.EventsCursor{Queue: ref, After: c.after})
			}
		}
		for ref := range cursors {
			if !live[ref] {
				delete(cursors, ref)
			}
		}
		more := false // some queue may hold more than one batch
		var failed []error
		for i, r := range l.engine.ReadEventsMany(ctx, reads, eventsBatch) {
			ref := reads[i].Queue
			if r.Err != nil {
				cursors[ref].retryAt = now.Add(loopErrorBackoff)
				failed = append(failed, r.Err)
				continue
			}
			more = more || len(r.Events) >= eventsBatch
			l.handleEvents(ctx, ref, cursors[ref], r.Events)
		}
		if len(failed) > 0 && ctx.Err() == nil {
			log.Error(failed[0], "Read events", "failedQueues", len(failed))
		}
		if !more {
			_ = wait.Sleep(ctx, eventsPoll)
		}
	}
}

// handleEvents wakes the Tasks of a queue's new events and, when one of them
// changes the backlog or the pause, the Queue.
func (l *queueLoops) handleEvents(ctx context.Context, ref broker.QueueRef, c *eventCursor, evs []broker.Event) {
	ids := make(map[string]bool, len(evs))
	for _, ev := range evs {
		c.after = ev.ID
		switch ev.Type {
		case broker.EventQueuePaused, broker.EventQueueResumed, broker.EventQueued, broker.EventRetried:
			c.pendingKick = true
		}
		// A progress report changes nothing a Task's status shows.
		if ev.TaskID != "" && ev.Type != broker.EventProgress {
			ids[ev.TaskID] = true
		}
	}
	for id := range ids {
		l.wakeTasks(ctx, ref.Namespace, id)
	}
	// Tasks submitted over HTTP exist only in Redis: the first one must
	// scale a queue up from zero now, not at the next poll. Later ones are
	// batched to one Queue reconcile per queueKickEvery.
	if c.pendingKick && l.clock.Since(c.lastKick) >= queueKickEvery {
		c.pendingKick, c.lastKick = false, l.clock.Now()
		select {
		case l.queueEvents <- event.TypedGenericEvent[*dtqv1alpha1.Queue]{Object: &dtqv1alpha1.Queue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}}:
		case <-ctx.Done():
		}
	}
}

// wakeTasks enqueues the Task whose UID is id and the Tasks mirroring it as
// duplicates: the unfinished ones, and the Failed or DeadLettered ones, which
// follow their task when it runs again (a retry, a dead-letter requeue).
func (l *queueLoops) wakeTasks(ctx context.Context, ns, id string) {
	for _, index := range []string{indexTaskID, indexMirrorOf} {
		var list dtqv1alpha1.TaskList
		if err := l.client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{index: id}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "List Tasks by index", "index", index, "task_id", id)
			continue
		}
		for i := range list.Items {
			if t := &list.Items[i]; !t.Status.State.Finished() || failedRun(t.Status.State) {
				l.send(ctx, t)
			}
		}
	}
}

func (l *queueLoops) send(ctx context.Context, t *dtqv1alpha1.Task) {
	select {
	case l.taskEvents <- event.TypedGenericEvent[*dtqv1alpha1.Task]{Object: t}:
	case <-ctx.Done():
	}
}

// promote runs the delay/retry scheduler of every queue: PromoteDue is one
// atomic script, so this loop and the workers' own scheduler loops never
// conflict. A queue is checked again when its next member is due, and at
// least every promoteMaxSleep (another process may schedule an earlier one).
func (l *queueLoops) promote(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("scheduler")
	next := map[broker.QueueRef]time.Time{} // when to check each queue
	for ctx.Err() == nil {
		queues := l.current()
		now := l.clock.Now()
		var due []broker.QueueRef
		live := make(map[broker.QueueRef]bool, len(queues))
		for _, ref := range queues {
			live[ref] = true
			if at, ok := next[ref]; !ok || !at.After(now) {
				due = append(due, ref)
			}
		}
		for ref := range next {
			if !live[ref] {
				delete(next, ref)
			}
		}
		var failed []error
		if len(due) > 0 {
			for i, p := range l.engine.PromoteDueMany(ctx, due, promoteBatch) {
				switch {
				case p.Err != nil:
					failed = append(failed, p.Err)
					next[due[i]] = now.Add(loopErrorBackoff)
				case p.Moved == promoteBatch: // more are due
					next[due[i]] = now
				case p.Next.IsZero():
					next[due[i]] = now.Add(promoteMaxSleep)
				default:
					next[due[i]] = now.Add(min(max(p.Next.Sub(now), 0), promoteMaxSleep))
				}
			}
		}
		if len(failed) > 0 && ctx.Err() == nil {
			log.Error(failed[0], "Promote due tasks", "failedQueues", len(failed))
		}
		wake := now.Add(promoteMaxSleep)
		for _, at := range next {
			if at.Before(wake) {
				wake = at
			}
		}
		_ = wait.Sleep(ctx, wake.Sub(l.clock.Now()))
	}
}

// resync cancels orphaned tasks, checks the flow control slots and wakes
// every unfinished Task.
func (l *queueLoops) resync(ctx context.Context) {
	l.sweepOrphans(ctx)
	l.checkFlowSlots(ctx)
	var list dtqv1alpha1.TaskList
	if err := l.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List Tasks for resync")
		return
	}
	for i := range list.Items {
		if t := &list.Items[i]; !t.Status.State.Finished() {
			l.send(ctx, t)
		}
	}
}
