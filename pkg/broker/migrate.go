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
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A Migration is one step of the Redis layout, from layout To-1 to To. The
// manager runs it (Migrate) while the queues keep serving, so the step's
// functions rewrite keys that workers, the API and the manager's own
// reconcilers use at the same moment: each rewrite must be one script (or
// one command), and the scripts of this build must read both layouts. Both
// functions may run again on keys they already migrated (after a crash, or
// while a step waits for a queue's workers), so they must be idempotent.
type Migration struct {
	To   int
	Name string
	// Global migrates the keys outside every queue; nil when there are none.
	Global func(ctx context.Context, rdb redis.UniversalClient) error
	// Queue migrates one queue's keys (KeyPrefix(q)); nil when there are none.
	Queue func(ctx context.Context, rdb redis.UniversalClient, q QueueRef) error
}

// Migrations are this build's layout steps, in order. None so far: layout 1
// is the only layout.
func Migrations() []Migration { return nil }

// MigrationStatus is what Migrate got done.
type MigrationStatus struct {
	// Migrated is the layout every key is migrated to (the global record's
	// "migrated").
	Migrated int
	// Waiting, when the step to Migrated+1 could not finish, holds the
	// queues it waits for, each with its live workers that read an older
	// layout. Migrate goes on with them once those workers are gone.
	Waiting map[QueueRef][]string
}

// Migrate runs the steps above the global record's "migrated" layout, in
// order, on the global keys and on each of queues (those EnsureQueue has not
// created are skipped). A step:
//
//  1. raises the global record's "layout" to its To, so managers and APIs
//     of older releases stop before any key of layout To exists;
//  2. runs Global;
//  3. on each queue whose live workers all read layout To, raises the
//     queue's record to To (RaiseQueueLayout: workers of older releases then
//     refuse it) and runs Queue; a queue with older workers is left in
//     Waiting, and the step stops there;
//  4. when every queue is done, raises the global record's "migrated" to To.
//
// Call it again (the manager does, every minute) to go on with a step that
// waits. Only the manager calls it.
func (b *Broker) Migrate(ctx context.Context, steps []Migration, queues []QueueRef) (MigrationStatus, error) {
	g, err := b.ReadLayout(ctx)
	if err != nil {
		return MigrationStatus{}, err
	}
	st := MigrationStatus{Migrated: g.Migrated}
	for _, m := range steps {
		if m.To <= st.Migrated {
			continue
		}
		if m.To != st.Migrated+1 || m.To > b.maxLayout {
			return st, fmt.Errorf("broker: migration %q to layout %d cannot run on layout %d (this build reads up to %d)",
				m.Name, m.To, st.Migrated, b.maxLayout)
		}
		if st.Waiting, err = b.migrateStep(ctx, m, queues); err != nil || len(st.Waiting) > 0 {
			return st, err
		}
		if err := b.raiseGlobal(ctx, fieldMigrated, m.To); err != nil {
			return st, err
		}
		st.Migrated = m.To
	}
	return st, nil
}

// migrateStep runs steps 1-3 of Migrate for m.
func (b *Broker) migrateStep(ctx context.Context, m Migration, queues []QueueRef) (map[QueueRef][]string, error) {
	if err := b.raiseGlobal(ctx, fieldLayout, m.To); err != nil {
		return nil, err
	}
	if m.Global != nil {
		if err := m.Global(ctx, b.rdb); err != nil {
			return nil, fmt.Errorf("broker: migration %q (layout %d), global keys: %w", m.Name, m.To, err)
		}
	}
	waiting := map[QueueRef][]string{}
	for _, q := range queues {
		behind, err := b.RaiseQueueLayout(ctx, q, m.To)
		if errors.Is(err, ErrQueueNotFound) {
			continue // not created yet: EnsureQueue creates it at MinLayout, which this build and its workers read
		}
		if err != nil {
			return nil, err
		}
		if len(behind) > 0 {
			waiting[q] = behind
			continue
		}
		if m.Queue == nil {
			continue
		}
		if err := m.Queue(ctx, b.rdb, q); err != nil {
			return nil, fmt.Errorf("broker: migration %q (layout %d), queue %s: %w", m.Name, m.To, q, err)
		}
	}
	return waiting, nil
}
