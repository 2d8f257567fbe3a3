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
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	"github.com/dtq-dev/dtq/internal/version"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/tracing"
)

// A burst with failures on Queue e2e-metrics/q (one worker), then the queue
// paused with tasks waiting: the manager's and the worker's /metrics are
// scraped and every series of docs/metrics.md is checked against the value
// the burst must give it. The logs of both are JSON lines, and the worker's
// lines about a task carry task_id, attempt, namespace and queue.
func TestMetricsAfterBurst(t *testing.T) {
	ns := single.namespace(t, "e2e-metrics")
	q := single.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		s.Scaling.MinReplicas, s.Scaling.MaxReplicas = ptr.To(int32(1)), 1
		s.Retry.BaseDelay, s.Retry.MaxDelay = dur(200*time.Millisecond), dur(time.Second)
		s.MaxPayloadBytes = 256
	})
	redisBefore := scrapeSeries(t, single.stack.ManagerMetricsURL(), "")
	// A suspended TaskSchedule: its series, runs none.
	must(t, single.stack.Client.Create(t.Context(), &dtqv1alpha1.TaskSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "sched", Namespace: ns},
		Spec: dtqv1alpha1.TaskScheduleSpec{Schedule: "* * * * *", Suspend: true,
			Template: dtqv1alpha1.TaskTemplate{Queue: q.Name, Type: "echo"}},
	}))

	var tasks []*dtqv1alpha1.Task
	for i := range 20 {
		tasks = append(tasks, newTask(fmt.Sprintf("echo-%02d", i), ns, "burst", "echo", map[string]int{"i": i}).Key(fmt.Sprintf("k%02d", i)).Obj())
	}
	for i := range 3 {
		tasks = append(tasks, newTask(fmt.Sprintf("fail-%d", i), ns, "burst", "fail", nil).MaxAttempts(3).Obj())
	}
	for i := range 2 {
		tasks = append(tasks, newTask(fmt.Sprintf("flaky-%d", i), ns, "burst", "flaky", map[string]int{"failTimes": 1}).MaxAttempts(3).Obj())
	}
	tasks = append(tasks, newTask("too-large", ns, "burst", "echo", map[string]string{"x": strings.Repeat("y", 300)}).Obj())
	tasks = append(tasks, newTask("cancelled", ns, "burst", "echo", nil).Delay(time.Hour).Obj())
	expiring := newTask("expired", ns, "burst", "echo", nil).Delay(2 * time.Second)
	expiring.Spec.TTL = &metav1.Duration{Duration: time.Second}
	tasks = append(tasks, expiring.Obj())
	single.createAll(t, tasks)
	must(t, poll(t.Context(), time.Minute, func() error {
		got, err := single.listTasks(t.Context(), ns, "burst")
		if err != nil || got["cancelled"] == nil || got["cancelled"].Status.TaskID == "" {
			return fmt.Errorf("task cancelled not submitted yet (%w)", err)
		}
		patched := got["cancelled"].DeepCopy()
		patched.Spec.Cancel = true
		return single.stack.Client.Patch(t.Context(), patched, client.MergeFrom(got["cancelled"]))
	}))
	got := single.waitTerminal(t, ns, "burst", len(tasks), 2*time.Minute)
	for name, want := range map[string]dtqv1alpha1.TaskState{"echo-00": dtqv1alpha1.TaskSucceeded, "fail-0": dtqv1alpha1.TaskDeadLettered,
		"flaky-0": dtqv1alpha1.TaskSucceeded, "too-large": dtqv1alpha1.TaskFailed, "cancelled": dtqv1alpha1.TaskCancelled, "expired": dtqv1alpha1.TaskExpired} {
		if got[name].Status.State != want {
			t.Fatalf("the burst did not go as planned: %s", describe(got[name]))
		}
	}
	// Two more Tasks with keys of finished ones: replays.
	single.createAll(t, []*dtqv1alpha1.Task{newTask("echo-00-again", ns, "replay", "echo", nil).Key("k00").Obj(),
		newTask("echo-01-again", ns, "replay", "echo", nil).Key("k01").Obj()})
	single.waitTerminal(t, ns, "replay", 2, time.Minute)

	// Paused, with tasks waiting at two priorities.
	must(t, single.stack.Client.Patch(t.Context(), &dtqv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q.Name}},
		client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":true}}`))))
	must(t, poll(t.Context(), time.Minute, func() error {
		var cur dtqv1alpha1.Queue
		if err := single.stack.Client.Get(t.Context(), client.ObjectKeyFromObject(q), &cur); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(cur.Status.Conditions, dtqv1alpha1.QueuePaused) {
			return fmt.Errorf("queue not paused yet: %v", cur.Status.Conditions)
		}
		return nil
	}))
	waiting := make([]*dtqv1alpha1.Task, 0, 5)
	for i := range 5 {
		prio := int32(7)
		if i >= 3 {
			prio = 2
		}
		waiting = append(waiting, newTask(fmt.Sprintf("waiting-%d", i), ns, "waiting", "echo", nil).Priority(prio).Obj())
	}
	pausedAt := time.Now()
	single.createAll(t, waiting)

	want := map[string]float64{
		"dtq_queue_in_flight_tasks{queue=q}":     0,
		"dtq_queue_scheduled_tasks{queue=q}":     0,
		"dtq_queue_dead_lettered_tasks{queue=q}": 3,
		"dtq_queue_paused{queue=q}":              1,
		"dtq_queue_workers_desired{queue=q}":     1,
		"dtq_queue_workers_ready{queue=q}":       1,
		// 20 echo, 3 fail, 2 flaky, cancelled, expired, 5 waiting; not the
		// one refused, nor the replays.
		"dtq_queue_submissions_total{queue=q,result=accepted}":                       32,
		"dtq_queue_submissions_total{queue=q,result=duplicate}":                      2,
		"dtq_queue_submissions_refused_total{code=PAYLOAD_TOO_LARGE,queue=q}":        1,
		"dtq_queue_submissions_refused_total{code=IDEMPOTENCY_IN_PROGRESS,queue=q}":  0,
		"dtq_queue_submissions_refused_total{code=IDEMPOTENCY_KEY_MISMATCH,queue=q}": 0,
		"dtq_queue_submissions_refused_total{code=QUEUE_FULL,queue=q}":               0,
		"dtq_queue_tasks_finished_total{queue=q,state=Succeeded}":                    22,
		"dtq_queue_tasks_finished_total{queue=q,state=DeadLettered}":                 3,
		"dtq_queue_tasks_finished_total{queue=q,state=Cancelled}":                    1,
		"dtq_queue_tasks_finished_total{queue=q,state=Expired}":                      1,
		"dtq_queue_tasks_finished_total{queue=q,state=Failed}":                       0,
		"dtq_queue_retries_total{queue=q}":                                           2,
		"dtq_queue_redeliveries_total{queue=q}":                                      0,
	}
	for p := range 10 {
		want[fmt.Sprintf("dtq_queue_queued_tasks{priority=%d,queue=q}", p)] = map[int]float64{7: 3, 2: 2}[p]
	}
	var mgr map[string]float64
	sched := map[string]float64{}
	err := poll(t.Context(), time.Minute, func() error {
		mgr = scrapeSeries(t, single.stack.ManagerMetricsURL(), ns)
		for k, v := range mgr {
			if strings.HasPrefix(k, "dtq_schedule_") {
				sched[k] = v
				delete(mgr, k)
			}
		}
		if next := sched["dtq_schedule_next_run_timestamp_seconds{schedule=sched}"]; next < float64(time.Now().Unix()) {
			return fmt.Errorf("dtq_schedule_next_run_timestamp_seconds = %v, want a time to come", next)
		}
		age := mgr["dtq_queue_oldest_queued_task_age_seconds{queue=q}"]
		if limit := time.Since(pausedAt).Seconds() + 1; age <= 0 || age > limit {
			return fmt.Errorf("oldest queued task age %v, want in (0, %v]", age, limit)
		}
		return diffSeries(want, mgr, "dtq_queue_oldest_queued_task_age_seconds{queue=q}")
	})
	must(t, err)
	_, skipped := sched["dtq_schedule_skipped_slots_total{schedule=sched}"] // suspended slots, as many as minutes passed
	if err := diffSeries(map[string]float64{"dtq_schedule_runs_total{schedule=sched}": 0, "dtq_schedule_missed_slots_total{schedule=sched}": 0,
		"dtq_schedule_active_runs{schedule=sched}": 0, "dtq_schedule_suspended{schedule=sched}": 1}, sched, "{schedule=sched}"); err != nil || !skipped {
		t.Errorf("schedule series %v: %v", sched, err)
	}

	// The one worker ran 27 executions: 20 echo, 3 fail, 2 flaky twice.
	pod := onePod(t, ns)
	wk := scrapeSeries(t, "http://"+pod.MetricsAddr+"/metrics", ns)
	wantWorker := map[string]float64{
		"dtq_worker_tasks_in_flight{queue=q}": 0,
		"dtq_worker_slots{queue=q}":           4,
	}
	checked := map[string]bool{"dtq_queue_oldest_queued_task_age_seconds": true,
		"dtq_schedule_runs_total": true, "dtq_schedule_missed_slots_total": true, "dtq_schedule_skipped_slots_total": true,
		"dtq_schedule_active_runs": true, "dtq_schedule_next_run_timestamp_seconds": true, "dtq_schedule_suspended": true,
		"dtq_redis_command_duration_seconds": true, "dtq_redis_command_errors_total": true}
	for typ, n := range map[string]struct{ started, succeeded, failed, retried, dead float64 }{
		"echo": {20, 20, 0, 0, 0}, "fail": {3, 0, 3, 0, 3}, "flaky": {4, 2, 2, 2, 0},
	} {
		l := "{queue=q,task_type=" + typ + "}"
		for name, v := range map[string]float64{"started": n.started, "succeeded": n.succeeded, "failed": n.failed,
			"retried": n.retried, "dead_lettered": n.dead, "cancelled": 0} {
			checked["dtq_worker_tasks_"+name+"_total"] = true
			if v > 0 || wk["dtq_worker_tasks_"+name+"_total"+l] != 0 { // a counter appears once it moved
				wantWorker["dtq_worker_tasks_"+name+"_total"+l] = v
			}
		}
		for _, h := range []string{"execution", "wait", "latency"} {
			wantWorker["dtq_worker_task_"+h+"_seconds_count"+l] = n.started
			if sum := wk["dtq_worker_task_"+h+"_seconds_sum"+l]; sum <= 0 {
				t.Errorf("dtq_worker_task_%s_seconds_sum%s = %v, want > 0", h, l, sum)
			}
		}
	}
	if err := diffSeries(wantWorker, wk, "_seconds_sum{"); err != nil {
		t.Error(err)
	}

	// The manager's Redis client: commands timed, none failed during the test.
	redisAfter := scrapeSeries(t, single.stack.ManagerMetricsURL(), "")
	if n := redisAfter["dtq_redis_command_duration_seconds_count{command=pipeline}"] - redisBefore["dtq_redis_command_duration_seconds_count{command=pipeline}"]; n <= 0 {
		t.Errorf("the manager's pipelined Redis calls did not move (%v)", n)
	}
	// ACL errors excepted: setting up a namespace's Redis user tries ACL
	// SETUSER with +client|setinfo first, which Redis before 7.2 refuses (an
	// ERR reply, counted as such), then without it.
	for k, v := range redisAfter {
		if strings.HasPrefix(k, "dtq_redis_command_errors_total") && !strings.Contains(k, "command=acl,") && v != redisBefore[k] {
			t.Errorf("%s went from %v to %v during the test", k, redisBefore[k], v)
		}
	}

	apiSeries := checkAPIMetrics(t)
	for k := range apiSeries {
		if strings.HasPrefix(k, "dtq_api_") {
			checked[seriesName(k)] = true
		}
	}

	// The manager's and the API's build, as their --version prints it.
	build := fmt.Sprintf("dtq_build_info{commit=%s,version=%s}", suiteCommit(), version.Version)
	for what, scraped := range map[string]map[string]float64{"manager": redisAfter, "API": apiSeries} {
		if err := diffSeries(map[string]float64{build: 1}, scraped, "dtq_"); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	checked["dtq_build_info"] = true
	for _, name := range flowSeries { // TestFlowControlCRs checks them
		checked[name] = true
	}

	// Every documented series was checked above (or is process-wide and
	// checked here), and every dtq series scraped is documented.
	docs := documentedSeries(t)
	for k := range maps.Keys(want) {
		checked[seriesName(k)] = true
	}
	for k := range maps.Keys(wantWorker) {
		checked[seriesName(k)] = true
	}
	for name := range docs {
		if !checked[name] {
			t.Errorf("documented series %s is not checked by this test", name)
		}
	}
	for _, scraped := range []map[string]float64{mgr, wk, redisAfter, apiSeries} {
		for k := range scraped {
			if name := seriesName(k); strings.HasPrefix(name, "dtq_") && docs[name] == "" {
				t.Errorf("%s is exported but not in docs/metrics.md", name)
			}
		}
	}

	checkLogs(t, ns, pod.Name)
}

