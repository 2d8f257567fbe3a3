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
	"strings"
	"time"
)

// Fields of a queue's counters hash (dtq:{ns/q}:stats), written by the
// scripts: "accepted", "duplicate", "refused:<code>", "finished:<state>",
// "retries", "redeliveries".
const (
	statAccepted     = "accepted"
	statDuplicate    = "duplicate"
	statRefused      = "refused:"
	statFinished     = "finished:"
	statRetries      = "retries"
	statRedeliveries = "redeliveries"
	// Flow-controlled tasks' execution times (completeBatchScript), for
	// FlowMetrics.MeanExec.
	statFlowExecMS = "flow_exec_ms"
	statFlowExecN  = "flow_exec_n"
)

// QueueMetrics reads q's backlog by state and its counters in one script call
// (on the auto-pipeliner, so concurrent calls for many queues share round
// trips). A queue that was never used reads as zeros.
func (b *Broker) QueueMetrics(ctx context.Context, q QueueRef) (QueueMetrics, error) {
	k := keysFor(q)
	keys := k.guarded(append(k.streams(), k.schedule(), k.deadLetter(), k.paused(), k.stats(), k.flow())...)
	v, err := queueMetricsScript.Run(ctx, b.fast, keys).Slice()
	if err != nil {
		return QueueMetrics{}, fmt.Errorf("broker: metrics of %s: %w", q, err)
	}
	if len(v) != 6 {
		return QueueMetrics{}, fmt.Errorf("broker: metrics of %s: unexpected reply %v", q, v)
	}
	var m QueueMetrics
	bands, _ := v[0].([]any)
	for i, x := range bands {
		f, _ := x.([]any)
		if i >= Bands || len(f) != 3 {
			return QueueMetrics{}, fmt.Errorf("broker: metrics of %s: unexpected band %v", q, x)
		}
		length, pending := num(f[0]), num(f[1])
		m.Lengths[i], m.Queued[i] = length, length-pending
		m.InFlight += pending
		if at := entryTime(str(f[2])); !at.IsZero() && (m.OldestQueued.IsZero() || at.Before(m.OldestQueued)) {
			m.OldestQueued = at
		}
	}
	m.Scheduled, m.DeadLettered, m.Paused = num(v[1]), num(v[2]), num(v[3]) == 1
	stats := hashMap(v[4])
	m.Counters = countersOf(stats)
	if num(v[5]) == 1 {
		if err := b.flowMetrics(ctx, q, &m, stats); err != nil {
			return QueueMetrics{}, err
		}
	}
	return m, nil
}

// flowMetrics fills m.Flow of a flow-controlled queue (flowMetricsScript)
// and adds the tasks in its key lists to m.Queued and m.Lengths by band.
func (b *Broker) flowMetrics(ctx context.Context, q QueueRef, m *QueueMetrics, stats map[string]string) error {
	k := keysFor(q)
	v, err := flowMetricsScript.Run(ctx, b.fast, k.guarded(k.flow()), k.prefix, b.rateNow()).Slice()
	if err != nil {
		return fmt.Errorf("broker: flow metrics of %s: %w", q, err)
	}
	if len(v) == 0 { // flow control ended meanwhile
		return nil
	}
	if len(v) != 7 {
		return fmt.Errorf("broker: flow metrics of %s: unexpected reply %v", q, v)
	}
	f := FlowMetrics{Enabled: true, Held: num(v[1]), Admissible: num(v[2]), ActiveKeys: num(v[3]), ParkedKeys: num(v[4])}
	f.Throttled = max(0, num(v[0])-f.Admissible)
	for _, l := range replyStrings(v[5]) {
		f.LimitedBy = append(f.LimitedBy, FlowLimit(l))
	}
	for i, n := range replyStrings(v[6]) {
		if i < Bands {
			c, _ := strconv.ParseInt(n, 10, 64)
			m.Queued[i] += c
			m.Lengths[i] += c
		}
	}
	execMS, _ := strconv.ParseInt(stats[statFlowExecMS], 10, 64)
	execN, _ := strconv.ParseInt(stats[statFlowExecN], 10, 64)
	f.ExecCount, f.ExecTotal = execN, time.Duration(execMS)*time.Millisecond
	if execN > 0 {
		f.MeanExec = f.ExecTotal / time.Duration(execN)
	}
	m.Flow = f
	return nil
}

// countersOf parses the stats hash.
func countersOf(h map[string]string) Counters {
	c := Counters{Refused: map[Code]int64{}, Finished: map[State]int64{}}
	for f, v := range h {
		n, _ := strconv.ParseInt(v, 10, 64)
		switch {
		case f == statAccepted:
			c.Accepted = n
		case f == statDuplicate:
			c.Duplicates = n
		case f == statRetries:
			c.Retries = n
		case f == statRedeliveries:
			c.Redeliveries = n
		case strings.HasPrefix(f, statRefused):
			c.Refused[Code(strings.TrimPrefix(f, statRefused))] = n
		case strings.HasPrefix(f, statFinished):
			c.Finished[State(strings.TrimPrefix(f, statFinished))] = n
		}
	}
	return c
}

// entryTime is the time a stream entry ID (<ms>-<seq>) was added; zero for "".
func entryTime(id string) time.Time {
	ms, _, ok := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

func num(v any) int64 {
	n, _ := strconv.ParseInt(str(v), 10, 64)
	return n
}
