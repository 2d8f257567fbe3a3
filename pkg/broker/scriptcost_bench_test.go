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
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// BenchmarkScriptCost reports the Redis CPU of one script call
// (redis-us/op, from INFO commandstats: the EVALSHA's usec, which include the
// commands the script runs), for: a script that only returns; ten XLENs (the
// price of a call from Lua); the shared library every batch script defines
// on each call (luaKeys and luaLib); and the read-and-start script on an
// empty queue (ten XLENs to skip empty bands, then the ten newest entry IDs a
// blocking XREAD waits after). It shows where a script call's fixed cost
// goes, beyond the commands themselves (docs/benchmarks.md).
//
//	go -C pkg test ./broker -run '^$' -bench ScriptCost
func BenchmarkScriptCost(b *testing.B) {
	rdb := redistest.Start(b).Client()
	eng := New(rdb)
	q := QueueRef{Namespace: "ns", Name: "q"}
	if err := eng.EnsureQueue(ctx, q, DefaultQueueConfig()); err != nil {
		b.Fatal(err)
	}
	k := keysFor(q)
	empty := func(sc *redis.Script, keys []string, args ...any) func() error {
		return func() error {
			if err := sc.Run(ctx, rdb, keys, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			return nil
		}
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"return", empty(redis.NewScript("return 1"), nil)},
		{"10 XLEN", empty(redis.NewScript("for i = 1, 10 do redis.call('XLEN', KEYS[1]) end return 1"), []string{k.stream(0)})},
		{"library", empty(redis.NewScript(luaLib+"return 1"), nil, k.prefix)},
		{"read-start, empty queue", func() error { _, err := eng.ReadStart(ctx, q, "w", "w", 1, 0); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.call(); err != nil { // loads the script
				b.Fatal(err)
			}
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(evalshaMicros(b, rdb)/float64(b.N), "redis-us/op")
		})
	}
}

// evalshaMicros is the usec of every EVALSHA since the last CONFIG RESETSTAT.
func evalshaMicros(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cmdstat_evalsha:"); ok {
			_, after, _ := strings.Cut(rest, "usec=")
			usec, _, _ := strings.Cut(after, ",")
			n, err := strconv.ParseFloat(usec, 64)
			if err != nil {
				b.Fatalf("commandstats line %q: %v", l, err)
			}
			return n
		}
	}
	b.Fatal("no EVALSHA in INFO commandstats")
	return 0
}
