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
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/tracing"
)

// Backpressure and wait intervals of the Task controller.
const (
	queueFullRetry     = 3 * time.Second
	queueNotReadyRetry = time.Second
	// conflictRetry is the wait before looking again at a Task whose status
	// write lost to a newer version the cache has not shown yet.
	conflictRetry = 50 * time.Millisecond
)

// TaskReconciler submits Task objects to the engine and mirrors the engine's
// task record into their status. It uses no finalizer: deleting an unfinished
// Task cancels it from the informer's delete event (see tombstones), so a task
// costs no extra API writes for finalizer bookkeeping.
type TaskReconciler struct {
	client.Client
	Engine   Engine
	Clock    clock.Clock
	Recorder events.EventRecorder
	// CoalesceWindow delays the status write of a task that was just queued or
	// just started, so a fast task costs one status write.
	CoalesceWindow time.Duration
	// RoutineEvents also records the Normal Submitted and Succeeded Events.
	RoutineEvents bool
	// APIReader reads a payload the cache dropped for its size (task_payload.go).
	APIReader client.Reader

	tombstones *tombstones
	// written is the last status this manager wrote per task UID: the cache
	// may lag behind our own write, and comparing with it avoids writing the
	// same status twice.
	written sync.Map // types.UID -> *dtqv1alpha1.TaskStatus
	// submitted is the task in Redis each Task this manager submitted
	// follows (its own, or the original of a duplicate), so later syncs read
	// it back instead of reading the payload again.
	submitted sync.Map // types.UID -> submission
	// unreachable holds the Tasks of queues whose Redis did not answer.
	unreachable unreachableQueues
}

// submission is what submitting a Task told: the task ID it follows, and
// whether its request matched that task's (nil: not compared).
type submission struct {
	id      string
	matches *bool
}

// +kubebuilder:rbac:groups=dtq.dev,resources=tasks,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=dtq.dev,resources=tasks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=dtq.dev,resources=queues,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile cancels the Redis tasks of deleted Tasks, then submits or syncs the Task.
func (r *TaskReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.cancelDeleted(ctx, req.NamespacedName); err != nil {
		return ctrl.Result{}, err
	}
	task := &dtqv1alpha1.Task{}
	if err := r.Get(ctx, req.NamespacedName, task); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !task.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("task_id", task.UID, "queue", task.Spec.Queue, "attempt", task.Status.Attempt))
	q := types.NamespacedName{Namespace: task.Namespace, Name: task.Spec.Queue}
	if d := r.unreachable.wait(q, r.Clock.Now()); d > 0 {
		return ctrl.Result{RequeueAfter: d}, nil
	}
	res, err := r.reconcile(ctx, task)
	r.unreachable.observe(q, err, r.Clock.Now())
	return res, err
}

