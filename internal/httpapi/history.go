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

package httpapi

import (
	"net/http"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client/apiconv"
)

// queueHistory answers the queue's history (broker.History), oldest first:
// the samples written after ?since= (RFC 3339; absent: every one kept), the
// newest ?limit= (1..10000, default 10000) of them.
func (s *Server) queueHistory(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			s.writeError(w, r, invalidRequest("since", "since must be an RFC 3339 time"))
			return
		}
		since = t
	}
	limit := broker.MaxHistoryLimit
	if r.URL.Query().Has("limit") {
		n, err := limitParam(r, broker.MaxHistoryLimit)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		limit = n
	}
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	samples, err := s.b.History(r.Context(), q, since, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiconv.History(q, samples))
}
