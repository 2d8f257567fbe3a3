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

	"github.com/dtq-dev/dtq/internal/version"
)

// Build compiles the main packages pkgs (e.g. "./cmd/manager") of the module
// in repoRoot into outDir, the way `make build` does (static, CGO off, the
// checked-out commit stamped for --version).
func Build(ctx context.Context, repoRoot, outDir string, pkgs ...string) error {
	args := []string{"build", "-o", outDir + string(os.PathSeparator)}
	if commit := version.GitCommit(ctx, repoRoot); commit != "" {
		args = append(args, "-ldflags="+version.LinkFlag(commit))
	}
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %w\n%s", pkgs, err, out)
	}
	return nil
}
