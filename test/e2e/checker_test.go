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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
)

// recordWrite is the submit script's idempotency record write, the line the
// broken build removes. The test fails loudly when it is not found exactly
// once, so it cannot turn vacuous when the script changes.
const recordWrite = `cur = redis.call("SET", rk, record(id, "processing", nowtxt), "NX", "GET")`

// The checker can fail: with a manager built without the idempotency record
// write, a second Task with a key is a second logical task, and the checker
// reports every such key duplicated. The broken manager replaces the real one
// for this test only (go build -overlay swaps the one file).
func TestCheckerSeesBrokenBuild(t *testing.T) {
	bin := buildBroken(t, "pkg/broker/scripts.go", recordWrite, "-- record write removed: a deliberately broken build")
	must(t, single.stack.ReplaceManager(t.Context(), bin))
	t.Cleanup(func() {
		if err := single.stack.ReplaceManager(context.Background(), managerBin); err != nil {
			t.Errorf("restore the manager: %v", err)
		}
	})

	ns := single.namespace(t, "e2e-broken")
	chaosQueue(t, single, ns)
	var originals, twins []*dtqv1alpha1.Task
	for i := range 20 {
		key := fmt.Sprintf("broken-%02d", i)
		originals = append(originals, chaosTask(ns, "broken", key, key, 0.02))
		twins = append(twins, chaosTask(ns, "broken", key+"-twin", key, 0.02))
	}
	// Each twin comes after its original finished: a replay, on a sound build.
	single.createAll(t, originals)
	single.waitTerminal(t, ns, "broken", len(originals), 3*time.Minute)
	single.createAll(t, twins)
	got := single.waitTerminal(t, ns, "broken", len(originals)+len(twins), 3*time.Minute)
	r := check(t, single, got)
	t.Logf("broken build (no idempotency record): %s\n%s", r, r.Details(5))
	if r.Duplicated != len(twins) || r.Accepted != len(originals) {
		t.Errorf("the checker reports %d duplicated of %d accepted, want every key with a twin (%d) duplicated",
			r.Duplicated, r.Accepted, len(twins))
	}
}

// buildBroken builds the manager with file (relative to the repository root)
// patched: old, found exactly once, replaced by repl. It returns the binary.
func buildBroken(t *testing.T, file, old, repl string) string {
	t.Helper()
	return buildPatched(t, "manager", file, old, repl)
}

// buildBrokenWorker is buildBroken for the worker binary.
func buildBrokenWorker(t *testing.T, file, old, repl string) string {
	t.Helper()
	return buildPatched(t, "worker", file, old, repl)
}

// buildPatched builds ./cmd/<cmd> with file patched (see buildBroken).
func buildPatched(t *testing.T, cmdName, file, old, repl string) string {
	t.Helper()
	root := envtestutil.RepoRoot()
	src, err := os.ReadFile(filepath.Join(root, file))
	must(t, err)
	if n := strings.Count(string(src), old); n != 1 {
		t.Fatalf("%s holds %q %d times, want once: update the broken build", file, old, n)
	}
	dir := t.TempDir()
	patched := filepath.Join(dir, filepath.Base(file))
	must(t, os.WriteFile(patched, []byte(strings.Replace(string(src), old, repl, 1)), 0o644))
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, file): patched}})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644))
	bin := filepath.Join(dir, cmdName)
	cmd := exec.CommandContext(t.Context(), "go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin, "./cmd/"+cmdName)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatal(fmt.Errorf("go build the broken %s: %w\n%s", cmdName, err, out))
	}
	return bin
}
