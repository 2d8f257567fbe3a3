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

package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// Defaults of Options.History.
const (
	DefaultHistoryInterval = 10 * time.Second
	DefaultHistorySamples  = 360 // an hour at the default interval
)

// HistoryOptions configures the queues' history: the samples of each
// queue's backlog and counters that the HTTP API serves and the console
// charts (docs/console.md).
type HistoryOptions struct {
	// Interval between two samples of every queue; negative: no sampling.
	Interval time.Duration
	// Samples kept per queue.
	Samples int
}

// queueHistory is the manager's leader-elected Runnable that samples every
// Queue each interval: it reads the queue's backlog and counters and appends
// them to the queue's history in Redis (Engine.RecordHistory). The history
// lives in Redis, so it survives restarts of the API and the manager and
// every API replica serves the same; the sampler reads what the metrics
// scrape reads, nothing on the task path. A history not written for twice
// its span expires (a deleted Queue's, say).
type queueHistory struct {
	reader   client.Reader
	engine   Engine
	clock    clock.Clock
	interval time.Duration
	samples  int
}

// NeedLeaderElection: one manager samples at a time.
func (h *queueHistory) NeedLeaderElection() bool { return true }

// Start samples now and then an interval after each sample until ctx ends.
func (h *queueHistory) Start(ctx context.Context) error {
	t := h.clock.NewTimer(h.interval)
	defer t.Stop()
	for {
		h.sample(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			t.Reset(h.interval)
		}
	}
}

// sample records one sample of every Queue, metricsReadConcurrency at a time.
func (h *queueHistory) sample(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("queue-history")
	ctx, cancel := context.WithTimeout(ctx, h.interval)
	defer cancel()
	var queues dtqv1alpha1.QueueList
	if err := h.reader.List(ctx, &queues); err != nil {
		log.Error(err, "List Queues")
		return
	}
	ttl := 2 * time.Duration(h.samples) * h.interval
	sem := make(chan struct{}, metricsReadConcurrency)
	var wg sync.WaitGroup
	for i := range queues.Items {
		if !queues.Items[i].DeletionTimestamp.IsZero() {
			continue // its keys are going (the engine also refuses a sample of a deleted queue)
		}
		ref := queueRefOf(&queues.Items[i])
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := h.engine.RecordHistory(ctx, ref, int64(h.samples), ttl); err != nil && ctx.Err() == nil {
				log.Error(err, "Record queue history", "namespace", ref.Namespace, "queue", ref.Name)
			}
		})
	}
	wg.Wait()
}
