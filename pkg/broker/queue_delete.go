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
	"strings"

	"github.com/redis/go-redis/v9"
)

// Whole-queue operations that walk every unfinished task: the orphan sweep's
// listing and queue deletion. They page through Redis in chunks and are meant
// for housekeeping (every resync, once per deleted queue), not the hot path.

// pageSize is how many stream entries, schedule members, task hashes or keys
// one call reads.
const pageSize = 1000

// unfinished returns the distinct task IDs of q's stream entries (queued and
// running tasks, and stale entries), flow control key lists (queued tasks of
// a flow-controlled queue) and schedule members (delayed and retrying
// tasks): every task that is not terminal is among them.
func (b *Broker) unfinished(ctx context.Context, q QueueRef) ([]string, error) {
	k := keysFor(q)
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, s := range k.streams() {
		start := "-"
		for {
			msgs, err := b.rdb.XRangeN(ctx, s, start, "+", pageSize).Result()
			if err != nil {
				return nil, fmt.Errorf("broker: list entries of %s: %w", s, err)
			}
			for _, m := range msgs {
				id, _ := m.Values["t"].(string)
				add(id)
			}
			if len(msgs) < pageSize {
				break
			}
			start = "(" + msgs[len(msgs)-1].ID
		}
	}
	if err := b.flowListed(ctx, q, add); err != nil {
		return nil, err
	}
	for off := int64(0); ; off += pageSize {
		members, err := b.rdb.ZRange(ctx, k.schedule(), off, off+pageSize-1).Result()
		if err != nil {
			return nil, fmt.Errorf("broker: list schedule of %s: %w", q, err)
		}
		for _, id := range members {
			add(id)
		}
		if len(members) < pageSize {
			return ids, nil
		}
	}
}

// TaskCRTasks returns the IDs of q's unfinished tasks that Task CRs submitted
// (SubmitRequest.FromTaskCR), for the controllers' orphan sweep: those whose
// Task is gone were deleted while no manager watched.
func (b *Broker) TaskCRTasks(ctx context.Context, q QueueRef) ([]string, error) {
	ids, err := b.unfinished(ctx, q)
	if err != nil {
		return nil, err
	}
	k := keysFor(q)
	var out []string
	for len(ids) > 0 {
		page := ids[:min(pageSize, len(ids))]
		ids = ids[len(page):]
		cmds := make([]*redis.SliceCmd, len(page))
		if _, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range page {
				cmds[i] = p.HMGet(ctx, k.task(id), "state", "from_cr")
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("broker: read tasks of %s: %w", q, err)
		}
		for i, c := range cmds {
			v := c.Val()
			if state, _ := v[0].(string); state != "" && !State(state).Terminal() && v[1] == "1" {
				out = append(out, page[i])
			}
		}
	}
	return out, nil
}

// DeleteQueue removes queue q from Redis. In order: its config (new
// submissions now get QUEUE_NOT_FOUND), a cancel of every unfinished task
// (Running ones get their cancel flag; their workers stop them once the task
// record is gone too, see CancelRequested), then every key under the queue's
// prefix. It returns how many tasks it cancelled. Calling it again after an
// error finishes the job; calling it for a queue that does not exist is a no-op.
func (b *Broker) DeleteQueue(ctx context.Context, q QueueRef) (cancelled int, err error) {
	if err := validQueue(q); err != nil {
		return 0, err
	}
	k := keysFor(q)
	if err := b.rdb.Del(ctx, k.config()).Err(); err != nil {
		return 0, fmt.Errorf("broker: delete config of %s: %w", q, err)
	}
	ids, err := b.unfinished(ctx, q)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		_, err := b.Cancel(ctx, q, id)
		switch {
		case err == nil:
			cancelled++
		case !errors.Is(err, ErrTaskNotFound) && !errors.Is(err, ErrTaskTerminal):
			return cancelled, err
		}
	}
	unlink := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, globEscape(k.prefix)+"*", pageSize).Iterator()
		batch := make([]string, 0, pageSize)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			err := c.Unlink(ctx, batch...).Err()
			batch = batch[:0]
			return err
		}
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == pageSize {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return flush()
	}
	switch c := b.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, unlink)
	case *redis.Client:
		err = unlink(ctx, c)
	default:
		err = fmt.Errorf("unsupported client %T", b.rdb)
	}
	if err != nil {
		return cancelled, fmt.Errorf("broker: delete keys of %s: %w", q, err)
	}
	return cancelled, nil
}

// globEscape escapes the glob characters of a SCAN MATCH pattern.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}

// flowListed calls add with the task ID of every entry of q's flow control
// key lists: the lists of the keys in each band's ready set and of the
// parked keys (a key with tasks in a band is in one or the other).
func (b *Broker) flowListed(ctx context.Context, q QueueRef, add func(string)) error {
	k := keysFor(q)
	n, err := b.rdb.HGet(ctx, k.prefix+sufFlowState, "n").Int64()
	if errors.Is(err, redis.Nil) || n <= 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker: list flow tasks of %s: %w", q, err)
	}
	lists := map[string]bool{}
	for band := range Bands {
		ready := k.prefix + sufFlowReady + strconv.Itoa(band)
		for off := int64(0); ; off += pageSize {
			keys, err := b.rdb.ZRange(ctx, ready, off, off+pageSize-1).Result()
			if err != nil {
				return fmt.Errorf("broker: list flow keys of %s: %w", q, err)
			}
			for _, key := range keys {
				lists[k.flowList(band, key)] = true
			}
			if len(keys) < pageSize {
				break
			}
		}
	}
	parked, err := b.rdb.HGetAll(ctx, k.prefix+sufFlowParked).Result()
	if err != nil {
		return fmt.Errorf("broker: list flow keys of %s: %w", q, err)
	}
	for key, p := range parked {
		for _, c := range p[min(1, len(p)):] {
			lists[k.flowList(int(c-'0'), key)] = true
		}
	}
	for l := range lists {
		for off := int64(0); ; off += pageSize {
			ids, err := b.rdb.LRange(ctx, l, off, off+pageSize-1).Result()
			if err != nil {
				return fmt.Errorf("broker: list flow tasks of %s: %w", q, err)
			}
			for _, id := range ids {
				add(id)
			}
			if len(ids) < pageSize {
				break
			}
		}
	}
	return nil
}
