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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// markerEnv is set on every process the stack starts (the control plane's
// command lines carry the stack directory instead), so Leftovers can find
// survivors by their environment.
const markerEnv = "DTQ_DEV_STACK"

// child is one process the stack started, in a process group of its own so
// that stopping it also stops anything it forked, and so that a Ctrl-C in the
// terminal reaches only the stack, which then stops its children in order.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // exit status, valid after done
}

// startChild starts cmd in a new process group with the stack marker in its
// environment, its output appended to logPath.
func startChild(name, dir, logPath string, cmd *exec.Cmd) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(cmd.Env, markerEnv+"="+dir)
	// Pdeathsig: if the stack itself is SIGKILLed, the kernel kills its children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		_ = logFile.Close()
		close(c.done)
	}()
	return c, nil
}

// pid returns the process id, which is also its process group id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the child's whole process group.
func (c *child) signal(sig syscall.Signal) {
	if c.exited() {
		return
	}
	if err := syscall.Kill(-c.pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = c.cmd.Process.Signal(sig)
	}
}

// stop sends SIGTERM to the group, waits up to grace, then SIGKILLs the group
// and waits for the exit. It reports whether the process stopped within grace.
func (c *child) stop(grace time.Duration) bool {
	if c.exited() {
		_ = syscall.Kill(-c.pid(), syscall.SIGKILL) // anything the group left behind
		return true
	}
	c.signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-c.done:
		_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
		return true
	case <-timer.C:
		c.kill()
		return false
	}
}

// kill SIGKILLs the group and waits for the exit.
func (c *child) kill() {
	_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
	<-c.done
}
