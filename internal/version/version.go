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

// Package version is the operator's view of dtq's version (pkg/version):
// the SDK's Version and Commit, plus what only the operator's binaries use
// (image tags, the build-info metric, the skew policy, the link flag). Every
// binary prints String for --version; the manager, the API and the workers
// report Version and Commit while they run, which `kubectl dtq version` shows
// (docs/upgrade.md).
package version

import sdkversion "github.com/dtq-dev/dtq/pkg/version"

// Version is the release's semantic version without a leading "v", e.g.
// "0.1.0" (pkg/version/VERSION). Git tags and image tags are "v" + Version (Tag).
var Version = sdkversion.Version

// Commit is the commit the binary was built from (pkg/version.Commit).
var Commit = sdkversion.Commit

// Info is what a component reports about its build.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// Get returns this binary's Info.
func Get() Info { return Info{Version: Version, Commit: Commit} }

// Tag is the tag of this version's images and Git tag, e.g. "v0.1.0".
func Tag() string { return "v" + Version }

// Image is the reference of dtq's image name at this version, e.g.
// Image("dtq-worker") is "ghcr.io/dtq-dev/dtq-worker:v0.1.0".
func Image(name string) string { return "ghcr.io/dtq-dev/" + name + ":" + Tag() }

// String is the line every binary prints for --version, e.g.
// "dtq 0.1.0 (commit 69c6d29c...)".
func String() string { return sdkversion.String() }
