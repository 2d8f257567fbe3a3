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

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/client"
)

// TestCLIVersion: every binary's --version prints the same line, with the
// version of pkg/version/VERSION and the checked-out commit the suite's
// build stamped; `kubectl dtq version` prints that line for the client and
// the API, and the build the API replica, the manager and the workers of a
// Queue report; every authenticated user may read them; without the API it
// prints the client's version, says why the server's is missing, and exits 0.
func TestCLIVersion(t *testing.T) {
	t.Parallel()
	commit := suiteCommit()
	line := fmt.Sprintf("dtq %s (commit %s)", version.Version, commit)
	for _, args := range [][]string{{"manager", "--version"}, {"api", "--version"}, {"worker", "--version"},
		{"worker", "delivery", "--version"}, {"kubectl-dtq", "--version"}} {
		want(t, strings.Join(args, " "), runBin(t, filepath.Join(binDir, args[0]), args[1:]...), 0, "^"+regexp.QuoteMeta(line)+"\n$", "^$")
	}

	// A Queue, so that workers run and report their build.
	ns := single.namespace(t, "e2e-version")
	single.queue(t, ns, nil)
	build := client.BuildCount{Version: version.Version, Commit: commit}
	has := func(bs []client.BuildCount) bool {
		return slices.ContainsFunc(bs, func(b client.BuildCount) bool { return b.Version == build.Version && b.Commit == build.Commit })
	}
	// Other tests may run their own builds beside this one (a replaced
	// manager, the checker's workers): the suite's build must be among those
	// reported, not alone.
	var got struct {
		Client version.Info          `json:"clientVersion"`
		Server *client.ServerVersion `json:"serverVersion"`
	}
	err := poll(t.Context(), 2*time.Minute, func() error {
		r := dtq(t, ns, "version", "-o", "json")
		if r.code != 0 {
			return fmt.Errorf("version -o json: %v", r)
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			return fmt.Errorf("version -o json: %w: %s", err, r.stdout)
		}
		if got.Server == nil || !has(got.Server.APIs) || !has(got.Server.Managers) || !has(got.Server.Workers) {
			return fmt.Errorf("the API, the manager and the workers do not all report %+v yet: %s", build, r.stdout)
		}
		return nil
	})
	must(t, err)
	if got.Client != (version.Info{Version: version.Version, Commit: commit}) || got.Server.Version != version.Version || got.Server.Commit != commit {
		t.Errorf("client %+v, server %s %s; want %s %s for both", got.Client, got.Server.Version, got.Server.Commit, version.Version, commit)
	}

	row := func(component string) string {
		return `(?m)^` + component + ` +` + regexp.QuoteMeta(version.Version) + ` +` + regexp.QuoteMeta(commit) + ` +[1-9]`
	}
	r := dtq(t, ns, "version")
	want(t, "version", r, 0, `(?s)^Client: `+regexp.QuoteMeta(line)+"\nServer: "+regexp.QuoteMeta(line)+"\nCOMPONENT +VERSION +COMMIT +COUNT\n", "^$")
	for _, c := range []string{"api", "manager", "worker"} {
		want(t, "version: the "+c+" row", r, 0, row(c), "")
	}

	// Any authenticated user may read the versions (config/api/version_reader_role.yaml).
	want(t, "can-i get /api/v1/version", kubectl(t, ns, "auth", "can-i", "get", "/api/v1/version", "--as=system:serviceaccount:"+ns+":nobody"), 0, "^yes\n$", "")

	want(t, "version without the API", dtq(t, ns, "version", "--api-url", "http://127.0.0.1:1"), 0,
		"^Client: "+regexp.QuoteMeta(line)+"\n$", `^No server version from the dtq HTTP API: .*127\.0\.0\.1:1`)
	want(t, "version --client", dtq(t, ns, "version", "--client"), 0, "^Client: "+regexp.QuoteMeta(line)+"\n$", "^$")
}

// suiteCommit is what the suite's binaries say their commit is: the one
// devstack.Build stamped, or "unknown" in a source tree without Git.
func suiteCommit() string {
	if builtCommit != "" {
		return builtCommit
	}
	return "unknown"
}
