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

package worker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/worker"
)

type receipt struct {
	Charge int `json:"charge"`
}

func TestIdempotentOperationOnceAndStoredResult(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	var runs atomic.Int32
	fn := func(ctx context.Context) (receipt, error) { return receipt{Charge: int(runs.Add(1))}, nil }

	ran, r, err := worker.IdempotentOperation(ctx, rdb, "op:1", time.Hour, fn)
	if err != nil || !ran || r.Charge != 1 {
		t.Fatalf("first: ran %v result %+v err %v", ran, r, err)
	}
	ran, r, err = worker.IdempotentOperation(ctx, rdb, "op:1", time.Hour, fn)
	if err != nil || ran || r.Charge != 1 || runs.Load() != 1 {
		t.Fatalf("second: ran %v result %+v err %v runs %d", ran, r, err, runs.Load())
	}
	if ttl := rdb.PTTL(ctx, "op:1").Val(); ttl < 59*time.Minute {
		t.Fatalf("stored result ttl %s, want the full hour", ttl)
	}
}

// Redis restarting right after fn ran (connection refused, or LOADING)
// must not fail the call: the result is stored once Redis is back, else a
// retry of the task would run fn a second time (found by the e2e chaos test).
func TestIdempotentOperationStoresResultAcrossRedisRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1}) // no client-side retries
	defer rdb.Close()
	ctx := context.Background()
	restarted := make(chan struct{})
	ran, r, err := worker.IdempotentOperation(ctx, rdb, "op:restart", time.Hour, func(ctx context.Context) (receipt, error) {
		// Down for longer than go-redis's own dial retries last.
		go func() { defer close(restarted); srv.RestartAfter(2 * time.Second) }()
		time.Sleep(50 * time.Millisecond) // killed, not yet back
		return receipt{Charge: 7}, nil
	})
	<-restarted
	if err != nil || !ran || r.Charge != 7 {
		t.Fatalf("ran %v result %+v err %v", ran, r, err)
	}
	ran, r, err = worker.IdempotentOperation(ctx, rdb, "op:restart", time.Hour, func(ctx context.Context) (receipt, error) {
		return receipt{Charge: 8}, nil
	})
	if err != nil || ran || r.Charge != 7 {
		t.Fatalf("after restart: ran %v result %+v err %v, want the stored result", ran, r, err)
	}
}

func TestIdempotentOperationConcurrentCallersRunOnce(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	var runs atomic.Int32
	var wg sync.WaitGroup
	results := make([]int, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, r, err := worker.IdempotentOperation(context.Background(), rdb, "op:c", time.Hour, func(ctx context.Context) (int, error) {
				time.Sleep(100 * time.Millisecond)
				return int(runs.Add(1)) * 10, nil
			})
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		}()
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times", runs.Load())
	}
	for _, r := range results {
		if r != 10 {
			t.Fatalf("a caller got %d, want the stored 10", r)
		}
	}
}

func TestIdempotentOperationFailureReleasesKey(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	boom := errors.New("downstream said no")
	ran, _, err := worker.IdempotentOperation(ctx, rdb, "op:f", time.Hour, func(ctx context.Context) (string, error) { return "", boom })
	if !ran || !errors.Is(err, boom) {
		t.Fatalf("ran %v err %v", ran, err)
	}
	if n := rdb.Exists(ctx, "op:f").Val(); n != 0 {
		t.Fatal("a failed fn left its key")
	}
	ran, r, err := worker.IdempotentOperation(ctx, rdb, "op:f", time.Hour, func(ctx context.Context) (string, error) { return "second", nil })
	if !ran || r != "second" || err != nil {
		t.Fatalf("retry: ran %v %q %v", ran, r, err)
	}
}

// A holder that died inside fn (its lease record stays, nobody renews it) blocks
// the key only until the lease lapses.
func TestIdempotentOperationCrashedHolderBlocksOnlyTheLease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	// What a crashed holder leaves behind.
	rdb.HSet(ctx, "op:x", "state", "running", "token", "dead-holder")
	rdb.PExpire(ctx, "op:x", 400*time.Millisecond)
	t0 := time.Now()
	ran, r, err := worker.IdempotentOperation(ctx, rdb, "op:x", time.Hour, func(ctx context.Context) (int, error) { return 7, nil })
	if !ran || r != 7 || err != nil {
		t.Fatalf("ran %v %d %v", ran, r, err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("waited %s for a 400ms lease", d)
	}
	// A live holder renews its lease beyond its length: a contender that
	// arrives after the first lease would have lapsed waits for the result
	// instead of running fn a second time.
	var runs atomic.Int32
	long := func(ctx context.Context) (int, error) {
		runs.Add(1)
		select {
		case <-time.After(900 * time.Millisecond):
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
		return 1, nil
	}
	type outcome struct {
		ran bool
		v   int
		err error
	}
	contender := make(chan outcome, 1)
	go func() {
		time.Sleep(500 * time.Millisecond) // past the first 200ms lease
		ran, v, err := worker.IdempotentOperation(ctx, rdb, "op:long", time.Hour, long, worker.WithLease(200*time.Millisecond))
		contender <- outcome{ran, v, err}
	}()
	ran, _, err = worker.IdempotentOperation(ctx, rdb, "op:long", time.Hour, long, worker.WithLease(200*time.Millisecond))
	if !ran || err != nil {
		t.Fatalf("long fn with renewals: ran %v err %v", ran, err)
	}
	if c := <-contender; c.ran || c.v != 1 || c.err != nil || runs.Load() != 1 {
		t.Fatalf("contender: %+v, fn ran %d times; want the holder's stored result and one run", c, runs.Load())
	}
	// A waiter gives up with its context.
	rdb.HSet(ctx, "op:held", "state", "running", "token", "someone")
	rdb.PExpire(ctx, "op:held", time.Minute)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, _, err := worker.IdempotentOperation(cctx, rdb, "op:held", time.Hour, func(ctx context.Context) (int, error) { return 0, nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter: %v", err)
	}
}

// The acquire script sent twice (go-redis re-sends a call whose reply it did
// not read) answers the caller's own lease as acquired: fn runs at once, not
// after the lease of a holder that is the caller itself has run out.
func TestIdempotentOperationAcquireSentTwice(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(redistest.SendTwice{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ran, r, err := worker.IdempotentOperation(ctx, rdb, "op:twice", time.Hour,
		func(ctx context.Context) (receipt, error) { return receipt{Charge: 1}, nil }, worker.WithLease(time.Minute))
	if err != nil || !ran || r.Charge != 1 {
		t.Fatalf("acquire sent twice: ran %v result %+v err %v, want fn run at once", ran, r, err)
	}
	claim, err := worker.ClaimOperation(ctx, rdb, "op:claim", time.Minute)
	if err != nil || claim.State != worker.OperationAcquired {
		t.Fatalf("claim sent twice: %+v %v, want acquired", claim, err)
	}
}
