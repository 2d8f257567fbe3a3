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

package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The error a binary prints names the layout found, the layouts it reads and
// the upgrade step.
func TestLayoutErrorMessage(t *testing.T) {
	for name, tc := range map[string]struct {
		err  LayoutError
		want []string
	}{
		"newer global": {LayoutError{Found: 3, Migrated: 3, Min: 1, Max: 2},
			[]string{"Redis holds dtq layout 3", "reads layouts 1..2", "upgrade this component to a release that reads layout 3", "docs/upgrade.md"}},
		"newer queue": {LayoutError{Queue: QueueRef{Namespace: "ns", Name: "q"}, Found: 2, Min: 1, Max: 1},
			[]string{"queue ns/q in Redis holds dtq layout 2", "reads layouts 1..1", "a release that reads layout 2"}},
		"not migrated": {LayoutError{Found: 2, Migrated: 1, Min: 2, Max: 3},
			[]string{"migrated only to layout 1", "reads layouts 2..3", "migrated every key to layout 2"}},
	} {
		t.Run(name, func(t *testing.T) {
			msg := tc.err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			if !errors.Is(&tc.err, ErrLayoutUnknown) {
				t.Error("errors.Is(err, ErrLayoutUnknown) is false")
			}
		})
	}
}

// A Redis without a record is layout 1; the manager's EnsureLayout writes
// the record then, and a build that reads an older range refuses it without
// writing anything.
func TestCheckLayout(t *testing.T) {
	e := newEnv(t)
	if g, err := e.b.ReadLayout(ctx); err != nil || g != (GlobalLayout{Layout: 1, Migrated: 1}) {
		t.Fatalf("ReadLayout of a Redis without a record = %+v, %v; want layout 1", g, err)
	}
	if err := e.b.CheckLayout(ctx); err != nil {
		t.Fatalf("CheckLayout without a record: %v", err)
	}
	if err := e.b.EnsureLayout(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"layout": "1", "migrated": "1"}, e.rdb.HGetAll(ctx, layoutKey).Val()); d != "" {
		t.Errorf("record after EnsureLayout (-want +got):\n%s", d)
	}

	e.rdb.HSet(ctx, layoutKey, "layout", 3, "migrated", 2)
	before := e.dirty()
	var le *LayoutError
	err := e.b.EnsureLayout(ctx)
	if !errors.As(err, &le) || le.Found != 3 || le.Min != MinLayout || le.Max != MaxLayout {
		t.Fatalf("EnsureLayout of a layout-3 Redis = %v; want a LayoutError naming 3 and %d..%d", err, MinLayout, MaxLayout)
	}
	if after := e.dirty(); after != before {
		t.Errorf("refused EnsureLayout wrote to Redis (changes %s -> %s)", before, after)
	}
	if err := New(e.rdb, WithLayouts(1, 3)).CheckLayout(ctx); err != nil {
		t.Errorf("a build reading 1..3 refuses layout 3: %v", err)
	}
	if err := New(e.rdb, WithLayouts(3, 3)).CheckLayout(ctx); !errors.As(err, &le) || le.Migrated != 2 {
		t.Errorf("a build reading 3..3 of a Redis migrated to 2 = %v; want a LayoutError", err)
	}
}

// dirty is Redis's count of changes since the last save: any write raises it.
func (e *env) dirty() string {
	e.t.Helper()
	for _, l := range strings.Split(e.rdb.Info(ctx, "persistence").Val(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rdb_changes_since_last_save:"); ok {
			return v
		}
	}
	e.t.Fatal("no rdb_changes_since_last_save in INFO")
	return ""
}

