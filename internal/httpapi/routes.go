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
	"errors"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dtq-dev/dtq/internal/console"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// Prefix is the path of a namespace's queues; every queue route is under
// Prefix + "/{queue}".
const Prefix = "/api/v1/namespaces/{ns}/queues"

// SchedulesPath lists a namespace's TaskSchedules.
const SchedulesPath = "/api/v1/namespaces/{ns}/schedules"

// route is one endpoint and the RBAC verb it needs, on the custom resources
// of group dtq.dev in the path's namespace: submit = create tasks; reads =
// get/list tasks; the events stream = watch tasks; cancel = update tasks;
// queue stats, history, workers, flow = get queues; list queues = list queues; pause, resume
// = patch queues; purge of the queue's waiting tasks = delete queues/tasks;
// dead-letter reads = get queues/deadletter, requeue = update
// queues/deadletter, discard and purge = delete queues/deadletter; list
// schedules = list taskschedules. Queue and
// dead-letter checks name the queue (RBAC resourceNames apply); task checks
// name no object (a task ID is not a Task object's name).
type route struct {
	name    string // the metrics label
	pattern string
	verb    string
	res     string // tasks, queues, queues/tasks, queues/deadletter, taskschedules
	stream  bool   // no request timeout (the events stream)
	handle  func(w http.ResponseWriter, r *http.Request, q broker.QueueRef)
}

func (s *Server) routes() []route {
	const q, t, dl = Prefix + "/{queue}", Prefix + "/{queue}/tasks", Prefix + "/{queue}/dead-letter"
	rts := []route{
		{name: "submit", pattern: "POST " + t, verb: "create", res: "tasks", handle: s.submit},
		{name: "submit_batch", pattern: "POST " + t + ":batch", verb: "create", res: "tasks", handle: s.submitBatch},
		{name: "list_tasks", pattern: "GET " + t, verb: "list", res: "tasks", handle: s.listTasks},
		{name: "get_task", pattern: "GET " + t + "/{id}", verb: "get", res: "tasks", handle: s.getTask},
		{name: "cancel_task", pattern: "POST " + t + "/{id}/cancel", verb: "update", res: "tasks", handle: s.cancelTask},
		{name: "events", pattern: "GET " + q + "/events", verb: "watch", res: "tasks", stream: true, handle: s.events},
		{name: "list_queues", pattern: "GET " + Prefix, verb: "list", res: "queues", handle: s.listQueues},
		{name: "get_queue", pattern: "GET " + q, verb: "get", res: "queues", handle: s.getQueue},
		{name: "pause_queue", pattern: "POST " + q + "/pause", verb: "patch", res: "queues", handle: s.pauseQueue},
		{name: "resume_queue", pattern: "POST " + q + "/resume", verb: "patch", res: "queues", handle: s.resumeQueue},
		{name: "purge_queue", pattern: "POST " + q + "/purge", verb: "delete", res: "queues/tasks", handle: s.purgeQueue},
		{name: "workers", pattern: "GET " + q + "/workers", verb: "get", res: "queues", handle: s.workers},
		{name: "queue_history", pattern: "GET " + q + "/history", verb: "get", res: "queues", handle: s.queueHistory},
		{name: "queue_flow", pattern: "GET " + q + "/flow", verb: "get", res: "queues", handle: s.queueFlow},
		{name: "list_dead_letters", pattern: "GET " + dl, verb: "get", res: "queues/deadletter", handle: s.listDeadLetters},
		{name: "get_dead_letter", pattern: "GET " + dl + "/{id}", verb: "get", res: "queues/deadletter", handle: s.getDeadLetter},
		{name: "requeue_dead_letter", pattern: "POST " + dl + "/{id}/requeue", verb: "update", res: "queues/deadletter", handle: s.requeueDeadLetter},
		{name: "requeue_dead_letters", pattern: "POST " + dl + "/requeue", verb: "update", res: "queues/deadletter", handle: s.requeueDeadLetters},
		{name: "discard_dead_letter", pattern: "POST " + dl + "/{id}/discard", verb: "delete", res: "queues/deadletter", handle: s.discardDeadLetter},
		{name: "purge_dead_letters", pattern: "POST " + dl + "/purge", verb: "delete", res: "queues/deadletter", handle: s.purgeDeadLetters},
	}
	if s.opts.Schedules != nil {
		rts = append(rts, route{name: "list_schedules", pattern: "GET " + SchedulesPath, verb: "list", res: "taskschedules", handle: s.listSchedules})
	}
	return rts
}

// register adds the API routes, then /metrics and /api/v1/version (get on
// their non-resource paths), /healthz, /readyz, /openapi.json and the web
// console under /ui/ (open: its assets hold no data, its script calls the API
// with the user's token).
func (s *Server) register() {
	for _, rt := range s.routes() {
		s.mux.Handle(rt.pattern, s.metrics.instrument(rt.name, s.authorized(rt)))
	}
	metricsHandler := promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{})
	s.mux.Handle("GET /metrics", s.metrics.instrument("metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.authorize(w, r, Attributes{Verb: "get", Path: "/metrics"}); ok {
			metricsHandler.ServeHTTP(w, r)
		}
	})))
	s.mux.Handle("GET "+VersionPath, s.metrics.instrument("version", http.HandlerFunc(s.serveVersion)))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	s.mux.Handle("GET "+console.Path, console.Handler())
}

// authorized checks the route's RBAC verb, restarts the body deadline (the
// time authorization took is not the client's), checks the path's names, then
// runs the handler (with the request timeout unless it streams).
func (s *Server) authorized(rt route) http.Handler {
	resource, sub, _ := strings.Cut(rt.res, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := broker.QueueRef{Namespace: r.PathValue("ns"), Name: r.PathValue("queue")}
		a := Attributes{Verb: rt.verb, Namespace: q.Namespace, Resource: resource, Subresource: sub}
		if resource == "queues" {
			a.Name = q.Name
		}
		user, ok := s.authorize(w, r, a)
		if !ok {
			return
		}
		r = withIdentity(s.startBodyDeadline(w, r), user)
		if !validName(q.Namespace) || q.Name != "" && !validName(q.Name) {
			s.writeError(w, r, &client.Error{StatusCode: http.StatusNotFound, Code: client.CodeQueueNotFound,
				Message: "queue " + q.String() + " not found: namespace and queue are DNS labels"})
			return
		}
		if !rt.stream {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		rt.handle(w, r, q)
	})
}

// authorize runs the Authorizer and answers 401/403 (or 500 when the
// decision failed); it returns the user and whether the request may go on.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, a Attributes) (string, bool) {
	user, err := s.opts.Auth.Authorize(r, a)
	if err == nil {
		return user, true
	}
	s.log.Debug("Request denied", "user", user, "method", r.Method, "path", r.URL.Path, "error", err)
	var ce *client.Error
	if !errors.As(err, &ce) { // TokenReview or SubjectAccessReview failed
		ce = &client.Error{StatusCode: http.StatusInternalServerError, Code: client.CodeInternal,
			Message: "authorization failed: " + err.Error()}
	}
	s.writeError(w, r, ce)
	return user, false
}

// validName reports whether s is a DNS label (validation.IsDNS1123Label
// without its regular expression, which costs more than the rest of a
// request's checks).
func validName(s string) bool {
	if s == "" || len(s) > validation.DNS1123LabelMaxLength || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// queueExists answers QUEUE_NOT_FOUND for a queue the engine does not know
// (no Queue, or its controller has not written its config yet).
func (s *Server) queueExists(ctx context.Context, q broker.QueueRef) error {
	_, err := s.b.QueueConfig(ctx, q)
	return err
}
