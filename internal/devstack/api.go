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
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// apiProcess is bin/api run as a child process on a loopback port, with
// authentication on (TokenReview and SubjectAccessReview against the local
// control plane).
type apiProcess struct {
	bin, kubeconfig, logPath, stackDir, redisURL string
	extraArgs, extraEnv                          []string
	port                                         int
	proc                                         *child
}

func (a *apiProcess) url() string { return "http://127.0.0.1:" + strconv.Itoa(a.port) }

// start runs the API (on the port of an earlier start, so clients reconnect
// to the same URL) and waits until /readyz answers 200.
func (a *apiProcess) start(ctx context.Context) error {
	if a.port == 0 {
		p, err := loopback.FreePort()
		if err != nil {
			return err
		}
		a.port = p
	}
	args := append([]string{"--bind-address=127.0.0.1:" + strconv.Itoa(a.port), "--redis-url=" + a.redisURL,
		"--kubeconfig=" + a.kubeconfig}, a.extraArgs...)
	cmd := exec.Command(a.bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, a.extraEnv...)
	proc, err := startChild("api", a.stackDir, a.logPath, cmd)
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, a.url()+"/readyz", proc, 60*time.Second); err != nil {
		proc.kill()
		return fmt.Errorf("API not ready (log: %s): %w", a.logPath, err)
	}
	a.proc = proc
	return nil
}

func (a *apiProcess) stop() {
	if a.proc != nil {
		a.proc.stop(25 * time.Second)
		a.proc = nil
	}
}
