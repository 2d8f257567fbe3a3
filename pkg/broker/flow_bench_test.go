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
	"fmt"
	"testing"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// BenchmarkFlowTaskCost reports the Redis CPU of one task's whole life
// (redis-us/task: the EVALSHA usec of INFO commandstats over submit, claim
// and complete, in batches of opBatch) on a plain queue and on a
// flow-controlled one shaped as the drain benchmark's (1000 keys with
// weighted fairness, per-key caps that do not bind). A queue's ceiling on
// one Redis core is about 1e6 / redis-us/task tasks a second.
//
//	go -C pkg test ./broker -run '^$' -bench FlowTaskCost
func BenchmarkFlowTaskCost(b *testing.B) {
	for _, c := range []struct {
		name string
		flow *FlowControl
	}{
		{"plain", nil},
		{"flow, 1000 keys", &FlowControl{PerKey: KeyLimits{Concurrency: 1000}}},
		{"flow, 1000 keys, queue rate and maxConcurrency", &FlowControl{PerKey: KeyLimits{Concurrency: 1000},
			Rate: &FlowRate{Limit: 1e6, Period: 1e9, Burst: 1e6}, MaxConcurrency: 1e6}},
	} {
		b.Run(c.name, func(b *testing.B) {
			rdb := redistest.Start(b).Client()
			eng := New(rdb)
			q := QueueRef{Namespace: "ns", Name: "q"}
			cfg := DefaultQueueConfig()
			cfg.MaxDepth = 1 << 40
			cfg.Flow = c.flow
			if err := eng.EnsureQueue(ctx, q, cfg); err != nil {
				b.Fatal(err)
			}
			reqs := make([]SubmitRequest, opBatch)
			n := 0
			cycle := func() {
				for i := range reqs {
					reqs[i] = SubmitRequest{Type: "t", Payload: raw(`{"n":1}`), Priority: 5, FlowKey: fmt.Sprintf("tenant-%d", n%1000)}
					n++
				}
				if _, _, err := eng.SubmitMany(ctx, q, reqs); err != nil {
					b.Fatal(err)
				}
				ss, err := eng.ReadStart(ctx, q, "w", "w", opBatch, 0)
				if err != nil {
					b.Fatal(err)
				}
				items := make([]completeItem, len(ss))
				for i, s := range ss {
					items[i] = completeItem{x: Execution{Delivery: s.Delivery, WorkerID: "w", Attempt: s.Task.Attempt}, kind: "ok", retryable: "0"}
				}
				if _, _, err := eng.completeBatch(ctx, q, items); err != nil {
					b.Fatal(err)
				}
			}
			for range 1000 / opBatch { // every key has had tasks: the steady state
				cycle()
			}
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				cycle()
			}
			b.ReportMetric(evalshaMicros(b, rdb)/float64(b.N*opBatch), "redis-us/task")
		})
	}
}