func (r *TaskReconciler) reconcile(ctx context.Context, task *dtqv1alpha1.Task) (ctrl.Result, error) {
	prev := r.lastStatus(task)
	if prev.State.Finished() {
		return r.reconcileFinished(ctx, task, prev)
	}
	queue := &dtqv1alpha1.Queue{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: task.Spec.Queue}, queue); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get queue %s: %w", task.Spec.Queue, err)
		}
		queue = nil
	}

	next := prev.DeepCopy()
	next.ObservedGeneration = task.Generation
	// Admission takes a raised retryGeneration only from a finished task, so a
	// value seen here came with the Task and retries nothing.
	next.ObservedRetryGeneration = task.Spec.RetryGeneration
	var o outcome
	switch {
	case queue == nil || !queue.DeletionTimestamp.IsZero():
		var err error
		if o, err = r.queueGone(ctx, task, next, queue); err != nil {
			return ctrl.Result{}, err
		}
	default:
		var err error
		if o, err = r.sync(ctx, task, prev, next); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.setLifecycleConditions(next, task)

	if !statusChanged(prev, next) {
		return r.after(ctx, task, next, queue, o)
	}
	if hold := r.holdFor(next, o, r.Clock.Now()); hold > 0 {
		return ctrl.Result{RequeueAfter: hold}, nil
	}
	if err := r.writeStatus(ctx, task, next); err != nil {
		if apierrors.IsConflict(err) {
			// The cached Task is older than the stored one (our previous
			// write or a spec change not seen yet): look again shortly.
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	r.recordMilestones(task, prev, next)
	return r.after(ctx, task, next, queue, o)
}

// outcome is what a sync learned besides the status.
type outcome struct {
	info    *broker.TaskInfo // the task (own or the original) when known
	requeue time.Duration    // backpressure or a not-yet-ready queue
}

// sync submits the task, or reads it back when it is already in Redis
// (readBack), and computes the status from the engine's answer. Submit with
// the UID as ID returns an existing task, so a re-reconcile after a crash
// never ingests twice.
func (r *TaskReconciler) sync(ctx context.Context, task *dtqv1alpha1.Task, prev, next *dtqv1alpha1.TaskStatus) (outcome, error) {
	q := queueRef(task)
	if task.Spec.Cancel {
		done, err := r.cancel(ctx, task, next)
		if done || err != nil {
			return outcome{}, err
		}
	}
	if o, done, err := r.readBack(ctx, task, prev, next); done || err != nil {
		return o, err
	}
	req := submitRequest(task)
	if err := r.loadPayload(ctx, task, &req); err != nil {
		if errors.Is(err, errTaskGone) {
			return outcome{}, nil
		}
		return outcome{}, err
	}
	ctx = tracing.WithTraceParent(ctx, task.Annotations[dtqv1alpha1.AnnotationTraceParent])
	res, err := r.Engine.Submit(ctx, q, req)
	switch {
	case err == nil:
		dup := res.Task.ID != string(task.UID)
		r.submitted.Store(task.UID, submission{id: res.Task.ID, matches: res.RequestMatches})
		applyTaskInfo(next, task, res.Task, dup)
		r.setSubmitted(next, task, res.Task, dup)
		r.setRequestMatch(next, task, res.Task.ID, res.RequestMatches)
		return outcome{info: &res.Task}, nil
	case errors.Is(err, broker.ErrIdempotencyInProgress):
		var e *broker.Error
		errors.As(err, &e)
		info, gerr := r.Engine.GetTask(ctx, q, e.TaskID)
		switch {
		case errors.Is(gerr, broker.ErrTaskNotFound): // it vanished between the two calls: retry
			return outcome{requeue: queueNotReadyRetry}, nil
		case gerr != nil:
			return outcome{}, fmt.Errorf("get original task %s: %w", e.TaskID, gerr)
		}
		r.submitted.Store(task.UID, submission{id: e.TaskID, matches: e.RequestMatches})
		applyTaskInfo(next, task, info, true)
		r.setSubmitted(next, task, info, true) // a replay if it finished between the two calls
		r.setRequestMatch(next, task, e.TaskID, e.RequestMatches)
		return outcome{info: &info}, nil
	case errors.Is(err, broker.ErrIdempotencyKeyMismatch):
		var e *broker.Error
		errors.As(err, &e)
		r.rejectMismatch(next, task, e.TaskID)
		return outcome{}, nil
	case errors.Is(err, broker.ErrQueueNotFound):
		next.State = dtqv1alpha1.TaskPending
		r.setCondition(next, task, dtqv1alpha1.TaskSubmitted, metav1.ConditionFalse, dtqv1alpha1.ReasonQueueNotFound,
			fmt.Sprintf("Queue %q is not set up in Redis yet", task.Spec.Queue))
		return outcome{requeue: queueNotReadyRetry}, nil
	case errors.Is(err, broker.ErrQueueFull):
		next.State = dtqv1alpha1.TaskPending
		r.setCondition(next, task, dtqv1alpha1.TaskSubmitted, metav1.ConditionFalse, dtqv1alpha1.ReasonQueueFull,
			fmt.Sprintf("Queue is full (%s); submission is retried", err))
		return outcome{requeue: queueFullRetry}, nil
	case errors.Is(err, broker.ErrPayloadTooLarge), errors.Is(err, broker.ErrInvalidTask):
		reason := dtqv1alpha1.ReasonInvalidTask
		if errors.Is(err, broker.ErrPayloadTooLarge) {
			reason = dtqv1alpha1.ReasonPayloadTooLarge
		}
		r.finishUnsubmitted(next, task, dtqv1alpha1.TaskFailed, reason, err.Error())
		return outcome{}, nil
	default:
		return outcome{}, fmt.Errorf("submit task: %w", err)
	}
}

// cancel handles spec.cancel. A task this Task owns in Redis is cancelled
// there and then synced as usual (done=false). A Task with no task of its own
// (never submitted, or a duplicate mirroring another Task's) ends Cancelled
// without touching Redis (done=true): cancelling a mirror never cancels the
// original.
func (r *TaskReconciler) cancel(ctx context.Context, task *dtqv1alpha1.Task, next *dtqv1alpha1.TaskStatus) (bool, error) {
	_, err := r.Engine.Cancel(ctx, queueRef(task), string(task.UID))
	switch {
	case err == nil, errors.Is(err, broker.ErrTaskTerminal):
		return false, nil
	case errors.Is(err, broker.ErrTaskNotFound):
		r.finishUnsubmitted(next, task, dtqv1alpha1.TaskCancelled, dtqv1alpha1.ReasonCancelledBeforeSubmit,
			"Cancelled by spec.cancel before this Task had work of its own in the queue")
		if next.Idempotency != nil {
			next.Idempotency.State = dtqv1alpha1.IdempotencyFailed
		}
		return true, nil
	default:
		return false, fmt.Errorf("cancel task: %w", err)
	}
}

// finishUnsubmitted ends a Task that has no task in Redis.
func (r *TaskReconciler) finishUnsubmitted(next *dtqv1alpha1.TaskStatus, task *dtqv1alpha1.Task, state dtqv1alpha1.TaskState, reason, msg string) {
	next.State = state
	next.FinishedAt = ptrTime(r.now())
	next.LastError = truncate(msg, maxLastError)
	r.setCondition(next, task, dtqv1alpha1.TaskSubmitted, metav1.ConditionFalse, reason, msg)
}

// setSubmitted sets the Submitted condition of a Task whose task (own, or the
// original it mirrors when dup) is info.
func (r *TaskReconciler) setSubmitted(next *dtqv1alpha1.TaskStatus, task *dtqv1alpha1.Task, info broker.TaskInfo, dup bool) {
	switch {
	case dup && !info.State.Terminal():
		r.setMirroring(next, task, info.ID)
	case dup:
		r.setCondition(next, task, dtqv1alpha1.TaskSubmitted, metav1.ConditionTrue, dtqv1alpha1.ReasonDuplicate,
			fmt.Sprintf("Idempotency key %q is owned by task %s; this Task replays its outcome", task.Spec.IdempotencyKey, info.ID))
	default:
		r.setCondition(next, task, dtqv1alpha1.TaskSubmitted, metav1.ConditionTrue, dtqv1alpha1.ReasonSubmitted,
			"Task is in the queue")
	}
}

// setRequestMatch records whether the Task's type and payload matched those
// of the task owning its key, owner (matches nil: no comparison, the Task
// owns its key or the owner has no fingerprint). A mismatch gets the
// RequestMismatch condition: the Task mirrors the owner, and its own payload
// never runs.
func (r *TaskReconciler) setRequestMatch(next *dtqv1alpha1.TaskStatus, task *dtqv1alpha1.Task, owner string, matches *bool) {
	if next.Idempotency != nil {
		next.Idempotency.RequestMatches = matches
	}
	if matches == nil || *matches {
		meta.RemoveStatusCondition(&next.Conditions, dtqv1alpha1.TaskRequestMismatch)
		return
	}
	r.setCondition(next, task, dtqv1alpha1.TaskRequestMismatch, metav1.ConditionTrue, dtqv1alpha1.ReasonReplayed,
		fmt.Sprintf("Idempotency key %q belongs to task %s, submitted with another type or payload; this Task mirrors that task and its own payload never runs",
			task.Spec.IdempotencyKey, owner))
}

// rejectMismatch ends a Task whose key belongs to task owner, submitted with
// another type or payload, on a Queue that rejects such reuse: Failed, never
// submitted, nothing written in Redis.
func (r *TaskReconciler) rejectMismatch(next *dtqv1alpha1.TaskStatus, task *dtqv1alpha1.Task, owner string) {
	msg := fmt.Sprintf("Idempotency key %q belongs to task %s, submitted with another type or payload; the Queue rejects such reuse (spec.idempotency.onMismatch: Reject), so this Task never runs",
		task.Spec.IdempotencyKey, owner)
	r.finishUnsubmitted(next, task, dtqv1alpha1.TaskFailed, dtqv1alpha1.ReasonIdempotencyKeyMismatch, msg)
	next.Idempotency = &dtqv1alpha1.TaskIdempotency{Key: task.Spec.IdempotencyKey, TaskID: owner, RequestMatches: ptr.To(false)}
	r.setCondition(next, task, dtqv1alpha1.TaskRequestMismatch, metav1.ConditionTrue, dtqv1alpha1.ReasonIdempotencyKeyMismatch, msg)
}

// setMirroring says the Task mirrors the in-progress task id owning its key.
func (r *TaskReconciler) setMirroring(next *dtqv1alpha1.TaskStatus, task *dtqv1alpha1.Task, id string) {
	r.setCondition(next, task, dtqv1alpha1.TaskSubmitted, metav1.ConditionTrue, dtqv1alpha1.ReasonIdempotencyInProgress,
		fmt.Sprintf("Task %s owns idempotency key %q and is in progress; this Task mirrors it", id, task.Spec.IdempotencyKey))
}

func (r *TaskReconciler) setCondition(st *dtqv1alpha1.TaskStatus, task *dtqv1alpha1.Task, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: task.Generation, LastTransitionTime: metav1.NewTime(r.now()),
	})
}

