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

// Package layout tests the Redis layout version with the real binaries
// (docs/upgrade.md, "Redis layout version").
package layout

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// A binary started against a Redis whose layout is newer than it reads
// exits non-zero with a message naming both layouts and the upgrade step, and
// writes nothing: the manager and the API read the global record, a worker
// (and its delivery sidecar mode) its queue's record.
func TestBinariesRefuseANewerLayout(t *testing.T) {
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin+"/", "../../cmd/manager", "../../cmd/api", "../../cmd/worker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q := broker.QueueRef{Namespace: "shop", Name: "emails"}
	b := broker.New(rdb)
	if err := b.EnsureQueue(ctx, q, broker.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(ctx, q, broker.SubmitRequest{Type: "echo", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	newer := broker.MaxLayout + 1
	rdb.HSet(ctx, "dtq:layout", "layout", newer, "migrated", newer)
	rdb.HSet(ctx, broker.KeyPrefix(q)+"config", "layout", newer)

	workerEnv := []string{"DTQ_REDIS_URL=" + srv.URL(), "DTQ_QUEUE_NAMESPACE=" + q.Namespace, "DTQ_QUEUE_NAME=" + q.Name,
		"DTQ_METRICS_ADDR=0", "DTQ_HEARTBEAT_INTERVAL=100ms", "DTQ_HANDLER_URL=http://127.0.0.1:1/run", "DTQ_SIDECAR_ADDR=127.0.0.1:0"}
	for name, tc := range map[string]struct {
		args []string
		env  []string
		says string // where the record was read
	}{
		"manager": {args: []string{filepath.Join(bin, "manager"), "--redis-url=" + srv.URL(), "--health-probe-bind-address=0", "--metrics-bind-address=0"},
			says: fmt.Sprintf("Redis holds dtq layout %d", newer)},
		"api": {args: []string{filepath.Join(bin, "api"), "--redis-url=" + srv.URL(), "--bind-address=127.0.0.1:0", "--insecure-no-auth"},
			says: fmt.Sprintf("Redis holds dtq layout %d", newer)},
		"worker": {args: []string{filepath.Join(bin, "worker")}, env: workerEnv,
			says: fmt.Sprintf("queue %s in Redis holds dtq layout %d", q, newer)},
		"delivery sidecar": {args: []string{filepath.Join(bin, "worker"), "delivery"}, env: workerEnv,
			says: fmt.Sprintf("queue %s in Redis holds dtq layout %d", q, newer)},
	} {
		t.Run(name, func(t *testing.T) {
			before := snapshot(t, rdb)
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, tc.args[0], tc.args[1:]...)
			// No Kubernetes config: a binary that got past the layout check
			// would fail on that instead, with another message.
			cmd.Env = append([]string{"KUBECONFIG=/nonexistent", "HOME=" + t.TempDir()}, tc.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() <= 0 {
				t.Errorf("exit: %v; want a non-zero exit code", err)
			}
			for _, w := range []string{tc.says, fmt.Sprintf("reads layouts %d..%d", broker.MinLayout, broker.MaxLayout),
				fmt.Sprintf("upgrade this component to a release that reads layout %d", newer), "docs/upgrade.md"} {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			t.Logf("%s", out)
			if changed := changedKeys(before, snapshot(t, rdb)); len(changed) > 0 {
				t.Errorf("Redis changed: %s", strings.Join(changed, ", "))
			}
		})
	}
}

// changedKeys names what differs between two snapshots.
func changedKeys(before, after map[string]string) []string {
	var changed []string
	for k, v := range after {
		if before[k] != v {
			changed = append(changed, fmt.Sprintf("%s (%.20q -> %.20q)", k, before[k], v))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			changed = append(changed, k+" deleted")
		}
	}
	slices.Sort(changed)
	return changed
}

// snapshot is Redis's count of changes (any write raises it) and every key
// with its DUMP serialisation.
func snapshot(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	m := map[string]string{}
	for _, l := range strings.Split(rdb.Info(ctx, "persistence").Val(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rdb_changes_since_last_save:"); ok {
			m["(changes)"] = v
		}
	}
	if m["(changes)"] == "" {
		t.Fatal("no rdb_changes_since_last_save in INFO")
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		m[k] = rdb.Dump(ctx, k).Val()
	}
	return m
}
