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

package redistest

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Two servers started by parallel tests never collide: distinct ports, and a
// write in one is invisible in the other.
func TestParallelServersAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := Start(t), Start(t)
	if a.Addr == b.Addr {
		t.Fatalf("both servers on %s", a.Addr)
	}
	if err := a.Client().Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Client().Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("write in a visible in b: n=%d err=%v", n, err)
	}
	a.FlushAll()
	if n, _ := a.Client().DBSize(ctx).Result(); n != 0 {
		t.Fatalf("FlushAll left %d keys", n)
	}
}

func TestParallelHelpers(t *testing.T) {
	ports := make(chan string, 4)
	t.Run("group", func(t *testing.T) {
		for range 4 {
			t.Run("server", func(t *testing.T) {
				t.Parallel()
				s := Start(t)
				ctx := context.Background()
				if err := s.Client().Incr(ctx, "n").Err(); err != nil {
					t.Fatal(err)
				}
				if n, _ := s.Client().Get(ctx, "n").Int(); n != 1 {
					t.Fatalf("counter = %d, want 1 (another test wrote here)", n)
				}
				ports <- s.Addr
			})
		}
	})
	close(ports)
	seen := map[string]bool{}
	for p := range ports {
		if seen[p] {
			t.Fatalf("port %s used twice", p)
		}
		seen[p] = true
	}
}

func TestAOFRestartKeepsData(t *testing.T) {
	t.Parallel()
	s := Start(t, WithAOF(t.TempDir()))
	ctx := context.Background()
	if err := s.Client().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if v, err := s.Client().Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after restart: %q %v", v, err)
	}
}

func TestStartCluster(t *testing.T) {
	t.Parallel()
	cc := StartCluster(t, 3)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "{x}1", "{x}2"} {
		if err := cc.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
	}
	var mu sync.Mutex
	withKeys := 0
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		if n > 0 {
			withKeys++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if withKeys < 2 {
		t.Fatalf("keys on %d masters, want them spread over at least 2", withKeys)
	}
}

// WaitReplicas follows a failover it did not cause: after Sentinel moves the
// master on its own (here SENTINEL FAILOVER), it returns the new master once
// the old one has rejoined as its replica.
func TestWaitReplicasFollowsTheSentinels(t *testing.T) {
	s := StartSentinel(t, 1, 1)
	if m := s.WaitReplicas(t, 1); m != s.Master {
		t.Fatalf("before the failover: master %s, want %s", m.Addr, s.Master.Addr)
	}
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr})
	defer c.Close()
	if err := c.Failover(t.Context(), s.MasterName).Err(); err != nil {
		t.Fatal(err)
	}
	promoted := s.WaitPromoted(t, s.Master)
	if m := s.WaitReplicas(t, 1); m != promoted || m != s.Replicas[0] {
		t.Fatalf("after the failover: master %s, want %s", m.Addr, s.Replicas[0].Addr)
	}
}
