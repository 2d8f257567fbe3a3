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

// Command images builds dtq's images without a container engine (`make
// images`): the static binaries, then one OCI image layout per image under
// -out, e.g. bin/images/dtq-manager, to push with
// `crane push bin/images/dtq-manager ghcr.io/dtq-dev/dtq-manager:v0.1.0`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/dtq-dev/dtq/internal/images"
	"github.com/dtq-dev/dtq/internal/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "bin/images", "Directory of the OCI layouts, one per image.")
	registry := flag.String("registry", "ghcr.io/dtq-dev", "Registry and path of the image names recorded in the layouts.")
	tag := flag.String("tag", version.Tag(), "Tag recorded in the layouts.")
	arch := flag.String("arch", runtime.GOARCH, "Architecture (linux/<arch>).")
	commit := flag.String("commit", "", "Commit stamped into the binaries and the revision label (default: the checked-out commit, -dirty when tracked files changed).")
	flag.Parse()
	if *commit == "" {
		*commit = version.GitCommit(context.Background(), ".")
	}

	// SOURCE_DATE_EPOCH (reproducible-builds.org) sets the images' creation
	// time; without it the time is the Unix epoch, so a rebuild from the same
	// source gives the same digests.
	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		created = time.Unix(sec, 0)
	}

	specs, err := images.Available(".")
	if err != nil {
		return err
	}
	binDir := filepath.Join(*out, "linux_"+*arch)
	if err := images.BuildBinaries(context.Background(), ".", binDir, *arch, specs, *commit, true); err != nil {
		return err
	}
	for _, s := range specs {
		img, err := images.Image(s, filepath.Join(binDir, s.Binary), *arch, *commit, created)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		ref := *registry + "/" + s.Name + ":" + *tag
		dir := filepath.Join(*out, s.Name)
		if err := images.WriteLayout(dir, img, ref); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s\t%s\t%s\n", dir, ref, digest)
	}
	return nil
}
