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
	"github.com/dtq-dev/dtq/internal/broker"
)

// Timings of the per-queue loops.
const (
	queueListPeriod  = 2 * time.Second        // how often the set of Queues is re-read
	eventsBlock      = 2 * time.Second        // XREAD block of the events reader
	eventsBatch      = 500                    // events per read
	promoteMaxSleep  = time.Second            // the scheduler re-checks at least this often
	promoteBatch     = 500                    // schedule members promoted per call
	loopErrorBackoff = 500 * time.Millisecond // after a Redis error
	queueKickEvery   = time.Second            // at most one Queue reconcile per queue per this, from events
)

// queueLoops is the manager's leader-elected Runnable that runs, for every
// Queue, the status syncer (reads the queue's events stream and wakes the
// affected Tasks and the Queue) and the delay/retry scheduler (PromoteDue, so
// delayed tasks are promoted even when the queue is scaled to zero). It also
// re-reads every unfinished Task each resync period, which covers events the
// syncer missed, and, when it starts and on every resync, cancels the tasks
// whose Task was deleted while no manager ran (sweepOrphans).
type queueLoops struct {
	client       client.Client
	engine       Engine
	clock        clock.Clock
	taskEvents   chan<- event.TypedGenericEvent[*dtqv1alpha1.Task]
	queueEvents  chan<- event.TypedGenericEvent[*dtqv1alpha1.Queue]
	resyncPeriod time.Duration
}

// NeedLeaderElection: one manager reads events and promotes at a time.
func (l *queueLoops) NeedLeaderElection() bool { return true }

// Start supervises one pair of loops per Queue until ctx ends.
func (l *queueLoops) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("queue-loops")
	running := map[broker.QueueRef]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, stop := range running {
			stop()
		}
		wg.Wait()
	}()
	list := time.NewTicker(queueListPeriod)
	defer list.Stop()
	resync := time.NewTicker(l.resyncPeriod)
	defer resync.Stop()
	l.sweepOrphans(ctx)
	for {
		var queues dtqv1alpha1.QueueList
		if err := l.client.List(ctx, &queues); err != nil {
			log.Error(err, "List Queues")
		} else {
			seen := map[broker.QueueRef]bool{}
			for i := range queues.Items {
				q := &queues.Items[i]
				ref := queueRefOf(q)
				seen[ref] = true
				if _, ok := running[ref]; ok {
					continue
				}
				qctx, stop := context.WithCancel(ctx)
				running[ref] = stop
				wg.Add(2)
				go func() { defer wg.Done(); l.readEvents(qctx, ref) }()
				go func() { defer wg.Done(); l.promote(qctx, ref) }()
			}
			for ref, stop := range running {
				if !seen[ref] {
					stop()
					delete(running, ref)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-list.C:
		case <-resync.C:
			l.resync(ctx)
		}
	}
}

// readEvents follows the queue's events stream. It starts from the oldest
// kept event, so transitions that happened while no manager ran still reach
// their Tasks (a reconcile of an up-to-date Task writes nothing).
func (l *queueLoops) readEvents(ctx context.Context, ref broker.QueueRef) {
	log := ctrl.LoggerFrom(ctx).WithName("status-syncer").WithValues("queue", ref.String())
	after := "0"
	var lastKick time.Time
	pendingKick := false
	for ctx.Err() == nil {
		block := eventsBlock
		if pendingKick {
			block = max(queueKickEvery-l.clock.Since(lastKick), time.Millisecond)
		}
		evs, err := l.engine.ReadEvents(ctx, ref, after, eventsBatch, block)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "Read events")
				sleepCtx(ctx, loopErrorBackoff)
			}
			continue
		}
		ids := make(map[string]bool, len(evs))
		for _, ev := range evs {
			after = ev.ID
			switch ev.Type {
			case broker.EventQueuePaused, broker.EventQueueResumed, broker.EventQueued, broker.EventRetried:
				pendingKick = true
			}
			if ev.TaskID != "" {
				ids[ev.TaskID] = true
			}
		}
		for id := range ids {
			l.wakeTasks(ctx, ref.Namespace, id)
		}
		// Tasks submitted over HTTP exist only in Redis: the first one must
		// scale a queue up from zero now, not at the next poll. Later ones
		// are batched to one Queue reconcile per queueKickEvery.
		if pendingKick && l.clock.Since(lastKick) >= queueKickEvery {
			pendingKick, lastKick = false, l.clock.Now()
			select {
			case l.queueEvents <- event.TypedGenericEvent[*dtqv1alpha1.Queue]{Object: &dtqv1alpha1.Queue{
				ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}}:
			case <-ctx.Done():
			}
		}
	}
}

// wakeTasks enqueues the Task whose UID is id and the unfinished Tasks
// mirroring it as duplicates.
func (l *queueLoops) wakeTasks(ctx context.Context, ns, id string) {
	for _, index := range []string{indexTaskID, indexMirrorOf} {
		var list dtqv1alpha1.TaskList
		if err := l.client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{index: id}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "List Tasks by index", "index", index, "taskID", id)
			continue
		}
		for i := range list.Items {
			if t := &list.Items[i]; !t.Status.State.Finished() {
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

// promote runs the queue's delay/retry scheduler: PromoteDue is one atomic
// script, so this loop and the workers' own scheduler loops never conflict.
func (l *queueLoops) promote(ctx context.Context, ref broker.QueueRef) {
	log := ctrl.LoggerFrom(ctx).WithName("scheduler").WithValues("queue", ref.String())
	for ctx.Err() == nil {
		moved, next, err := l.engine.PromoteDue(ctx, ref, promoteBatch)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "Promote due tasks")
			}
			sleepCtx(ctx, loopErrorBackoff)
			continue
		}
		if moved == promoteBatch {
			continue
		}
		wait := promoteMaxSleep
		if !next.IsZero() {
			wait = min(max(next.Sub(l.clock.Now()), 0), promoteMaxSleep)
		}
		sleepCtx(ctx, wait)
	}
}

// resync cancels orphaned tasks and wakes every unfinished Task.
func (l *queueLoops) resync(ctx context.Context) {
	l.sweepOrphans(ctx)
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

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
