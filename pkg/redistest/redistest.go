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

// Package redistest starts private redis-server processes for tests: one per
// call, on a free loopback port, shut down at test cleanup. Tests in parallel
// never share a server.
package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
	"github.com/dtq-dev/dtq/pkg/redistest/rediscluster"
)

const notFound = "redis-server not found: run `make redis` (installs it with apt) or install Redis 7"

// Server is a running redis-server owned by one test.
type Server struct {
	Addr string // host:port

	t      testing.TB
	cmd    *exec.Cmd
	stderr *SyncBuffer

	tls *tls.Config // nil: plain TCP

	once   sync.Once
	client *redis.Client
}

type config struct {
	aofDir string
	args   []string
	tls    *TLS
}

// Option configures Start.
type Option func(*config)

// WithAOF turns on the append-only file (appendfsync always) in dir, so a test
// can restart Redis and keep its data.
func WithAOF(dir string) Option {
	return func(c *config) { c.aofDir = dir }
}

// WithArgs appends raw redis-server arguments, e.g. "--maxmemory", "10mb".
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithTLS makes the server (every node, for StartCluster and StartSentinel)
// serve TLS only, with ca's server certificate; Client, URL and the
// replication and cluster links use TLS too.
func WithTLS(ca *TLS) Option {
	return func(c *config) { c.tls = ca }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}

// dataArgs are the arguments of a data node (not a sentinel). Its files go
// to a directory of its own: a replica writes the RDB of its full sync to
// disk, and a server started later in the same directory would load it.
func (c config) dataArgs(t testing.TB) []string {
	args := []string{"--save", ""}
	if c.aofDir != "" {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always", "--dir", c.aofDir)
	} else {
		args = append(args, "--appendonly", "no", "--dir", t.TempDir())
	}
	return append(args, c.args...)
}

// Start starts a redis-server, waits until it answers PING and registers its
// shutdown with t.Cleanup. It fails the test when redis-server is missing.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	c := newConfig(opts)
	s, errText := startProcess(t, nil, c.dataArgs(t), c.tls)
	if s == nil {
		t.Fatalf("redis-server did not start: %s", errText)
	}
	return s
}

func binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(notFound)
	}
	return bin
}

// startProcess starts redis-server on a free port (see launch) and registers
// its shutdown with t.Cleanup. On failure it returns nil and the server's
// output.
func startProcess(t testing.TB, lead, extra []string, ca *TLS) (*Server, string) {
	t.Helper()
	s, exited, errText, err := launch(binary(t), lead, extra, ca)
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		return nil, errText
	}
	s.t = t
	t.Cleanup(func() {
		if s.client != nil {
			_ = s.client.Close()
		}
		_ = s.cmd.Process.Kill()
		<-exited
	})
	return s, ""
}

// launch starts redis-server on a free port and waits until it answers,
// retrying when another process grabbed the port between probe and bind. lead
// comes first on the command line (a sentinel's config file), extra last. With
// ca the port serves TLS only. It returns the server and a channel closed when
// it exits, or nil and the server's output when it did not come up.
func launch(bin string, lead, extra []string, ca *TLS) (*Server, chan struct{}, string, error) {
	var lastErr string
	for range 5 {
		p, err := loopback.FreePort()
		if err != nil {
			return nil, nil, "", err
		}
		port := strconv.Itoa(p)
		args := append([]string(nil), lead...)
		var tlsCfg *tls.Config
		if ca != nil {
			tlsCfg = ca.ClientConfig()
			args = append(args, "--port", "0", "--tls-port", port)
			args = append(args, ca.serverArgs()...)
		} else {
			args = append(args, "--port", port)
		}
		args = append(args, "--bind", "127.0.0.1", "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning")
		args = append(args, extra...)
		cmd := exec.Command(bin, args...)
		stderr := &SyncBuffer{}
		cmd.Stdout = stderr
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			return nil, nil, "", fmt.Errorf("start redis-server: %w", err)
		}
		s := &Server{Addr: "127.0.0.1:" + port, cmd: cmd, stderr: stderr, tls: tlsCfg}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if s.pingUntil(exited, 5*time.Second) {
			return s, exited, "", nil
		}
		_ = cmd.Process.Kill()
		<-exited
		lastErr = stderr.String()
		if !strings.Contains(lastErr, "in use") {
			break
		}
	}
	return nil, nil, lastErr, nil
}

