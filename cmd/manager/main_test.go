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
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// No Redis password reaches a worker Deployment through DTQ_REDIS_URL.
func TestWorkersRedisURL(t *testing.T) {
	for name, tc := range map[string]struct {
		manager, worker, want string
		err                   bool
	}{
		"manager URL without credentials": {manager: "redis://redis:6379/0", want: "redis://redis:6379/0"},
		"manager's password dropped":      {manager: "redis://admin:s3cret@redis:6379/0", want: "redis://redis:6379/0"},
		"manager's TLS URL":               {manager: "rediss://:s3cret@redis:6380/1", want: "rediss://redis:6380/1"},
		"worker URL kept":                 {manager: "redis://admin:s3cret@r:6379/0", worker: "redis://replica:6379/0", want: "redis://replica:6379/0"},
		"worker URL with a user only":     {manager: "redis://r:6379/0", worker: "redis://app@r:6379/0", want: "redis://app@r:6379/0"},
		"worker URL with a password":      {manager: "redis://r:6379/0", worker: "redis://app:pw@r:6379/0", err: true},
		"manager's cluster URL":           {manager: "redis+cluster://admin:s3cret@r0:6379?addr=r1:6379", want: "redis+cluster://r0:6379?addr=r1:6379"},
		"manager's Sentinel URL": {manager: "redis+sentinel://sentinel:pw@s0:26379/0?master_name=m&addr=s1:26379&username=admin&password=s3cret",
			want: "redis+sentinel://s0:26379/0?addr=s1%3A26379&master_name=m"},
		"worker Sentinel URL with a password": {manager: "redis://r:6379/0", worker: "redis+sentinel://s0:26379/0?master_name=m&password=pw", err: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := workersRedisURL(tc.manager, tc.worker)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("workersRedisURL(%q, %q) = %q, %v; want %q, error %v", tc.manager, tc.worker, got, err, tc.want, tc.err)
			}
		})
	}
}

// Every flag the manifests in config/manager and config/default pass to the
// manager (arguments and patches adding arguments) is one the manager defines:
// a flag it does not know makes it exit at start.
func TestConfigPassesOnlyKnownFlags(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindFlags(fs)
	arg := regexp.MustCompile(`(?m)^\s*(?:-|value:)\s+--([a-z][a-z0-9-]*)`)
	seen := 0
	for _, dir := range []string{"manager", "default"} {
		files, err := filepath.Glob(filepath.Join("..", "..", "config", dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range arg.FindAllSubmatch(data, -1) {
				seen++
				if fs.Lookup(string(m[1])) == nil {
					t.Errorf("%s passes --%s, which the manager does not define", f, m[1])
				}
			}
		}
	}
	if seen < 4 { // --leader-elect, --health-probe-bind-address, --metrics-bind-address, --metrics-cert-path
		t.Fatalf("found only %d flags in config/: is the pattern still right?", seen)
	}
}
