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
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Heartbeat writes the worker's record with a TTL of three intervals, with
// the newest layout the worker reads (WorkerInfo.Layout is ignored), unless
// the queue's layout record is newer than that: then it writes nothing and
// returns a *LayoutError. LastHeartbeat is set from the broker's clock. The
// queue's set of workers gets the same TTL, so it goes with the last worker
// of a deleted queue.
func (b *Broker) Heartbeat(ctx context.Context, q QueueRef, w WorkerInfo, interval time.Duration) error {
	k := keysFor(q)
	now, _ := b.now()
	found, err := heartbeatScript.Run(ctx, b.rdb, k.guarded(k.config(), k.worker(w.ID), k.workers()),
		b.maxLayout, (3 * interval).Milliseconds(), now, w.ID,
		"id", w.ID, "hostname", w.Hostname, "concurrency", w.Concurrency, "active", w.Active, "status", w.Status,
		"started_at", msOrZero(w.StartedAt), "last_heartbeat", now, fieldLayout, b.maxLayout, "version", w.Version, "commit", w.Commit).Int()
	if err != nil {
		return fmt.Errorf("broker: heartbeat %s: %w", w.ID, err)
	}
	if found != 0 {
		return &LayoutError{Queue: q, Found: found, Min: b.minLayout, Max: b.maxLayout}
	}
	return nil
}

// heartbeatScript writes a worker's record when the queue's layout record is
// one the worker reads. In one script, so a raise of the record
// (raiseQueueLayoutScript) either sees the worker or refuses it.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:config
// KEYS[2]        -> dtq:{<ns>/<q>}:worker:<id>
// KEYS[3]        -> dtq:{<ns>/<q>}:workers
//
// ARGV[1]        -> the newest layout the worker reads
// ARGV[2]        -> the records' TTL, ms
// ARGV[3]        -> now, Unix ms
// ARGV[4]        -> worker id
// ARGV[5..]      -> field, value pairs of the worker's record
//
// Returns 0 when written, else the queue's layout (newer than ARGV[1]).
var heartbeatScript = redis.NewScript(fmt.Sprintf(`
local found = tonumber(redis.call("HGET", KEYS[1], %q)) or 1
if found > tonumber(ARGV[1]) then return found end
redis.call("HSET", KEYS[2], unpack(ARGV, 5))
redis.call("PEXPIRE", KEYS[2], ARGV[2])
redis.call("ZADD", KEYS[3], ARGV[3], ARGV[4])
redis.call("PEXPIRE", KEYS[3], ARGV[2])
return 0
`, fieldLayout))

// Workers lists the queue's live worker records (those whose heartbeat has not
// expired) and forgets the expired ones.
func (b *Broker) Workers(ctx context.Context, q QueueRef) ([]WorkerInfo, error) {
	k := keysFor(q)
	ids, err := b.rdb.ZRange(ctx, k.workers(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("broker: list workers of %s: %w", q, err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, k.worker(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("broker: read workers of %s: %w", q, err)
	}
	var out []WorkerInfo
	var gone []any
	for i, c := range cmds {
		m := c.Val()
		if len(m) == 0 {
			gone = append(gone, ids[i])
			continue
		}
		out = append(out, workerInfo(m))
	}
	if len(gone) > 0 {
		b.rdb.ZRem(ctx, k.workers(), gone...)
	}
	return out, nil
}

// WorkersOf lists the live workers of every queue of qs, with two pipelines
// whatever their number (for a count across the cluster); unlike Workers it
// forgets no expired record.
func (b *Broker) WorkersOf(ctx context.Context, qs []QueueRef) ([]WorkerInfo, error) {
	sets := make([]*redis.StringSliceCmd, len(qs))
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range qs {
			sets[i] = p.ZRange(ctx, keysFor(q).workers(), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("broker: list workers of %d queues: %w", len(qs), err)
	}
	var recs []*redis.MapStringStringCmd
	_, err = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range qs {
			for _, id := range sets[i].Val() {
				recs = append(recs, p.HGetAll(ctx, keysFor(q).worker(id)))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("broker: read workers of %d queues: %w", len(qs), err)
	}
	var out []WorkerInfo
	for _, c := range recs {
		if m := c.Val(); len(m) > 0 {
			out = append(out, workerInfo(m))
		}
	}
	return out, nil
}

// workerInfo reads a worker record written by Heartbeat.
func workerInfo(m map[string]string) WorkerInfo {
	n := func(f string) int64 { v, _ := strconv.ParseInt(m[f], 10, 64); return v }
	t := func(f string) time.Time {
		if v := n(f); v > 0 {
			return time.UnixMilli(v).UTC()
		}
		return time.Time{}
	}
	return WorkerInfo{ID: m["id"], Hostname: m["hostname"], Concurrency: int(n("concurrency")),
		Active: int(n("active")), Status: m["status"], StartedAt: t("started_at"), LastHeartbeat: t("last_heartbeat"),
		Version: m["version"], Commit: m["commit"], Layout: layoutOf(m[fieldLayout])}
}

// RemoveConsumer deletes a consumer from the group only when it has no pending
// entries (XGROUP DELCONSUMER would discard them); ErrConsumerBusy otherwise.
func (b *Broker) RemoveConsumer(ctx context.Context, q QueueRef, consumer string) error {
	k := keysFor(q)
	n, err := removeConsumerScript.Run(ctx, b.rdb, k.guarded(k.streams()...), k.prefix, consumer).Int()
	if err != nil {
		return fmt.Errorf("broker: remove consumer %s: %w", consumer, err)
	}
	if n == 0 {
		return &Error{Code: CodeConsumerBusy, Message: fmt.Sprintf("consumer %s has pending entries", consumer)}
	}
	return nil
}