// StartMain starts a redis-server for a TestMain, which has no testing.TB
// (Example tests share it): call stop when the tests have run.
func StartMain() (addr string, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, errors.New(notFound)
	}
	s, exited, errText, err := launch(bin, nil, []string{"--save", "", "--appendonly", "no"}, nil)
	if err != nil {
		return "", nil, err
	}
	if s == nil {
		return "", nil, fmt.Errorf("redis-server did not start: %s", errText)
	}
	return s.Addr, func() { _ = s.cmd.Process.Kill(); <-exited }, nil
}

func (s *Server) pingUntil(exited <-chan struct{}, timeout time.Duration) bool {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, TLSConfig: s.tls})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// URL returns redis://127.0.0.1:port/0 (rediss:// with TLS).
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr + "/0"
	}
	return "redis://" + s.Addr + "/0"
}

// Client returns a client for the server, closed at cleanup.
func (s *Server) Client() *redis.Client {
	s.once.Do(func() { s.client = redis.NewClient(&redis.Options{Addr: s.Addr, TLSConfig: s.tls}) })
	return s.client
}

// Kill SIGKILLs the server (Restart starts it again).
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
}

// FlushAll empties the server.
func (s *Server) FlushAll() {
	s.t.Helper()
	if err := s.Client().FlushAll(context.Background()).Err(); err != nil {
		s.t.Fatalf("flushall: %v", err)
	}
}

// Pause stops the server process (SIGSTOP) until Resume: connections stay
// open but nothing answers, as when Redis hangs or a network partition drops
// every packet.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal redis-server: %v", err)
	}
}

// Restart kills the server and starts it again on the same port with the same
// arguments (with WithAOF the data survives).
func (s *Server) Restart() {
	s.t.Helper()
	s.RestartAfter(50 * time.Millisecond)
}

// RestartAfter is Restart with the server down for d (clients see connection
// refused meanwhile; go-redis retries dials for a short while by itself).
func (s *Server) RestartAfter(d time.Duration) {
	s.t.Helper()
	_ = s.cmd.Process.Kill()
	time.Sleep(d)
	cmd := exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
	cmd.Stdout = s.stderr
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("restart redis-server: %v", err)
	}
	s.cmd = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	// A node with AOF loads its data first; on a busy machine that can take
	// longer than a fresh start.
	if !s.pingUntil(exited, 30*time.Second) {
		s.t.Fatalf("redis-server did not restart: %s", s.stderr.String())
	}
}

// StartCluster starts masters redis-server processes in cluster mode, splits
// the 16384 slots between them, joins them and waits for cluster_state:ok. It
// skips the test when redis-server lacks cluster support. The client's
// Options().Addrs are the nodes' addresses. WithArgs and WithTLS apply to
// every node; WithAOF is not supported.
func StartCluster(t testing.TB, masters int, opts ...Option) *redis.ClusterClient {
	t.Helper()
	binary(t)
	c := newConfig(opts)
	if c.aofDir != "" {
		t.Fatalf("StartCluster: WithAOF is not supported")
	}
	if masters < 1 {
		t.Fatalf("StartCluster: masters must be >= 1")
	}
	dir := t.TempDir()
	nodes := make([]*Server, masters)
	for i := range nodes {
		nd := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			t.Fatal(err)
		}
		nodes[i] = startCluster(t, nd, c)
	}
	ctx := context.Background()
	addrs := make([]string, masters)
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	if err := rediscluster.Form(ctx, addrs, nodes[0].tls); err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, TLSConfig: nodes[0].tls})
	t.Cleanup(func() { _ = cc.Close() })
	// The client learns the slot map lazily; wait until every node agrees.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err == nil {
			if shards, err := cc.ClusterShards(ctx).Result(); err == nil && len(shards) == masters {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster client did not see %d masters", masters)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cc
}

func startCluster(t testing.TB, dir string, c config) *Server {
	t.Helper()
	args := []string{"--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-node-timeout", "2000", "--dir", dir}
	if c.tls != nil {
		args = append(args, "--tls-cluster", "yes")
	}
	s, errText := startProcess(t, nil, append(args, c.args...), c.tls)
	if s == nil {
		if strings.Contains(strings.ToLower(errText), "cluster") {
			t.Skipf("redis-server lacks cluster support: %s", errText)
		}
		t.Fatalf("redis-server (cluster mode) did not start: %s", errText)
	}
	return s
}
