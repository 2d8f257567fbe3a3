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

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// sampleSchedule creates the sample TaskSchedule (config/samples: every
// minute, Europe/Berlin) in ns, suspended, so it makes no Task; expr, when
// set, replaces its cron expression.
func sampleSchedule(t *testing.T, ns, expr string) *dtqv1alpha1.TaskSchedule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(envtestutil.RepoRoot(), "config", "samples", "dtq_v1alpha1_taskschedule.yaml"))
	must(t, err)
	ts := &dtqv1alpha1.TaskSchedule{}
	must(t, yaml.UnmarshalStrict(data, ts))
	ts.Namespace, ts.Spec.Suspend = ns, true
	if expr != "" {
		ts.Spec.Schedule = expr
	}
	must(t, single.stack.Client.Create(t.Context(), ts))
	t.Cleanup(func() { _ = single.stack.Client.Delete(t.Context(), ts) })
	return ts
}

// GET schedules through the real API process, the TaskSchedule read from the
// API server: the sample's next five runs are the next five minutes, in
// Berlin's offset; a caller needs list on taskschedules.
func TestAPISchedules(t *testing.T) {
	ns := single.namespace(t, "api-schedules")
	sampleSchedule(t, ns, "")
	path := "/api/v1/namespaces/" + ns + "/schedules"

	before := time.Now()
	r := call(t, adminToken(t), http.MethodGet, path, nil)
	expect(t, "list schedules", r, http.StatusOK, "")
	var list dtqclient.ScheduleList
	r.decode(t, &list)
	if len(list.Schedules) != 1 {
		t.Fatalf("schedules: %v, want the sample alone", r)
	}
	s := list.Schedules[0]
	if s.Name != "heartbeat" || s.Schedule != "* * * * *" || s.TimeZone != "Europe/Berlin" || !s.Suspended ||
		s.Queue != "emails" || s.TaskType != "echo" || len(s.NextRuns) != 5 {
		t.Fatalf("schedule: %+v", s)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	must(t, err)
	first := before.Truncate(time.Minute).Add(time.Minute)
	for i, at := range s.NextRuns {
		_, off := at.Zone()
		_, wantOff := at.In(berlin).Zone()
		// A minute boundary may pass between before and the request.
		if at.Second() != 0 || off != wantOff || at.Before(first.Add(time.Duration(i)*time.Minute)) ||
			at.After(first.Add(time.Duration(i+1)*time.Minute)) {
			t.Errorf("next run %d: %s, want %s (or a minute later) in Berlin's offset", i, at, first.Add(time.Duration(i)*time.Minute).In(berlin))
		}
	}

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-schedule-lister"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"dtq.dev"}, Resources: []string{"taskschedules"}, Verbs: []string{"list"}}}}
	if err := single.stack.Client.Create(t.Context(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	expect(t, "list schedules as a producer", call(t, serviceAccount(t, ns, "producer", "dtq-producer"), http.MethodGet, path, nil),
		http.StatusForbidden, dtqclient.CodeForbidden)
	expect(t, "list schedules as a lister", call(t, serviceAccount(t, ns, "lister", role.Name), http.MethodGet, path, nil),
		http.StatusOK, "")
	expect(t, "list schedules without a token", call(t, "", http.MethodGet, path, nil), http.StatusUnauthorized, dtqclient.CodeUnauthorized)
}
