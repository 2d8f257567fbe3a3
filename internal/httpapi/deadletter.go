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

	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/client/apiconv"
)

// listDeadLetters answers up to ?limit= (1..500, 50) entries, newest first,
// after ?continue= (the previous page's continue: the entry ID it ended
// with). A full page carries continue; the page after the last is empty.
func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	limit, err := limitParam(r, broker.MaxListLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	before, err := entryParam(r, "continue")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	dls, err := s.b.DeadLettersBefore(r.Context(), q, before, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := client.DeadLetterList{Entries: make([]client.DeadLetter, 0, len(dls)), Count: len(dls)}
	for _, d := range dls {
		out.Entries = append(out.Entries, apiconv.DeadLetter(d))
	}
	if len(dls) == limit {
		out.Continue = dls[len(dls)-1].EntryID
	}
	writeJSON(w, http.StatusOK, out)
}

// entryParam reads query parameter name, a stream entry ID, or "".
func entryParam(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return "", nil
	}
	if _, _, ok := parseEntryID(v); !ok {
		return "", invalidRequest(name, "%s must be a dead-letter entry ID (<ms>-<seq>), not %q", name, v)
	}
	return v, nil
}

// requeueDeadLetters requeues the task of every entry up to ?through= (an
// entry ID; the newest entry at the start without it), oldest first; see
// broker.RequeueDeadLetters for why it is safe beside other clients.
func (s *Server) requeueDeadLetters(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	through, err := entryParam(r, "through")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.b.RequeueDeadLetters(r.Context(), q, through)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, client.RequeueAllResponse{Requeued: res.Requeued, Skipped: res.Skipped, Through: res.Through})
}

func (s *Server) getDeadLetter(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	d, err := s.b.DeadLetter(r.Context(), q, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiconv.DeadLetter(d))
}

// requeueDeadLetter puts the task back with attempt 1 (the old count kept
// as previous_attempts) and its idempotency record back to processing.
func (s *Server) requeueDeadLetter(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	t, err := s.b.Requeue(r.Context(), q, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiconv.Task(t, false))
}

// discardDeadLetter removes the task's entry and answers it; the task stays
// DeadLettered.
func (s *Server) discardDeadLetter(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	id := r.PathValue("id")
	d, err := s.b.DeadLetter(r.Context(), q, id)
	if err == nil {
		err = s.b.Discard(r.Context(), q, id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiconv.DeadLetter(d))
}

func (s *Server) purgeDeadLetters(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	if err := s.queueExists(r.Context(), q); err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.b.PurgeDeadLetters(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, client.PurgeResponse{Purged: n})
}
