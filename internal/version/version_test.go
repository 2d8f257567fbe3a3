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

package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestTagAndImage(t *testing.T) {
	if Tag() != "v"+Version {
		t.Fatalf("Tag() = %q", Tag())
	}
	if got, want := Image("dtq-worker"), "ghcr.io/dtq-dev/dtq-worker:v"+Version; got != want {
		t.Fatalf("Image = %q, want %q", got, want)
	}
}

func TestWithinSkew(t *testing.T) {
	cases := map[string]struct {
		a, b string
		want bool
	}{
		"same":                 {"0.1.0", "0.1.0", true},
		"patches apart":        {"0.1.0", "0.1.7", true},
		"one minor":            {"0.1.0", "0.2.3", true},
		"one minor, reversed":  {"0.2.3", "0.1.0", true},
		"leading v":            {"v0.2.0", "0.1.0", true},
		"pre-release, build":   {"0.2.0-rc.1", "0.1.0+abc", true},
		"two minors":           {"0.1.0", "0.3.0", false},
		"two minors, reversed": {"v1.5.0", "v1.3.9", false},
		"majors apart":         {"1.0.0", "0.9.0", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := WithinSkew(tc.a, tc.b)
			if err != nil || got != tc.want {
				t.Fatalf("WithinSkew(%q, %q) = %v, %v; want %v", tc.a, tc.b, got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "unknown", "1.2", "1.2.x", "1.2.3.4", "latest"} {
		if _, err := WithinSkew(bad, "0.1.0"); err == nil {
			t.Errorf("WithinSkew(%q, ...) accepted a version that is not semver", bad)
		}
	}
}

// TestGitCommit builds a repository with one commit and checks the commit
// GitCommit reads, with -dirty once a tracked file changes (an untracked
// one does not count), and "" outside a Git work tree.
func TestGitCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := GitCommit(t.Context(), dir); got != "" {
		t.Fatalf("outside a work tree: %q, want empty", got)
	}
	git("init", "-q")
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "1")
	git("add", "a")
	git("commit", "-q", "-m", "one")
	sha := git("rev-parse", "HEAD")
	if got := GitCommit(t.Context(), dir); got != sha {
		t.Fatalf("clean: %q, want %q", got, sha)
	}
	write("b", "untracked")
	if got := GitCommit(t.Context(), dir); got != sha {
		t.Fatalf("with an untracked file: %q, want %q", got, sha)
	}
	write("a", "2")
	if got := GitCommit(t.Context(), dir); got != sha+"-dirty" {
		t.Fatalf("modified: %q, want %q", got, sha+"-dirty")
	}
}
