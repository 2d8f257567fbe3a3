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

// Package docs runs the command blocks of README.md and docs/*.md against a
// dev stack started as `make dev` starts it, as a reader would copy them:
// file by file (README first, then docs/ by name), each file's blocks in
// order in one bash session, from a directory laid out like the repository
// after `make dev` (.dev/kubeconfig, .dev/api-url, bin/kubectl-dtq, bin/k8s).
// Every command must exit 0; the output a console block shows must match
// what the command prints, under the volatility rule of normalise. See
// docs/operations.md ("The docs test") for the marks a block can carry.
package docs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
)

const (
	// retryFor is how long a console command whose output does not match yet
	// is repeated (every two seconds): the stack works asynchronously, and
	// a shown listing is what it settles to ("about 20 seconds after").
	retryFor = 90 * time.Second
	// stopAfter is how long a command of a "stopped after" block runs.
	stopAfter = 3 * time.Second
	// commandTimeout bounds every other command.
	commandTimeout = 3 * time.Minute
)

func TestDocs(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	root, err := filepath.Abs(envtestutil.RepoRoot())
	must(t, err)
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	must(t, err)
	sort.Strings(docs)
	for _, f := range docs {
		rel, _ := filepath.Rel(root, f)
		files = append(files, rel)
	}
	if only := os.Getenv("DTQ_DOCS"); only != "" {
		files = strings.Split(only, ",") // a comma-separated subset, while editing
	}
	var all [][]block
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		must(t, err)
		blocks, err := commandBlocks(f, string(text))
		must(t, err)
		all = append(all, blocks)
	}

	work := checkout(t, root)
	stack := startStack(t, root, work)
	env := append(os.Environ(),
		"KUBECONFIG="+stack.Kubeconfig,
		"PATH="+filepath.Join(work, "bin")+":"+envtestutil.AssetsDir()+":"+os.Getenv("PATH"),
	)
	env = append(env, sdkProxy(t, root)...)

	var ran, marked int
	for i, f := range files {
		if len(all[i]) == 0 {
			continue
		}
		r, m := runFile(t, work, env, all[i])
		ran, marked = ran+r, marked+m
		t.Logf("%s: %d blocks ran, %d marked not run", f, r, m)
	}
	t.Logf("docs test: %d command blocks ran, %d marked not run, in %d files", ran, marked, len(files))
	if ran == 0 {
		t.Fatal("no command block ran")
	}
}

// checkout lays out a directory like the repository after `make build`:
// every top-level entry of the repository linked, bin/ with the binaries
// built for this test and the control plane's (bin/k8s), and .dev for the
// stack, so the docs' relative paths work without touching the checkout's
// own bin/ and .dev/.
func checkout(t *testing.T, root string) string {
	work := t.TempDir()
	entries, err := os.ReadDir(root)
	must(t, err)
	for _, e := range entries {
		if e.Name() == "bin" || e.Name() == ".dev" || e.Name() == ".git" {
			continue
		}
		must(t, os.Symlink(filepath.Join(root, e.Name()), filepath.Join(work, e.Name())))
	}
	bin := filepath.Join(work, "bin")
	must(t, devstack.Build(t.Context(), root, bin, "./cmd/manager", "./cmd/worker", "./cmd/api", "./cmd/kubectl-dtq"))
	must(t, os.Symlink(filepath.Join(root, "bin", "k8s"), filepath.Join(bin, "k8s")))
	return work
}

// startStack starts the dev stack as `kubectl-dtq dev` does (cmd/kubectl-dtq/dev.go).
func startStack(t *testing.T, root, work string) *devstack.Stack {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(work, ".dev")
	bin := filepath.Join(work, "bin")
	stack, err := devstack.Start(ctx, devstack.Options{
		Dir:          dir,
		AssetsDir:    envtestutil.AssetsDir(),
		ManagerBin:   filepath.Join(bin, "manager"),
		WorkerBin:    filepath.Join(bin, "worker"),
		APIBin:       filepath.Join(bin, "api"),
		ClusterRoles: []string{filepath.Join(root, "config/rbac/producer_role.yaml"), filepath.Join(root, "config/rbac/queue_operator_role.yaml"), filepath.Join(root, "config/api/version_reader_role.yaml")},
		CRDDir:       filepath.Join(root, "config/crd/bases"),
		AdmissionDir: filepath.Join(root, "config/admission"),
		SampleDirs:   sampleDirs(root),
		AppDirs:      devstack.ExampleApps(root),
		DefaultQueue: true,
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("start the dev stack (logs in %s): %v", filepath.Join(dir, "logs"), err)
	}
	t.Cleanup(func() {
		if err := stack.Stop(); err != nil {
			t.Errorf("stop the dev stack: %v", err)
		}
		if left, err := devstack.Leftovers(dir); err != nil || len(left) > 0 {
			t.Errorf("processes survived the dev stack: %+v %v", left, err)
		}
	})
	return stack
}

// shell is one bash session that runs a file's commands one by one.
type shell struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	dir   string // the command files and their output
	count int
}

