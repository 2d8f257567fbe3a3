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

package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// listOnly allows list taskschedules alone, and records what it was asked.
type listOnly struct{ asked []httpapi.Attributes }

func (l *listOnly) Authorize(_ *http.Request, a httpapi.Attributes) (string, error) {
	l.asked = append(l.asked, a)
	if a.Verb == "list" && a.Resource == "taskschedules" {
		return "alice", nil
	}
	return "alice", &client.Error{StatusCode: http.StatusForbidden, Code: client.CodeForbidden, Message: "no"}
}

// GET schedules lists the namespace's TaskSchedules (a pure unit test of the
// conversion, on controller-runtime's fake client; TestAPISchedules in
// test/e2e reads them from a real API server): sorted by name, zone UTC when
// unset, the next five slots in the schedule's zone after its last slot
// handled, and every unfinished run counted (activeCount, not the capped list).
func TestListSchedules(t *testing.T) {
	scheme := runtime.NewScheme()
	must(t, dtqv1alpha1.AddToScheme(scheme))
	last := metav1.NewTime(time.Date(2030, 1, 7, 14, 0, 0, 0, time.UTC)) // a Monday, 09:00 in New York
	weekly := &dtqv1alpha1.TaskSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "weekly"},
		Spec: dtqv1alpha1.TaskScheduleSpec{Schedule: "0 9 * * 1", TimeZone: "America/New_York",
			Template: dtqv1alpha1.TaskTemplate{Queue: "q", Type: "report"}},
		// status.active lists at most 100 runs; activeCount counts them all.
		Status: dtqv1alpha1.TaskScheduleStatus{LastScheduleTime: &last, LastHandledSlot: &last, Runs: 3, SkippedSlots: 2,
			LastSkipReason: "ConcurrencyForbidden", Active: []dtqv1alpha1.ScheduleRun{{Name: "weekly-1"}}, ActiveCount: 120},
	}
	hourly := &dtqv1alpha1.TaskSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-hourly"},
		Spec: dtqv1alpha1.TaskScheduleSpec{Schedule: "@hourly", Suspend: true,
			Template: dtqv1alpha1.TaskTemplate{Queue: "q", Type: "tick"}},
	}
	other := &dtqv1alpha1.TaskSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x"},
		Spec: dtqv1alpha1.TaskScheduleSpec{Schedule: "@daily"}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(weekly, hourly, other).Build()

	auth := &listOnly{}
	s, err := httpapi.New(httpapi.Options{Broker: broker.New(redistest.Start(t).Client()), Auth: auth, Schedules: kube})
	must(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: apitest.Transport(t, nil)}
	resp, err := hc.Get(srv.URL + "/api/v1/namespaces/ns/schedules")
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET schedules: %d %s", resp.StatusCode, body)
	}
	if diff := cmp.Diff([]httpapi.Attributes{{Verb: "list", Namespace: "ns", Resource: "taskschedules"}}, auth.asked); diff != "" {
		t.Errorf("authorised (-want +got):\n%s", diff)
	}
	var got struct {
		Schedules []map[string]any `json:"schedules"`
	}
	must(t, json.Unmarshal(body, &got))
	if len(got.Schedules) != 2 || got.Schedules[0]["name"] != "a-hourly" || got.Schedules[1]["name"] != "weekly" {
		t.Fatalf("schedules %s, want a-hourly and weekly of namespace ns", body)
	}
	h := got.Schedules[0]
	if h["time_zone"] != "UTC" || h["suspended"] != true || len(h["next_runs"].([]any)) != 5 {
		t.Errorf("a-hourly: %v, want zone UTC, suspended, five next runs", h)
	}
	w := got.Schedules[1]
	want := map[string]any{
		"namespace": "ns", "name": "weekly", "schedule": "0 9 * * 1", "time_zone": "America/New_York",
		"queue": "q", "task_type": "report", "suspended": false,
		"last_run_time": "2030-01-07T14:00:00Z", "last_schedule_time": "2030-01-07T14:00:00Z",
		"next_runs": []any{"2030-01-14T09:00:00-05:00", "2030-01-21T09:00:00-05:00", "2030-01-28T09:00:00-05:00",
			"2030-02-04T09:00:00-05:00", "2030-02-11T09:00:00-05:00"},
		"active": 120.0, "runs": 3.0, "missed_slots": 0.0, "skipped_slots": 2.0, "last_skip_reason": "ConcurrencyForbidden",
	}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("weekly (-want +got):\n%s", diff)
	}

	// The right to list taskschedules is not the right to list queues.
	resp, err = hc.Get(srv.URL + "/api/v1/namespaces/ns/queues")
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET queues with list taskschedules alone: %d, want 403", resp.StatusCode)
	}
}

// Without Options.Schedules the route is not served: 404 NOT_FOUND.
func TestListSchedulesNotServedWithoutKubernetes(t *testing.T) {
	srv := newAPI(t)
	hc := &http.Client{Transport: apitest.Transport(t, nil)}
	resp, err := hc.Get(srv.URL + "/api/v1/namespaces/ns/schedules")
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET schedules without a Kubernetes reader: %d, want 404", resp.StatusCode)
	}
}
