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
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/schedule"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// nextRunsListed is how many upcoming slots each listed schedule carries, as
// many as kubectl dtq schedule get prints.
const nextRunsListed = 5

// listSchedules lists the namespace's TaskSchedules from the API server, read
// with the API's own identity (the caller's right to list taskschedules was
// checked before), with their next run times.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request, q broker.QueueRef) {
	var list dtqv1alpha1.TaskScheduleList
	if err := s.opts.Schedules.List(r.Context(), &list, ctrlclient.InNamespace(q.Namespace)); err != nil {
		s.writeError(w, r, &client.Error{StatusCode: http.StatusInternalServerError, Code: client.CodeInternal,
			Message: fmt.Sprintf("list TaskSchedules of namespace %s: %v", q.Namespace, err)})
		return
	}
	now := time.Now()
	out := client.ScheduleList{Schedules: make([]client.Schedule, 0, len(list.Items))}
	for i := range list.Items {
		out.Schedules = append(out.Schedules, scheduleOf(&list.Items[i], now))
	}
	slices.SortFunc(out.Schedules, func(a, b client.Schedule) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

// scheduleOf is ts as the API lists it at now.
func scheduleOf(ts *dtqv1alpha1.TaskSchedule, now time.Time) client.Schedule {
	st := &ts.Status
	out := client.Schedule{
		Namespace: ts.Namespace, Name: ts.Name, Schedule: ts.Spec.Schedule, TimeZone: cmp.Or(string(ts.Spec.TimeZone), "UTC"),
		Queue: ts.Spec.Template.Queue, TaskType: ts.Spec.Template.Type, Suspended: ts.Spec.Suspend,
		LastRunTime: timeOf(st.LastScheduleTime), LastScheduleTime: timeOf(st.LastScheduleTime), NextRuns: []time.Time{},
		Active: int(st.ActiveCount), Runs: st.Runs, MissedSlots: st.MissedSlots, SkippedSlots: st.SkippedSlots,
		LastSkipReason: st.LastSkipReason,
	}
	runs, err := schedule.NextRuns(ts, now, nextRunsListed)
	if err != nil {
		out.NextRunsError = err.Error()
	} else if runs != nil {
		out.NextRuns = runs
	}
	return out
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
