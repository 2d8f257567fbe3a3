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

package client

import (
	"encoding/json"
	"time"
)

// This file holds the HTTP API's JSON documents (its OpenAPI document,
// served at /openapi.json, describes the same shapes). Field names are the
// original dtq's snake_case names.

// TaskStatus is a task's lifecycle state; the values are the Task custom
// resource's status.state values.
type TaskStatus string

const (
	StatusPending      TaskStatus = "Pending" // delayed, waits for not_before
	StatusQueued       TaskStatus = "Queued"
	StatusRunning      TaskStatus = "Running"
	StatusRetrying     TaskStatus = "Retrying" // failed retryably, waits for its next attempt
	StatusSucceeded    TaskStatus = "Succeeded"
	StatusFailed       TaskStatus = "Failed"
	StatusDeadLettered TaskStatus = "DeadLettered"
	StatusCancelled    TaskStatus = "Cancelled"
	StatusExpired      TaskStatus = "Expired"
)

// TaskStatuses lists every TaskStatus in lifecycle order: the one list of a
// task's states. The engine's states, the Task resource's, the CLI's
// --state, the API's ?status= and its OpenAPI enum, and the console use
// these values (internal/httpapi's TestOneListOfTaskStates checks the
// copies that cannot import it: the CRD enum marker, openapi.yaml and the
// console's script).
var TaskStatuses = []TaskStatus{StatusPending, StatusQueued, StatusRunning, StatusRetrying,
	StatusSucceeded, StatusFailed, StatusDeadLettered, StatusCancelled, StatusExpired}

// Terminal reports whether the task can no longer change (a dead-lettered
// task can only be requeued by an operator).
func (s TaskStatus) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusDeadLettered, StatusCancelled, StatusExpired:
		return true
	}
	return false
}

// SubmitRequest is the body of a submission (one item of a batch). Only
// TaskType is required.
type SubmitRequest struct {
	TaskType string `json:"task_type"`
	// Payload is a JSON object ({} when absent), at most the Queue's
	// maxPayloadBytes as compact JSON.
	Payload json.RawMessage `json:"payload,omitempty"`
	// IdempotencyKey maps duplicate submissions to one logical task (1..256
	// bytes). The Idempotency-Key header wins over it.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Priority is 0..9, 9 first; 5 when absent.
	Priority *int `json:"priority,omitempty"`
	// MaxAttempts is 1..10; the Queue's default when absent.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// TimeoutMs is the handler deadline, 1..3600000; the Queue's default when absent.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
	// DelaySeconds (>= 0) or NotBefore (not both) hold the task back.
	DelaySeconds float64    `json:"delay_seconds,omitempty"`
	NotBefore    *time.Time `json:"not_before,omitempty"`
	// TTLSeconds (> 0) expires the task if it has not started by then.
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	// Metadata is a JSON object of at most 4096 bytes, stored with the task.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// FlowKey is the task's flow key (1..128 printable ASCII characters, no
	// space): on a Queue with flowControl, the key whose per-key limits
	// and share apply to it (docs/flow-control.md); stored and inert on a
	// Queue without.
	FlowKey string `json:"flow_key,omitempty"`
}