// checkAPIMetrics scrapes the API's /metrics (with the admin token: the
// non-resource path /metrics needs get) around a submission and a batch to a
// queue that does not exist: each counts once under its route with code 404
// and is timed, and the API's Redis client is timed (the queue lookups). It
// returns the last scrape.
func checkAPIMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	tok := adminToken(t)
	before := scrapeSeriesAs(t, single.stack.APIURL+"/metrics", tok, "")
	path := queuePath("e2e-no-such-ns", "none") + "/tasks"
	expect(t, "submit to no queue", call(t, tok, http.MethodPost, path, map[string]any{"task_type": "echo"}), http.StatusNotFound, "QUEUE_NOT_FOUND")
	expect(t, "batch to no queue", call(t, tok, http.MethodPost, path+":batch",
		map[string]any{"tasks": []map[string]any{{"task_type": "echo"}}}), http.StatusNotFound, "QUEUE_NOT_FOUND")
	after := scrapeSeriesAs(t, single.stack.APIURL+"/metrics", tok, "")
	for _, k := range []string{
		"dtq_api_requests_total{code=404,route=submit}", "dtq_api_requests_total{code=404,route=submit_batch}",
		"dtq_api_request_duration_seconds_count{route=submit}", "dtq_api_request_duration_seconds_count{route=submit_batch}",
	} {
		if d := after[k] - before[k]; d != 1 {
			t.Errorf("API %s moved by %v, want 1", k, d)
		}
	}
	if d := after["dtq_api_requests_total{code=200,route=metrics}"] - before["dtq_api_requests_total{code=200,route=metrics}"]; d != 1 {
		t.Errorf("API scrapes counted %v between two scrapes, want 1", d)
	}
	var redisCalls float64
	for k, v := range after {
		if strings.HasPrefix(k, "dtq_redis_command_duration_seconds_count") {
			redisCalls += v - before[k]
		}
	}
	if redisCalls < 2 {
		t.Errorf("the API's Redis client timed %v commands for two queue lookups", redisCalls)
	}
	return after
}

