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

package worker

// IdempotentOperation lives in the SDK, not in the engine (pkg/broker),
// because it runs on the user's own Redis client and keys: the key namespace is
// the caller's, independent of submission idempotency keys.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/wait"
)

// DefaultOperationLease is how long a running IdempotentOperation holds its key
// before another caller may take it over. The holder renews it every third of
// the lease while fn runs, so only a crashed holder lets it lapse.
const DefaultOperationLease = 30 * time.Second

// ErrOperationLeaseLost is the cause of fn's context when the holder could not
// renew its lease (Redis unreachable, or the key was deleted or taken over).
var ErrOperationLeaseLost = errors.New("worker: idempotent operation lease lost")

// OperationOption configures IdempotentOperation.
type OperationOption func(*opConfig)

type opConfig struct {
	lease time.Duration
	poll  time.Duration
}

// WithLease sets the lease (default DefaultOperationLease, minimum 100ms).
func WithLease(d time.Duration) OperationOption {
	return func(c *opConfig) { c.lease = max(d, 100*time.Millisecond) }
}

// Record layout: a hash at key with
//
//	state   "running" | "done"
//	token   the holder's random token (running only)
//	result  fn's JSON result (done only)
//	at      unix ms of the last write
//
// running: PEXPIRE lease; done: PEXPIRE ttl.

// opAcquire takes the record when there is none.
//
// KEYS[1]  -> the operation's key (IdempotentOperation's key)
//
// ARGV[1]  -> the caller's token
// ARGV[2]  -> lease, ms
// ARGV[3]  -> now, Unix ms
//
// Returns {"acquired"} | {"done", result} | {"running", pttl}. A record
// running under the caller's own token is the caller's: the same call sent
// twice (go-redis re-sends a call whose reply it did not read) or retried
// after a lost reply, so it answers "acquired" again.
var opAcquire = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if not st or (st == 'running' and redis.call('HGET', KEYS[1], 'token') == ARGV[1]) then
  redis.call('HSET', KEYS[1], 'state', 'running', 'token', ARGV[1], 'at', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'acquired'}
end
if st == 'done' then
  return {'done', redis.call('HGET', KEYS[1], 'result') or 'null'}
end
return {'running', tostring(redis.call('PTTL', KEYS[1]))}
`)

// opRenew extends the lease of a running record the caller holds.
//
// KEYS[1]  -> the operation's key
//
// ARGV[1]  -> the caller's token
// ARGV[2]  -> lease, ms
//
// Returns 1 when still held, else 0.
var opRenew = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] and redis.call('HGET', KEYS[1], 'state') == 'running' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// opFinish stores the result unless another holder already stored one (then
// it returns that one).
//
// KEYS[1]  -> the operation's key
//
// ARGV[1]  -> the caller's token
// ARGV[2]  -> fn's result, JSON
// ARGV[3]  -> ttl, ms
// ARGV[4]  -> now, Unix ms
//
// Returns {"stored"} | {"done", result}.
var opFinish = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') == 'done' and redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return {'done', redis.call('HGET', KEYS[1], 'result') or 'null'}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[2], 'at', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'stored'}
`)