// Task is a task record as the API returns it.
type Task struct {
	TaskID         string          `json:"task_id"`
	Namespace      string          `json:"namespace"`
	Queue          string          `json:"queue"`
	TaskType       string          `json:"task_type"`
	Payload        json.RawMessage `json:"payload,omitempty"` // left out of lists
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Status         TaskStatus      `json:"status"`
	Priority       int             `json:"priority"`
	// Attempt is the current or last attempt: 0 until the task first starts,
	// then 1, counting retries and crash redeliveries.
	Attempt int `json:"attempt"`
	// PreviousAttempts is the attempts of earlier runs, summed: a dead-letter
	// requeue (or a Task retry) adds the ended run's and restarts Attempt at 1.
	PreviousAttempts int             `json:"previous_attempts,omitempty"`
	MaxAttempts      int             `json:"max_attempts"`
	TimeoutMs        int64           `json:"timeout_ms"`
	CreatedAt        time.Time       `json:"created_at"`
	AvailableAt      time.Time       `json:"available_at"`
	ExpiresAt        *time.Time      `json:"expires_at,omitempty"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	FlowKey          string          `json:"flow_key,omitempty"`
	// WaitReason says why a Queued task of a flow-controlled queue is not
	// running yet ("key tenant-a at concurrency 3/3"), as of the read.
	WaitReason string    `json:"wait_reason,omitempty"`
	Execution  Execution `json:"execution"`
	// Result is the handler's result while it is retained (the Queue's
	// resultRetention); left out of lists.
	Result          json.RawMessage `json:"result,omitempty"`
	ResultTruncated bool            `json:"result_truncated,omitempty"`
	// Duplicate is true when a submission replayed an existing task.
	Duplicate bool `json:"duplicate"`
	// RequestMatches, on a replay found by its idempotency key, says whether
	// this submission's task type and payload (canonical JSON) are the
	// original's. Nil on other answers, and when the original has no
	// fingerprint (submitted by an older release).
	RequestMatches *bool `json:"request_matches,omitempty"`
}

// Execution describes the latest attempt.
type Execution struct {
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	DurationMs      *int64     `json:"duration_ms,omitempty"`
	WorkerID        string     `json:"worker_id,omitempty"`
	ErrorClass      string     `json:"error_class,omitempty"`
	ErrorMessage    string     `json:"error_message,omitempty"`
	CancelRequested bool       `json:"cancel_requested,omitempty"`
	// Progress is the latest progress the attempt reported (any JSON, at
	// most 1024 bytes compact), at ProgressAt; a new attempt clears it.
	Progress   json.RawMessage `json:"progress,omitempty"`
	ProgressAt *time.Time      `json:"progress_at,omitempty"`
}

// BatchRequest is the body of a batch submission: 1..1000 tasks.
type BatchRequest struct {
	Tasks []SubmitRequest `json:"tasks"`
}

// BatchResponse holds one result per submitted task, in order.
type BatchResponse struct {
	Results []BatchResult `json:"results"`
}

// BatchResult is one item's outcome: Status is the HTTP status the item would
// have got on its own (202 new, 200 replay, or an error status), with Task or
// Error set.
type BatchResult struct {
	Status int    `json:"status"`
	Task   *Task  `json:"task,omitempty"`
	Error  *Error `json:"error,omitempty"`
}

// TaskList is a page of tasks, newest first.
type TaskList struct {
	Tasks []Task `json:"tasks"`
	Count int    `json:"count"`
	// Continue, when not empty, is passed back to fetch the next page. A page
	// may be short, even empty, and still have a Continue when a status filter
	// skipped tasks.
	Continue string `json:"continue,omitempty"`
}

// CancelResponse answers an accepted cancel.
type CancelResponse struct {
	TaskID string     `json:"task_id"`
	Status TaskStatus `json:"status"`
}

// QueueStats is a queue's backlog.
type QueueStats struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Paused    bool   `json:"paused"`
	// Depth is the stream entries of all bands, in flight included; the
	// Queue's maxDepth gates Depth plus Scheduled.
	Depth int64 `json:"depth"`
	// DepthByPriority has ten entries, priority 0..9.
	DepthByPriority []int64 `json:"depth_by_priority"`
	Queued          int64   `json:"queued"`
	InFlight        int64   `json:"in_flight"`
	Scheduled       int64   `json:"scheduled"` // delayed and retrying
	DeadLettered    int64   `json:"dead_lettered"`
	Workers         int     `json:"workers"` // registered workers, draining and stopped ones included
	// OldestQueuedAgeSeconds is the age of the oldest task not yet delivered
	// to a worker (submitted, or due after a delay or retry); 0 when none waits.
	OldestQueuedAgeSeconds float64 `json:"oldest_queued_age_seconds"`
	// Finished counts the queue's tasks that ended, by state (Succeeded,
	// Failed, DeadLettered, Cancelled, Expired), since the queue's first use;
	// two readings give the throughput.
	Finished map[string]int64 `json:"finished"`
	// Flow is the queue's flow control now; nil when the Queue has no
	// flowControl.
	Flow *FlowStats `json:"flow,omitempty"`
}

// QueueList lists a namespace's queues.
type QueueList struct {
	Queues []QueueStats `json:"queues"`
}

// Schedule is a TaskSchedule (taskschedules.dtq.dev) as the HTTP API lists
// it: its spec and status counters, and its next run times.
type Schedule struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Schedule  string `json:"schedule"`  // the cron expression
	TimeZone  string `json:"time_zone"` // an IANA zone; UTC when the spec names none
	Queue     string `json:"queue"`
	TaskType  string `json:"task_type"`
	Suspended bool   `json:"suspended"`
	// LastScheduleTime is the slot of the newest run started (the
	// schedule's status.lastScheduleTime, as a CronJob's); LastRunTime is the
	// same.
	LastRunTime      *time.Time `json:"last_run_time,omitempty"`
	LastScheduleTime *time.Time `json:"last_schedule_time,omitempty"`
	// NextRuns are the next five slots, in the schedule's zone, after the
	// later of now and the newest slot handled (as kubectl dtq schedule get shows
	// them); while suspended, the slots that would run on resume.
	NextRuns []time.Time `json:"next_runs"`
	// NextRunsError says why NextRuns is empty when the schedule cannot be
	// computed (the API server refuses such a schedule; a stored one may
	// name a zone this build does not know).
	NextRunsError  string `json:"next_runs_error,omitempty"`
	Active         int    `json:"active"` // runs whose Task is unfinished (status.activeCount)
	Runs           int64  `json:"runs"`
	MissedSlots    int64  `json:"missed_slots"`
	SkippedSlots   int64  `json:"skipped_slots"`
	LastSkipReason string `json:"last_skip_reason,omitempty"`
}

// ScheduleList lists a namespace's TaskSchedules, by name.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
}

// PauseResponse answers pause and resume.
type PauseResponse struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Paused    bool   `json:"paused"`
}

// Worker is a live worker of a queue.
type Worker struct {
	WorkerID      string    `json:"worker_id"`
	Hostname      string    `json:"hostname"`
	Status        string    `json:"status"`
	Concurrency   int       `json:"concurrency"`
	InFlight      int       `json:"in_flight"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Version and Commit are the worker's dtq build (of its pkg/worker SDK);
	// empty for a worker older than 0.1.0, which does not report them.
	Version string `json:"version,omitempty"`
	Commit  string `json:"commit,omitempty"`
}

