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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The task hash's fields a TaskInfo is built from, in the order of a packed
// task (pack_task in the scripts, taskFromPacked).
const (
	tfID = iota
	tfType
	tfIkey
	tfPrio
	tfState
	tfAttempt
	tfPrevAttempts
	tfMaxAttempts
	tfTimeout
	tfCreatedAt
	tfAvailableAt
	tfExpiresAt
	tfStartedAt
	tfFinishedAt
	tfWorkerID
	tfLastError
	tfErrorClass
	tfCancelRequested
	tfResultTruncated
	tfTrace
	tfProgressAt
	tfProgress
	tfPayload
	tfMeta
	tfFlowKey
	taskFieldCount
)

var taskFields = [taskFieldCount]string{
	tfID: "id", tfType: "type", tfIkey: "ikey", tfPrio: "prio", tfState: "state", tfAttempt: "attempt",
	tfPrevAttempts: "previous_attempts", tfMaxAttempts: "max_attempts", tfTimeout: "timeout_ms",
	tfCreatedAt: "created_at", tfAvailableAt: "available_at", tfExpiresAt: "expires_at",
	tfStartedAt: "started_at", tfFinishedAt: "finished_at", tfWorkerID: "worker_id",
	tfLastError: "last_error", tfErrorClass: "error_class", tfCancelRequested: "cancel_requested",
	tfResultTruncated: "result_truncated", tfTrace: "trace", tfProgressAt: "progress_at",
	tfProgress: "progress", tfPayload: "payload", tfMeta: "meta", tfFlowKey: "fk",
}

// taskFromHash builds a TaskInfo from the fields of a task hash.
func taskFromHash(q QueueRef, m map[string]string) TaskInfo {
	var v [taskFieldCount]string
	for i, f := range taskFields {
		v[i] = m[f]
	}
	return taskFromFields(q, &v)
}

// taskFromPacked builds a TaskInfo from a packed task (pack_task); false
// when s is not one.
func taskFromPacked(q QueueRef, s string) (TaskInfo, bool) {
	var v [taskFieldCount]string
	if !unpack(s, v[:]) {
		return TaskInfo{}, false
	}
	return taskFromFields(q, &v), true
}

// taskFromFields builds a TaskInfo from a task hash's fields (taskFields
// order), "" for a field the hash does not have.
func taskFromFields(q QueueRef, v *[taskFieldCount]string) TaskInfo {
	i := func(f int) int64 {
		if v[f] == "" {
			return 0 // absent: no ParseInt error to allocate (the start path reads several absent fields per task)
		}
		n, _ := strconv.ParseInt(v[f], 10, 64)
		return n
	}
	t := func(f int) time.Time {
		if n := i(f); n > 0 {
			return time.UnixMilli(n).UTC()
		}
		return time.Time{}
	}
	ti := TaskInfo{
		ID:              v[tfID],
		Queue:           q,
		Type:            v[tfType],
		IdempotencyKey:  v[tfIkey],
		Priority:        int(i(tfPrio)),
		State:           State(v[tfState]),
		Attempt:         int(i(tfAttempt)),
		PrevAttempts:    int(i(tfPrevAttempts)),
		MaxAttempts:     int(i(tfMaxAttempts)),
		Timeout:         time.Duration(i(tfTimeout)) * time.Millisecond,
		CreatedAt:       t(tfCreatedAt),
		AvailableAt:     t(tfAvailableAt),
		ExpiresAt:       t(tfExpiresAt),
		StartedAt:       t(tfStartedAt),
		FinishedAt:      t(tfFinishedAt),
		WorkerID:        v[tfWorkerID],
		LastError:       v[tfLastError],
		LastErrorClass:  v[tfErrorClass],
		CancelRequested: v[tfCancelRequested] == "1",
		ResultTruncated: v[tfResultTruncated] == "1",
		TraceParent:     v[tfTrace],
		ProgressAt:      t(tfProgressAt),
		FlowKey:         v[tfFlowKey],
	}
	if p := v[tfProgress]; p != "" {
		ti.Progress = json.RawMessage(p)
	}
	if ti.StartedAt.IsZero() && ti.PrevAttempts == 0 {
		// The hash's attempt is the one the task is queued for: a task that
		// never ran has made none. (A requeued one shows attempt 1, its
		// earlier runs in PrevAttempts.)
		ti.Attempt = 0
	}
	if v[tfAvailableAt] == "" {
		ti.AvailableAt = ti.CreatedAt // submit leaves it out when it is created_at
	}
	if p := v[tfPayload]; p != "" { // "" once the task succeeded, was cancelled or expired
		ti.Payload = json.RawMessage(p)
	}
	if md := v[tfMeta]; md != "" { // submit writes meta only when there is some
		ti.Metadata = json.RawMessage(md)
	}
	return ti
}

// withResult attaches a stored result (a script's GET reply; false when none).
func withResult(t TaskInfo, v any) TaskInfo {
	if s, ok := v.(string); ok {
		t.Result = json.RawMessage(s)
	}
	return t
}

// GetTask returns the task record and its result; ErrTaskNotFound when absent.
// A Queued task waiting in a flow-controlled queue's key list also gets its
// WaitReason, in a second round trip.
func (b *Broker) GetTask(ctx context.Context, q QueueRef, id string) (TaskInfo, error) {
	if !validID(id) {
		return TaskInfo{}, notFound(id)
	}
	k := keysFor(q)
	var h *redis.MapStringStringCmd
	var r *redis.StringCmd
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		h = p.HGetAll(ctx, k.task(id))
		r = p.Get(ctx, k.result(id))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return TaskInfo{}, fmt.Errorf("broker: get task %s: %w", id, err)
	}
	if len(h.Val()) == 0 {
		return TaskInfo{}, notFound(id)
	}
	t := taskFromHash(q, h.Val())
	if r.Err() == nil {
		t.Result = json.RawMessage(r.Val())
	}
	if t.State == StateQueued && h.Val()["fq"] == "1" && h.Val()["msg"] == "" {
		// In a key list of a flow-controlled queue: say why it waits.
		if t.WaitReason, err = b.waitReason(ctx, q, t); err != nil {
			return TaskInfo{}, err
		}
	}
	return t, nil
}

func notFound(id string) error {
	return &Error{Code: CodeTaskNotFound, Message: fmt.Sprintf("task %q not found", id)}
}

// Idempotency returns the record for key; ErrTaskNotFound when there is none.
func (b *Broker) Idempotency(ctx context.Context, q QueueRef, key string) (IdempotencyRecord, error) {
	v, err := b.rdb.Get(ctx, keysFor(q).idempotency(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return IdempotencyRecord{}, &Error{Code: CodeTaskNotFound, Message: "no idempotency record for this key"}
	}
	if err != nil {
		return IdempotencyRecord{}, fmt.Errorf("broker: get idempotency record: %w", err)
	}
	var rec IdempotencyRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return IdempotencyRecord{}, fmt.Errorf("broker: decode idempotency record: %w", err)
	}
	return rec, nil
}
