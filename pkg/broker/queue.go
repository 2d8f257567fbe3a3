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
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cancel ends a Pending, Queued or Retrying task at once (returns StateCancelled)
// and flags a Running one (returns StateRunning; the worker cancels its context).
// ErrTaskTerminal for a finished task, ErrTaskNotFound for an unknown one.
func (b *Broker) Cancel(ctx context.Context, q QueueRef, id string) (State, error) {
	if !validID(id) {
		return "", notFound(id)
	}
	k := keysFor(q)
	now, nowtxt := b.now()
	v, err := cancelScript.Run(ctx, b.rdb, k.guarded(k.task(id), k.schedule()), k.prefix, id, now, nowtxt).Slice()
	if err != nil {
		return "", fmt.Errorf("broker: cancel %s: %w", id, err)
	}
	switch r := str(v[0]); r {
	case "notfound":
		return "", notFound(id)
	case "terminal":
		return State(str(v[1])), &Error{Code: CodeTaskTerminal, Message: fmt.Sprintf("task %s is already %s", id, str(v[1]))}
	default:
		return State(r), nil
	}
}

// Pause stops workers from reading the queue; Resume undoes it. Each appends a
// QueuePaused or QueueResumed event when the flag changes.
func (b *Broker) Pause(ctx context.Context, q QueueRef) error  { return b.setPaused(ctx, q, "1") }
func (b *Broker) Resume(ctx context.Context, q QueueRef) error { return b.setPaused(ctx, q, "0") }

func (b *Broker) setPaused(ctx context.Context, q QueueRef, on string) error {
	k := keysFor(q)
	now, _ := b.now()
	if err := pauseScript.Run(ctx, b.rdb, k.guarded(k.paused()), k.prefix, on, now).Err(); err != nil {
		return fmt.Errorf("broker: pause %s: %w", q, err)
	}
	return nil
}

// Paused reports whether the queue is paused.
func (b *Broker) Paused(ctx context.Context, q QueueRef) (bool, error) {
	n, err := b.rdb.Exists(ctx, keysFor(q).paused()).Result()
	if err != nil {
		return false, fmt.Errorf("broker: paused %s: %w", q, err)
	}
	return n == 1, nil
}

// Stats returns the queue's backlog, from one QueueMetrics read.
func (b *Broker) Stats(ctx context.Context, q QueueRef) (QueueStats, error) {
	m, err := b.QueueMetrics(ctx, q)
	if err != nil {
		return QueueStats{}, err
	}
	s := QueueStats{Bands: m.Lengths, InFlight: m.InFlight, Scheduled: m.Scheduled, DeadLettered: m.DeadLettered, Paused: m.Paused, Flow: m.Flow}
	for _, n := range m.Lengths {
		s.Depth += n
	}
	s.Queued = s.Depth - s.InFlight
	return s, nil
}

// ReadEvents returns the events of up to count stream entries after the stream
// ID after ("0" for the oldest kept), blocking up to block when there are none
// (0: do not block). One entry may hold several events: a submit batch writes
// one TaskQueued entry for all its new tasks, a start or complete batch one
// TaskStarted and one TaskSucceeded entry for its tasks (with each task's
// attempt), returned as one Event per task, all with the entry's ID.
func (b *Broker) ReadEvents(ctx context.Context, q QueueRef, after string, count int, block time.Duration) ([]Event, error) {
	args := eventsArgs(q, after, count)
	if block > 0 {
		args.Block = block
	}
	res, err := b.rdb.XRead(ctx, args).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: read events of %s: %w", q, err)
	}
	return eventsOf(res), nil
}

// EventsCursor names a queue's events stream and the ID to read after ("" or
// "0" for the oldest kept).
type EventsCursor struct {
	Queue QueueRef
	After string
}

// EventsReply is one queue's share of ReadEventsMany.
type EventsReply struct {
	Events []Event
	Err    error
}

// ReadEventsMany is ReadEvents without blocking for many queues at once, in
// one pipeline (go-redis sends a cluster's share of it to each node in
// parallel): one round trip and one connection per Redis node however many
// queues there are. The replies are in the order of cursors.
func (b *Broker) ReadEventsMany(ctx context.Context, cursors []EventsCursor, count int) []EventsReply {
	cmds := make([]*redis.XStreamSliceCmd, len(cursors))
	_, _ = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range cursors {
			cmds[i] = p.XRead(ctx, eventsArgs(c.Queue, c.After, count))
		}
		return nil
	}) // each command carries its own error
	out := make([]EventsReply, len(cursors))
	for i, cmd := range cmds {
		res, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			out[i].Err = fmt.Errorf("broker: read events of %s: %w", cursors[i].Queue, err)
		default:
			out[i].Events = eventsOf(res)
		}
	}
	return out
}

// eventsArgs reads q's events stream after the ID after, without blocking.
func eventsArgs(q QueueRef, after string, count int) *redis.XReadArgs {
	if after == "" {
		after = "0"
	}
	return &redis.XReadArgs{Streams: []string{keysFor(q).events(), after}, Count: int64(count), Block: -1}
}

// eventsOf turns XREAD's reply into events, one per task of a batch entry.
func eventsOf(res []redis.XStream) []Event {
	var out []Event
	for _, s := range res {
		for _, m := range s.Messages {
			typ, _ := m.Values["type"].(string)
			task, _ := m.Values["task"].(string)
			a, _ := m.Values["attempt"].(string)
			at, _ := m.Values["at"].(string)
			attempt, _ := strconv.Atoi(a)
			ms, _ := strconv.ParseInt(at, 10, 64)
			tasks := []string{task}
			if ts, ok := m.Values["tasks"].(string); ok { // a batch's one entry (see batch_event in scripts.go)
				tasks = strings.Fields(ts)
			}
			var attempts []string // per task, when the entry lists them
			if as, ok := m.Values["attempts"].(string); ok {
				attempts = strings.Fields(as)
			}
			for i, task := range tasks {
				a := attempt
				if i < len(attempts) {
					a, _ = strconv.Atoi(attempts[i])
				}
				ev := Event{ID: m.ID, Type: EventType(typ), TaskID: task, Attempt: a, At: time.UnixMilli(ms).UTC()}
				if p, ok := m.Values["progress"].(string); ok {
					ev.Progress = json.RawMessage(p)
				}
				out = append(out, ev)
			}
		}
	}
	return out
}
