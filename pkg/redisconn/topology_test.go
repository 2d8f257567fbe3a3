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

package redisconn_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// topology is a running Redis deployment: the URL that names it (with
// credentials the Config must override), its data nodes, and a check that a
// client reached it the way the topology says.
type topology struct {
	url   string
	nodes []*redis.Client // admin clients of every data node
	check func(t *testing.T, c redis.UniversalClient)
}

// Each URL form reaches its topology, plain and over TLS with a private CA,
// as an ACL user whose name and password come from the Config (a password
// file), not from the URL.
func TestClientTopologies(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := "plain"
		if withTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var opts []redistest.Option
			var ca *redistest.TLS
			scheme := "redis"
			if withTLS {
				ca = redistest.NewTLS(t)
				opts = append(opts, redistest.WithTLS(ca))
				scheme = "rediss"
			}
			for top, start := range map[redisconn.Topology]func(*testing.T) topology{
				redisconn.Single:   func(t *testing.T) topology { return startSingle(t, scheme, opts) },
				redisconn.Cluster:  func(t *testing.T) topology { return startCluster(t, scheme, opts) },
				redisconn.Sentinel: func(t *testing.T) topology { return startSentinel(t, scheme, opts) },
			} {
				t.Run(string(top), func(t *testing.T) {
					t.Parallel()
					tp := start(t)
					for _, n := range tp.nodes {
						if err := n.Do(t.Context(), "ACL", "SETUSER", "app", "on", ">s3cret", "~*", "+@all").Err(); err != nil {
							t.Fatal(err)
						}
					}
					file := filepath.Join(t.TempDir(), "password")
					if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					cfg := redisconn.Config{URL: tp.url, Username: "app", PasswordFile: file}
					if ca != nil {
						cfg.CAFile = ca.CAFile
					}
					if got, err := cfg.Topology(); err != nil || got != top {
						t.Fatalf("Topology() = %q, %v; want %q", got, err, top)
					}
					c, err := cfg.Client()
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
						t.Fatalf("write through %s: %v", tp.url, err)
					}
					tp.check(t, c)

					if ca != nil { // the CA is what makes TLS work: without it the system roots refuse the certificate
						noCA := cfg
						noCA.CAFile = ""
						c2, err := noCA.Client()
						if err != nil {
							t.Fatal(err)
						}
						defer c2.Close()
						if err := c2.Ping(t.Context()).Err(); err == nil {
							t.Fatalf("without the CA bundle the connection succeeded; the test proves nothing")
						}
					}
				})
			}
		})
	}
}

func whoami(t *testing.T, c interface {
	Do(context.Context, ...any) *redis.Cmd
}) {
	t.Helper()
	if got, err := c.Do(t.Context(), "ACL", "WHOAMI").Text(); err != nil || got != "app" {
		t.Fatalf("ACL WHOAMI = %q, %v; want app", got, err)
	}
}

func runID(t *testing.T, c redis.Cmdable) string {
	t.Helper()
	info, err := c.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
			return v
		}
	}
	t.Fatalf("no run_id in INFO")
	return ""
}

func startSingle(t *testing.T, scheme string, opts []redistest.Option) topology {
	srv := redistest.Start(t, opts...)
	return topology{
		url:   scheme + "://nobody:wrong@" + srv.Addr + "/0",
		nodes: []*redis.Client{srv.Client()},
		check: func(t *testing.T, c redis.UniversalClient) {
			if _, ok := c.(*redis.Client); !ok {
				t.Fatalf("client is a %T, want *redis.Client", c)
			}
			whoami(t, c)
			if runID(t, c) != runID(t, srv.Client()) {
				t.Fatalf("reached another server than %s", srv.Addr)
			}
		},
	}
}

// The URL names one seed node; the client finds the other masters and writes
// land on several of them.
func startCluster(t *testing.T, scheme string, opts []redistest.Option) topology {
	cc := redistest.StartCluster(t, 3, opts...)
	addrs := cc.Options().Addrs
	var nodes []*redis.Client
	for _, a := range addrs {
		n := redis.NewClient(&redis.Options{Addr: a, TLSConfig: cc.Options().TLSConfig})
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	return topology{
		url:   scheme + "+cluster://nobody:wrong@" + addrs[0],
		nodes: nodes,
		check: func(t *testing.T, c redis.UniversalClient) {
			cl, ok := c.(*redis.ClusterClient)
			if !ok {
				t.Fatalf("client is a %T, want *redis.ClusterClient", c)
			}
			for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
				if err := cl.Set(t.Context(), k, k, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			masters, withKeys := 0, 0
			if err := cl.ForEachMaster(t.Context(), func(ctx context.Context, n *redis.Client) error {
				whoami(t, n)
				size, err := n.DBSize(ctx).Result()
				mu.Lock()
				defer mu.Unlock()
				masters++
				if size > 0 {
					withKeys++
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if masters != 3 || withKeys < 2 {
				t.Fatalf("reached %d masters, %d holding keys; want 3 masters and keys on several", masters, withKeys)
			}
		},
	}
}

// The URL names only the sentinel; the client writes to the master it names,
// with the data-node user from the Config.
func startSentinel(t *testing.T, scheme string, opts []redistest.Option) topology {
	s := redistest.StartSentinel(t, 1, 1, opts...)
	return topology{
		url:   scheme + "+sentinel://" + s.Sentinels[0].Addr + "/0?master_name=" + s.MasterName + "&username=nobody&password=wrong",
		nodes: []*redis.Client{s.Master.Client(), s.Replicas[0].Client()},
		check: func(t *testing.T, c redis.UniversalClient) {
			if _, ok := c.(*redis.Client); !ok {
				t.Fatalf("client is a %T, want *redis.Client", c)
			}
			whoami(t, c)
			if runID(t, c) != runID(t, s.Master.Client()) {
				t.Fatalf("reached another server than the master %s", s.Master.Addr)
			}
			if v, err := s.Master.Client().Get(t.Context(), "k").Result(); err != nil || v != "v" {
				t.Fatalf("the write is not on the master: %q %v", v, err)
			}
		},
	}
}