// A worker registers the layout it reads, a heartbeat on a queue of a newer
// layout writes nothing and says so, and a queue's record is raised only
// when every live worker reads the new layout.
func TestQueueLayoutAndWorkers(t *testing.T) {
	e := newEnv(t)
	if n, err := e.b.QueueLayout(ctx, e.q); err != nil || n != MinLayout {
		t.Fatalf("layout of a new queue = %d, %v; want %d", n, err, MinLayout)
	}
	old := New(e.rdb, WithLayouts(1, 1))
	next := New(e.rdb, WithLayouts(1, 2))
	beat := func(b *Broker, id string) error {
		return b.Heartbeat(ctx, e.q, WorkerInfo{ID: id, Status: "ready", StartedAt: time.Now()}, time.Minute)
	}
	for _, w := range []struct {
		b  *Broker
		id string
	}{{old, "old"}, {next, "new"}} {
		if err := beat(w.b, w.id); err != nil {
			t.Fatal(err)
		}
	}
	ok, behind, err := next.WorkersReadLayout(ctx, e.q, 2)
	if err != nil || ok || !cmp.Equal(behind, []string{"old"}) {
		t.Fatalf("WorkersReadLayout(2) = %v %v %v; want false [old]", ok, behind, err)
	}
	if behind, err := next.RaiseQueueLayout(ctx, e.q, 2); err != nil || !cmp.Equal(behind, []string{"old"}) {
		t.Fatalf("RaiseQueueLayout(2) beside an old worker = %v, %v; want [old]", behind, err)
	}
	if n, _ := e.b.QueueLayout(ctx, e.q); n != 1 {
		t.Fatalf("queue raised to %d beside an old worker", n)
	}

	// The old worker goes (its record expires); the raise goes through.
	e.rdb.Del(ctx, keysFor(e.q).worker("old"))
	if behind, err := next.RaiseQueueLayout(ctx, e.q, 2); err != nil || behind != nil {
		t.Fatalf("RaiseQueueLayout(2) = %v, %v", behind, err)
	}
	if n, _ := e.b.QueueLayout(ctx, e.q); n != 2 {
		t.Fatalf("queue layout %d after the raise, want 2", n)
	}
	if g, _ := e.b.ReadLayout(ctx); g.Layout != 2 || g.Migrated != 1 {
		t.Errorf("global record %+v after a queue's raise; want layout 2 (raised first), migrated 1", g)
	}

	// An old worker now refuses, at start (CheckQueueLayout) and at its
	// heartbeat, and writes nothing.
	before := e.dirty()
	var le *LayoutError
	if err := old.CheckQueueLayout(ctx, e.q); !errors.As(err, &le) || le.Found != 2 || le.Queue != e.q {
		t.Errorf("CheckQueueLayout of an old build = %v", err)
	}
	if err := beat(old, "old"); !errors.As(err, &le) || le.Found != 2 {
		t.Errorf("heartbeat of an old worker on a layout-2 queue = %v; want a LayoutError", err)
	}
	if after := e.dirty(); after != before {
		t.Errorf("refused heartbeat wrote to Redis (changes %s -> %s)", before, after)
	}
	if e.rdb.Exists(ctx, keysFor(e.q).worker("old")).Val() != 0 {
		t.Error("the refused worker is registered")
	}
	if err := beat(next, "new"); err != nil {
		t.Errorf("heartbeat of a layout-2 worker: %v", err)
	}
	ws, _ := e.b.Workers(ctx, e.q)
	if len(ws) != 1 || ws[0].Layout != 2 {
		t.Errorf("workers %+v; want new, reading layout 2", ws)
	}

	// EnsureQueue keeps a raised record; a raise never lowers one; a build
	// cannot raise beyond what it reads.
	if err := e.b.EnsureQueue(ctx, e.q, DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := next.RaiseQueueLayout(ctx, e.q, 1); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.b.QueueLayout(ctx, e.q); n != 2 {
		t.Errorf("queue layout %d after EnsureQueue and a raise to 1, want 2", n)
	}
	if _, err := next.RaiseQueueLayout(ctx, e.q, 3); err == nil {
		t.Error("a build reading up to 2 raised a queue to 3")
	}
	// A queue EnsureQueue never created is left alone.
	missing := QueueRef{Namespace: "ns", Name: "missing"}
	if behind, err := next.RaiseQueueLayout(ctx, missing, 2); !errors.Is(err, ErrQueueNotFound) || behind != nil {
		t.Fatalf("RaiseQueueLayout of a missing queue = %v, %v; want ErrQueueNotFound", behind, err)
	}
	if e.rdb.Exists(ctx, keysFor(missing).config()).Val() != 0 {
		t.Error("RaiseQueueLayout created a missing queue's config")
	}
}

// WatchLayout keeps checking through failures to reach Redis and stops on
// the first LayoutError, once.
func TestWatchLayout(t *testing.T) {
	le := &LayoutError{Found: 2, Min: 1, Max: 1}
	results := []error{errors.New("connection refused"), nil, le}
	calls := 0
	var stopped []error
	WatchLayout(context.Background(), time.Millisecond, func(context.Context) error {
		calls++
		return results[min(calls, len(results))-1]
	}, func(err error) { stopped = append(stopped, err) })
	if calls != 3 || len(stopped) != 1 || !errors.Is(stopped[0], le) {
		t.Errorf("checks %d, stops %v; want 3 checks and one stop with the LayoutError", calls, stopped)
	}
}

// Flow control is written only into a queue of LayoutFlowControl, and a
// queue is raised to it only when no live worker of an earlier layout serves
// it: such a worker would read the streams past the limits and never give a
// slot back.
func TestFlowControlWaitsForOlderWorkers(t *testing.T) {
	e := newEnv(t)
	old := New(e.rdb, WithLayouts(1, 1))
	if err := old.Heartbeat(ctx, e.q, WorkerInfo{ID: "old", Status: "ready", StartedAt: time.Now()}, time.Minute); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultQueueConfig()
	cfg.Flow = &FlowControl{MaxConcurrency: 2}
	err := e.b.EnsureQueue(ctx, e.q, cfg)
	if CodeOf(err) != CodeWorkersBehind || !strings.Contains(err.Error(), "old") {
		t.Fatalf("EnsureQueue with flow control beside a layout-1 worker = %v; want %s naming it", err, CodeWorkersBehind)
	}
	if got, err := e.b.QueueConfig(ctx, e.q); err != nil || got.Flow != nil {
		t.Fatalf("flow control written beside a layout-1 worker: %+v, %v", got.Flow, err)
	}
	if n, _ := e.b.QueueLayout(ctx, e.q); n != MinLayout {
		t.Fatalf("queue raised to %d beside a layout-1 worker", n)
	}

	e.rdb.Del(ctx, keysFor(e.q).worker("old")) // rolled: its record expires
	if err := e.b.EnsureQueue(ctx, e.q, cfg); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.b.QueueLayout(ctx, e.q); n != LayoutFlowControl {
		t.Fatalf("queue layout %d with flow control, want %d", n, LayoutFlowControl)
	}
	if got, _ := e.b.QueueConfig(ctx, e.q); got.Flow == nil || got.Flow.MaxConcurrency != 2 {
		t.Fatalf("flow control not written: %+v", got.Flow)
	}
	if err := old.Heartbeat(ctx, e.q, WorkerInfo{ID: "old", Status: "ready", StartedAt: time.Now()}, time.Minute); !errors.Is(err, ErrLayoutUnknown) {
		t.Fatalf("a layout-1 worker's heartbeat on a flow-controlled queue = %v; want refused", err)
	}
}
