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

package main

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// server is a private redis-server (no persistence) on a free loopback port.
// pkg/redistest needs a testing.TB, so this command has its own
// tiny starter.
type server struct {
	addr string
	cmd  *exec.Cmd
}

// serverArgs are the arguments of every redis-server the bench starts:
// loopback, no persistence, and the setting docs/operations.md recommends
// (stream-node-max-entries; the header prints the value a run had).
var serverArgs = []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--stream-node-max-entries", "20"}

func startRedis() (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found: run `make redis` (installs it with apt) or install Redis 7")
	}
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"--port", fmt.Sprint(port)}, serverArgs...)...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c.Ping(context.Background()).Err() == nil {
			return s, nil
		}
	}
	s.stop()
	return nil, fmt.Errorf("redis-server on %s did not start", s.addr)
}

func (s *server) stop() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() }
