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
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CheckRedis checks the Redis settings dtq's guarantees rest on; every binary
// that writes tasks (the manager, the HTTP API) calls it at start.
//
//   - maxmemory-policy must be noeviction: under any other policy Redis evicts
//     keys when it is full (volatile-* policies evict idempotency records first,
//     as they carry TTLs; allkeys-* evict streams and task hashes), and
//     duplicates or lost tasks follow silently. Anything else is an
//     ErrEvictionPolicy error naming the setting, unless allowEviction, which
//     turns it into a warning.
//   - The server must be Redis 7.0 or later (SET NX GET, see the submit
//     script); an older one is an error.
//   - Persistence off (no AOF, no RDB snapshots) is a warning: a restart loses
//     every task. So is AOF with appendfsync no.
//
// The policy is read from INFO, which managed services leave enabled; the
// persistence details need CONFIG GET, and a server that disables CONFIG (as
// managed Redis does) gets a warning instead of a failure. On Redis Cluster
// every master is checked. Only a Redis that cannot be reached is an error of
// another kind.
func CheckRedis(ctx context.Context, rdb redis.UniversalClient, allowEviction bool) (warnings []string, err error) {
	var mu sync.Mutex // ForEachMaster checks the masters in parallel
	check := func(ctx context.Context, c *redis.Client) error {
		w, err := checkNode(ctx, c, allowEviction)
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, w...)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Options().Addr, err)
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
		return warnings, err
	case *redis.Client:
		return warnings, check(ctx, c)
	}
	return nil, fmt.Errorf("broker: check Redis: unsupported client %T", rdb)
}

func checkNode(ctx context.Context, c *redis.Client, allowEviction bool) (warnings []string, err error) {
	info, err := infoFields(ctx, c, "server", "memory", "persistence")
	if err != nil {
		if !isServerError(err) {
			return nil, fmt.Errorf("broker: check Redis: %w", err)
		}
		return []string{fmt.Sprintf("cannot read Redis INFO (%v): make sure maxmemory-policy is noeviction and persistence is on", err)}, nil
	}
	if v := info["redis_version"]; v != "" && !atLeast7(v) {
		return warnings, fmt.Errorf("broker: Redis %s is older than 7.0, which dtq needs (a submission claims its "+
			"idempotency key with SET NX GET; on an older server every submission with a key fails)", v)
	}
	if p := info["maxmemory_policy"]; p != "noeviction" {
		msg := fmt.Sprintf("Redis maxmemory-policy is %q, not noeviction: when Redis is full it evicts keys "+
			"(volatile-* policies evict idempotency records first, allkeys-* streams and tasks), and lost tasks or "+
			"duplicate runs follow; set maxmemory-policy to noeviction", p)
		if !allowEviction {
			return warnings, &Error{Code: CodeEvictionPolicy, Message: msg}
		}
		warnings = append(warnings, msg+" (allowed by an override)")
	}
	if info["aof_enabled"] == "1" {
		if fsync, err := configGet(ctx, c, "appendfsync"); err == nil && fsync == "no" {
			warnings = append(warnings, "Redis appendfsync is no: a host crash loses the writes the OS had not flushed (about 30 s); use everysec or always")
		}
		return warnings, nil
	}
	switch save, err := configGet(ctx, c, "save"); {
	case err != nil:
		warnings = append(warnings, fmt.Sprintf("Redis AOF is off and its RDB snapshot schedule cannot be read (CONFIG GET: %v): "+
			"a crash loses every write since the last snapshot, or everything when snapshots are off too", err))
	case save == "":
		warnings = append(warnings, "Redis persistence is off (no AOF, no RDB snapshots): a restart loses every task and idempotency record; "+
			"turn on appendonly")
	default:
		warnings = append(warnings, fmt.Sprintf("Redis AOF is off (RDB snapshots %q): a crash loses every write since the last snapshot; "+
			"turn on appendonly", save))
	}
	return warnings, nil
}

// atLeast7 reports whether the version text v ("7.0.15") is 7.0 or later.
func atLeast7(v string) bool {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return err != nil || n >= 7 // an unparsable version is not refused
}

// infoFields reads the given INFO sections as field -> value.
func infoFields(ctx context.Context, c *redis.Client, sections ...string) (map[string]string, error) {
	text, err := c.Info(ctx, sections...).Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// configGet returns one CONFIG GET value; an error when CONFIG is disabled.
func configGet(ctx context.Context, c *redis.Client, name string) (string, error) {
	m, err := c.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", err
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("no %s in the reply", name)
	}
	return v, nil
}

// isServerError reports whether err is a reply of the server (an unknown or
// forbidden command), not a connection failure.
func isServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