// holdFor says how long to delay a status write so that a task that was just
// queued or just started gets one write for several quick transitions. The
// write happens at the latest when the hold ends (the reconcile is requeued).
func (r *TaskReconciler) holdFor(next *dtqv1alpha1.TaskStatus, o outcome, now time.Time) time.Duration {
	if o.info == nil {
		return 0
	}
	var since time.Time
	switch next.State {
	case dtqv1alpha1.TaskQueued:
		since = o.info.AvailableAt
		if since.IsZero() {
			since = o.info.CreatedAt
		}
	case dtqv1alpha1.TaskRunning:
		since = o.info.StartedAt
	default:
		return 0
	}
	return max(since.Add(r.CoalesceWindow).Sub(now), 0)
}

// after decides when to look at the Task again.
func (r *TaskReconciler) after(ctx context.Context, task *dtqv1alpha1.Task, st *dtqv1alpha1.TaskStatus, queue *dtqv1alpha1.Queue, o outcome) (ctrl.Result, error) {
	if st.State.Finished() {
		return r.collectAfter(ctx, task, st, queue)
	}
	return ctrl.Result{RequeueAfter: o.requeue}, nil
}

// writeStatus replaces the Task's status, conditional on the resourceVersion
// of the cached Task (a conflict when the cache is behind). An update, not a
// patch: applying the patch was about a tenth of the API server's CPU in the
// CR path (CPU profile of its benchmark, docs/benchmarks.md). The request
// carries the Task's identity and status only (statusUpdate).
func (r *TaskReconciler) writeStatus(ctx context.Context, task *dtqv1alpha1.Task, next *dtqv1alpha1.TaskStatus) error {
	task.Status = *next
	if err := r.Status().Update(ctx, statusUpdate(task)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("write task status: %w", err)
	}
	r.written.Store(task.UID, next.DeepCopy())
	return nil
}

