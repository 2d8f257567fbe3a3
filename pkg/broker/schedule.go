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

// PromoteDue moves up to limit due schedule members to their streams in one
// script: Pending keeps its attempt, Retrying gets attempt+1, expired ones end
// Expired (a Retrying one included, original defect 3), cancelled ones end
// Cancelled, missing ones are dropped. Safe to call concurrently.
// It returns how many were moved and the due time of the next member (zero if none).
func (b *Broker) PromoteDue(ctx context.Context, q QueueRef, limit int) (moved int, next time.Time, err error) {
	p := b.PromoteDueMany(ctx, []QueueRef{q}, limit)[0]
	return p.Moved, p.Next, p.Err
}

// Promotion is one queue's share of PromoteDueMany.
type Promotion struct {
	Moved int       // members moved to their streams
	Next  time.Time // due time of the next member; zero if none
	Err   error
}

// PromoteDueMany is PromoteDue for many queues at once, in one pipeline (one
// round trip and one connection per Redis node however many queues there
// are). The replies are in the order of qs.
func (b *Broker) PromoteDueMany(ctx context.Context, qs []QueueRef, limit int) []Promotion {
	if limit <= 0 {
		limit = 100
	}
	now, nowtxt := b.now()
	run := func(c redis.Scripter, q QueueRef, sc func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd) *redis.Cmd {
		k := keysFor(q)
		return sc(ctx, c, k.guarded(k.schedule()), k.prefix, now, nowtxt, limit)
	}
	cmds := make([]*redis.Cmd, len(qs))
	_, _ = b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range qs {
			cmds[i] = run(p, q, promoteScript.EvalSha)
		}
		return nil
	}) // each command carries its own error
	out := make([]Promotion, len(qs))
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") { // first use on this node: Run loads the script
			cmd = run(b.rdb, qs[i], promoteScript.Run)
		}
		v, err := cmd.Slice()
		if err != nil {
			out[i].Err = fmt.Errorf("broker: promote due of %s: %w", qs[i], err)
			continue
		}
		n, _ := v[0].(int64)
		out[i].Moved = int(n)
		if s := str(v[1]); s != "" {
			f, _ := strconv.ParseFloat(s, 64)
			out[i].Next = time.UnixMilli(int64(f)).UTC()
		}
	}
	return out
}
