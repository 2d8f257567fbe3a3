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

// Package images builds dtq's container images without a container engine or
// a registry: each image is two layers on an empty base, a base layer with the
// files a static Go binary needs (a passwd entry for the non-root user, CA
// certificates, /tmp) and a layer with the binary, which is the entrypoint. The
// same inputs give the same image digest. `make images` writes them as OCI
// image layouts (hack/images).
package images

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/dtq-dev/dtq/internal/version"
)

// Spec is one image: the binary of cmd/<Binary>, run as /<Binary>.
type Spec struct {
	Name   string // image name, e.g. dtq-manager
	Binary string // the command under cmd/
}

// All lists dtq's images. Adding an image is one line here.
var All = []Spec{
	{Name: "dtq-manager", Binary: "manager"},
	{Name: "dtq-worker", Binary: "worker"},
	{Name: "dtq-api", Binary: "api"},
}

// The user every image runs as: "nonroot", 65532 as in distroless, so the
// Dockerfile's images and these agree (config/ and the chart set it too).
const (
	UID  = 65532
	User = "nonroot"
)

// Available returns the specs of All whose cmd/<Binary> exists in the source
// tree at root (dtq-api only once cmd/api is there).
func Available(root string) ([]Spec, error) {
	var specs []Spec
	for _, s := range All {
		_, err := os.Stat(filepath.Join(root, "cmd", s.Binary))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// Image assembles spec's image for linux/arch from the static binary at
// binPath, built from commit revision (the label
// org.opencontainers.image.revision; none when empty) of this version.
// created is the image's creation time (the build's, for reproducible images:
// SOURCE_DATE_EPOCH or the commit time); the label
// org.opencontainers.image.created states it unless it is the Unix epoch, the
// stand-in for "not set".
func Image(spec Spec, binPath, arch, revision string, created time.Time) (v1.Image, error) {
	base, err := baseLayer()
	if err != nil {
		return nil, err
	}
	bin, err := BinaryLayer(spec.Binary, binPath)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, bin)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: created.UTC()}
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, UID),
		Entrypoint: []string{"/" + spec.Binary},
		WorkingDir: "/",
		Labels:     Labels(spec, revision, created),
	}
	// Each layer's history entry: the image config of an OCI image lists one per layer.
	cfg.History = []v1.History{
		{Created: cfg.Created, CreatedBy: "dtq images: passwd, group, CA certificates, /tmp"},
		{Created: cfg.Created, CreatedBy: "dtq images: /" + spec.Binary},
	}
	return mutate.ConfigFile(img, cfg)
}

// Labels are the OCI annotations (image-spec annotations.md) of spec's image:
// its title, source, version and, when known, revision and creation time.
func Labels(spec Spec, revision string, created time.Time) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":   spec.Name,
		"org.opencontainers.image.source":  "https://github.com/dtq-dev/dtq",
		"org.opencontainers.image.version": version.Version,
	}
	if revision != "" {
		l["org.opencontainers.image.revision"] = revision
	}
	if created.Unix() != 0 {
		l["org.opencontainers.image.created"] = created.UTC().Format(time.RFC3339)
	}
	return l
}

// WriteLayout writes img as a one-image OCI layout in dir (emptied first),
// tagged ref (the org.opencontainers.image.ref.name annotation), ready for
// `crane push dir REF` or `skopeo copy oci:dir docker://REF`.
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
}