// WorkerList lists a queue's live workers.
type WorkerList struct {
	Workers []Worker `json:"workers"`
}

// ServerVersion is GET /api/v1/version: the build of the API replica that
// answered, and the builds the running API replicas, managers and workers
// (delivery sidecars included) report, each counted per build.
type ServerVersion struct {
	Version  string       `json:"version"`
	Commit   string       `json:"commit"`
	APIs     []BuildCount `json:"apis"`
	Managers []BuildCount `json:"managers"`
	Workers  []BuildCount `json:"workers"`
}

// BuildCount is how many processes run one build, newest version first.
// Version is empty for workers older than 0.1.0, which do not report it.
type BuildCount struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Count   int    `json:"count"`
}

// DeadLetter is a dead-letter entry.
type DeadLetter struct {
	EntryID        string    `json:"entry_id"`
	TaskID         string    `json:"task_id"`
	TaskType       string    `json:"task_type"`
	FailedAt       time.Time `json:"failed_at"`
	AttemptsMade   int       `json:"attempts_made"`
	LastError      string    `json:"last_error"`
	LastErrorClass string    `json:"last_error_class,omitempty"`
}

// DeadLetterList lists dead-letter entries, newest first.
type DeadLetterList struct {
	Entries []DeadLetter `json:"entries"`
	Count   int          `json:"count"`
	// Continue, when set, asks for the next (older) page: pass it as
	// DeadLetterListOptions.Continue (the API's ?continue=).
	Continue string `json:"continue,omitempty"`
}

// RequeueAllResponse answers a requeue of every dead letter.
type RequeueAllResponse struct {
	// Requeued tasks run again; Skipped entries' tasks were no longer
	// DeadLettered (requeued, or gone, by someone else meanwhile).
	Requeued int64 `json:"requeued"`
	Skipped  int64 `json:"skipped"`
	// Through is the newest entry ID the requeue considered (the fence):
	// entries after it were left alone. "" when there were none.
	Through string `json:"through,omitempty"`
}

// PurgeResponse answers a dead-letter purge.
type PurgeResponse struct {
	Purged int64 `json:"purged"`
}

// EventType names a lifecycle event.
type EventType string

const (
	EventQueued            EventType = "TaskQueued"
	EventStarted           EventType = "TaskStarted"
	EventSucceeded         EventType = "TaskSucceeded"
	EventRetryScheduled    EventType = "TaskRetryScheduled"
	EventRetried           EventType = "TaskRetried"
	EventFailed            EventType = "TaskFailed"
	EventDeadLettered      EventType = "TaskDeadLettered"
	EventCancelled         EventType = "TaskCancelled"
	EventCancelRequested   EventType = "TaskCancelRequested"
	EventExpired           EventType = "TaskExpired"
	EventDuplicateAbsorbed EventType = "TaskDuplicateAbsorbed"
	EventProgress          EventType = "TaskProgress" // a running attempt's progress report (Event.Progress)
	EventReleased          EventType = "TaskReleased" // handed back by a draining worker; Attempt is the next run's (the same when the handler had not begun)
	EventQueuePaused       EventType = "QueuePaused"
	EventQueueResumed      EventType = "QueueResumed"
	// EventsTruncated says that events may be missing before the next one:
	// the stream was resumed from an ID older than the oldest event the
	// server still keeps (about 10,000 per queue). It has no ID.
	EventsTruncated EventType = "EventsTruncated"
)

// Terminal reports whether the event ends its task (TaskDeadLettered included).
func (t EventType) Terminal() bool {
	switch t {
	case EventSucceeded, EventFailed, EventDeadLettered, EventCancelled, EventExpired:
		return true
	}
	return false
}

// Event is one lifecycle event of a queue's events stream.
type Event struct {
	// EventID is unique and ordered within the queue; resume after it with
	// Last-Event-ID (or since=).
	EventID string    `json:"event_id,omitempty"`
	Type    EventType `json:"type"`
	TaskID  string    `json:"task_id,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Time    time.Time `json:"ts"`
	// Progress is a TaskProgress event's value (any JSON).
	Progress json.RawMessage `json:"progress,omitempty"`
}
