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

// Package rediscluster forms a Redis Cluster out of fresh redis-server
// processes started in cluster mode: the dev stack's and the tests'.
package rediscluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Form splits the 16384 slots evenly between the masters at addrs (fresh
// nodes started with --cluster-enabled yes), joins them, and waits until every
// node reports cluster_state:ok and knows them all. tlsCfg is nil for plain TCP.
func Form(ctx context.Context, addrs []string, tlsCfg *tls.Config) error {
	nodes := clients(addrs, tlsCfg)
	defer closeAll(nodes)
	per := 16384 / len(nodes)
	for i, n := range nodes {
		lo, hi := i*per, (i+1)*per-1
		if i == len(nodes)-1 {
			hi = 16383
		}
		if err := n.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("cluster addslotsrange on %s: %w", addrs[i], err)
		}
	}
	for _, a := range addrs[1:] {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return err
		}
		if err := nodes[0].Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
			return fmt.Errorf("cluster meet %s: %w", a, err)
		}
	}
	return WaitHealthy(ctx, addrs, tlsCfg)
}

// WaitHealthy waits until every node at addrs reports cluster_state:ok and
// knows all of them (after Form, or after its nodes restarted), until ctx
// ends or 30 s pass.
func WaitHealthy(ctx context.Context, addrs []string, tlsCfg *tls.Config) error {
	nodes := clients(addrs, tlsCfg)
	defer closeAll(nodes)
	known := fmt.Sprintf("cluster_known_nodes:%d", len(addrs))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var last string
		ok := true
		for i, n := range nodes {
			info, err := n.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, known) {
				ok, last = false, fmt.Sprintf("%s: %v %q", addrs[i], err, firstLine(info))
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cluster not healthy (want cluster_state:ok and %s): %s", known, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clients(addrs []string, tlsCfg *tls.Config) []*redis.Client {
	out := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		out[i] = redis.NewClient(&redis.Options{Addr: a, TLSConfig: tlsCfg})
	}
	return out
}

func closeAll(cs []*redis.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}
