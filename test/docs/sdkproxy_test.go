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

package docs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// sdkModule is the module path the docs tell a reader to `go get`.
const sdkModule = "github.com/dtq-dev/dtq/pkg"

// sdkProxy serves the checkout's SDK module (pkg/, without its nested
// modules) as the only version of sdkModule from a file GOPROXY, so that
// the docs' `go get github.com/dtq-dev/dtq/pkg@latest` runs as written and
// gets this checkout's code. It returns the environment to add: GOPROXY with
// that directory first (every other module still comes from the caller's
// proxy) and GONOSUMDB for the module, which no checksum database knows. The
// version is a pre-release named by a hash of the module's zip, so the module
// cache never holds two contents under one version.
func sdkProxy(t *testing.T, root string) []string {
	t.Helper()
	dir := filepath.Join(root, "pkg")
	zipOf := func(version string) []byte {
		var b bytes.Buffer
		if err := modzip.CreateFromDir(&b, module.Version{Path: sdkModule, Version: version}, dir); err != nil {
			t.Fatalf("zip the SDK module: %v", err)
		}
		return b.Bytes()
	}
	sum := sha256.Sum256(zipOf("v0.0.0"))
	version := "v0.0.0-docs." + hex.EncodeToString(sum[:6])
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	must(t, err)
	proxy := t.TempDir()
	v := filepath.Join(proxy, filepath.FromSlash(sdkModule), "@v")
	must(t, os.MkdirAll(v, 0o755))
	info := `{"Version":"` + version + `","Time":"` + time.Now().UTC().Format(time.RFC3339) + `"}`
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(info),
		version + ".mod":  gomod,
		version + ".zip":  zipOf(version),
	} {
		must(t, os.WriteFile(filepath.Join(v, name), data, 0o644))
	}
	upstream := os.Getenv("GOPROXY")
	if upstream == "" {
		upstream = "https://proxy.golang.org,direct"
	}
	nosum := sdkModule
	if s := os.Getenv("GONOSUMDB"); s != "" {
		nosum = strings.Join([]string{s, nosum}, ",")
	}
	return []string{"GOPROXY=file://" + proxy + "," + upstream, "GONOSUMDB=" + nosum, "GOWORK=off"}
}
