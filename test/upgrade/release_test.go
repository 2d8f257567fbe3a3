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

package upgrade

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dtq-dev/dtq/internal/devstack"
)

// release is one build of dtq: the binaries the dev stack runs and the
// manifests it installs.
type release struct {
	name                 string
	manager, api, worker string
	// crdDir and admissionDir are its config/crd/bases and config/admission
	// (admissionDir "" when it has none).
	crdDir, admissionDir string
}

// releaseFile names the previous release: a line "commit <sha>" and a line
// "version <semver>" (hack/previous-images.sh reads it too).
const releaseFile = "test/upgrade/previous-release"

// envPlant names a planted incompatibility (plants) to build into this
// commit's binaries, to see the test fail; unset, nothing is planted.
const envPlant = "DTQ_UPGRADE_PLANT"

// previousRelease returns the release releaseFile names, built from this
// repository's own history (git archive of its commit, then go build) and
// cached under bin/upgrade/<commit>/, so only the first run per commit builds.
func previousRelease(t *testing.T, root string) release {
	t.Helper()
	commit, version := readReleaseFile(t, filepath.Join(root, releaseFile))
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		shallow, _ := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output()
		t.Fatalf("the previous release's commit %s (%s) is not in this repository's history: git rev-parse: %v %s"+
			"(shallow clone: %s)\na shallow clone? fetch the history (git fetch --unshallow, or fetch the release's tag) and run again",
			commit, releaseFile, err, stderr(err), strings.TrimSpace(string(shallow)))
	}
	sha := strings.TrimSpace(string(out))
	name := fmt.Sprintf("previous release %s (%s)", version, sha[:7])
	cache := filepath.Join(root, "bin", "upgrade", sha)
	if exists(filepath.Join(cache, "complete")) {
		t.Logf("%s: binaries cached in %s", name, cache)
	} else {
		t.Logf("%s: building it from the repository's history into %s", name, cache)
		buildFromHistory(t, root, sha, cache)
	}
	r := release{
		name:    name,
		manager: filepath.Join(cache, "manager"), api: filepath.Join(cache, "api"), worker: filepath.Join(cache, "worker"),
		crdDir: filepath.Join(cache, "crd"), admissionDir: filepath.Join(cache, "admission"),
	}
	if !exists(r.admissionDir) {
		r.admissionDir = ""
	}
	return r
}

// readReleaseFile reads the commit and the version of releaseFile.
func readReleaseFile(t *testing.T, path string) (commit, version string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v: the file names the previous release the upgrade test starts from", err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		switch fields := strings.Fields(sc.Text()); {
		case len(fields) == 2 && fields[0] == "commit":
			commit = fields[1]
		case len(fields) == 2 && fields[0] == "version":
			version = fields[1]
		}
	}
	if commit == "" || version == "" {
		t.Fatalf("%s needs a line 'commit <sha>' and a line 'version <semver>'", path)
	}
	return commit, version
}

// buildFromHistory extracts commit sha (git archive) into a temporary
// folder, builds its manager, API and worker there and copies them with its
// CRDs and admission policies into cache, written whole or not at all.
func buildFromHistory(t *testing.T, root, sha, cache string) {
	t.Helper()
	ctx := t.Context()
	tmp := t.TempDir()
	src, stage := filepath.Join(tmp, "src"), filepath.Join(tmp, "stage")
	tarball := filepath.Join(tmp, "src.tar")
	for _, args := range [][]string{
		{"git", "-C", root, "archive", "--format=tar", "-o", tarball, sha},
		{"mkdir", "-p", src, stage},
		{"tar", "-xf", tarball, "-C", src},
	} {
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := devstack.Build(ctx, src, stage, "./cmd/manager", "./cmd/api", "./cmd/worker"); err != nil {
		t.Fatalf("build the previous release %s: %v", sha, err)
	}
	must(t, os.CopyFS(filepath.Join(stage, "crd"), os.DirFS(filepath.Join(src, "config", "crd", "bases"))))
	if admission := filepath.Join(src, "config", "admission"); exists(admission) {
		must(t, os.CopyFS(filepath.Join(stage, "admission"), os.DirFS(admission)))
	}
	must(t, os.WriteFile(filepath.Join(stage, "complete"), nil, 0o644))
	must(t, os.MkdirAll(filepath.Dir(cache), 0o755))
	_ = os.RemoveAll(cache) // an incomplete earlier build
	if err := os.Rename(stage, cache); err != nil && !exists(filepath.Join(cache, "complete")) {
		t.Fatalf("cache the previous release: %v", err)
	}
}

// currentRelease builds this checkout's manager, API and worker into dir,
// with the plant DTQ_UPGRADE_PLANT names, if any.
func currentRelease(t *testing.T, root, dir string) release {
	t.Helper()
	name := "this commit"
	args := []string{"build"}
	if plant := os.Getenv(envPlant); plant != "" {
		patches, ok := plants[plant]
		if !ok {
			t.Fatalf("%s=%s: no such plant (have %v)", envPlant, plant, plantNames())
		}
		args = append(args, "-overlay", overlay(t, root, patches))
		name += " with the plant " + plant
		t.Logf("PLANTED: %s is built into this commit's binaries: the test must fail", plant)
	}
	args = append(args, "-o", dir+string(os.PathSeparator), "./cmd/manager", "./cmd/api", "./cmd/worker")
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build this commit's binaries: %v\n%s", err, out)
	}
	return release{
		name:    name,
		manager: filepath.Join(dir, "manager"), api: filepath.Join(dir, "api"), worker: filepath.Join(dir, "worker"),
		crdDir: filepath.Join(root, "config", "crd", "bases"), admissionDir: filepath.Join(root, "config", "admission"),
	}
}

