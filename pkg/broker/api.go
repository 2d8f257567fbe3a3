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

// Package broker is the Redis engine of dtq: the only code that speaks Redis.
//
// Every key of one queue carries the hash tag {<namespace>/<queue>} (see keys.go),
// so each Lua script touches a single slot and the engine runs unchanged on Redis
// Cluster. Every multi-step state change is one Lua script (scripts.go) with its
// KEYS, ARGV and return values documented above it. On the hot path, concurrent
// Submit, Start and Complete calls on one queue are coalesced into one script
// call that handles them in order, each with exactly the semantics of a call on
// its own (batch.go); the public methods are unchanged.
//
// This file is the engine's contract with its callers (the controllers, the worker
// SDK and the HTTP API): the exported types, errors and the Broker's methods.
//
// The package is public because the operator's binaries, in a module of their
// own, run on it; a program of yours needs it only below pkg/worker and
// pkg/client (tooling that reads queues, tasks and dead letters, say). What
// you may rely on is its exported Go API, which the SDK's API check holds to
// the previous release (docs/sdk.md): not the Redis keys, fields and scripts
// behind it, which change with the Redis layout (docs/upgrade.md). The
// operator's own parts (ACL, NamespaceUser, PasswordHash, Migrations,
// WatchLayout, the Component records, CheckRedis) are exported for it and
// are of no use to a worker or a producer.
package broker

import (
	"encoding/json"
	"time"
)

// QueueRef is a queue's identity, <namespace>/<name>. Idempotency scope is this
// identity: two namespaces never share keys.
type QueueRef struct {
	Namespace string
	Name      string
}

// String returns "namespace/name", the text inside the queue's hash tag.
func (q QueueRef) String() string { return q.Namespace + "/" + q.Name }

// RetryPolicy is the exponential backoff of retryable failures:
// delay = min(MaxDelay, BaseDelay * 2^(attempt-1)) * (1 + uniform(-Jitter, +Jitter)),
// where attempt is the attempt that failed.
type RetryPolicy struct {
	BaseDelay time.Duration
	MaxDelay  time.Duration
	Jitter    float64
}

// QueueConfig holds the per-queue settings the engine enforces. The Queue
// controller writes it to Redis with EnsureQueue; scripts read it from there, so
// the manager, the HTTP API and every worker agree on one copy.
type QueueConfig struct {
	MaxDepth           int64         // admission gate on unfinished tasks: stream entries plus schedule members (10000)
	MaxPayloadBytes    int64         // compact JSON payload size limit (262144)
	DefaultMaxAttempts int           // per-task default (5); per-task values are capped at 10
	DefaultTimeout     time.Duration // handler deadline when the task sets none (30s)
	Retry              RetryPolicy   // 1s, 60s, 0.2
	IdempotencyTTL     time.Duration // lifetime of dtq:{q}:idempotency:<key> records after their task ends (24h)
	TaskRetention      time.Duration // TTL of task hashes, counted from when the task finishes (7d)
	ResultRetention    time.Duration // TTL of stored results (1h)
	ResultMaxBytes     int64         // results longer than this are truncated (8192)
	DeadLetter         bool          // true: exhausted tasks go DeadLettered, false: Failed
	DeadLetterMaxLen   int64         // approximate cap of the dead-letter stream (10000)
	VisibilityTimeout  time.Duration // idle time before another worker may reclaim an entry (30s)
	ReplicaAcks        int           // replicas that must acknowledge each Submit and Complete before it returns (0: none; see replicas.go)
	ReplicaAckTimeout  time.Duration // how long a write waits for them before it fails with ErrNotReplicated (1s)
	Flow               *FlowControl  // limits across every worker of the queue (flow.go); nil: none, today's scripts run unchanged
	OnMismatch         OnMismatch    // a keyed submission of a different request (fingerprint.go): "" or MismatchReplay replays, MismatchReject refuses
}

// DefaultQueueConfig returns the defaults of the original dtq.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{
		MaxDepth:           10000,
		MaxPayloadBytes:    262144,
		DefaultMaxAttempts: 5,
		DefaultTimeout:     30 * time.Second,
		Retry:              RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Minute, Jitter: 0.2},
		IdempotencyTTL:     24 * time.Hour,
		TaskRetention:      7 * 24 * time.Hour,
		ResultRetention:    time.Hour,
		ResultMaxBytes:     8192,
		DeadLetter:         true,
		DeadLetterMaxLen:   10000,
		VisibilityTimeout:  30 * time.Second,
		ReplicaAckTimeout:  time.Second,
		OnMismatch:         MismatchReplay,
	}
}

// MaxAttemptsCap is the largest maxAttempts a task may ask for.
const MaxAttemptsCap = 10

// State is a task's lifecycle state. The values are the Task CR's status.state
// values, so callers never translate.
type State string

const (
	StatePending      State = "Pending" // delayed; waits in the schedule
	StateQueued       State = "Queued"
	StateRunning      State = "Running"
	StateRetrying     State = "Retrying" // failed retryably; waits in the schedule
	StateSucceeded    State = "Succeeded"
	StateFailed       State = "Failed"
	StateDeadLettered State = "DeadLettered"
	StateCancelled    State = "Cancelled"
	StateExpired      State = "Expired"
)

