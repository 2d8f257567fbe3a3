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
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DeadLetters lists up to limit dead-letter entries, newest first.
func (b *Broker) DeadLetters(ctx context.Context, q QueueRef, limit int) ([]DeadLetter, error) {
	return b.DeadLettersBefore(ctx, q, "", limit)
}

// DeadLettersBefore lists up to limit dead-letter entries older than the
// entry ID before ("" for the newest), newest first: a page after the one
// that ended with entry before.
func (b *Broker) DeadLettersBefore(ctx context.Context, q QueueRef, before string, limit int) ([]DeadLetter, error) {
	if limit <= 0 {
		limit = 100
	}
	end := "+"
	if before != "" {
		end = "(" + before
	}
	msgs, err := b.rdb.XRevRangeN(ctx, keysFor(q).deadLetter(), end, "-", int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("broker: list dead letters of %s: %w", q, err)
	}
	out := make([]DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, deadLetterOf(m))
	}
	return out, nil
}

func deadLetterOf(m redis.XMessage) DeadLetter {
	s := func(f string) string { v, _ := m.Values[f].(string); return v }
	at, _ := strconv.ParseInt(s("failed_at"), 10, 64)
	attempts, _ := strconv.Atoi(s("attempts"))
	return DeadLetter{EntryID: m.ID, TaskID: s("task"), Type: s("type"), FailedAt: time.UnixMilli(at).UTC(),
		Attempts: attempts, LastError: s("error"), ErrorClass: s("class")}
}

// DeadLetter returns the dead-letter entry of task id; ErrDLQEntryNotFound
// when the task has none (never dead-lettered, requeued, discarded, purged or
// trimmed).
func (b *Broker) DeadLetter(ctx context.Context, q QueueRef, id string) (DeadLetter, error) {
	notFound := &Error{Code: CodeDLQEntryNotFound, Message: fmt.Sprintf("task %q has no dead-letter entry", id)}
	if !validID(id) {
		return DeadLetter{}, notFound
	}
	k := keysFor(q)
	eid, err := b.rdb.HGet(ctx, k.task(id), "dlq").Result()
	if errors.Is(err, redis.Nil) {
		return DeadLetter{}, notFound
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("broker: dead letter of %s: %w", id, err)
	}
	msgs, err := b.rdb.XRange(ctx, k.deadLetter(), eid, eid).Result()
	if err != nil {
		return DeadLetter{}, fmt.Errorf("broker: dead letter of %s: %w", id, err)
	}
	if len(msgs) == 0 {
		return DeadLetter{}, notFound
	}
	return deadLetterOf(msgs[0]), nil
}

// Requeue puts a DeadLettered task back on its stream with attempt 1 and resets
// its idempotency record to processing (no expiry until the task ends again),
// so a resubmission gets
// IDEMPOTENCY_IN_PROGRESS again. ErrTaskConflict when the task is not
// dead-lettered. The record is left alone if the key names another task.
func (b *Broker) Requeue(ctx context.Context, q QueueRef, id string) (TaskInfo, error) {
	return b.requeue(ctx, q, id, "")
}

// Retry runs a task that ended Failed or DeadLettered again, as Requeue does.
// token (non-empty) names this retry: a second Retry with the token of the
// retry applied last changes nothing and returns the task, so a caller that
// crashed before recording its retry does not run the task twice.
// ErrTaskConflict when the task is in any other state.
func (b *Broker) Retry(ctx context.Context, q QueueRef, id, token string) (TaskInfo, error) {
	if token == "" {
		return TaskInfo{}, &Error{Code: CodeInvalidTask, Message: "a retry needs a token"}
	}
	return b.requeue(ctx, q, id, token)
}

