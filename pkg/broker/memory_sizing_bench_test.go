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
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// BenchmarkMemory measures the Redis memory a task holds in each state, and
// an idempotency record, for the sizing formula of docs/operations.md: N
// tasks go through submit (with and without a key), start and complete on a
// fresh redis-server, and used_memory is read after each phase, minus the
// events stream (capped per queue, reported on its own). Run it with:
//
//	go -C pkg test ./broker -run '^$' -bench 'Memory$' -benchtime 1x
//
// DTQ_BENCH_TASKS sets N (default 20000).
func BenchmarkMemory(b *testing.B) {
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("DTQ_BENCH_TASKS")); err == nil && v > 0 {
		n = v
	}
	srv := redistest.Start(b)
	rdb := srv.Client()
	cfg := DefaultQueueConfig()
	cfg.MaxDepth = int64(n)
	ver, _ := rdb.Info(ctx, "server").Result()
	fmt.Printf("\n%d tasks per run, %s, result {\"ok\":true}\n\n", n, infoField(ver, "redis_version"))
	fmt.Println("| payload | queued, no key | queued, with key | idempotency record | running | finished (result and record kept) | finished, result expired | finished, result and record expired | events stream at its cap |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, size := range []int{100, 1000} {
		payload := []byte(`{"p":"` + strings.Repeat("x", size-8) + `"}`)
		var row []string
		per := func(delta int64) string { return strconv.FormatInt(delta/int64(n), 10) + " B" }

		// Without keys: queued.
		base := memoryState(b, rdb, QueueRef{})
		q := QueueRef{Namespace: "mem", Name: "nokey"}
		br := New(rdb)
		if err := br.EnsureQueue(ctx, q, cfg); err != nil {
			b.Fatal(err)
		}
		submitAll(b, br, q, n, payload, false)
		row = append(row, per(memoryState(b, rdb, q).sub(base)))
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}

		// With keys: queued, running, finished, then as retention passes.
		base = memoryState(b, rdb, QueueRef{})
		q = QueueRef{Namespace: "mem", Name: "key"}
		if err := br.EnsureQueue(ctx, q, cfg); err != nil {
			b.Fatal(err)
		}
		submitAll(b, br, q, n, payload, true)
		queued := memoryState(b, rdb, q).sub(base)
		row = append(row, per(queued))
		k := keysFor(q)
		if err := deleteMatching(rdb, k.idempotency("*")); err != nil {
			b.Fatal(err)
		}
		row = append(row, per(queued-memoryState(b, rdb, q).sub(base)))
		// The records again, for the phases below.
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		base = memoryState(b, rdb, QueueRef{})
		if err := br.EnsureQueue(ctx, q, cfg); err != nil {
			b.Fatal(err)
		}
		submitAll(b, br, q, n, payload, true)
		var started []Started
		for len(started) < n {
			got, err := br.ReadStart(ctx, q, "c", "w", 500, 0)
			if err != nil || len(got) == 0 {
				b.Fatalf("read-start: %d of %d, %v", len(started), n, err)
			}
			started = append(started, got...)
		}
		row = append(row, per(memoryState(b, rdb, q).sub(base)))
		forEach(b, len(started), func(i int) error {
			x := Execution{Delivery: started[i].Delivery, WorkerID: "w", Attempt: started[i].Task.Attempt}
			_, err := br.Complete(ctx, q, x, Outcome{Result: raw(`{"ok":true}`)})
			return err
		})
		row = append(row, per(memoryState(b, rdb, q).sub(base)))
		if err := deleteMatching(rdb, k.result("*")); err != nil {
			b.Fatal(err)
		}
		row = append(row, per(memoryState(b, rdb, q).sub(base)))
		if err := deleteMatching(rdb, k.idempotency("*")); err != nil {
			b.Fatal(err)
		}
		row = append(row, per(memoryState(b, rdb, q).sub(base)))
		events, err := rdb.MemoryUsage(ctx, k.events(), 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		entries, _ := rdb.XLen(ctx, k.events()).Result()
		row = append(row, fmt.Sprintf("%d KiB (%d entries)", events/1024, entries))
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("| %d B | %s |\n", size, strings.Join(row, " | "))
	}
}

// memory is used_memory and the events stream's share of it.
type memory struct{ used, events int64 }

// memoryState reads used_memory and the size of q's events stream.
func memoryState(b *testing.B, rdb *redis.Client, q QueueRef) memory {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	used, _ := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	events, err := rdb.MemoryUsage(ctx, keysFor(q).events(), 0).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		b.Fatal(err)
	}
	return memory{used: used, events: events}
}

// sub is the memory used since base, without the events stream.
func (m memory) sub(base memory) int64 {
	return (m.used - m.events) - (base.used - base.events)
}

func infoField(info, name string) string {
	for l := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return ""
}

// submitAll submits n tasks with 16 concurrent callers (so batches form as
// in production), with a unique idempotency key each when keyed.
func submitAll(b *testing.B, br *Broker, q QueueRef, n int, payload []byte, keyed bool) {
	forEach(b, n, func(i int) error {
		req := SubmitRequest{Type: "echo", Payload: payload, Priority: 5}
		if keyed {
			req.IdempotencyKey = fmt.Sprintf("order-%08d", i)
		}
		_, err := br.Submit(ctx, q, req)
		return err
	})
}

// forEach calls f(0..n-1) from 16 goroutines and fails b on the first error.
func forEach(b *testing.B, n int, f func(i int) error) {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// deleteMatching deletes the keys matching pattern (as if they expired).
func deleteMatching(rdb *redis.Client, pattern string) error {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			if err := rdb.Del(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if err := rdb.Del(ctx, batch...).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
