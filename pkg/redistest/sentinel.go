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
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a master, its replicas and the sentinels that watch it, as
// StartSentinel started them.
type Sentinel struct {
	MasterName string
	Master     *Server
	Replicas   []*Server
	Sentinels  []*Server
}

// StartSentinel starts a master, the given number of replicas of it, and of
// sentinel processes (redis-server --sentinel) that monitor it with a quorum
// of a majority, a 1 s down-after and a 3 s failover timeout. It returns once
// the replicas are in sync and every sentinel knows the replicas and the other
// sentinels, so a failover can start at once. WithArgs applies to the data
// nodes, WithTLS to every process; WithAOF is not supported.
func StartSentinel(t testing.TB, replicas, sentinels int, opts ...Option) *Sentinel {
	t.Helper()
	c := newConfig(opts)
	if c.aofDir != "" || sentinels < 1 {
		t.Fatalf("StartSentinel: WithAOF is not supported and at least one sentinel is needed")
	}
	s := &Sentinel{MasterName: "dtq-master"}
	start := func(lead, extra []string) *Server {
		srv, errText := startProcess(t, lead, extra, c.tls)
		if srv == nil {
			t.Fatalf("redis-server did not start: %s", errText)
		}
		return srv
	}
	s.Master = start(nil, c.dataArgs(t))
	host, port, _ := net.SplitHostPort(s.Master.Addr)
	for range replicas {
		s.Replicas = append(s.Replicas, start(nil, append(c.dataArgs(t), "--replicaof", host, port)))
	}
	waitFor(t, "replicas in sync", func() bool {
		info, err := s.Master.Client().Info(context.Background(), "replication").Result()
		return err == nil && strings.Count(info, "state=online") == replicas
	})
	dir := t.TempDir()
	for i := range sentinels {
		conf := filepath.Join(dir, "sentinel-"+strconv.Itoa(i)+".conf")
		text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s %[4]d\nsentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 3000\nsentinel parallel-syncs %[1]s 1\n", s.MasterName, host, port, sentinels/2+1)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		s.Sentinels = append(s.Sentinels, start([]string{conf, "--sentinel"}, nil))
	}
	waitFor(t, "sentinels to know the replicas and each other", func() bool {
		for _, sn := range s.Sentinels {
			m, err := s.masterInfo(sn)
			if err != nil || m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
				return false
			}
		}
		return true
	})
	return s
}

// SentinelAddrs are the sentinels' host:port addresses.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		addrs[i] = sn.Addr
	}
	return addrs
}

// WaitPromoted waits until every sentinel names a master other than old and
// that master answers as one, and returns it.
func (s *Sentinel) WaitPromoted(t testing.TB, old *Server) *Server {
	t.Helper()
	var promoted *Server
	waitForState(t, "a replica promoted", func() (bool, string) {
		var state string
		promoted, state = s.agreedMaster()
		if promoted == old {
			promoted, state = nil, "the sentinels still name "+old.Addr
		}
		return promoted != nil, state
	})
	return promoted
}

// WaitReplicas waits until the master every sentinel names has n replicas in
// sync and every sentinel sees n replicas of it up with their link to it ok,
// so that a failover of it can promote one of them, and returns that master.
// It asks the sentinels rather than taking a master from the caller: on a
// loaded machine Sentinel may fail over again on its own (a master that did
// not answer within the down-after time), and a wait on the old one would
// never end.
func (s *Sentinel) WaitReplicas(t testing.TB, n int) *Server {
	t.Helper()
	var master *Server
	waitForState(t, "replicas in sync and known to the sentinels", func() (bool, string) {
		m, state := s.agreedMaster()
		if m == nil {
			return false, state
		}
		info, err := m.Client().Info(context.Background(), "replication").Result()
		if err != nil {
			return false, "master " + m.Addr + ": " + err.Error()
		}
		state = fmt.Sprintf("master %s has %d replicas online;", m.Addr, strings.Count(info, "state=online"))
		ok := strings.Count(info, "state=online") >= n
		for _, sn := range s.Sentinels {
			var rs []map[string]string
			err := withSentinel(sn, func(c *redis.SentinelClient) (err error) {
				rs, err = c.Replicas(context.Background(), s.MasterName).Result()
				return err
			})
			up := 0
			state += " sentinel " + sn.Addr + ":"
			for _, r := range rs {
				if r["flags"] == "slave" && r["master-link-status"] == "ok" {
					up++
				}
				state += fmt.Sprintf(" %s:%s flags=%s link=%s", r["ip"], r["port"], r["flags"], r["master-link-status"])
			}
			if err != nil {
				state += " " + err.Error()
			}
			ok = ok && err == nil && up >= n
		}
		master = m
		return ok, state
	})
	return master
}

// agreedMaster returns the data node every sentinel names as the master, when
// they agree and it answers ROLE as a master; else nil and what it saw.
func (s *Sentinel) agreedMaster() (*Server, string) {
	addr := ""
	for _, sn := range s.Sentinels {
		m, err := s.masterInfo(sn)
		if err != nil {
			return nil, "sentinel " + sn.Addr + ": " + err.Error()
		}
		a := m["ip"] + ":" + m["port"]
		if addr != "" && a != addr {
			return nil, "the sentinels name " + addr + " and " + a
		}
		addr = a
	}
	for _, r := range append([]*Server{s.Master}, s.Replicas...) {
		if r.Addr != addr {
			continue
		}
		role, err := r.Client().Do(context.Background(), "ROLE").Slice()
		if err != nil || len(role) == 0 || role[0] != "master" {
			return nil, fmt.Sprintf("the sentinels name %s, which answers ROLE %v %v", addr, role, err)
		}
		return r, ""
	}
	return nil, "the sentinels name " + addr + ", not a node of this set"
}

// Failovers is the number of failovers of the master so far (the sentinels'
// config epoch), as the first sentinel that answers reports it.
func (s *Sentinel) Failovers() (int, error) {
	var err error
	for _, sn := range s.Sentinels {
		var m map[string]string
		if m, err = s.masterInfo(sn); err == nil {
			return strconv.Atoi(m["config-epoch"])
		}
	}
	return 0, err
}

// masterInfo is SENTINEL MASTER.
func (s *Sentinel) masterInfo(sn *Server) (m map[string]string, err error) {
	err = withSentinel(sn, func(c *redis.SentinelClient) error {
		m, err = c.Master(context.Background(), s.MasterName).Result()
		return err
	})
	return m, err
}

// withSentinel runs f with a client of the SENTINEL commands connected to sn.
func withSentinel(sn *Server, f func(*redis.SentinelClient) error) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr, TLSConfig: sn.tls})
	defer c.Close()
	return f(c)
}

// waitFor polls ok for up to a minute and fails the test when it never holds.
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	waitForState(t, what, func() (bool, string) { return ok(), "" })
}

// waitForState is waitFor whose condition also describes what it saw, which
// the failure message gives from the last poll. The minute is for CI, where
// this runs beside other test packages on two cores.
func waitForState(t testing.TB, what string, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		done, state := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: timed out waiting for %s; last saw: %s", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
