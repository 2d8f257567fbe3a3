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
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// managerProcess is bin/manager run as a child process against the local
// control plane and Redis.
type managerProcess struct {
	bin, kubeconfig, logPath, stackDir string
	redisURL, workerRedisURL           string
	workerImage                        string
	extraArgs, extraEnv                []string
	probePort, metricsPort             int
	proc                               *child
}

// args builds the command line. Flags the binary does not define (older
// managers lack --worker-image, --worker-redis-url and --redis-isolation) are
// left out, so the stack runs with any manager of this repository's history.
func (m *managerProcess) args() ([]string, error) {
	help, _ := exec.Command(m.bin, "--help").CombinedOutput()
	has := func(flag string) bool {
		return bytes.Contains(help, []byte("-"+flag+" ")) || bytes.Contains(help, []byte("-"+flag+"\n"))
	}
	if !has("redis-url") {
		return nil, fmt.Errorf("%s --help lists no --redis-url flag; is it the dtq manager?", m.bin)
	}
	args := []string{
		"--redis-url=" + m.redisURL,
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(m.probePort),
	}
	if has("metrics-secure") {
		// Plain HTTP on loopback, without authentication: a local stack.
		args = append(args, "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(m.metricsPort), "--metrics-secure=false")
	} else {
		args = append(args, "--metrics-bind-address=0")
	}
	if has("worker-image") {
		args = append(args, "--worker-image="+m.workerImage)
	}
	if has("worker-redis-url") {
		args = append(args, "--worker-redis-url="+m.workerRedisURL)
	}
	if has("redis-isolation") {
		// Each namespace's workers log in as its own Redis ACL user, as in a
		// cluster; the manager is the dev Redis's default user.
		args = append(args, "--redis-isolation=true")
	}
	if has("queue-history-interval") {
		// The console's charts fill within seconds rather than a minute.
		args = append(args, "--queue-history-interval=2s")
	}
	return append(args, m.extraArgs...), nil
}

// start runs the manager and waits until /readyz answers 200.
func (m *managerProcess) start(ctx context.Context) error {
	for _, port := range []*int{&m.probePort, &m.metricsPort} {
		if *port == 0 {
			p, err := loopback.FreePort()
			if err != nil {
				return err
			}
			*port = p
		}
	}
	args, err := m.args()
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, args...)
	cmd.Env = append([]string{"KUBECONFIG=" + m.kubeconfig, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, m.extraEnv...)
	proc, err := startChild("manager", m.stackDir, m.logPath, cmd)
	if err != nil {
		return err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(m.probePort) + "/readyz"
	if err := waitHTTP(ctx, url, proc, 60*time.Second); err != nil {
		proc.kill()
		return fmt.Errorf("manager not ready (log: %s): %w", m.logPath, err)
	}
	m.proc = proc
	return nil
}

func (m *managerProcess) stop() {
	if m.proc != nil {
		m.proc.stop(15 * time.Second)
		m.proc = nil
	}
}

// waitHTTP polls url until it answers 200, the process exits or timeout passes.
func waitHTTP(ctx context.Context, url string, proc *child, timeout time.Duration) error {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if proc.exited() {
			return fmt.Errorf("process exited: %w", proc.err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ok, msg := probe(hc, url); ok {
			return nil
		} else {
			last = msg
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within %v: %s", url, timeout, last)
}

// probe GETs url and reports whether it answered 200.
func probe(hc *http.Client, url string) (bool, string) {
	resp, err := hc.Get(url)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}
