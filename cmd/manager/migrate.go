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
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/wait"
)

// migrateEvery is how often the elected manager tries again a layout step
// that waits for a queue's older workers.
const migrateEvery = time.Minute

// migrator runs the Redis layout migrations (broker.Migrate, docs/upgrade.md)
// on the elected manager (a Runnable that needs leader election): at start,
// then every migrateEvery until every step is done, on the queues of every
// Queue object.
type migrator struct {
	b     *broker.Broker
	c     client.Reader
	steps []broker.Migration
}

func (m migrator) Start(ctx context.Context) error {
	if len(m.steps) == 0 {
		return nil
	}
	for !m.run(ctx) && wait.Sleep(ctx, migrateEvery) == nil {
	}
	return nil // done, or the manager stops
}

// run runs the steps once and logs what it got done; true when the last
// step is done.
func (m migrator) run(ctx context.Context) bool {
	var qs dtqv1alpha1.QueueList
	if err := m.c.List(ctx, &qs); err != nil {
		setupLog.Error(err, "Redis layout migration cannot list the Queues; trying again", "in", migrateEvery.String())
		return false
	}
	refs := make([]broker.QueueRef, len(qs.Items))
	for i, q := range qs.Items {
		refs[i] = broker.QueueRef{Namespace: q.Namespace, Name: q.Name}
	}
	st, err := m.b.Migrate(ctx, m.steps, refs)
	if err != nil {
		setupLog.Error(err, "Redis layout migration failed; trying again", "in", migrateEvery.String())
		return false
	}
	for q, workers := range st.Waiting {
		setupLog.Info("Redis layout migration waits for workers of an older release", "queue", q.String(),
			"layout", st.Migrated+1, "workers", workers)
	}
	setupLog.Info("Redis layout", "migrated", st.Migrated)
	return st.Migrated >= m.steps[len(m.steps)-1].To
}