// checkLogs reads the stack's manager, API and worker pod's logs: every line
// is a JSON object with time, level and msg, and the worker's five failed
// attempts (3 fail, 2 flaky) are logged with the task's ID, attempt,
// namespace and queue.
func checkLogs(t *testing.T, ns, pod string) {
	t.Helper()
	logs := filepath.Join(single.stack.Dir, "logs")
	jsonLines(t, filepath.Join(logs, "manager.log"))
	if !slices.ContainsFunc(jsonLines(t, filepath.Join(logs, "api.log")), func(l map[string]any) bool {
		return l["msg"] == "Serving the dtq API" && l["level"] == "info"
	}) {
		t.Errorf("api.log has no info line Serving the dtq API")
	}
	failed := 0
	for _, l := range jsonLines(t, filepath.Join(logs, "worker_"+ns+"_"+pod+".log")) {
		if l["msg"] != "Task attempt failed" {
			continue
		}
		failed++
		if id, _ := l["task_id"].(string); id == "" || l["attempt"] == nil || l["namespace"] != ns || l["queue"] != "q" {
			t.Errorf("a task line without task_id, attempt, namespace %s and queue q: %v", ns, l)
		}
	}
	if failed != 5 {
		t.Errorf("%d 'Task attempt failed' lines, want 5", failed)
	}
}

func jsonLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["time"] == nil || m["level"] == nil || m["msg"] == nil {
			t.Errorf("%s: a line that is not a JSON object with time, level and msg: %s", filepath.Base(path), sc.Text())
			continue
		}
		out = append(out, m)
	}
	must(t, sc.Err())
	return out
}

// onePod returns the queue's one running worker pod.
func onePod(t *testing.T, ns string) struct{ Name, MetricsAddr string } {
	t.Helper()
	var pods []struct{ Name, MetricsAddr string }
	for _, p := range single.stack.Pods() {
		if p.Namespace == ns && p.Deployment == "q-workers" && !p.Terminating {
			pods = append(pods, struct{ Name, MetricsAddr string }{p.Name, p.MetricsAddr})
		}
	}
	if len(pods) != 1 || pods[0].MetricsAddr == "" {
		t.Fatalf("want one worker pod of %s/q with a metrics address: %+v", ns, pods)
	}
	return pods[0]
}

// scrapeSeries GETs a Prometheus text endpoint and returns its dtq_ series as
// "name{label=value,...}" -> value, the labels sorted and the namespace label
// left out: with ns set, only series whose namespace is ns; with ns "", only
// series without a namespace label. A histogram gives its _count and _sum.
func scrapeSeries(t *testing.T, url, ns string) map[string]float64 {
	t.Helper()
	return scrapeSeriesAs(t, url, "", ns)
}

