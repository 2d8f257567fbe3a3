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
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// BenchmarkFinishedTaskMemory measures the Redis memory a finished task keeps
// for its retention: b.N keyed tasks with a payload of each size are
// submitted, run and completed (Succeeded, with a 20-byte result, or Failed),
// and Redis's used_memory after, minus before, is reported per task along
// with the task hash's own MEMORY USAGE. Run with a fixed count:
//
//	go -C pkg test ./broker -run '^$' -bench FinishedTaskMemory -benchtime 2000x
func BenchmarkFinishedTaskMemory(b *testing.B) {
	for _, outcome := range []string{"succeeded", "failed"} {
		for _, size := range []int{83, 1024, 10240} {
			b.Run(fmt.Sprintf("%s/payload=%d", outcome, size), func(b *testing.B) {
				rdb := redistest.Start(b).Client()
				br, q := New(rdb), QueueRef{Namespace: "ns", Name: "q"}
				cfg := DefaultQueueConfig()
				cfg.MaxDepth = int64(b.N) + 1
				cfg.DeadLetter = false
				if err := br.EnsureQueue(ctx, q, cfg); err != nil {
					b.Fatal(err)
				}
				payload := []byte(`{"data":"` + strings.Repeat("x", size-11) + `"}`)
				before := usedMemory(b, rdb)
				var last string
				b.ResetTimer()
				for i := range b.N {
					r, err := br.Submit(ctx, q, SubmitRequest{Type: "t", Payload: payload, Priority: 5, IdempotencyKey: "key-" + strconv.Itoa(i)})
					if err != nil {
						b.Fatal(err)
					}
					ss, err := br.ReadStart(ctx, q, "w", "w", 1, 0)
					if err != nil || len(ss) != 1 || !ss[0].Run {
						b.Fatalf("read: %+v %v", ss, err)
					}
					out := Outcome{Result: []byte(`{"ok":true,"n":1234}`)}
					if outcome == "failed" {
						out = Outcome{Err: "permanent failure"}
					}
					x := Execution{Delivery: ss[0].Delivery, WorkerID: "w", Attempt: ss[0].Task.Attempt}
					if _, err := br.Complete(ctx, q, x, out); err != nil {
						b.Fatal(err)
					}
					last = r.Task.ID
				}
				b.StopTimer()
				after := usedMemory(b, rdb)
				b.ReportMetric(float64(after-before)/float64(b.N), "bytes/task")
				b.ReportMetric(float64(rdb.MemoryUsage(ctx, keysFor(q).task(last), 0).Val()), "hash-bytes")
			})
		}
	}
}

// usedMemory reads INFO memory's used_memory.
func usedMemory(b *testing.B, c *redis.Client) int64 {
	m, err := infoFields(ctx, c, "memory")
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(m["used_memory"], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
