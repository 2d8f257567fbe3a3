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

package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// QueueHistory is a queue's recent history: samples of its backlog and of
// its counters' totals that the elected manager writes to Redis at a fixed
// interval (the manager's --queue-history-interval), oldest first.
type QueueHistory struct {
	Namespace string          `json:"namespace"`
	Queue     string          `json:"queue"`
	Samples   []HistorySample `json:"samples"`
}

// HistorySample is one sample of a queue. The backlog fields are the state
// at Time; the others are totals since the queue's first use, so two samples
// give a rate (a total that went down was reset).
type HistorySample struct {
	Time         time.Time `json:"time"`
	Queued       int64     `json:"queued"`        // not yet delivered to a worker
	InFlight     int64     `json:"in_flight"`     // delivered, not yet acknowledged
	Scheduled    int64     `json:"scheduled"`     // delayed and retrying
	DeadLettered int64     `json:"dead_lettered"` // dead-letter entries
	Submitted    int64     `json:"submitted"`     // new tasks accepted
	Succeeded    int64     `json:"succeeded"`     // tasks that ended Succeeded
	Failed       int64     `json:"failed"`        // tasks that ended Failed or DeadLettered
	Retries      int64     `json:"retries"`       // failed attempts scheduled for a retry
}

// HistoryOptions selects the samples History returns.
type HistoryOptions struct {
	// Since keeps the samples written after it; zero for every one kept.
	Since time.Time
	// Limit keeps the newest Limit of those, 1..10000; 0 means 10000.
	Limit int
}

// History returns the queue's samples selected by opts, oldest first.
func (q *Queue) History(ctx context.Context, opts HistoryOptions) (*QueueHistory, error) {
	v := url.Values{}
	if !opts.Since.IsZero() {
		v.Set("since", opts.Since.UTC().Format(time.RFC3339Nano))
	}
	if opts.Limit != 0 {
		v.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := q.path + "/history"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out QueueHistory
	if err := q.c.do(ctx, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
