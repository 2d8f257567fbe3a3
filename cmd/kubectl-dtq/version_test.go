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

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/client"
)

func builds(vs ...string) []client.BuildCount {
	var out []client.BuildCount
	for _, v := range vs {
		out = append(out, client.BuildCount{Version: v, Commit: "c" + v, Count: 1})
	}
	return out
}

// TestSkewWarnings: the policy of docs/upgrade.md, one minor release between
// components and between the CLI and the server, and a warning for
// components that report no version.
func TestSkewWarnings(t *testing.T) {
	cases := map[string]struct {
		cli    string
		server client.ServerVersion
		want   []string // substrings, one per warning, in order
	}{
		"all one version": {"0.2.0", client.ServerVersion{Version: "0.2.0", APIs: builds("0.2.0"), Managers: builds("0.2.0"), Workers: builds("0.2.0")}, nil},
		"a rollout, N and N-1": {"0.1.0", client.ServerVersion{Version: "0.2.0", APIs: builds("0.2.0", "0.1.0"),
			Managers: builds("0.1.0"), Workers: builds("0.2.0", "0.1.0")}, nil},
		"workers two minors behind": {"0.3.0", client.ServerVersion{Version: "0.3.0", APIs: builds("0.3.0"), Managers: builds("0.3.0"),
			Workers: builds("0.1.0")}, []string{"api 0.3.0 and worker 0.1.0", "manager 0.3.0 and worker 0.1.0"}},
		"cli two minors behind": {"0.1.0", client.ServerVersion{Version: "0.3.0", APIs: builds("0.3.0")}, []string{"kubectl-dtq 0.1.0 and the server's 0.3.0"}},
		"worker without a version": {"0.1.0", client.ServerVersion{Version: "0.1.0", Workers: []client.BuildCount{{Count: 3}}},
			[]string{`3 worker process(es) report version ""`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := skewWarnings(tc.cli, &tc.server)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d: %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

// TestPrintVersions: the Client: and Server: lines are what --version prints,
// and the table lists each component's builds (a component with none says so).
func TestPrintVersions(t *testing.T) {
	var b bytes.Buffer
	s := &client.ServerVersion{Version: "0.2.0", Commit: "c0.2.0", APIs: builds("0.2.0"),
		Workers: []client.BuildCount{{Version: "0.2.0", Commit: "c0.2.0", Count: 3}, {Count: 1}}}
	if err := printVersions(&b, versions{Client: version.Info{Version: "0.2.0", Commit: "abc"}, Server: s}, ""); err != nil {
		t.Fatal(err)
	}
	want := `Client: dtq 0.2.0 (commit abc)
Server: dtq 0.2.0 (commit c0.2.0)
COMPONENT  VERSION    COMMIT     COUNT
api        0.2.0      c0.2.0     1
manager    <none>                0
worker     0.2.0      c0.2.0     3
worker     <unknown>  <unknown>  1
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
