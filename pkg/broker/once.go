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

	"github.com/redis/go-redis/v9"
)

// nodeOf returns the client of the node that runs a script on keys: rdb
// itself, or on a cluster the master of keys[0]'s slot. Its Conn is a
// sticky connection: once a read on it failed it refuses every command, so
// go-redis sends nothing on it again.
func nodeOf(ctx context.Context, rdb redis.UniversalClient, keys []string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		if len(keys) > 0 {
			return c.MasterForKey(ctx, keys[0])
		}
	}
	return nil, fmt.Errorf("broker: no node of a %T", rdb)
}

// runOnce runs sc on rdb as a call go-redis never sends a second time
// (onceScripter), for a script that is not idempotent on a second send: when
// the reply does not come in time the caller gets the error (the script may
// have run).
func runOnce(ctx context.Context, rdb redis.UniversalClient, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	return sc.Run(ctx, onceScripter{rdb}, keys, args...)
}

// scripter is a client or a pipeline.
type scripter interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// onceScripter sends EVALSHA and EVAL as commands that say NoRetry, which
// go-redis does not send again after a failure, alone or in a pipeline (a
// cluster client still follows MOVED and ASK, before which Redis ran
// nothing). A failed dial is not retried either: the caller's own retry
// (the worker's read loop backs off and reads again) covers it. A sticky
// connection (Conn) would retry a dial, at about 18 allocations and 15 us a
// call (a scratch benchmark on this machine).
type onceScripter struct{ scripter }

func (s onceScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "evalsha", sha1, keys, args)
}

func (s onceScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.eval(ctx, "eval", script, keys, args)
}

// eval builds the command as go-redis's own Eval does.
func (s onceScripter) eval(ctx context.Context, name, script string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	cmd := redis.NewCmd(ctx, append(a, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = s.Process(ctx, noRetry{cmd})
	return cmd
}

// noRetry is a command go-redis does not send again (Cmder.NoRetry).
type noRetry struct{ *redis.Cmd }

func (noRetry) NoRetry() bool { return true }
