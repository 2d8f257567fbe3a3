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

package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dtq-dev/dtq/internal/version"
)

// BuildBinaries builds the specs' commands of the module at root into dir as
// static linux/arch binaries (CGO off) with one `go build`, stamped with
// commit (version.LinkFlag; none when empty). release adds the flags of
// released binaries, as in the Dockerfile: -trimpath and a stripped symbol
// table, so a binary depends only on the source and the Go version, not on
// the checkout's path.
func BuildBinaries(ctx context.Context, root, dir, arch string, specs []Spec, commit string, release bool) error {
	args := []string{"build"}
	ldflags := ""
	if release {
		args = append(args, "-trimpath")
		ldflags = "-s -w"
	}
	if commit != "" {
		ldflags = strings.TrimSpace(ldflags + " " + version.LinkFlag(commit))
	}
	if ldflags != "" {
		args = append(args, "-ldflags="+ldflags)
	}
	args = append(args, "-o", dir+string(filepath.Separator))
	for _, s := range specs {
		args = append(args, "./cmd/"+s.Binary)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, out)
	}
	return nil
}
