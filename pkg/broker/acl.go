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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Tenant isolation: every namespace's workers reach Redis as an ACL user of
// their own, allowed only that namespace's keys and the commands workers
// need. Redis checks key patterns on every command, including each
// redis.call inside a script (Redis 7), so the engine's scripts work under
// the user as long as they touch only the namespace's queues.

// NamespaceUser is the ACL user name of a namespace's workers.
func NamespaceUser(namespace string) string { return "dtq-ns-" + namespace }

// namespaceUserPrefix starts every NamespaceUser name.
const namespaceUserPrefix = "dtq-ns-"

// workerCommands are the commands a worker may run. The data-type categories
// hold only commands that name their keys, so the key patterns bound them;
// the keyless commands that could reach other tenants' data or the server
// (FLUSHALL, KEYS, SCAN, CONFIG, ACL, INFO, DEBUG, SCRIPT FLUSH...) are left out.
// COMMAND, CLUSTER SLOTS, READONLY and ASKING are what go-redis's cluster client
// needs; HELLO, AUTH and SELECT are its connection set-up. TIME is the flow
// control scripts' clock (flow_scripts.go).
var workerCommands = []string{
	"-@all",
	"+@hash", "+@string", "+@sortedset", "+@stream", "+@list", "+@set",
	"+del", "+unlink", "+exists", "+type", "+expire", "+pexpire", "+expireat", "+pexpireat", "+ttl", "+pttl", "+persist", "+time",
	"+eval", "+evalsha", "+script|load", "+script|exists",
	"+multi", "+exec", "+discard", "+watch", "+unwatch",
	"+ping", "+hello", "+auth", "+select", "+command", "+cluster|slots", "+readonly", "+readwrite", "+asking",
}

// namespaceUserRules are the ACL SETUSER rules of ns's user: password is the
// current password; acceptHashes are SHA-256 hex digests of earlier
// passwords that stay valid (a rotation's grace period).
func namespaceUserRules(ns, password string, acceptHashes []string) []any {
	args := []any{"reset", "on", ">" + password}
	for _, h := range acceptHashes {
		args = append(args, "#"+h)
	}
	args = append(args, "~"+namespaceKeyPattern(ns), "~"+AppKeyPrefix(ns)+"*", "resetchannels")
	for _, c := range workerCommands {
		args = append(args, c)
	}
	return args
}

// PasswordHash is the digest Redis keeps of a password (ACL GETUSER).
func PasswordHash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

// ACL manages the namespace users. On Redis Cluster every change is applied
// to every node (ACL users are per node and not replicated).
type ACL struct {
	rdb redis.UniversalClient
	// noSetInfo is set once a server refused clientSetInfo, so later users are
	// created without trying it (one refused command per process, not one per
	// namespace in dtq_redis_command_errors_total).
	noSetInfo atomic.Bool
}

// NewACL returns an ACL on rdb, whose user needs the ACL command.
func NewACL(rdb redis.UniversalClient) *ACL { return &ACL{rdb: rdb} }

// doer runs a raw command on one node.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// eachNode runs fn on every node of a cluster (masters and replicas), or on
// the one server.
func (a *ACL) eachNode(ctx context.Context, fn func(ctx context.Context, c doer) error) error {
	if cc, ok := a.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	}
	return fn(ctx, a.rdb)
}

// clientSetInfo is the command go-redis sends on every new connection since
// Redis 7.2 (it ignores a refusal); older servers do not know it, and ACL
// SETUSER refuses unknown commands, so it is allowed only where it exists.
const clientSetInfo = "+client|setinfo"

// SetNamespaceUser creates ns's user, or resets it to exactly these rules
// (connections already authenticated as it stay open).
func (a *ACL) SetNamespaceUser(ctx context.Context, ns, password string, acceptHashes []string) error {
	args := append([]any{"ACL", "SETUSER", NamespaceUser(ns)}, namespaceUserRules(ns, password, acceptHashes)...)
	return a.eachNode(ctx, func(ctx context.Context, c doer) error {
		if !a.noSetInfo.Load() {
			err := c.Do(ctx, append(args, clientSetInfo)...).Err()
			if err == nil || !strings.Contains(err.Error(), "client|setinfo") {
				return setUserErr(ns, err)
			}
			a.noSetInfo.Store(true) // before Redis 7.2
		}
		return setUserErr(ns, c.Do(ctx, args...).Err())
	})
}

func setUserErr(ns string, err error) error {
	if err != nil {
		return fmt.Errorf("broker: ACL SETUSER %s: %w", NamespaceUser(ns), err)
	}
	return nil
}

// DeleteNamespaceUser deletes ns's user; Redis closes its connections.
func (a *ACL) DeleteNamespaceUser(ctx context.Context, ns string) error {
	return a.eachNode(ctx, func(ctx context.Context, c doer) error {
		if err := c.Do(ctx, "ACL", "DELUSER", NamespaceUser(ns)).Err(); err != nil {
			return fmt.Errorf("broker: ACL DELUSER %s: %w", NamespaceUser(ns), err)
		}
		return nil
	})
}

// HasNamespaceUser reports whether every node has ns's user, accepting
// exactly the passwords whose digests are hashes.
func (a *ACL) HasNamespaceUser(ctx context.Context, ns string, hashes []string) (bool, error) {
	want := slices.Sorted(slices.Values(hashes))
	missing := errors.New("missing")
	err := a.eachNode(ctx, func(ctx context.Context, c doer) error {
		got, err := passwordHashes(ctx, c, ns)
		if err != nil {
			return err
		}
		if slices.Sort(got); !slices.Equal(got, want) {
			return missing
		}
		return nil
	})
	if errors.Is(err, missing) {
		return false, nil
	}
	return err == nil, err
}

// PasswordHashes returns the digests of the passwords ns's user accepts, nil
// when there is no such user.
func (a *ACL) PasswordHashes(ctx context.Context, ns string) ([]string, error) {
	return passwordHashes(ctx, a.rdb, ns)
}

func passwordHashes(ctx context.Context, c doer, ns string) ([]string, error) {
	v, err := c.Do(ctx, "ACL", "GETUSER", NamespaceUser(ns)).Result()
	if errors.Is(err, redis.Nil) || (err == nil && v == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: ACL GETUSER %s: %w", NamespaceUser(ns), err)
	}
	var pw any
	switch u := v.(type) {
	case map[any]any: // RESP3
		pw = u["passwords"]
	case []any: // RESP2: flat key/value list
		for i := 0; i+1 < len(u); i += 2 {
			if u[i] == "passwords" {
				pw = u[i+1]
			}
		}
	}
	list, _ := pw.([]any)
	out := make([]string, 0, len(list))
	for _, h := range list {
		if s, ok := h.(string); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// NamespaceUsers lists the namespaces that have a user.
func (a *ACL) NamespaceUsers(ctx context.Context) ([]string, error) {
	users, err := a.rdb.Do(ctx, "ACL", "USERS").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("broker: ACL USERS: %w", err)
	}
	var out []string
	for _, u := range users {
		if ns, ok := strings.CutPrefix(u, namespaceUserPrefix); ok {
			out = append(out, ns)
		}
	}
	return out, nil
}