// patch replaces every old in file (relative to the repository root) by new.
type patch struct{ file, old, new string }

// plants are deliberate incompatibilities with the previous release's Redis
// layout or breaches of its guard, each built into this commit's binaries only when DTQ_UPGRADE_PLANT
// names it, to show that the test fails (and what it reports) when an
// upgrade would lose or repeat work. Nothing here is built otherwise.
var plants = map[string][]patch{
	// The task hash's field "state" renamed "status" in every script and
	// reader, consistently, and without a migration: this build works on a
	// fresh Redis, but reads every task the previous release wrote as having
	// no state.
	"rename-state": {
		{"pkg/broker/scripts.go", `"state", `, `"status", `},
		{"pkg/broker/scripts.go", `h.state`, `h.status`},
		{"pkg/broker/list.go", `h[j] == "state"`, `h[j] == "status"`},
		{"pkg/broker/task.go", `tfState: "state"`, `tfState: "status"`},
		{"pkg/broker/deliver.go", `k.task(id), "state", `, `k.task(id), "status", `},
		{"pkg/broker/queue_delete.go", `k.task(id), "state", `, `k.task(id), "status", `},
	},
	// The idempotency records' keys renamed, without a migration: this build
	// finds no record the previous release wrote, so a key submitted again
	// is new work, run a second time.
	"rename-idempotency": {
		{"pkg/broker/keys.go", `sufIdempotency = "idempotency:"`, `sufIdempotency = "idem:"`},
	},
	// A queue's layout raised without the check of its workers' layouts
	// (RaiseQueueLayout, which flow control's raise goes through): flow
	// control applies at once beside a worker of the previous release, which
	// the raise then stops, instead of waiting until it is rolled.
	"raise-beside-old-workers": {
		{"pkg/broker/layoutversion.go", `if ok, behind, err := b.WorkersReadLayout(ctx, q, n); err != nil || !ok {`,
			`if _, behind, err := b.WorkersReadLayout(ctx, q, n); err != nil {`},
		{"pkg/broker/layoutversion.go", `if #behind > 1 then return behind end`, `if false then return behind end`},
	},
	// Flow control written without raising the queue's layout (EnsureQueue
	// skips raiseForFlow): it applies at once beside a worker of the previous
	// release, and nothing tells the previous release's binaries that they
	// can no longer read this Redis.
	"flow-without-layout": {
		{"pkg/broker/broker.go", `if cfg.Flow != nil {`, `if cfg.Flow != nil && false {`},
	},
}

func plantNames() []string {
	var out []string
	for n := range plants {
		out = append(out, n)
	}
	return out
}

// overlay writes the patched files and a go build -overlay file naming them,
// and returns its path. Each patch must match at least once.
func overlay(t *testing.T, root string, patches []patch) string {
	t.Helper()
	dir := t.TempDir()
	patched := map[string]string{} // file -> its text so far
	for _, p := range patches {
		text, ok := patched[p.file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, p.file))
			must(t, err)
			text = string(b)
		}
		if !strings.Contains(text, p.old) {
			t.Fatalf("the plant's patch of %s finds no %q: update the plant", p.file, p.old)
		}
		patched[p.file] = strings.ReplaceAll(text, p.old, p.new)
	}
	replace := map[string]string{}
	for file, text := range patched {
		out := filepath.Join(dir, strings.ReplaceAll(file, "/", "_"))
		must(t, os.WriteFile(out, []byte(text), 0o644))
		replace[filepath.Join(root, file)] = out
	}
	b, err := json.Marshal(map[string]any{"Replace": replace})
	must(t, err)
	path := filepath.Join(dir, "overlay.json")
	must(t, os.WriteFile(path, b, 0o644))
	return path
}

// stderr is what a failed command printed on stderr.
func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
