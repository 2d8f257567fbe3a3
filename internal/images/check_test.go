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
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/dtq-dev/dtq/internal/images"
)

// imageFS is an image as a container runtime sees it: its config and the
// files of its flattened layers.
type imageFS struct {
	cfg   *v1.ConfigFile
	files map[string]file // by absolute path
}

type file struct {
	hdr  *tar.Header
	body []byte // regular files only
}

func readImage(img v1.Image) (imageFS, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return imageFS{}, err
	}
	fs := imageFS{cfg: cfg, files: map[string]file{}}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fs, nil
		}
		if err != nil {
			return imageFS{}, err
		}
		f := file{hdr: h}
		if h.Typeflag == tar.TypeReg {
			if f.body, err = io.ReadAll(tr); err != nil {
				return imageFS{}, err
			}
		}
		fs.files[path.Clean("/"+h.Name)] = f
	}
}

// check lists what is wrong with an image of binary: it must run as a
// non-root user that /etc/passwd knows, run /<binary> in exec form (no shell),
// hold no shell at all, and the binary must be a static linux/arch executable
// (an image from scratch has no dynamic loader).
func check(fs imageFS, spec images.Spec, arch string) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }

	if fs.cfg.OS != "linux" || fs.cfg.Architecture != arch {
		add("platform %s/%s, want linux/%s", fs.cfg.OS, fs.cfg.Architecture, arch)
	}
	uid, err := userID(fs, fs.cfg.Config.User)
	switch {
	case err != nil:
		add("user %q: %v", fs.cfg.Config.User, err)
	case uid == 0:
		add("runs as root (user %q)", fs.cfg.Config.User)
	}

	entry := "/" + spec.Binary
	if !slices.Equal(fs.cfg.Config.Entrypoint, []string{entry}) {
		add("entrypoint %q, want [%q] (exec form, no shell)", fs.cfg.Config.Entrypoint, entry)
	}
	if len(fs.cfg.Config.Cmd) > 0 {
		add("cmd %q, want none", fs.cfg.Config.Cmd)
	}
	for name := range fs.files {
		switch path.Base(name) {
		case "sh", "bash", "dash", "ash", "busybox":
			add("a shell at %s", name)
		}
	}

	bin, ok := fs.files[entry]
	if !ok || bin.hdr.Typeflag != tar.TypeReg {
		add("no regular file at %s", entry)
		return problems
	}
	if bin.hdr.Mode&0o001 == 0 {
		add("%s is not executable by others (mode %o)", entry, bin.hdr.Mode)
	}
	if err := static(bin.body, arch); err != nil {
		add("%s: %v", entry, err)
	}
	return problems
}

// userID resolves an image's User ("uid", "uid:gid", "name" or "name:group")
// to a uid through the image's /etc/passwd, which must know it. An empty User
// runs as root.
func userID(fs imageFS, user string) (int, error) {
	if user == "" {
		return 0, nil
	}
	name, _, _ := strings.Cut(user, ":")
	passwd, ok := fs.files["/etc/passwd"]
	if !ok {
		return 0, fmt.Errorf("no /etc/passwd")
	}
	for _, line := range strings.Split(string(passwd.body), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 {
			continue
		}
		if f[0] == name || f[2] == name {
			return strconv.Atoi(f[2])
		}
	}
	return 0, fmt.Errorf("no /etc/passwd entry for %q", name)
}

// static checks that an ELF binary for arch needs no dynamic loader or libraries.
func static(body []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(body))
	if err != nil {
		return err
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != want {
		return fmt.Errorf("machine %v, want %v", f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("not static: it needs a dynamic loader")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("not static: it needs %v", libs)
	}
	return nil
}
