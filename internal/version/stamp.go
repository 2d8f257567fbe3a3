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
	"context"
	"os/exec"
	"strings"

	sdkversion "github.com/dtq-dev/dtq/pkg/version"
)

// LinkFlag is the linker flag (for -ldflags) that stamps commit into a binary.
func LinkFlag(commit string) string { return "-X " + sdkversion.CommitVar + "=" + commit }

// GitCommit returns the commit checked out in the Git work tree holding dir,
// with "-dirty" when a tracked file differs from it, as the Makefile's COMMIT
// does; "" when dir is in no Git work tree (a source archive) or git is
// missing, and the binaries then fall back as Commit says.
func GitCommit(ctx context.Context, dir string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return ""
	}
	changes, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return ""
	}
	if changes != "" {
		rev += "-dirty"
	}
	return rev
}
