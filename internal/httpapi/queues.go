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
	"context"
	"net/http"
	"time"

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/apiconv"
)

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	names, err := s.b.Queues(r.Context(), q.Namespace)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := client.QueueList{Queues: make([]client.QueueStats, 0, len(names))}
	for _, n := range names {
		st, err := s.stats(r.Context(), broker.QueueRef{Namespace: q.Namespace, Name: n})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out.Queues = append(out.Queues, st)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) stats(ctx context.Context, q broker.QueueRef) (client.QueueStats, error) {
	m, err := s.b.QueueMetrics(ctx, q)
	if err != nil {
		return client.QueueStats{}, err
	}
	ws, err := s.b.Workers(ctx, q)
	if err != nil {
		return client.QueueStats{}, err
	}
	return apiconv.Stats(q, m, len(ws), time.Now()), nil
}

func (s *Server) getQueue(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.stats(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// purgeQueue cancels every task waiting in the queue (broker.PurgeQueue):
// queued, delayed and retrying ones; running tasks finish.
func (s *Server) purgeQueue(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.b.PurgeQueue(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, client.PurgeResponse{Purged: n})
}

func (s *Server) pauseQueue(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	s.setPaused(w, r, q, true)
}

func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	s.setPaused(w, r, q, false)
}

// setPaused pauses or resumes the queue: it sets the Queue resource's
// spec.paused (Options.PauseQueue), the lasting switch that the Queue
// controller applies to Redis, and the engine's flag at once, so workers stop
// (or start) taking tasks without waiting for the controller.
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, q broker.QueueRef, pause bool) {
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.opts.PauseQueue != nil {
		if err := s.opts.PauseQueue(r.Context(), q, pause); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	set := s.b.Resume
	if pause {
		set = s.b.Pause
	}
	if err := set(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, client.PauseResponse{Namespace: q.Namespace, Queue: q.Name, Paused: pause})
}

func (s *Server) workers(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	ws, err := s.b.Workers(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := client.WorkerList{Workers: make([]client.Worker, 0, len(ws))}
	for _, wk := range ws {
		out.Workers = append(out.Workers, apiconv.Worker(wk))
	}
	writeJSON(w, http.StatusOK, out)
}
