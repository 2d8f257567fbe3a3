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
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// A Redis that may evict keys is refused, with a message naming the setting;
// the override turns the refusal into a warning.
func TestCheckRedisRefusesEviction(t *testing.T) {
	rdb := redistest.Start(t, redistest.WithAOF(t.TempDir()), redistest.WithArgs("--maxmemory-policy", "volatile-lru")).Client()
	warnings, err := CheckRedis(ctx, rdb, false)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), `maxmemory-policy is "volatile-lru"`) ||
		!strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("err %v (warnings %q), want REDIS_EVICTION_POLICY naming maxmemory-policy", err, warnings)
	}
	warnings, err = CheckRedis(ctx, rdb, true)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "maxmemory-policy") {
		t.Fatalf("with the override: %q %v, want one warning naming maxmemory-policy", warnings, err)
	}
}

// noeviction with AOF passes silently; persistence off is a warning; a server
// with CONFIG disabled (managed Redis) is checked through INFO and still
// refused when it may evict.
func TestCheckRedisPersistenceAndDisabledConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		opts    []redistest.Option
		warning string // "" none
		refused bool
	}{
		"aof":                 {opts: []redistest.Option{redistest.WithAOF(t.TempDir())}},
		"no persistence":      {warning: "persistence is off"},
		"rdb only":            {opts: []redistest.Option{redistest.WithArgs("--save", "60 1")}, warning: "AOF is off"},
		"config disabled":     {opts: []redistest.Option{redistest.WithArgs("--rename-command", "CONFIG", "")}, warning: "cannot be read"},
		"config disabled lru": {opts: []redistest.Option{redistest.WithArgs("--rename-command", "CONFIG", "", "--maxmemory-policy", "allkeys-lru")}, refused: true},
	} {
		t.Run(name, func(t *testing.T) {
			rdb := redistest.Start(t, tc.opts...).Client()
			warnings, err := CheckRedis(ctx, rdb, false)
			if tc.refused {
				if !errors.Is(err, ErrEvictionPolicy) {
					t.Fatalf("err %v, want REDIS_EVICTION_POLICY", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.warning == "" && len(warnings) != 0:
				t.Fatalf("warnings %q, want none", warnings)
			case tc.warning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warning)):
				t.Fatalf("warnings %q, want one containing %q", warnings, tc.warning)
			}
		})
	}
}

// An unreachable Redis is an error, not a warning.
func TestCheckRedisUnreachable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // nothing listens on port 1
	defer rdb.Close()
	if _, err := CheckRedis(ctx, rdb, false); err == nil || errors.Is(err, ErrEvictionPolicy) {
		t.Fatalf("err %v, want a connection error", err)
	}
}

// A server older than 7.0 lacks SET NX GET (the submit script's claim): the
// start-up check refuses it; an unparsable version is let through.
func TestAtLeast7(t *testing.T) {
	for v, want := range map[string]bool{"7.0.15": true, "7.2.4": true, "8.0.0": true, "10.1": true,
		"6.2.14": false, "6.0.0": false, "5.0.7": false, "unknown": true} {
		if got := atLeast7(v); got != want {
			t.Errorf("atLeast7(%q) = %v, want %v", v, got, want)
		}
	}
}