// statusUpdate is the body of a status write of t: its name, UID,
// resourceVersion and status. The status subresource takes nothing else from
// the body (the API server copies spec and metadata from the stored Task, and
// its field manager ignores both there), and every other byte is one more for
// the API server to decode, coerce and diff: the spec with its payload, labels,
// annotations.
func statusUpdate(t *dtqv1alpha1.Task) *dtqv1alpha1.Task {
	return &dtqv1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace, UID: t.UID, ResourceVersion: t.ResourceVersion},
		Status:     *t.Status.DeepCopy(),
	}
}

// lastStatus is the status this manager last wrote, else the cached one: the
// cache can lag behind our own write, and this controller is the only writer.
func (r *TaskReconciler) lastStatus(task *dtqv1alpha1.Task) *dtqv1alpha1.TaskStatus {
	if v, ok := r.written.Load(task.UID); ok {
		return v.(*dtqv1alpha1.TaskStatus).DeepCopy()
	}
	return task.Status.DeepCopy()
}

func statusChanged(prev, next *dtqv1alpha1.TaskStatus) bool {
	return !equality.Semantic.DeepEqual(prev, next)
}

// collectFinished deletes a finished Task after its ttlSecondsAfterFinished.
func (r *TaskReconciler) collectFinished(ctx context.Context, task *dtqv1alpha1.Task, st *dtqv1alpha1.TaskStatus) (ctrl.Result, error) {
	var queue *dtqv1alpha1.Queue
	if task.Spec.TTLSecondsAfterFinished == nil {
		q := &dtqv1alpha1.Queue{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: task.Namespace, Name: task.Spec.Queue}, q); err == nil {
			queue = q
		} else if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get queue %s: %w", task.Spec.Queue, err)
		}
	}
	return r.collectAfter(ctx, task, st, queue)
}

