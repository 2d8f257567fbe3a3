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

// Package version is dtq's version: the semantic version in the file VERSION
// beside this one, embedded so that every build carries it, and the commit
// the binary was built from. Workers report Version and Commit in their
// heartbeats, which `kubectl dtq version` shows (docs/upgrade.md).
package version

import (
	_ "embed"
	"fmt"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var file string

// Version is the release's semantic version without a leading "v", e.g.
// "0.1.0". Git tags and image tags are "v" + Version.
var Version = strings.TrimSpace(file)

// commit is set at link time by the repository's builds (make build, make
// images, the Dockerfile, the dev stack) with -X of CommitVar.
var commit string

// CommitVar is the linker's name of the commit variable, for
// -ldflags "-X CommitVar=<commit>".
const CommitVar = "github.com/dtq-dev/dtq/pkg/version.commit"

// Commit is the commit the binary was built from, with "-dirty" when tracked
// files differed from it: the link-time value, else the Go toolchain's VCS
// stamp when dtq is the main module (a `go build` in a Git clone), else
// "unknown".
var Commit = func() string {
	mainPath, settings := buildSettings()
	return resolveCommit(commit, mainPath, settings)
}()

// String is the line every binary prints for --version, e.g.
// "dtq 0.1.0 (commit 69c6d29c...)".
func String() string { return fmt.Sprintf("dtq %s (commit %s)", Version, Commit) }

// modulePath is the operator's module: the toolchain's VCS stamp names the
// main module's commit, which is dtq's only when the operator's module is the
// main module (not in a user's worker built on pkg/worker).
const modulePath = "github.com/dtq-dev/dtq"

// buildSettings returns the main module's path and its build settings.
func buildSettings() (string, map[string]string) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", nil
	}
	s := make(map[string]string, len(bi.Settings))
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	return bi.Main.Path, s
}

func resolveCommit(linked string, mainPath string, settings map[string]string) string {
	if linked != "" {
		return linked
	}
	rev := settings["vcs.revision"]
	if mainPath != modulePath || rev == "" {
		return "unknown"
	}
	if settings["vcs.modified"] == "true" {
		rev += "-dirty"
	}
	return rev
}
