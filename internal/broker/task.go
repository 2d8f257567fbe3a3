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

// taskFromHash builds a TaskInfo from the fields of a task hash.
func taskFromHash(q QueueRef, m map[string]string) TaskInfo {
	i := func(f string) int64 {
		v := m[f]
		if v == "" {
			return 0 // absent: no ParseInt error to allocate (the start path reads several absent fields per task)
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	t := func(f string) time.Time {
		if n := i(f); n > 0 {
			return time.UnixMilli(n).UTC()
		}
		return time.Time{}
	}
	ti := TaskInfo{
		ID:              m["id"],
		Queue:           q,
		Type:            m["type"],
		IdempotencyKey:  m["ikey"],
		Priority:        int(i("prio")),
		State:           State(m["state"]),
		Attempt:         int(i("attempt")),
		PrevAttempts:    int(i("previous_attempts")),
		MaxAttempts:     int(i("max_attempts")),
		Timeout:         time.Duration(i("timeout_ms")) * time.Millisecond,
		CreatedAt:       t("created_at"),
		AvailableAt:     t("available_at"),
		ExpiresAt:       t("expires_at"),
		StartedAt:       t("started_at"),
		FinishedAt:      t("finished_at"),
		WorkerID:        m["worker_id"],
		LastError:       m["last_error"],
		LastErrorClass:  m["error_class"],
		CancelRequested: m["cancel_requested"] == "1",
		ResultTruncated: m["result_truncated"] == "1",
		TraceParent:     m["trace"],
		ProgressAt:      t("progress_at"),
	}
	if p := m["progress"]; p != "" {
		ti.Progress = json.RawMessage(p)
	}
	if ti.StartedAt.IsZero() && ti.PrevAttempts == 0 {
		// The hash's attempt is the one the task is queued for: a task that
		// never ran has made none. (A requeued one shows attempt 1, its
		// earlier runs in PrevAttempts.)
		ti.Attempt = 0
	}
	if _, ok := m["available_at"]; !ok {
		ti.AvailableAt = ti.CreatedAt // submit leaves it out when it is created_at
	}
	if p := m["payload"]; p != "" { // "" once the task succeeded, was cancelled or expired
		ti.Payload = json.RawMessage(p)
	}
	if md, ok := m["meta"]; ok {
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
