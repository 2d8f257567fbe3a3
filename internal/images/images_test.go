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

package images_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dtq-dev/dtq/internal/images"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	"github.com/dtq-dev/dtq/internal/version"
)

// The binaries are built once for all tests, the way the e2e tests build
// them (devstack.Build: CGO off, the commit stamped), so that `make test`
// compiles the packages once for both. `make images` adds the release flags,
// which change embedded paths and symbols, not what these tests check.
var (
	buildOnce sync.Once
	binDir    string
	specs     []images.Spec
	commit    string // stamped into the binaries
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func binaries(t *testing.T) (string, []images.Spec) {
	t.Helper()
	buildOnce.Do(func() {
		root := envtestutil.RepoRoot()
		if specs, buildErr = images.Available(root); buildErr != nil {
			return
		}
		if binDir, buildErr = os.MkdirTemp("", "dtq-images"); buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		commit = version.GitCommit(ctx, root)
		buildErr = images.BuildBinaries(ctx, root, binDir, runtime.GOARCH, specs, commit, false)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir, specs
}

// TestImages builds each image of `make images`, writes and reads back its
// OCI layout, checks it (non-root user, the binary as exec-form entrypoint,
// static, no shell, the version labels) and runs the binary taken out of the
// image with --help and --version.
func TestImages(t *testing.T) {
	dir, specs := binaries(t)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	// The manager and the worker always exist; the API once cmd/api does.
	if len(specs) < 2 || specs[0].Name != "dtq-manager" || specs[1].Name != "dtq-worker" {
		t.Fatalf("images to build: %v, want dtq-manager, dtq-worker and any later ones", names)
	}
	t.Logf("images: %v", names)
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			created := time.Unix(1764720000, 0)
			img, err := images.Image(s, filepath.Join(dir, s.Binary), runtime.GOARCH, commit, created)
			if err != nil {
				t.Fatal(err)
			}
			layoutDir := filepath.Join(t.TempDir(), s.Name)
			if err := images.WriteLayout(layoutDir, img, "ghcr.io/dtq-dev/"+s.Name+":test"); err != nil {
				t.Fatal(err)
			}
			img, err = readLayout(layoutDir)
			if err != nil {
				t.Fatal(err)
			}
			pushAndPull(t, img, s.Name)
			fs, err := readImage(img)
			if err != nil {
				t.Fatal(err)
			}
			if problems := check(fs, s, runtime.GOARCH); len(problems) > 0 {
				t.Fatalf("image %s:\n%s", s.Name, strings.Join(problems, "\n"))
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			wantLabels := map[string]string{
				"org.opencontainers.image.title":    s.Name,
				"org.opencontainers.image.source":   "https://github.com/dtq-dev/dtq",
				"org.opencontainers.image.version":  version.Version,
				"org.opencontainers.image.revision": commit,
				"org.opencontainers.image.created":  "2025-12-03T00:00:00Z",
			}
			if commit == "" {
				delete(wantLabels, "org.opencontainers.image.revision")
			}
			if d := cmp.Diff(wantLabels, cfg.Config.Labels); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}

			bin := filepath.Join(t.TempDir(), s.Binary)
			if err := os.WriteFile(bin, fs.files["/"+s.Binary].body, 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --help: %v\n%s", s.Binary, err, out)
			}
			if !strings.Contains(string(out), "Usage") {
				t.Fatalf("%s --help printed no usage:\n%s", s.Binary, out)
			}
			out, err = exec.CommandContext(ctx, bin, "--version").CombinedOutput()
			want := fmt.Sprintf("dtq %s (commit %s)\n", version.Version, commit)
			if commit == "" {
				want = fmt.Sprintf("dtq %s (commit unknown)\n", version.Version)
			}
			if err != nil || string(out) != want {
				t.Fatalf("%s --version: %v, printed %q, want %q", s.Binary, err, out, want)
			}
		})
	}
}