func (b *Broker) requeue(ctx context.Context, q QueueRef, id, token string) (TaskInfo, error) {
	if !validID(id) {
		return TaskInfo{}, notFound(id)
	}
	k := keysFor(q)
	now, nowtxt := b.now()
	v, err := requeueScript.Run(ctx, b.rdb, k.guarded(k.task(id), k.deadLetter()), k.prefix, id, now, nowtxt, token).Slice()
	if err != nil {
		return TaskInfo{}, fmt.Errorf("broker: requeue %s: %w", id, err)
	}
	switch str(v[0]) {
	case "notfound":
		return TaskInfo{}, notFound(id)
	case "conflict":
		want := "DeadLettered"
		if token != "" {
			want = "Failed or DeadLettered"
		}
		return TaskInfo{}, &Error{Code: CodeTaskConflict, Message: fmt.Sprintf("task %s is %s, not %s", id, str(v[1]), want)}
	}
	return taskFromHash(q, hashMap(v[1])), nil
}

// RequeueAllResult is what RequeueDeadLetters did.
type RequeueAllResult struct {
	Requeued int64  // tasks put back on the queue
	Skipped  int64  // entries whose task was no longer DeadLettered (or gone)
	Through  string // the newest entry ID considered ("" when there was none)
}

// RequeueDeadLetters requeues, as Requeue does, the task of every
// dead-letter entry up to the entry ID through ("" for the newest entry at
// the start), oldest first. The fence makes it safe beside other clients:
// tasks dead-lettered meanwhile (or again, after this requeue) have newer
// entries and are left alone, and each task is requeued by one script that
// checks it is still DeadLettered, so an entry requeued, discarded or purged
// by someone else at the same time is skipped, never run twice. Stopped
// midway (an error, a deadline), a second call with the same through
// requeues the rest.
func (b *Broker) RequeueDeadLetters(ctx context.Context, q QueueRef, through string) (RequeueAllResult, error) {
	k := keysFor(q)
	var res RequeueAllResult
	if through == "" {
		last, err := b.rdb.XRevRangeN(ctx, k.deadLetter(), "+", "-", 1).Result()
		if err != nil {
			return res, fmt.Errorf("broker: requeue dead letters of %s: %w", q, err)
		}
		if len(last) == 0 {
			return res, nil
		}
		through = last[0].ID
	}
	res.Through = through
	start := "-"
	for {
		msgs, err := b.rdb.XRangeN(ctx, k.deadLetter(), start, through, requeueAllPage).Result()
		if err != nil {
			return res, fmt.Errorf("broker: requeue dead letters of %s: %w", q, err)
		}
		if len(msgs) == 0 {
			return res, nil
		}
		for _, m := range msgs {
			id, _ := m.Values["task"].(string)
			_, err := b.requeue(ctx, q, id, "")
			switch c := CodeOf(err); {
			case err == nil:
				res.Requeued++
			case c == CodeTaskConflict || c == CodeTaskNotFound:
				res.Skipped++
			default:
				return res, err
			}
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// requeueAllPage is how many dead-letter entries RequeueDeadLetters reads at a time.
const requeueAllPage = 100

// Discard removes a task's dead-letter entry; the task stays DeadLettered.
func (b *Broker) Discard(ctx context.Context, q QueueRef, id string) error {
	if !validID(id) {
		return notFound(id)
	}
	k := keysFor(q)
	r, err := discardScript.Run(ctx, b.rdb, k.guarded(k.task(id), k.deadLetter()), k.prefix).Text()
	if err != nil {
		return fmt.Errorf("broker: discard %s: %w", id, err)
	}
	switch r {
	case "notfound":
		return notFound(id)
	case "noentry":
		return &Error{Code: CodeDLQEntryNotFound, Message: fmt.Sprintf("task %s has no dead-letter entry", id)}
	}
	return nil
}

// PurgeDeadLetters empties the dead-letter stream exactly and returns how many went.
func (b *Broker) PurgeDeadLetters(ctx context.Context, q QueueRef) (int64, error) {
	k := keysFor(q)
	n, err := purgeScript.Run(ctx, b.rdb, k.guarded(k.deadLetter()), k.prefix).Int64()
	if err != nil {
		return 0, fmt.Errorf("broker: purge dead letters of %s: %w", q, err)
	}
	return n, nil
}
