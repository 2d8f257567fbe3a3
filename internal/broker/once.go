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

// runOnce runs sc on a sticky connection of the node of keys, for a script
// that is not idempotent on a second send: go-redis does not send it again
// when the reply does not come in time (the caller gets the error; the script
// may have run).
func runOnce(ctx context.Context, rdb redis.UniversalClient, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	node, err := nodeOf(ctx, rdb, keys)
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	cn := node.Conn()
	defer cn.Close()
	return sc.Run(ctx, cn, keys, args...)
}
