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

package version

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxMinorSkew is the version-skew policy of docs/upgrade.md: the manager, the
// API, the workers and the delivery sidecars may run together when their
// versions have the same major and are at most this many minor releases
// apart (N and N-1 during a rollout), and so may the CLI and the cluster.
const MaxMinorSkew = 1

// WithinSkew reports whether components of versions a and b may run together
// under the policy of MaxMinorSkew. Versions are semantic versions with or
// without a leading "v"; a pre-release or build suffix is ignored.
func WithinSkew(a, b string) (bool, error) {
	am, an, err := majorMinor(a)
	if err != nil {
		return false, err
	}
	bm, bn, err := majorMinor(b)
	if err != nil {
		return false, err
	}
	return am == bm && max(an-bn, bn-an) <= MaxMinorSkew, nil
}

// majorMinor parses the major and minor of a semantic version.
func majorMinor(v string) (major, minor int, err error) {
	core, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), "+")
	core, _, _ = strings.Cut(core, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return 0, 0, fmt.Errorf("version %q is not a semantic version (MAJOR.MINOR.PATCH)", v)
	}
	n := make([]int, 3)
	for i, p := range parts {
		if n[i], err = strconv.Atoi(p); err != nil || n[i] < 0 {
			return 0, 0, fmt.Errorf("version %q is not a semantic version (MAJOR.MINOR.PATCH)", v)
		}
	}
	return n[0], n[1], nil
}