// Terminal reports whether no further transition can happen.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateDeadLettered, StateCancelled, StateExpired:
		return true
	}
	return false
}

// IdempotencyState is the seed's record vocabulary.
type IdempotencyState string

const (
	IdempotencyProcessing IdempotencyState = "processing"
	IdempotencyCompleted  IdempotencyState = "completed"
	IdempotencyFailed     IdempotencyState = "failed"
)

// IdempotencyRecord is the JSON value at dtq:{q}:idempotency:<key>.
type IdempotencyRecord struct {
	TaskID    string           `json:"task_id"`
	State     IdempotencyState `json:"state"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// SubmitRequest is one task to ingest.
type SubmitRequest struct {
	ID             string          // optional; [A-Za-z0-9_-]{1,64}; generated (32 hex) when empty
	Type           string          // required handler name, 1..253 bytes
	Payload        json.RawMessage // a JSON object; empty means {}
	IdempotencyKey string          // optional, 1..256 bytes, any bytes
	Priority       int             // 0..9; callers apply the default 5
	MaxAttempts    int             // 0: queue default; else 1..MaxAttemptsCap
	Timeout        time.Duration   // 0: queue default; else 1ms..1h
	NotBefore      time.Time       // zero or past: queued now; future: Pending in the schedule
	ExpiresAt      time.Time       // zero: never; a task not started by then ends Expired
	FromTaskCR     bool            // a Task CR submits it (ID = its UID): TaskCRTasks lists it until it ends
	Metadata       json.RawMessage // optional JSON object, at most MaxMetadataBytes compact; stored, not interpreted
	FlowKey        string          // optional flow key (flow.go), at most MaxFlowKeyBytes printable; inert on a queue without flow control
}

// SubmitResult is a successful submission: a new task (HTTP 202) or, with
// Duplicate, the replay of a completed or failed idempotency record (HTTP 200).
type SubmitResult struct {
	Task      TaskInfo
	Duplicate bool
	// RequestMatches, for a Duplicate found by its idempotency key, says
	// whether this request matched the original's (same fingerprint,
	// fingerprint.go); nil when there is nothing to compare: a new task, a
	// duplicate found by its ID, or an original submitted by an older
	// release without a fingerprint.
	RequestMatches *bool
}

// TaskInfo is the authoritative task record (the task hash) plus its result.
type TaskInfo struct {
	ID              string
	Queue           QueueRef
	Type            string
	Payload         json.RawMessage // nil once the task Succeeded, was Cancelled or Expired (kept when Failed or DeadLettered)
	IdempotencyKey  string
	Priority        int
	State           State
	Attempt         int // the current or last attempt: 0 until the task first starts, then 1 (and again after a requeue); +1 on a retry and on a crash redelivery
	PrevAttempts    int // attempts of the runs before the latest dead-letter requeue or Retry, summed (0: never requeued)
	MaxAttempts     int
	Timeout         time.Duration
	CreatedAt       time.Time
	AvailableAt     time.Time // when it becomes (or became) runnable
	ExpiresAt       time.Time // zero: never
	StartedAt       time.Time // of the latest attempt; on a queue with a rate limit, the Redis server's clock when the limit admitted it
	FinishedAt      time.Time
	WorkerID        string
	LastError       string // sanitized, at most 500 characters
	LastErrorClass  string
	CancelRequested bool
	Metadata        json.RawMessage // the submission's metadata object; nil when none
	Result          json.RawMessage // nil when none or expired; truncated to ResultMaxBytes
	ResultTruncated bool
	TraceParent     string // W3C traceparent of the submission's span; "" when it had none
	// Progress is the latest progress the running (or last) attempt reported
	// (compact JSON, see Broker.Progress), and ProgressAt when; nil and zero
	// when it reported none. A new attempt clears it.
	Progress   json.RawMessage
	ProgressAt time.Time
	FlowKey    string // the submission's flow key; "" when none
	// WaitReason says why a Queued task of a flow-controlled queue waits
	// (e.g. "key tenant-a at concurrency 3/3"), computed by GetTask; "" otherwise.
	WaitReason string
}

// QueueStats is a queue's backlog, read for status and autoscaling.
type QueueStats struct {
	Bands        [10]int64 // stream length per priority band, p0..p9 (includes in-flight entries)
	Depth        int64     // sum of Bands; MaxDepth gates Depth + Scheduled
	InFlight     int64     // delivered, not yet acknowledged (XPENDING)
	Queued       int64     // Depth - InFlight
	Scheduled    int64     // delayed and retrying tasks in the schedule
	DeadLettered int64     // dead-letter stream length
	Paused       bool
	Flow         FlowMetrics // QueueMetrics.Flow: zero when the queue has no flow control
}

// QueueMetrics is a queue's backlog by state, read in one script call, and
// its counters: totals since the queue was first used, kept by the engine
// scripts in dtq:{ns/q}:stats, so they are the queue's own whichever process
// (API replica, manager, worker) did the work. The manager exports them
// (docs/metrics.md).
type QueueMetrics struct {
	Queued       [Bands]int64 // entries not yet delivered to a worker, per priority band p0..p9
	Lengths      [Bands]int64 // stream entries per band, in flight included (what maxDepth gates)
	InFlight     int64        // delivered, not yet acknowledged
	Scheduled    int64        // delayed and retrying tasks in the schedule
	DeadLettered int64        // dead-letter stream length
	Paused       bool
	// OldestQueued is when the oldest entry not yet delivered was added to
	// its stream (submitted, or promoted when due); zero when none waits.
	OldestQueued time.Time
	Counters     Counters
	Flow         FlowMetrics // zero when the queue has no flow control
}

// Counters are a queue's totals. A submission naming the ID of a task that
// exists (a client retrying with the ID it chose, the operator submitting a
// Task again whose status it had not written) submits nothing and is not
// counted.
type Counters struct {
	Accepted   int64          // new tasks written (HTTP 202)
	Duplicates int64          // replays of a completed or failed idempotency record (HTTP 200)
	Refused    map[Code]int64 // IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_KEY_MISMATCH, QUEUE_FULL, PAYLOAD_TOO_LARGE
	Finished   map[State]int64
	Retries    int64 // failed attempts scheduled for a retry
	// Redeliveries counts entries reclaimed from a worker that stopped
	// heartbeating (after the visibility timeout) and delivered again.
	Redeliveries int64
}

// EventType names a lifecycle event on the queue's events stream.
type EventType string

const (
	EventQueued            EventType = "TaskQueued"
	EventStarted           EventType = "TaskStarted"
	EventSucceeded         EventType = "TaskSucceeded"
	EventRetryScheduled    EventType = "TaskRetryScheduled"
	EventRetried           EventType = "TaskRetried" // moved from the schedule (or the DLQ) back to a stream
	EventFailed            EventType = "TaskFailed"
	EventDeadLettered      EventType = "TaskDeadLettered"
	EventCancelled         EventType = "TaskCancelled"
	EventCancelRequested   EventType = "TaskCancelRequested"
	EventExpired           EventType = "TaskExpired"
	EventDuplicateAbsorbed EventType = "TaskDuplicateAbsorbed"
	EventProgress          EventType = "TaskProgress" // a running attempt's progress report (Event.Progress)
	EventReleased          EventType = "TaskReleased" // handed back by a draining or holding worker: Queued again, Attempt the next run's
	EventQueuePaused       EventType = "QueuePaused"
	EventQueueResumed      EventType = "QueueResumed"
)

// Event is one entry of dtq:{q}:events (a bounded stream, so a reader resumes
// after a restart from the last ID it saw).
type Event struct {
	ID      string // stream entry ID; pass it back as after
	Type    EventType
	TaskID  string
	Attempt int
	At      time.Time
	// Progress is a TaskProgress event's value (compact JSON); nil otherwise.
	Progress json.RawMessage
}

// Delivery is a stream entry handed to a worker.
type Delivery struct {
	MessageID string // stream entry ID
	Band      int    // priority 0..9
	TaskID    string
	Attempt   int  // the attempt the entry was queued for
	Reclaimed bool // taken over from another consumer after the visibility timeout
}

// Execution is one run of a delivery: the worker that started it and the
// attempt it runs (StartResult.Task.Attempt). Complete and Touch are fenced on
// it: once another worker has taken the task over (a reclaim after the
// visibility timeout starts attempt+1 there), they change nothing.
type Execution struct {
	Delivery
	WorkerID string
	Attempt  int
}

// StartResult says whether a worker should run a delivery. When Run is false the
// entry has already been acknowledged (absorbed duplicate, cancelled, expired,
// terminal, or dead-lettered because a crash loop exhausted maxAttempts) and
// Reason says why.
type StartResult struct {
	Run    bool
	Task   TaskInfo
	Reason string
}

// Outcome is how a handler execution ended.
type Outcome struct {
	Result     json.RawMessage // on success; must be valid JSON (nil means null)
	Err        string          // non-empty: the attempt failed with this message
	ErrorClass string          // a short class name for metrics and status
	Retryable  bool            // the error is in the retry allow-list
	Cancelled  bool            // the handler was stopped by a cancel request
}

// DeadLetter is one dead-letter stream entry.
type DeadLetter struct {
	EntryID    string
	TaskID     string
	Type       string
	FailedAt   time.Time
	Attempts   int
	LastError  string
	ErrorClass string
}

// WorkerInfo is a worker's heartbeat record.
type WorkerInfo struct {
	ID            string
	Hostname      string
	Concurrency   int
	Active        int
	Status        string // starting, ready, busy, draining, stopped
	StartedAt     time.Time
	LastHeartbeat time.Time
	// Version and Commit are the dtq build of the worker (of its pkg/worker
	// SDK); empty for a worker older than 0.1.0, which did not record them.
	Version, Commit string
	// Layout is the newest Redis layout the worker reads (layoutversion.go),
	// written by Heartbeat; 1 for a worker of a release before the layout version.
	Layout int
}