// opRelease deletes a running record the caller holds.
//
// KEYS[1]  -> the operation's key
//
// ARGV[1]  -> the caller's token
//
// Returns 1 when deleted, else 0.
var opRelease = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] and redis.call('HGET', KEYS[1], 'state') == 'running' then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// IdempotentOperation runs fn at most once per key among successful runs within
// ttl, and tells the caller whether this call ran it. The rules:
//
//   - The first caller takes a lease on key (SET-NX-like, in a script) and runs
//     fn. While fn runs the lease (WithLease, default 30s) is renewed every third
//     of the lease; fn's context is cancelled with ErrOperationLeaseLost when a
//     renewal fails.
//   - fn succeeds: its result is stored as JSON at key for ttl, counted from
//     completion, and returned with ran=true. Later callers within ttl get
//     ran=false and the stored result, and fn does not run.
//   - fn fails: the key is released at once and the error is returned with
//     ran=true, so a retry of the task runs fn again.
//   - The holder crashes inside fn: the key stays blocked only until the lease
//     lapses (at most one lease), then the next caller runs fn. So fn can run
//     twice if it crashed after its side effect and before the result was
//     stored; make the side effect itself idempotent when that matters.
//   - A caller that finds the key held by a live holder waits (polling) until
//     the result is stored, the key is released or lapses, or ctx ends
//     (ctx.Err() is returned).
//   - A result that cannot be marshalled is an error; the key is released.
//
// key is used as is (choose your own namespace, e.g. "myapp:receipt:<order>");
// the record is one Redis hash, so it works on Redis Cluster too.
func IdempotentOperation[T any](ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration,
	fn func(ctx context.Context) (T, error), opts ...OperationOption) (ran bool, result T, err error) {
	cfg := opConfig{lease: DefaultOperationLease, poll: 50 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	if ttl <= 0 {
		return false, result, errors.New("worker: IdempotentOperation ttl must be positive")
	}
	if key == "" {
		return false, result, errors.New("worker: IdempotentOperation key is empty")
	}
	var tb [16]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	keys := []string{key}
	for {
		res, err := opAcquire.Run(ctx, rdb, keys, token, cfg.lease.Milliseconds(), time.Now().UnixMilli()).StringSlice()
		if err != nil {
			return false, result, fmt.Errorf("idempotent operation %q: acquire: %w", key, err)
		}
		switch res[0] {
		case "done":
			if err := json.Unmarshal([]byte(res[1]), &result); err != nil {
				return false, result, fmt.Errorf("idempotent operation %q: stored result: %w", key, err)
			}
			return false, result, nil
		case "running":
			if err := wait.Sleep(ctx, wait.Jitter(cfg.poll, 0.2)); err != nil {
				return false, result, err
			}
			continue
		}
		return runHeld(ctx, rdb, key, token, ttl, cfg, fn)
	}
}

func runHeld[T any](ctx context.Context, rdb redis.UniversalClient, key, token string, ttl time.Duration, cfg opConfig,
	fn func(ctx context.Context) (T, error)) (bool, T, error) {
	keys := []string{key}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewDone := make(chan struct{})
	stopRenew := make(chan struct{})
	go func() {
		defer close(renewDone)
		t := time.NewTicker(cfg.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stopRenew:
				return
			case <-t.C:
			}
			rctx, rc := context.WithTimeout(context.Background(), cfg.lease/3)
			n, err := opRenew.Run(rctx, rdb, keys, token, cfg.lease.Milliseconds()).Int()
			rc()
			if err != nil || n == 0 {
				cancel(ErrOperationLeaseLost)
				return
			}
		}
	}()
	v, ferr := fn(fctx)
	close(stopRenew)
	<-renewDone

	// The record writes must happen even when ctx has just ended, and survive
	// a Redis restart (retryConn): fn has run, and giving up here would let a
	// retry of the task run it again.
	wctx := context.WithoutCancel(ctx)
	var data []byte
	if ferr == nil {
		var merr error
		data, merr = json.Marshal(v)
		if merr != nil {
			ferr = fmt.Errorf("idempotent operation %q: marshal result: %w", key, merr)
		}
	}
	if ferr != nil {
		if err := retryConn(wctx, func(ctx context.Context) error { return opRelease.Run(ctx, rdb, keys, token).Err() }); err != nil {
			ferr = errors.Join(ferr, fmt.Errorf("release key: %w", err))
		}
		var zero T
		return true, zero, ferr
	}
	var res []string
	err := retryConn(wctx, func(ctx context.Context) (err error) {
		res, err = opFinish.Run(ctx, rdb, keys, token, string(data), ttl.Milliseconds(), time.Now().UnixMilli()).StringSlice()
		return err
	})
	if err != nil {
		return true, v, fmt.Errorf("idempotent operation %q: store result: %w", key, err)
	}
	if res[0] == "done" {
		// Our lease lapsed and another caller finished first: both ran; keep theirs.
		var other T
		if json.Unmarshal([]byte(res[1]), &other) == nil {
			return true, other, nil
		}
	}
	return true, v, nil
}
