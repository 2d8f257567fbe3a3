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
// processes started in cluster mode (the dev stack's and the tests'), and
// moves a slot between its masters (SlotMove).
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

// SlotMove moves one hash slot from the master that serves it to another
// master, step by step, the way Redis' own resharding does (redis-cli
// --cluster reshard): Begin marks the slot IMPORTING on the target and
// MIGRATING on the source, Migrate moves keys (MIGRATE), Finish moves the
// rest and gives the slot to the target on every master. Between the steps
// the caller decides which keys move when (the tests move a queue's keys in
// an order that finds its scripts' weak spots).
type SlotMove struct {
	Slot                           int
	masters                        []*redis.Client
	src, dst                       *redis.Client
	srcID, dstID, dstHost, dstPort string
}

// NewSlotMove prepares the move of slot away from its master to another one
// of cc's masters, with cc's credentials. Close closes its connections.
func NewSlotMove(ctx context.Context, cc *redis.ClusterClient, slot int) (*SlotMove, error) {
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	o := cc.Options()
	m := &SlotMove{Slot: slot}
	for _, s := range shards {
		for _, n := range s.Nodes {
			if n.Role != "master" {
				continue
			}
			c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(n.IP, fmt.Sprint(n.Port)),
				Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig})
			m.masters = append(m.masters, c)
			owns := false
			for _, r := range s.Slots {
				owns = owns || (int64(slot) >= r.Start && int64(slot) <= r.End)
			}
			switch {
			case owns:
				m.src, m.srcID = c, n.ID
			case m.dst == nil:
				m.dst, m.dstID, m.dstHost, m.dstPort = c, n.ID, n.IP, fmt.Sprint(n.Port)
			}
		}
	}
	if m.src == nil || m.dst == nil {
		m.Close()
		return nil, fmt.Errorf("slot %d: no master serving it, or no other master", slot)
	}
	return m, nil
}

// Begin puts the slot in its migrating state on both masters.
func (m *SlotMove) Begin(ctx context.Context) error {
	if err := m.dst.Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "IMPORTING", m.srcID).Err(); err != nil {
		return err
	}
	return m.src.Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "MIGRATING", m.dstID).Err()
}

// Left returns up to n keys of the slot still on the source.
func (m *SlotMove) Left(ctx context.Context, n int) ([]string, error) {
	return m.src.ClusterGetKeysInSlot(ctx, m.Slot, n).Result()
}

// Migrate moves keys to the target.
func (m *SlotMove) Migrate(ctx context.Context, keys ...string) error {
	args := []any{"MIGRATE", m.dstHost, m.dstPort, "", 0, 5000, "REPLACE"}
	switch o := m.src.Options(); {
	case o.Username != "":
		args = append(args, "AUTH2", o.Username, o.Password)
	case o.Password != "":
		args = append(args, "AUTH", o.Password)
	}
	args = append(args, "KEYS")
	for _, k := range keys {
		args = append(args, k)
	}
	if err := m.src.Do(ctx, args...).Err(); err != nil && err.Error() != "NOKEY" {
		return fmt.Errorf("MIGRATE: %w", err)
	}
	return nil
}

// Finish moves the keys left, batch at a time with pause after each batch,
// and gives the slot to the target on every master.
func (m *SlotMove) Finish(ctx context.Context, batch int, pause time.Duration) error {
	for {
		keys, err := m.Left(ctx, batch)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		if err := m.Migrate(ctx, keys...); err != nil {
			return err
		}
		time.Sleep(pause)
	}
	for _, c := range m.masters {
		if err := c.Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.dstID).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the connections to the masters.
func (m *SlotMove) Close() { closeAll(m.masters) }
