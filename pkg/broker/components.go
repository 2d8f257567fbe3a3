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
	"encoding/json"
	"fmt"
	"time"
)

// ComponentRefresh is how often RunComponentRecord rewrites a process's
// record; ComponentsMaxAge is the age after which Components drops a record
// (its process stopped without removing it, e.g. SIGKILL).
const (
	ComponentRefresh = 30 * time.Second
	ComponentsMaxAge = 3 * ComponentRefresh
	componentTimeout = 5 * time.Second // per write
)

// The components that record their builds (Component.Component).
const (
	ComponentAPI     = "api"
	ComponentManager = "manager"
)

// Component is one running manager or API replica, as it records itself in
// the hash dtq:components.
type Component struct {
	Component string    `json:"component"` // "manager" or "api"
	Pod       string    `json:"pod"`       // the pod (host) name
	Version   string    `json:"version"`
	Commit    string    `json:"commit"`
	Updated   time.Time `json:"updated"` // by the broker's clock
}

func (c Component) field() string { return c.Component + "/" + c.Pod }

// RecordComponent writes c's record, updated now.
func (b *Broker) RecordComponent(ctx context.Context, c Component) error {
	c.Updated = b.clock.Now().UTC()
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := b.rdb.HSet(ctx, componentsKey, c.field(), v).Err(); err != nil {
		return fmt.Errorf("broker: record %s: %w", c.field(), err)
	}
	return nil
}

// RemoveComponent deletes c's record.
func (b *Broker) RemoveComponent(ctx context.Context, c Component) error {
	if err := b.rdb.HDel(ctx, componentsKey, c.field()).Err(); err != nil {
		return fmt.Errorf("broker: remove %s: %w", c.field(), err)
	}
	return nil
}

// Components lists the records updated within ComponentsMaxAge and deletes
// the older ones and any it cannot read.
func (b *Broker) Components(ctx context.Context) ([]Component, error) {
	m, err := b.rdb.HGetAll(ctx, componentsKey).Result()
	if err != nil {
		return nil, fmt.Errorf("broker: read components: %w", err)
	}
	oldest := b.clock.Now().Add(-ComponentsMaxAge)
	var out []Component
	var stale []string
	for field, v := range m {
		var c Component
		if err := json.Unmarshal([]byte(v), &c); err != nil || c.Updated.Before(oldest) {
			stale = append(stale, field)
			continue
		}
		out = append(out, c)
	}
	if len(stale) > 0 {
		b.rdb.HDel(ctx, componentsKey, stale...)
	}
	return out, nil
}

// RunComponentRecord records c every ComponentRefresh until ctx ends, then
// removes the record. A failed write is passed to onError and tried again at
// the next refresh.
func (b *Broker) RunComponentRecord(ctx context.Context, c Component, onError func(error)) {
	t := time.NewTicker(ComponentRefresh)
	defer t.Stop()
	for {
		wctx, cancel := context.WithTimeout(ctx, componentTimeout)
		if err := b.RecordComponent(wctx, c); err != nil && ctx.Err() == nil {
			onError(err)
		}
		cancel()
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), componentTimeout)
			if err := b.RemoveComponent(rctx, c); err != nil {
				onError(err)
			}
			cancel()
			return
		case <-t.C:
		}
	}
}
