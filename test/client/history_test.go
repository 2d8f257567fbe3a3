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

package client_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// History returns the samples the manager writes: every one oldest first, the
// newest Limit of them, those after Since; a Limit out of range is
// INVALID_REQUEST.
func TestHistory(t *testing.T) {
	q := ensureQueue(t, "history", func(*broker.QueueConfig) {})
	for i := range 4 {
		if i > 0 {
			if _, err := q.Submit(t.Context(), "send", nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := engine.RecordHistory(t.Context(), broker.QueueRef{Namespace: "shop", Name: "history"}, 100, time.Hour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // a sample's time is its stream entry's millisecond
	}
	submitted := func(opts client.HistoryOptions) []int64 {
		t.Helper()
		h, err := q.History(t.Context(), opts)
		if err != nil {
			t.Fatalf("history %+v: %v", opts, err)
		}
		var n []int64
		for _, s := range h.Samples {
			n = append(n, s.Submitted)
		}
		return n
	}
	all, err := q.History(t.Context(), client.HistoryOptions{})
	if err != nil || len(all.Samples) != 4 {
		t.Fatalf("history: %+v %v, want 4 samples", all, err)
	}
	for _, c := range []struct {
		opts client.HistoryOptions
		want []int64
	}{
		{client.HistoryOptions{}, []int64{0, 1, 2, 3}},
		{client.HistoryOptions{Limit: 2}, []int64{2, 3}},
		{client.HistoryOptions{Since: all.Samples[1].Time}, []int64{2, 3}},
		{client.HistoryOptions{Since: all.Samples[0].Time, Limit: 1}, []int64{3}},
	} {
		if got := submitted(c.opts); !slices.Equal(got, c.want) {
			t.Errorf("history %+v: submitted %v, want %v", c.opts, got, c.want)
		}
	}
	_, err = q.History(t.Context(), client.HistoryOptions{Limit: 10001})
	wantError(t, err, client.ErrInvalidRequest, http.StatusBadRequest)
}
