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
