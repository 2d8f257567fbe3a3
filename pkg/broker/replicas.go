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

// Replica acknowledgement. Redis replicates asynchronously: a failover loses
// the writes the promoted replica had not received, even those already
// answered. A queue whose config sets ReplicaAcks (the Queue's
// spec.durability) runs its Submit and Complete batch scripts followed by
// WAIT on the same connection (replicaAck), so each returns only once that
// many replicas have its writes, or fails with ErrNotReplicated after
// ReplicaAckTimeout. Such a write is on the master and survives a failover
// only if it reached the promoted replica after all: the caller retries it
// (with its idempotency key a submission's retry is a replay or an
// in-progress answer, never a second task; a completion's retry records
// nothing twice). Start, Touch and the management writes (Cancel, Requeue,
// Pause ...) do not wait: a lost Start or Touch only redelivers the task.
// docs/redis.md ("Failover") has the measured trade-off.

// ackRefresh is how often a process re-reads a queue's ReplicaAcks and
// ReplicaAckTimeout from its config: a change of the Queue reaches every
// API replica, worker and the manager within this time.
const ackRefresh = 5 * time.Second

// ackSetting is a queue's replica acknowledgement as read at read.
type ackSetting struct {
	sc   redis.Scripter // b.fast, or a *replicaAck
	read time.Time
}

// writer returns the scripter of q's Submit and Complete batches: a
// replicaAck when q's config sets ReplicaAcks, else b.fast. It reads the
// config (one HMGET) on first use and then every ackRefresh.
func (b *Broker) writer(ctx context.Context, q QueueRef) (redis.Scripter, error) {
	qb := b.batchers(q)
	now := b.clock.Now()
	if s := qb.ack.Load(); s != nil && now.Sub(s.read) < ackRefresh {
		return s.sc, nil
	}
	v, err := b.rdb.HMGet(ctx, keysFor(q).config(), cfgReplicaAcks, cfgReplicaAckTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("read the replica acknowledgement of %s: %w", q, err)
	}
	n, _ := strconv.Atoi(str(v[0]))
	ms, _ := strconv.ParseInt(str(v[1]), 10, 64)
	s := &ackSetting{sc: b.fast, read: now}
	if n > 0 {
		s.sc = &replicaAck{rdb: b.rdb, n: n, timeout: time.Duration(ms) * time.Millisecond}
	}
	qb.ack.Store(s)
	return s.sc, nil
}

// replicaAck is a redis.Scripter that follows each script call with WAIT on
// the same connection of the node that runs it.
type replicaAck struct {
	rdb     redis.UniversalClient
	n       int
	timeout time.Duration
}

func (r *replicaAck) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return r.run(ctx, keys, func(c *redis.Conn) *redis.Cmd { return c.EvalSha(ctx, sha1, keys, args...) })
}

func (r *replicaAck) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.run(ctx, keys, func(c *redis.Conn) *redis.Cmd { return c.Eval(ctx, script, keys, args...) })
}

// The read-only calls and script loading write nothing to wait for.

func (r *replicaAck) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.rdb.EvalRO(ctx, script, keys, args...)
}

func (r *replicaAck) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return r.rdb.EvalShaRO(ctx, sha1, keys, args...)
}

func (r *replicaAck) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return r.rdb.ScriptExists(ctx, hashes...)
}

func (r *replicaAck) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return r.rdb.ScriptLoad(ctx, script)
}

// run sends call and then WAIT on one connection: WAIT counts the replicas
// that have every write of its connection so far. On a cluster that is a
// connection to the master of the script's slot. A replay that writes nothing
// (a submission's retry through another connection, finding the task the
// first try wrote) still waits for the master's writes so far: Redis moves a
// connection's write offset at every command that may write, a script call
// or a SET NX that set nothing included (TestReplicaAckOfAReplay; with a
// lagging replica, WAIT after no command at all would answer at once).
//
// The connection is a sticky one (Conn), so go-redis never sends either
// command again on another connection: once a read failed, the connection
// refuses every later command. WAIT goes on its own, not pipelined with the
// call, because go-redis reads a pipeline under the client's ReadTimeout
// (5 s by default) while the WAIT command gets a read timeout of its own
// (its timeout plus 10 s) and is not re-sent when that passes; pipelined, a
// timeout above the ReadTimeout failed the read and go-redis re-sent both
// (TestReplicaAckLongerThanReadTimeout). This costs one round trip to the
// master more than a pipeline.
func (r *replicaAck) run(ctx context.Context, keys []string, call func(*redis.Conn) *redis.Cmd) *redis.Cmd {
	node, err := nodeOf(ctx, r.rdb, keys)
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	cn := node.Conn()
	defer cn.Close()
	cmd := call(cn)
	if cmd.Err() != nil {
		return cmd
	}
	got, err := cn.Wait(ctx, r.n, r.timeout).Result()
	switch {
	case err != nil:
		cmd.SetErr(&Error{Code: CodeNotReplicated, Message: "the write is on the master; WAIT failed", Err: err})
	case got < int64(r.n):
		cmd.SetErr(&Error{Code: CodeNotReplicated,
			Message: fmt.Sprintf("the write is on the master; %d of %d replicas acknowledged it within %v", got, r.n, r.timeout)})
	}
	return cmd
}
