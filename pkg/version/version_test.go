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
	"regexp"
	"testing"
)

func TestVersionIsSemver(t *testing.T) {
	if !regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`).MatchString(Version) {
		t.Fatalf("VERSION holds %q, want MAJOR.MINOR.PATCH", Version)
	}
}

func TestResolveCommit(t *testing.T) {
	const sha = "69c6d29110a06d3624255725a19ce76b381db229"
	cases := map[string]struct {
		linked, main string
		settings     map[string]string
		want         string
	}{
		"linked wins":     {linked: "abc-dirty", main: modulePath, settings: map[string]string{"vcs.revision": sha}, want: "abc-dirty"},
		"vcs stamp":       {main: modulePath, settings: map[string]string{"vcs.revision": sha, "vcs.modified": "false"}, want: sha},
		"vcs stamp dirty": {main: modulePath, settings: map[string]string{"vcs.revision": sha, "vcs.modified": "true"}, want: sha + "-dirty"},
		"another module":  {main: "example.com/myworker", settings: map[string]string{"vcs.revision": sha}, want: "unknown"},
		"no stamp":        {main: modulePath, want: "unknown"},
		"no build info":   {want: "unknown"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := resolveCommit(tc.linked, tc.main, tc.settings); got != tc.want {
				t.Fatalf("resolveCommit = %q, want %q", got, tc.want)
			}
		})
	}
}
