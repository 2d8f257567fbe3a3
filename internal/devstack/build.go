package devstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Build compiles the main packages pkgs (e.g. "./cmd/manager") of the module
// in repoRoot into outDir, the way `make build` does (static, CGO off).
func Build(ctx context.Context, repoRoot, outDir string, pkgs ...string) error {
	args := append([]string{"build", "-o", outDir + string(os.PathSeparator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %w\n%s", pkgs, err, out)
	}
	return nil
}
