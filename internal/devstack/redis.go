package devstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is the stack's private redis-server: loopback only, AOF on, data
// in <dir>/redis, so a restart (RestartRedis) keeps every acknowledged write.
type redisServer struct {
	bin, dataDir, logPath, stackDir string
	fsync                           string
	port                            int
	proc                            *child
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *redisServer) url() string { return "redis://" + r.addr() + "/0" }

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
			p, err := freePort()
			if err != nil {
				return err
			}
			r.port = p
		}
		cmd := exec.Command(r.bin,
			"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
			"--daemonize", "no", "--dir", r.dataDir, "--appendonly", "yes", "--appendfsync", r.fsync,
			"--save", "", "--loglevel", "warning", "--logfile", "")
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
			return fmt.Errorf("redis-server exited: %v", proc.err)
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
