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
	"strconv"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/apiconv"
)

// queueFlow answers the queue's flow control (its FlowMetrics) and its
// ?top= (1..500, default 20) busiest keys (broker.FlowKeys); a queue
// without flow control answers no flow and no keys.
func (s *Server) queueFlow(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	top := client.DefaultFlowTop
	if v := r.URL.Query().Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > client.MaxFlowTop {
			s.writeError(w, r, invalidRequest("top", "top must be 1..%d", client.MaxFlowTop))
			return
		}
		top = n
	}
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	m, err := s.b.QueueMetrics(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := client.QueueFlow{Namespace: q.Namespace, Queue: q.Name, Flow: apiconv.Flow(m.Flow), Keys: []client.KeyFlow{}}
	if out.Flow != nil {
		keys, err := s.b.FlowKeys(r.Context(), q, top)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, k := range keys {
			out.Keys = append(out.Keys, apiconv.KeyFlow(k))
		}
	}
	writeJSON(w, http.StatusOK, out)
}