// readLayout reads the one image of an OCI layout written by WriteLayout.
func readLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s: %d manifests, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// pushAndPull pushes img the way `crane push <layout> <ref>` does, to a
// registry in this process, and checks that the registry serves it back with
// the same digest.
func pushAndPull(t *testing.T, img v1.Image, imageName string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/dtq-dev/" + imageName + ":test")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	pulled, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	want, _ := img.Digest()
	got, err := pulled.Digest()
	if err != nil || got != want {
		t.Fatalf("pulled %s: digest %s (%v), pushed %s", ref, got, err, want)
	}
}

// TestCheckReportsPlantedFaults shows that check finds each fault it is there
// to find, in an image that differs from a good one by that fault only.
func TestCheckReportsPlantedFaults(t *testing.T) {
	dir, _ := binaries(t)
	spec := images.Spec{Name: "dtq-worker", Binary: "worker"}
	good, err := images.Image(spec, filepath.Join(dir, "worker"), runtime.GOARCH, "", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	withConfig := func(edit func(*v1.Config)) v1.Image {
		cfg, err := good.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config.DeepCopy()
		edit(c)
		img, err := mutate.Config(good, *c)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	withFile := func(binary, hostPath string) v1.Image {
		img, err := images.Image(images.Spec{Name: spec.Name, Binary: binary}, hostPath, runtime.GOARCH, "", time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		l, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		img, err = mutate.AppendLayers(good, l[1])
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	// A dynamically linked program of the host: an image from scratch cannot run it.
	dynamic, err := exec.LookPath("ls")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		img  v1.Image
		want string
	}{
		"good":          {good, ""},
		"root user":     {withConfig(func(c *v1.Config) { c.User = "0:0" }), "runs as root"},
		"named root":    {withConfig(func(c *v1.Config) { c.User = "root" }), "runs as root"},
		"no user":       {withConfig(func(c *v1.Config) { c.User = "" }), "runs as root"},
		"unknown uid":   {withConfig(func(c *v1.Config) { c.User = "1234" }), "no /etc/passwd entry"},
		"shell form":    {withConfig(func(c *v1.Config) { c.Entrypoint = []string{"/bin/sh", "-c", "/worker"} }), "entrypoint"},
		"cmd":           {withConfig(func(c *v1.Config) { c.Cmd = []string{"--x"} }), "cmd"},
		"shell present": {withFile("sh", dynamic), "a shell"},
		"dynamic":       {withFile("worker", dynamic), "not static"},
	}
	for fault, tc := range cases {
		t.Run(fault, func(t *testing.T) {
			fs, err := readImage(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			problems := strings.Join(check(fs, spec, runtime.GOARCH), "\n")
			if tc.want == "" && problems != "" {
				t.Fatalf("good image reported:\n%s", problems)
			}
			if !strings.Contains(problems, tc.want) {
				t.Fatalf("planted fault not reported: want %q in %q", tc.want, problems)
			}
		})
	}
}

// TestImageReproducible: the same binary gives the same digest, and every
// image shares one base layer.
func TestImageReproducible(t *testing.T) {
	dir, _ := binaries(t)
	build := func(s images.Spec) v1.Image {
		img, err := images.Image(s, filepath.Join(dir, s.Binary), runtime.GOARCH, "", time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	digest := func(img v1.Image) v1.Hash {
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	baseDigest := func(img v1.Image) v1.Hash {
		l, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		d, err := l[0].Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	worker := images.Spec{Name: "dtq-worker", Binary: "worker"}
	a, b := build(worker), build(worker)
	if digest(a) != digest(b) {
		t.Fatalf("two builds of %s: %s and %s", worker.Name, digest(a), digest(b))
	}
	manager := build(images.Spec{Name: "dtq-manager", Binary: "manager"})
	if baseDigest(a) != baseDigest(manager) {
		t.Fatalf("base layers differ: %s and %s", baseDigest(a), baseDigest(manager))
	}
}