// scrapeSeriesAs is scrapeSeries with a bearer token (the API's /metrics).
func scrapeSeriesAs(t *testing.T, url, token, ns string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return testutil.Series(slices.Collect(maps.Values(fams)), "dtq_", ns)
}

// diffSeries compares want with got, ignoring got's keys that contain ignore.
func diffSeries(want, got map[string]float64, ignore string) error {
	var diffs []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			diffs = append(diffs, fmt.Sprintf("%s = %v (present %v), want %v", k, g, ok, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && !strings.Contains(k, ignore) {
			diffs = append(diffs, fmt.Sprintf("unexpected %s = %v", k, v))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return fmt.Errorf("series differ:\n%s", strings.Join(diffs, "\n"))
	}
	return nil
}

// seriesName strips labels and a histogram's _count or _sum.
func seriesName(key string) string {
	name, _, _ := strings.Cut(key, "{")
	for _, s := range []string{"_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, s); ok && strings.HasSuffix(base, "_seconds") {
			return base
		}
	}
	return name
}

// documentedSeries reads the series tables of docs/metrics.md: name -> type.
func documentedSeries(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(envtestutil.RepoRoot(), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(dtq_[a-z_]+)` \\| (counter|gauge|histogram) \\|").FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = m[2]
	}
	if len(out) < 20 {
		t.Fatalf("found %d series in docs/metrics.md", len(out))
	}
	return out
}

// A Task CR with the dtq.dev/traceparent annotation, on a Queue whose workers
// export spans (OTEL_* in the worker template, as a user sets them): the
// manager's dtq.submit and the worker's dtq.start and dtq.complete reach an
// OTLP receiver in the annotation's trace, each the child of the one before.
func TestTraceThroughTaskCR(t *testing.T) {
	ns := single.namespace(t, "e2e-trace")
	single.queue(t, ns, func(s *dtqv1alpha1.QueueSpec) {
		s.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "worker", Image: "dtq-worker", Env: []corev1.EnvVar{
			{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: otlp.URL()},
			{Name: "OTEL_BSP_SCHEDULE_DELAY", Value: "100"},
		}}}
	})
	traceID, parentID := randomHex(16), randomHex(8)
	task := newTask("traced", ns, "trace", "echo", map[string]int{"x": 1}).Obj()
	task.Annotations = map[string]string{dtqv1alpha1.AnnotationTraceParent: "00-" + traceID + "-" + parentID + "-01"}
	single.createAll(t, []*dtqv1alpha1.Task{task})
	if got := single.waitTerminal(t, ns, "trace", 1, time.Minute)["traced"]; got.Status.State != dtqv1alpha1.TaskSucceeded {
		t.Fatalf("the traced task: %s", describe(got))
	}
	must(t, poll(t.Context(), 30*time.Second, func() error {
		spans := otlp.trace(traceID)
		submit, start, complete := spans["dtq.submit"], spans["dtq.start"], spans["dtq.complete"]
		switch {
		case submit.SpanID == "" || start.SpanID == "" || complete.SpanID == "":
			return fmt.Errorf("spans of trace %s so far: %+v", traceID, spans)
		case submit.ParentID != parentID || start.ParentID != submit.SpanID || complete.ParentID != start.SpanID:
			return fmt.Errorf("want annotation -> dtq.submit -> dtq.start -> dtq.complete, got %+v", spans)
		case submit.Service != "dtq-manager" || start.Service != "dtq-worker":
			return fmt.Errorf("services: submit %q, start %q", submit.Service, start.Service)
		}
		return nil
	}))
}

// A submission through the real API with the caller's trace context (the Go
// client sends it as a traceparent header), single and batch, on a Queue whose
// workers export spans: the API's dtq.submit and the worker's dtq.start and
// dtq.complete reach the OTLP receiver in the caller's trace, each the child
// of the one before.
func TestTraceThroughAPI(t *testing.T) {
	ns := single.namespace(t, "e2e-trace-api")
	apiQueue(t, ns, "q", func(s *dtqv1alpha1.QueueSpec) {
		s.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "worker", Image: "dtq-worker", Env: []corev1.EnvVar{
			{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: otlp.URL()},
			{Name: "OTEL_BSP_SCHEDULE_DELAY", Value: "100"},
		}}}
	})
	q := apiClient(t, adminToken(t)).Queue(ns, "q")
	traced := func() (context.Context, string, string) {
		traceID, parentID := randomHex(16), randomHex(8)
		return tracing.WithTraceParent(t.Context(), "00-"+traceID+"-"+parentID+"-01"), traceID, parentID
	}
	ctx, single, singleParent := traced()
	task, err := q.Submit(ctx, "echo", map[string]int{"x": 1})
	must(t, err)
	ids := []string{task.TaskID}
	ctx, batch, batchParent := traced()
	res, err := q.SubmitBatch(ctx, []dtqclient.SubmitRequest{{TaskType: "echo"}, {TaskType: "echo"}})
	must(t, err)
	for _, r := range res {
		must(t, r.Err())
		ids = append(ids, r.Task.TaskID)
	}
	for _, id := range ids {
		if done, err := q.Wait(t.Context(), id); err != nil || done.Status != dtqclient.StatusSucceeded {
			t.Fatalf("task %s: %+v %v", id, done, err)
		}
	}
	for _, c := range []struct {
		traceID, parentID string
		tasks             int
	}{{single, singleParent, 1}, {batch, batchParent, 2}} {
		must(t, poll(t.Context(), 30*time.Second, func() error {
			spans := otlp.traceSpans(c.traceID)
			var submit receivedSpan
			starts := map[string]receivedSpan{} // by span ID
			for _, s := range spans {
				switch s.Name {
				case "dtq.submit":
					submit = s
				case "dtq.start":
					starts[s.SpanID] = s
				}
			}
			if submit.SpanID == "" || submit.ParentID != c.parentID || submit.Service != "dtq-api" {
				return fmt.Errorf("trace %s: want the API's dtq.submit, child of %s; spans so far %+v", c.traceID, c.parentID, spans)
			}
			completes := 0
			for _, s := range spans {
				start, ok := starts[s.ParentID]
				if s.Name == "dtq.complete" && ok && start.ParentID == submit.SpanID && start.Service == "dtq-worker" {
					completes++
				}
			}
			if len(starts) != c.tasks || completes != c.tasks {
				return fmt.Errorf("trace %s: want %d dtq.start -> dtq.complete chains under dtq.submit, got %+v", c.traceID, c.tasks, spans)
			}
			return nil
		}))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
