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

// MaxHistoryLimit bounds the samples one History call returns.
const MaxHistoryLimit = 10000

// HistorySample is one reading of a queue kept in its history: the backlog
// at At and the queue's counters' totals since its first use, so that two
// samples give rates (a total that went down was reset: Redis lost it).
type HistorySample struct {
	At           time.Time // Redis's clock when the sample was written
	Queued       int64     // not yet delivered to a worker
	InFlight     int64     // delivered, not yet acknowledged
	Scheduled    int64     // delayed and retrying tasks
	DeadLettered int64     // dead-letter stream length
	Submitted    int64     // new tasks accepted
	Succeeded    int64     // tasks that ended Succeeded
	Failed       int64     // tasks that ended Failed or DeadLettered
	Retries      int64     // failed attempts scheduled for a retry
}

// historyFields are the fields of a history stream entry, in order. A stream
// stores the names once per node when entries repeat them, so an entry costs
// its values.
var historyFields = [...]string{"queued", "in_flight", "scheduled", "dead_lettered", "submitted", "succeeded", "failed", "retries"}

func (s *HistorySample) values() [len(historyFields)]*int64 {
	return [...]*int64{&s.Queued, &s.InFlight, &s.Scheduled, &s.DeadLettered, &s.Submitted, &s.Succeeded, &s.Failed, &s.Retries}
}

// historySampleOf is the sample of metrics m (At left to Redis).
func historySampleOf(m QueueMetrics) HistorySample {
	s := HistorySample{InFlight: m.InFlight, Scheduled: m.Scheduled, DeadLettered: m.DeadLettered,
		Submitted: m.Counters.Accepted, Succeeded: m.Counters.Finished[StateSucceeded],
		Failed: m.Counters.Finished[StateFailed] + m.Counters.Finished[StateDeadLettered], Retries: m.Counters.Retries}
	for _, n := range m.Queued {
		s.Queued += n
	}
	return s
}

// appendHistoryScript appends a sample to a queue's history unless the
// queue is gone: DeleteQueue deletes the config first and every key of the
// queue after, so a sample read before a deletion is never left behind.
//
// KEYS[1]        -> dtq:{<ns>/<q>}:config
// KEYS[2]        -> dtq:{<ns>/<q>}:history
//
// ARGV[1]        -> samples kept (XADD MAXLEN)
// ARGV[2]        -> TTL of the history, milliseconds
// ARGV[3..]      -> the sample's field, value pairs (historyFields)
//
// Returns 1 when appended, 0 when the queue has no config.
var appendHistoryScript = redis.NewScript(`
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
redis.call("XADD", KEYS[2], "MAXLEN", ARGV[1], "*", unpack(ARGV, 3))
redis.call("PEXPIRE", KEYS[2], ARGV[2])
return 1
`)

// RecordHistory reads q's backlog and counters (QueueMetrics) and appends
// them as a sample to q's history, the stream dtq:{ns/q}:history, which keeps
// the newest keep samples and expires ttl after the last one, so the history
// of a queue no longer sampled goes too; a queue deleted meanwhile gets none
// (appendHistoryScript). Two script calls; nothing on the task path.
func (b *Broker) RecordHistory(ctx context.Context, q QueueRef, keep int64, ttl time.Duration) error {
	m, err := b.QueueMetrics(ctx, q)
	if err != nil {
		return err
	}
	s := historySampleOf(m)
	args := make([]any, 0, 2+2*len(historyFields))
	args = append(args, keep, ttl.Milliseconds())
	for i, v := range s.values() {
		args = append(args, historyFields[i], *v)
	}
	k := keysFor(q)
	// A second send would append the sample twice.
	if err := runOnce(ctx, b.rdb, appendHistoryScript, k.guarded(k.config(), k.history()), args...).Err(); err != nil {
		return fmt.Errorf("broker: record history of %s: %w", q, err)
	}
	return nil
}

// History returns q's newest samples (at most limit) written after since
// (zero: every kept one), oldest first. A queue never sampled has none.
func (b *Broker) History(ctx context.Context, q QueueRef, since time.Time, limit int) ([]HistorySample, error) {
	start := "-"
	if !since.IsZero() {
		start = strconv.FormatInt(since.UnixMilli()+1, 10)
	}
	msgs, err := b.rdb.XRevRangeN(ctx, keysFor(q).history(), "+", start, int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("broker: read history of %s: %w", q, err)
	}
	out := make([]HistorySample, len(msgs))
	for i, msg := range msgs {
		s := &out[len(msgs)-1-i]
		s.At = entryTime(msg.ID)
		for j, v := range s.values() {
			*v = num(msg.Values[historyFields[j]])
		}
	}
	return out, nil
}
