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
	"time"

	"github.com/redis/go-redis/v9"
)

// WithReplicaAck makes Submit wait, in the same round trip as its script,
// until n replicas acknowledge its writes (Redis WAIT on the same connection),
// for at most timeout. A submission fewer replicas acknowledged in time fails
// with ErrNotReplicated: it is on the master and survives a failover only if
// it reached the promoted replica after all, so the caller retries it (with
// its idempotency key, a retry is a replay or an in-progress answer, never a
// second task). Start and Complete do not wait. docs/redis.md ("Failover")
// has the measured trade-off.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(b *Broker) { b.replicaAck = &replicaAck{n: n, timeout: timeout} }
}

// replicaAck is a redis.Scripter that follows each script call with WAIT in
// one pipeline on the node that runs it.
type replicaAck struct {
	rdb     redis.UniversalClient
	n       int
	timeout time.Duration
}

func (r *replicaAck) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return r.run(ctx, keys, func(p redis.Pipeliner) *redis.Cmd { return p.EvalSha(ctx, sha1, keys, args...) })
}

func (r *replicaAck) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return r.run(ctx, keys, func(p redis.Pipeliner) *redis.Cmd { return p.Eval(ctx, script, keys, args...) })
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

// run pipelines call and WAIT on one connection: WAIT counts the replicas
// that have every write of its connection so far. On a cluster that is a
// connection to the master of the script's slot.
func (r *replicaAck) run(ctx context.Context, keys []string, call func(redis.Pipeliner) *redis.Cmd) *redis.Cmd {
	var node redis.Cmdable = r.rdb
	if cc, ok := r.rdb.(*redis.ClusterClient); ok && len(keys) > 0 {
		m, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
		node = m
	}
	var cmd, wait *redis.Cmd
	_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = call(p)
		wait = p.Do(ctx, "WAIT", r.n, r.timeout.Milliseconds())
		return nil
	}) // each command carries its own error
	if cmd.Err() == nil {
		if got, err := wait.Int64(); err != nil || got < int64(r.n) {
			cmd.SetErr(&Error{Code: CodeNotReplicated,
				Message: fmt.Sprintf("%d of %d replicas acknowledged the write within %v (%v)", got, r.n, r.timeout, err)})
		}
	}
	return cmd
}
