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

package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
	"github.com/dtq-dev/dtq/pkg/redistest/rediscluster"
)

// clusterMasters is the number of masters of the stack's Redis Cluster.
const clusterMasters = 3

// redisNodes is the stack's Redis: one redis-server, or the masters of a
// Redis Cluster (Options.RedisCluster), each loopback only with AOF on, so a
// restart (RestartRedis) keeps every acknowledged write.
type redisNodes struct {
	servers []*redisServer
	cluster bool
}

func newRedisNodes(bin, stackDir, logDir, fsync string, cluster bool) *redisNodes {
	if !cluster {
		return &redisNodes{servers: []*redisServer{{bin: bin, dataDir: filepath.Join(stackDir, "redis"),
			logPath: filepath.Join(logDir, "redis.log"), stackDir: stackDir, fsync: fsync}}}
	}
	r := &redisNodes{cluster: true}
	for i := range clusterMasters {
		dir := filepath.Join(stackDir, "redis", strconv.Itoa(i))
		r.servers = append(r.servers, &redisServer{bin: bin, dataDir: dir,
			logPath: filepath.Join(logDir, "redis-"+strconv.Itoa(i)+".log"), stackDir: stackDir, fsync: fsync,
			// Full coverage off: with a master down, the others serve
			// their slots (docs/redis.md, "One master down").
			extra: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
				"--cluster-require-full-coverage", "no"}})
	}
	return r
}

// start starts every server; a fresh cluster is formed, a restarted one
// waits until it is healthy again.
func (r *redisNodes) start(ctx context.Context) error {
	var fresh bool
	if r.cluster {
		if _, err := os.Stat(filepath.Join(r.servers[0].dataDir, "nodes.conf")); err == nil && r.servers[0].port == 0 {
			// Its nodes know each other by port, and the ports are new.
			return errors.New("a Redis Cluster cannot keep its state between dev stack runs: start without --keep-state")
		}
		fresh = r.servers[0].port == 0
	}
	for _, s := range r.servers {
		if err := s.start(ctx); err != nil {
			return err
		}
	}
	if !r.cluster {
		return nil
	}
	if fresh {
		return rediscluster.Form(ctx, r.addrs(), nil)
	}
	return rediscluster.WaitHealthy(ctx, r.addrs(), nil)
}

// restart stops every server with sig (SIGKILL at once, else SIGTERM with a
// grace period) and starts them again on their ports with their data.
func (r *redisNodes) restart(ctx context.Context, sig syscall.Signal) error {
	for _, s := range r.servers {
		if sig == syscall.SIGKILL {
			s.proc.kill()
		} else {
			s.stop()
		}
		s.proc = nil
	}
	return r.start(ctx)
}

// restartNode stops server i with sig, leaves it down for down, starts it
// again on its port with its data and waits until the cluster is healthy.
func (r *redisNodes) restartNode(ctx context.Context, i int, sig syscall.Signal, down time.Duration) error {
	if i < 0 || i >= len(r.servers) {
		return fmt.Errorf("no redis-server %d: the stack has %d", i, len(r.servers))
	}
	s := r.servers[i]
	if sig == syscall.SIGKILL {
		s.proc.kill()
	} else {
		s.stop()
	}
	s.proc = nil
	select {
	case <-time.After(down):
	case <-ctx.Done():
	}
	if err := s.start(ctx); err != nil {
		return err
	}
	if r.cluster {
		return rediscluster.WaitHealthy(ctx, r.addrs(), nil)
	}
	return nil
}

// stop stops every server (SIGTERM, data kept); start runs them again.
func (r *redisNodes) stop() {
	for _, s := range r.servers {
		s.stop()
		s.proc = nil
	}
}

func (r *redisNodes) addrs() []string {
	out := make([]string, len(r.servers))
	for i, s := range r.servers {
		out[i] = s.addr()
	}
	return out
}

// url is the DTQ_REDIS_URL of the stack (pkg/redisconn's forms).
func (r *redisNodes) url() string {
	if !r.cluster {
		return "redis://" + r.servers[0].addr() + "/0"
	}
	a := r.addrs()
	return "redis+cluster://" + a[0] + "?addr=" + strings.Join(a[1:], "&addr=")
}

// redisServer is one redis-server of the stack, data in dataDir.
type redisServer struct {
	bin, dataDir, logPath, stackDir string
	fsync                           string
	extra                           []string // more arguments (cluster mode)
	port                            int
	proc                            *child
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// start runs redis-server on r.port, or on a free port when it is 0, and waits
// until it answers PING.
func (r *redisServer) start(ctx context.Context) error {
	if err := os.MkdirAll(r.dataDir, 0o755); err != nil {
		return err
	}
	pick := r.port == 0
	var lastErr error
	for range 5 {
		if pick {
			p, err := loopback.FreePort()
			if err != nil {
				return err
			}
			r.port = p
		}
		cmd := exec.Command(r.bin, append([]string{
			"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
			"--daemonize", "no", "--dir", r.dataDir, "--appendonly", "yes", "--appendfsync", r.fsync,
			"--save", "", "--loglevel", "warning", "--logfile", "",
			// The setting docs/operations.md recommends (Production Redis, "Stream
			// nodes"): a completion's XDEL walks its stream node from the start.
			"--stream-node-max-entries", "20"}, r.extra...)...)
		proc, err := startChild("redis-server", r.stackDir, r.logPath, cmd)
		if err != nil {
			return err
		}
		if lastErr = pingUntil(ctx, r.addr(), proc, 10*time.Second); lastErr == nil {
			r.proc = proc
			return nil
		}
		proc.kill()
		if !pick {
			break
		}
	}
	return fmt.Errorf("redis-server did not start (log: %s): %w", r.logPath, lastErr)
}

func (r *redisServer) stop() {
	if r.proc != nil {
		// SIGTERM makes redis-server fsync the AOF before it exits.
		r.proc.stop(10 * time.Second)
	}
}

func pingUntil(ctx context.Context, addr string, proc *child, timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if proc.exited() {
			return fmt.Errorf("redis-server exited: %w", proc.err)
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err = c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no PING answer within %v: %w", timeout, err)
}

func redisBinary() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found in PATH: run `make redis` (installs it with apt) or install Redis 7")
	}
	return filepath.Abs(bin)
}