func newShell(t *testing.T, work string, env []string) *shell {
	s := &shell{dir: t.TempDir()}
	s.cmd = exec.Command("bash", "--noprofile", "--norc")
	s.cmd.Dir, s.cmd.Env, s.cmd.Stderr = work, env, os.Stderr
	// Its own process group, ended as a whole with the file (a command's
	// children included); bash itself dies with the test.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var err error
	s.in, err = s.cmd.StdinPipe()
	must(t, err)
	out, err := s.cmd.StdoutPipe()
	must(t, err)
	s.out = bufio.NewReader(out)
	must(t, s.cmd.Start())
	t.Cleanup(func() {
		_ = s.in.Close()
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Wait()
	})
	_, err = io.WriteString(s.in, "shopt -s expand_aliases\n")
	must(t, err)
	return s
}

// run runs one command in the session (its variables and aliases stay for
// the next) and returns its output (stdout and stderr) and exit status. With
// stop, the command runs in a subshell that is stopped after that long.
func (s *shell) run(text string, stop time.Duration) (string, int, error) {
	s.count++
	script := filepath.Join(s.dir, fmt.Sprintf("cmd%d.sh", s.count))
	outFile := script + ".out"
	if err := os.WriteFile(script, []byte(text+"\n"), 0o644); err != nil {
		return "", 0, err
	}
	line := fmt.Sprintf("source %q </dev/null >%q 2>&1; echo \"__done $?\"\n", script, outFile)
	if stop > 0 {
		line = fmt.Sprintf("( source %q ) </dev/null >%q 2>&1 & p=$!; sleep %d; pkill -INT -P $p; kill -INT $p 2>/dev/null; wait $p; echo \"__done 0\"\n",
			script, outFile, int(stop.Seconds()))
	}
	if _, err := io.WriteString(s.in, line); err != nil {
		return "", 0, err
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		for {
			l, err := s.out.ReadString('\n')
			if err != nil {
				done <- result{0, fmt.Errorf("the shell ended: %w", err)}
				return
			}
			if rest, ok := strings.CutPrefix(l, "__done "); ok {
				code, err := strconv.Atoi(strings.TrimSpace(rest))
				done <- result{code, err}
				return
			}
		}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(commandTimeout):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		r = result{0, fmt.Errorf("no end after %v", commandTimeout)}
	}
	out, _ := os.ReadFile(outFile)
	return string(out), r.code, r.err
}

// runFile runs a file's blocks in order in one shell; it returns how many
// blocks ran and how many are marked not run. The first failure ends the
// file: later blocks build on it.
func runFile(t *testing.T, work string, env []string, blocks []block) (ran, marked int) {
	for _, b := range blocks {
		if b.notRun != "" {
			marked++
		}
	}
	sh := newShell(t, work, env)
	for _, b := range blocks {
		if b.notRun != "" {
			continue
		}
		ran++
		for _, c := range b.cmds {
			where := fmt.Sprintf("%s:%d", b.file, c.line)
			var stop time.Duration
			if b.stopAfter != "" {
				stop = stopAfter
			}
			out, code, err := sh.run(c.text, stop)
			if err != nil {
				t.Errorf("%s: %s: %v", where, c.text, err)
				return ran, marked
			}
			if code != 0 {
				t.Errorf("%s: exit %d from\n  %s\noutput:\n%s", where, code, c.text, out)
				return ran, marked
			}
			if !b.console || b.outputVaries != "" || b.stopAfter != "" {
				continue
			}
			got := strings.Split(strings.TrimRight(out, "\n"), "\n")
			for deadline := time.Now().Add(retryFor); !matches(c.want, got) && time.Now().Before(deadline); {
				time.Sleep(2 * time.Second)
				if out, code, err = sh.run(c.text, 0); err != nil || code != 0 {
					break
				}
				got = strings.Split(strings.TrimRight(out, "\n"), "\n")
			}
			if err != nil || code != 0 || !matches(c.want, got) {
				t.Errorf("%s: the output of\n  %s\ndoes not match the shown one (exit %d, %v).\nshown:\n%s\nprinted:\n%s",
					where, c.text, code, err, strings.Join(c.want, "\n"), out)
				return ran, marked
			}
		}
	}
	return ran, marked
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sampleDirs are the folders make dev applies (devstack.DevSamples), in root.
func sampleDirs(root string) []string {
	out := make([]string, len(devstack.DevSamples))
	for i, d := range devstack.DevSamples {
		out[i] = filepath.Join(root, d)
	}
	return out
}
