//go:build node

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

package node

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// layoutToArchive writes the image of the OCI layout dir (`make images`) as
// an image archive (docker save format) named ref, for `ctr images import`.
func layoutToArchive(dir, ref, archive string) error {
	img, _, err := layoutImage(dir)
	if err != nil {
		return err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(archive, r, img)
}

// layoutRef reads what an OCI layout of `make images` holds: the reference
// its image was built for (the org.opencontainers.image.ref.name annotation)
// and the image's config digest, which containerd reports as its image ID.
func layoutRef(dir string) (name.Tag, string, error) {
	img, desc, err := layoutImage(dir)
	if err != nil {
		return name.Tag{}, "", err
	}
	ref, err := name.NewTag(desc.Annotations["org.opencontainers.image.ref.name"], name.StrictValidation)
	if err != nil {
		return name.Tag{}, "", fmt.Errorf("%s: the image's reference: %w", dir, err)
	}
	id, err := img.ConfigName()
	if err != nil {
		return name.Tag{}, "", err
	}
	return ref, id.String(), nil
}

// layoutImage is the one image of an OCI layout and its index entry.
func layoutImage(dir string) (v1.Image, v1.Descriptor, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	if len(m.Manifests) != 1 {
		return nil, v1.Descriptor{}, fmt.Errorf("%s: %d images, want 1", dir, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	return img, m.Manifests[0], err
}
