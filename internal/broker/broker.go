package broker

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"
)

var errNotImplemented = errors.New("broker: not implemented yet")

// Broker runs the engine's operations against one Redis (single node or cluster).
type Broker struct {
	rdb   redis.UniversalClient
	clock clock.PassiveClock
}

// Option configures a Broker.
type Option func(*Broker)

// WithClock injects the clock used for timestamps, due times and expiry.
func WithClock(c clock.PassiveClock) Option { return func(b *Broker) { b.clock = c } }

// New returns a Broker on rdb.
func New(rdb redis.UniversalClient, opts ...Option) *Broker {
	b := &Broker{rdb: rdb, clock: clock.RealClock{}}
	for _, o := range opts {
		o(b)
	}
	return b
}

// EnsureQueue writes the queue's config and creates the consumer group "workers"
// on its ten streams (MKSTREAM). Idempotent; call it again to change the config.
func (b *Broker) EnsureQueue(ctx context.Context, q QueueRef, cfg QueueConfig) error {
	return errNotImplemented
}

// QueueConfig reads the config EnsureQueue wrote; ErrQueueNotFound when absent.
func (b *Broker) QueueConfig(ctx context.Context, q QueueRef) (QueueConfig, error) {
	return QueueConfig{}, errNotImplemented
}

// Submit ingests a task with the five idempotency cases of DESIGN section 4 in one
// script: replay (Duplicate), in progress (ErrIdempotencyInProgress with TaskID),
// stale record (new work), full (ErrQueueFull, nothing written), new task. Submit
// with an ID that already exists returns that task with Duplicate set, so a
// caller deriving IDs (the controller uses the CR's UID) never ingests twice.
func (b *Broker) Submit(ctx context.Context, q QueueRef, req SubmitRequest) (SubmitResult, error) {
	return SubmitResult{}, errNotImplemented
}

// GetTask returns the task record and its result; ErrTaskNotFound when absent.
func (b *Broker) GetTask(ctx context.Context, q QueueRef, id string) (TaskInfo, error) {
	return TaskInfo{}, errNotImplemented
}

// Idempotency returns the record for key; ErrTaskNotFound when there is none.
func (b *Broker) Idempotency(ctx context.Context, q QueueRef, key string) (IdempotencyRecord, error) {
	return IdempotencyRecord{}, errNotImplemented
}

// Cancel ends a Pending, Queued or Retrying task at once (returns StateCancelled)
// and flags a Running one (returns StateRunning; the worker cancels its context).
// ErrTaskTerminal for a finished task, ErrTaskNotFound for an unknown one.
func (b *Broker) Cancel(ctx context.Context, q QueueRef, id string) (State, error) {
	return "", errNotImplemented
}

// Pause stops workers from reading the queue; Resume undoes it.
func (b *Broker) Pause(ctx context.Context, q QueueRef) error  { return errNotImplemented }
func (b *Broker) Resume(ctx context.Context, q QueueRef) error { return errNotImplemented }

// Paused reports whether the queue is paused.
func (b *Broker) Paused(ctx context.Context, q QueueRef) (bool, error) {
	return false, errNotImplemented
}

// Stats returns the queue's backlog.
func (b *Broker) Stats(ctx context.Context, q QueueRef) (QueueStats, error) {
	return QueueStats{}, errNotImplemented
}

// ReadEvents returns up to count events after the stream ID after ("0" for the
// oldest kept), blocking up to block when there are none (0: do not block).
func (b *Broker) ReadEvents(ctx context.Context, q QueueRef, after string, count int, block time.Duration) ([]Event, error) {
	return nil, errNotImplemented
}

// Read delivers up to count new entries to consumer across the ten bands, p9
// first, blocking up to block when all are empty. Paused queues return nothing.
func (b *Broker) Read(ctx context.Context, q QueueRef, consumer string, count int, block time.Duration) ([]Delivery, error) {
	return nil, errNotImplemented
}

// Reclaim takes over up to count entries idle longer than minIdle (the visibility
// timeout) with XAUTOCLAIM, p9 first; the deliveries have Reclaimed set.
func (b *Broker) Reclaim(ctx context.Context, q QueueRef, consumer string, minIdle time.Duration, count int) ([]Delivery, error) {
	return nil, errNotImplemented
}

// Start decides, in one script, whether d runs: absorbed duplicate, cancelled,
// expired, terminal, or (a reclaimed entry, attempt+1) past maxAttempts and so
// dead-lettered, all ACK the entry and return Run false; otherwise the task moves
// to Running with workerID and the TaskStarted event, and Run is true.
func (b *Broker) Start(ctx context.Context, q QueueRef, workerID string, d Delivery) (StartResult, error) {
	return StartResult{}, errNotImplemented
}

// Complete records an execution's outcome in the seed's write order (task hash,
// event, result, idempotency record with SET XX KEEPTTL) and ends with XACK+XDEL,
// all in one script. It returns the state the task moved to (Succeeded, Retrying,
// Failed, DeadLettered or Cancelled).
func (b *Broker) Complete(ctx context.Context, q QueueRef, d Delivery, out Outcome) (State, error) {
	return "", errNotImplemented
}

// Touch resets the idle time of in-flight entries (XCLAIM JUSTID, idle 0) so a
// live worker's long tasks are not reclaimed.
func (b *Broker) Touch(ctx context.Context, q QueueRef, consumer string, ds []Delivery) error {
	return errNotImplemented
}

// CancelRequested returns the subset of ids whose cancel was requested.
func (b *Broker) CancelRequested(ctx context.Context, q QueueRef, ids []string) ([]string, error) {
	return nil, errNotImplemented
}

// PromoteDue moves up to limit due schedule members to their streams in one
// script: Pending keeps its attempt, Retrying gets attempt+1, expired ones end
// Expired, cancelled or missing ones are dropped. Safe to call concurrently.
// It returns how many were moved and the due time of the next member (zero if none).
func (b *Broker) PromoteDue(ctx context.Context, q QueueRef, limit int) (moved int, next time.Time, err error) {
	return 0, time.Time{}, errNotImplemented
}

// DeadLetters lists up to limit dead-letter entries, newest first.
func (b *Broker) DeadLetters(ctx context.Context, q QueueRef, limit int) ([]DeadLetter, error) {
	return nil, errNotImplemented
}

// Requeue puts a DeadLettered task back on its stream with attempt 1 and resets
// its idempotency record to processing (full TTL).
func (b *Broker) Requeue(ctx context.Context, q QueueRef, id string) (TaskInfo, error) {
	return TaskInfo{}, errNotImplemented
}

// Discard removes a task's dead-letter entry; the task stays DeadLettered.
func (b *Broker) Discard(ctx context.Context, q QueueRef, id string) error { return errNotImplemented }

// PurgeDeadLetters empties the dead-letter stream exactly and returns how many went.
func (b *Broker) PurgeDeadLetters(ctx context.Context, q QueueRef) (int64, error) {
	return 0, errNotImplemented
}

// Heartbeat writes the worker's record with a TTL of three intervals.
func (b *Broker) Heartbeat(ctx context.Context, q QueueRef, w WorkerInfo, interval time.Duration) error {
	return errNotImplemented
}

// Workers lists the queue's live worker records.
func (b *Broker) Workers(ctx context.Context, q QueueRef) ([]WorkerInfo, error) {
	return nil, errNotImplemented
}

// RemoveConsumer deletes a consumer from the group only when it has no pending
// entries (XGROUP DELCONSUMER would discard them); ErrConsumerBusy otherwise.
func (b *Broker) RemoveConsumer(ctx context.Context, q QueueRef, consumer string) error {
	return errNotImplemented
}