func (r *TaskReconciler) collectAfter(ctx context.Context, task *dtqv1alpha1.Task, st *dtqv1alpha1.TaskStatus, queue *dtqv1alpha1.Queue) (ctrl.Result, error) {
	ttl := task.Spec.TTLSecondsAfterFinished
	if ttl == nil && queue != nil {
		ttl = queue.Spec.TTLSecondsAfterFinished
	}
	if ttl == nil {
		return ctrl.Result{}, nil
	}
	// A duplicate's finishedAt is the original's, possibly long before this
	// Task existed: count from the later of the two, so a re-applied manifest
	// is not deleted (and re-applied by GitOps) at once.
	finished := task.CreationTimestamp.Time
	if st.FinishedAt != nil && st.FinishedAt.After(finished) {
		finished = st.FinishedAt.Time
	}
	if left := finished.Add(time.Duration(*ttl) * time.Second).Sub(r.now()); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Deleting finished Task after ttlSecondsAfterFinished", "ttl", *ttl)
	err := r.Delete(ctx, task, client.Preconditions{UID: &task.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("delete finished task: %w", err)
	}
	return ctrl.Result{}, nil
}

func (r *TaskReconciler) now() time.Time { return r.Clock.Now().UTC().Truncate(time.Second) }

// SetupWithManager watches Tasks (delete events cancel), Queues (a Queue that
// appears wakes the Tasks waiting for it) and the status syncer's channel.
func (r *TaskReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int, syncer <-chan event.TypedGenericEvent[*dtqv1alpha1.Task]) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("task").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Watches(&dtqv1alpha1.Task{}, r.taskHandler()).
		Watches(&dtqv1alpha1.Queue{}, handler.EnqueueRequestsFromMapFunc(r.waitingTasks)).
		WatchesRawSource(source.Channel(syncer, &handler.TypedEnqueueRequestForObject[*dtqv1alpha1.Task]{})).
		Complete(r)
}

// taskHandler enqueues Tasks on create, on spec changes (spec.cancel) and on
// delete; status-only updates (our own writes) are not reconciled again. A
// deleted unfinished Task leaves a tombstone so Reconcile cancels its task.
func (r *TaskReconciler) taskHandler() handler.EventHandler {
	enqueue := func(o client.Object, q workqueueT) {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueueT) { enqueue(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueueT) {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				enqueue(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueueT) {
			t, ok := e.Object.(*dtqv1alpha1.Task)
			if !ok {
				return
			}
			st := r.lastStatus(t)
			r.written.Delete(t.UID)
			r.submitted.Delete(t.UID)
			if st.State.Finished() {
				return
			}
			r.tombstones.add(client.ObjectKeyFromObject(t), tombstone{queue: queueRef(t), id: string(t.UID)})
			enqueue(t, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueueT) { enqueue(e.Object, q) },
	}
}

// waitingTasks maps a Queue to its Tasks that are not submitted yet, and a
// Queue being deleted (or gone) to all its unfinished Tasks (see queueGone).
func (r *TaskReconciler) waitingTasks(ctx context.Context, o client.Object) []reconcile.Request {
	opts := []client.ListOption{client.InNamespace(o.GetNamespace()), client.MatchingFields{indexWaitingQueue: o.GetName()}}
	deleting := o.GetDeletionTimestamp() != nil
	if deleting {
		opts = opts[:1] // a namespace's Tasks, filtered below: Queues are rarely deleted
	}
	var list dtqv1alpha1.TaskList
	if err := r.List(ctx, &list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List Tasks of Queue", "queue", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		t := &list.Items[i]
		if deleting && (t.Spec.Queue != o.GetName() || t.Status.State.Finished()) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(t)})
	}
	return reqs
}

func queueRef(t *dtqv1alpha1.Task) broker.QueueRef {
	return broker.QueueRef{Namespace: t.Namespace, Name: t.Spec.Queue}
}
