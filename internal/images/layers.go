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

package images

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// entry is one file or directory of a layer. Every entry has the zero
// modification time, so a layer's digest depends on its contents only.
type entry struct {
	name string
	mode int64
	uid  int
	body []byte // nil for a directory
}

// baseLayer holds what a static Go binary expects of a system: the users
// (root and nonroot, both without a shell: there is none), the name service
// order Go's resolver reads, a CA bundle for TLS to Redis (the NSS roots Go
// ships in golang.org/x/crypto/x509roots/fallback, pinned by go.mod), a home
// for nonroot and a /tmp.
func baseLayer() (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", User, UID, UID, User, User)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", User, UID)
	return layer([]entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: caBundle()},
		{name: "home/", mode: 0o755},
		{name: "home/" + User + "/", mode: 0o700, uid: UID},
		{name: "tmp/", mode: 0o1777},
	})
}

// caBundle is the PEM of the unconstrained NSS roots (a root with a
// distrust-after date cannot be expressed in a PEM bundle, so it is left out).
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		}
	}
	return b.Bytes()
}

// BinaryLayer is a gzip-compressed layer holding the binary at path as
// /<name>, executable by everyone (the images here, and hack/pause).
func BinaryLayer(name, path string) (v1.Layer, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return layer([]entry{{name: name, mode: 0o755, body: body}})
}

// layer writes entries, in order, as a gzip-compressed OCI layer.
func layer(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid,
			ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
		}
		if e.body == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	tarBytes := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
