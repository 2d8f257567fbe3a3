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

// Package envtestutil finds the envtest control-plane binaries that
// hack/envtest-assets.sh builds under bin/k8s.
package envtestutil

import (
	"os"
	"path/filepath"
	"runtime"
)

// AssetsDir returns KUBEBUILDER_ASSETS when set, else bin/k8s/<version>-<os>-<arch>
// of the repository (K8S_VERSION, default 1.37.2), so `go test` works from an IDE
// after one `make envtest`. envtest fails loudly when the binaries are missing.
func AssetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	version := os.Getenv("K8S_VERSION")
	if version == "" {
		version = "1.37.2"
	}
	return filepath.Join(RepoRoot(), "bin", "k8s", version+"-"+runtime.GOOS+"-"+runtime.GOARCH)
}

// RepoRoot returns the repository root, found from this source file's path.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
