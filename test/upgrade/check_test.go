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

package upgrade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/controllers"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil/chaoscheck"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// finish ends the load and checks everything: the fault suite's checker on
// every logical task (per phase too), the idempotency answers, the
// schedule's slots, every stored object, and that this commit's manager
// reconciles them.
func (s *suite) finish() {
	t := s.t
	for _, err := range slices.Concat(s.crChaos.halt(), s.crHTTP.halt(), s.api.halt()) {
		t.Errorf("load: %v", err)
	}
	s.setPhase("final")
	s.logf("load stopped: %d API submissions answered", s.api.submissions())
	s.suspendSchedule()
	s.seeds.cure(s.seeds.dead)
	s.runDeadAgain()
	s.waitFinished()
	s.resubmit()
	s.waitFinished()

	tasks := s.tasks()
	reports := s.checkChaos(tasks[nsChaos])
	httpReport := s.checkHTTP(tasks[nsHTTP])
	answered := s.checkAnswers()
	hit := s.checkHit(tasks)
	s.validate(&s.cur, true)
	s.checkReconciled(tasks)
	for _, ns := range []string{nsChaos, nsHTTP} {
		for _, p := range s.workerPods(ns, false) {
			if p.Bin != s.cur.worker {
				t.Errorf("pod %s/%s runs %s after the upgrade, want this commit's worker", ns, p.Name, p.Bin)
			}
		}
	}
	s.logf("SUMMARY\n%s\n  HTTP handler queue: %s\n  %s\n  %s", reports, httpReport, answered, hit)
}

// suspendSchedule suspends the TaskSchedule (this commit's manager): no
// slot runs from now on.
func (s *suite) suspendSchedule() {
	ts := &dtqv1alpha1.TaskSchedule{}
	must(s.t, s.stack.Client.Get(s.t.Context(), client.ObjectKey{Namespace: nsChaos, Name: scheduleName}, ts))
	base := client.MergeFrom(ts.DeepCopy())
	ts.Spec.Suspend = true
	must(s.t, s.stack.Client.Patch(s.t.Context(), ts, base))
}

// runDeadAgain runs every dead-lettered seed again with this commit's
// build: the Task CRs by raising spec.retryGeneration (the manager), the
// API's by a dead-letter requeue (the API).
func (s *suite) runDeadAgain() {
	t := s.t
	n := 0
	for _, key := range s.seeds.dead {
		if k, ok := s.api.byKey[key]; ok {
			if _, err := s.api.q.Requeue(t.Context(), s.api.taskID(k)); err != nil {
				t.Errorf("requeue the dead-lettered API task of %s: %v", key, err)
			}
			n++
			continue
		}
		task := &dtqv1alpha1.Task{}
		must(t, s.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: nsChaos, Name: key}, task))
		base := client.MergeFrom(task.DeepCopy())
		task.Spec.RetryGeneration++
		if err := s.stack.Client.Patch(t.Context(), task, base); err != nil {
			t.Errorf("retry the dead-lettered Task %s (%s): %v", key, task.Status.State, err)
		}
		n++
	}
	s.logf("ran the %d dead-lettered tasks again: Task CRs through spec.retryGeneration, the API's through a dead-letter requeue", n)
}

// waitFinished waits until every Task and every API task has finished, or,
// once the last delayed task is due, until nothing has changed for a minute
// (the checks then report what is left).
func (s *suite) waitFinished() {
	t := s.t
	var left []string
	last, lastChange := "", time.Now()
	for {
		left = s.unfinished()
		if now := strings.Join(left, ","); now != last {
			last, lastChange = now, time.Now()
		}
		if len(left) == 0 || time.Now().After(s.seeds.lastDue.Add(30*time.Second)) && time.Since(lastChange) > time.Minute {
			break
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(time.Second):
		}
	}
	if len(left) > 0 {
		s.logf("%d tasks never finished (nothing changed for a minute), e.g. %v", len(left), left[:min(10, len(left))])
		return
	}
	s.logf("every task has finished")
}

// unfinished lists the Tasks and API tasks that have not finished.
func (s *suite) unfinished() []string {
	var out []string
	for ns, tasks := range s.tasks() {
		for _, task := range tasks {
			if !task.Status.State.Finished() {
				out = append(out, fmt.Sprintf("%s/%s %s", ns, task.Name, task.Status.State))
			}
		}
	}
	for _, k := range s.api.all() {
		if s.succeeded[k.key] {
			continue // it stays so: only dead-lettered tasks run again
		}
		st, _ := s.apiTask(k)
		switch {
		case st == nil || !apiState(st.Status).Finished():
			out = append(out, "api/"+k.key)
		case st.Status == dtqclient.StatusSucceeded:
			s.succeeded[k.key] = true
		}
	}
	sort.Strings(out)
	return out
}

// apiTask reads the API's task of k (nil when k was never answered).
func (s *suite) apiTask(k *apiKey) (*dtqclient.Task, error) {
	if s.api.taskID(k) == "" {
		return nil, errors.New("never answered")
	}
	return s.api.q.Get(s.t.Context(), s.api.taskID(k))
}

// resubmit submits every API key once more and creates a second Task of up
// to 15 keys of each phase on each Queue: after the last swap, each must be
// answered with its task, as it was before.
func (s *suite) resubmit() {
	for _, k := range s.api.all() {
		s.api.submit(k)
	}
	n := 0
	for ns, tasks := range s.tasks() {
		perPhase := map[string]int{}
		for _, task := range tasks {
			phase := task.Labels[labelPhase]
			if task.Labels[labelClass] != classLoad || perPhase[phase] >= 15 || task.Status.State != dtqv1alpha1.TaskSucceeded {
				continue
			}
			perPhase[phase]++
			key := task.Spec.IdempotencyKey
			must(s.t, s.stack.Client.Create(s.t.Context(), s.chaosTask(ns, key+"-t2", key, classTwin, chaosPayload(ns, key, 0.02), maxAttempts)))
			n++
		}
	}
	s.logf("resubmitted every API key once more and %d Task CR keys of every phase", n)
}

// tasks lists the Tasks of both namespaces.
func (s *suite) tasks() map[string][]*dtqv1alpha1.Task {
	out := map[string][]*dtqv1alpha1.Task{}
	for _, ns := range []string{nsChaos, nsHTTP} {
		var list dtqv1alpha1.TaskList
		must(s.t, s.stack.Client.List(s.t.Context(), &list, client.InNamespace(ns)))
		for i := range list.Items {
			out[ns] = append(out[ns], &list.Items[i])
		}
	}
	return out
}

// phaseOrder lists the phases tasks are first submitted in, in order (the
// schedule's runs are a phase of their own here).
var phaseOrder = []string{"old", "upgrade-1", "after-upgrade-1", "downgrade", "after-downgrade", "upgrade-2", "after-upgrade-2",
	"final", "schedule"}

// phaseReports is the checker's report on every logical task of the chaos
// Queue, and on those first submitted in each phase.
type phaseReports struct {
	all     chaoscheck.Report
	byPhase map[string]chaoscheck.Report
	order   []string
}

func (r phaseReports) String() string {
	lines := []string{"  chaos queue, every logical task (Task CRs, API submissions, schedule runs): " + r.all.String()}
	for _, p := range r.order {
		lines = append(lines, fmt.Sprintf("    first submitted in %-16s %s", p+":", r.byPhase[p]))
	}
	return strings.Join(lines, "\n")
}

// checkChaos runs the checker on the chaos Queue: the logical tasks of its
// Task CRs (by key), of the API's keys and of the schedule's slots, against
// the chaos log and the counters.
func (s *suite) checkChaos(tasks []*dtqv1alpha1.Task) phaseReports {
	t := s.t
	var crs, runs []*dtqv1alpha1.Task
	for _, task := range tasks {
		if task.Labels[controllers.LabelSchedule] != "" {
			runs = append(runs, task)
		} else {
			crs = append(crs, task)
		}
	}
	phaseOf := map[string]string{} // key -> the phase of its first submission
	for _, task := range crs {
		if task.Labels[labelClass] != classTwin {
			phaseOf[task.Spec.IdempotencyKey] = task.Labels[labelPhase]
		}
	}
	logical := chaoscheck.FromTasks(crs, maxAttempts)
	for _, k := range s.api.all() {
		logical = append(logical, s.apiLogical(k))
		phaseOf[k.key] = k.phase
	}
	log, err := demo.ReadChaosLog(s.chaosLog)
	must(t, err)
	slots, log := s.checkSchedule(runs, log)
	for _, lt := range slots {
		phaseOf[lt.Key] = "schedule"
	}
	logical = append(logical, slots...)
	keys := make([]string, 0, len(logical))
	for _, lt := range logical {
		keys = append(keys, lt.Key)
	}
	effects, err := chaoscheck.ReadEffects(t.Context(), s.rdb, nsChaos, keys)
	must(t, err)
	r := phaseReports{all: chaoscheck.Check(logical, log, effects), byPhase: map[string]chaoscheck.Report{}}
	subsets := map[string][]chaoscheck.Logical{}
	for _, lt := range logical {
		subsets[phaseOf[lt.Key]] = append(subsets[phaseOf[lt.Key]], lt)
	}
	for _, p := range phaseOrder {
		if len(subsets[p]) > 0 {
			r.byPhase[p] = chaoscheck.Check(subsets[p], log, effects)
			r.order = append(r.order, p)
		}
	}
	if !r.all.OK() {
		t.Errorf("chaos queue: %s\n%s", r.all, r.all.Details(20))
	}
	return r
}

// apiLogical is the logical task of an API key: the task IDs of all its
// answers, and its task as the API reads it now.
func (s *suite) apiLogical(k *apiKey) chaoscheck.Logical {
	lt := chaoscheck.Logical{Key: k.key, MaxAttempts: k.maxAttempts}
	for _, a := range k.answers {
		lt.TaskIDs = append(lt.TaskIDs, a.taskID)
	}
	if task, err := s.apiTask(k); err == nil {
		lt.Succeeded = task.Status == dtqclient.StatusSucceeded
		lt.Attempt = task.Attempt
		if task.PreviousAttempts > 0 { // one dead-letter requeue, in this test
			lt.EarlierRuns = []int{task.PreviousAttempts}
		}
	}
	return lt
}

// checkSchedule checks the schedule's runs: one Task per slot from the
// first to the last, none missed. It returns one logical task per slot
// (keyed scheduleKey@<slot>) and the log with the runs' executions keyed
// the same way; an execution of scheduleKey by a task no run names is a
// failure.
func (s *suite) checkSchedule(runs []*dtqv1alpha1.Task, log []demo.ChaosExecution) ([]chaoscheck.Logical, []demo.ChaosExecution) {
	t := s.t
	slotOf := map[string]string{}
	var logical []chaoscheck.Logical
	var slots []time.Time
	for _, r := range runs {
		slot := r.Annotations[controllers.AnnotationSlot]
		at, err := time.Parse(time.RFC3339, slot)
		if err != nil {
			t.Errorf("schedule run %s has no slot annotation: %v", r.Name, err)
			continue
		}
		slots = append(slots, at)
		slotOf[r.Status.TaskID] = slot
		logical = append(logical, chaoscheck.Logical{Key: scheduleKey + "@" + slot, TaskIDs: []string{r.Status.TaskID},
			Succeeded: r.Status.State == dtqv1alpha1.TaskSucceeded, Attempt: int(r.Status.Attempt), MaxAttempts: maxAttempts})
	}
	out := make([]demo.ChaosExecution, 0, len(log))
	for _, e := range log {
		if e.Key == scheduleKey {
			slot, ok := slotOf[e.TaskID]
			if !ok {
				t.Errorf("the schedule's key ran by task %s (attempt %d, %s), which no run of a slot names", e.TaskID, e.Attempt, e.Worker)
			}
			e.Key += "@" + slot
		}
		out = append(out, e)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Before(slots[j]) })
	for i := 1; i < len(slots); i++ {
		if d := slots[i].Sub(slots[i-1]); d != time.Minute {
			t.Errorf("schedule: slots %s and %s are %v apart: a slot was missed or run twice", slots[i-1].Format("15:04"), slots[i].Format("15:04"), d)
		}
	}
	ts := &dtqv1alpha1.TaskSchedule{}
	must(t, s.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: nsChaos, Name: scheduleName}, ts))
	if ts.Status.MissedSlots != 0 {
		t.Errorf("schedule: status.missedSlots %d, want 0", ts.Status.MissedSlots)
	}
	if !slices.ContainsFunc(slots, s.slotSpanned.Equal) {
		t.Errorf("schedule: the slot %s, due while no manager ran, has no run (slots %v)", s.slotSpanned.UTC().Format("15:04"), slots)
	}
	if len(slots) > 0 {
		s.logf("schedule: %d slots, %s to %s, each with one run, %s among them (due while no manager ran)", len(slots),
			slots[0].UTC().Format("15:04"), slots[len(slots)-1].UTC().Format("15:04"), s.slotSpanned.UTC().Format("15:04"))
	}
	return logical, out
}

// checkHTTP runs the checker on the HTTP handler's Queue, from the Python
// handler's own execution log.
func (s *suite) checkHTTP(tasks []*dtqv1alpha1.Task) chaoscheck.Report {
	log, err := demo.ReadChaosLog(s.httpLog)
	must(s.t, err)
	r := chaoscheck.Check(chaoscheck.FromTasks(tasks, maxAttempts), log, nil)
	if !r.OK() {
		s.t.Errorf("HTTP handler queue: %s\n%s", r, r.Details(20))
	}
	return r
}

// checkAnswers checks that no idempotency key was answered differently
// before and after a swap: every answer of a key names the same task, and
// once one said it Succeeded, every later one says so with the same result.
// For Task CRs the same holds of every Task of a key.
func (s *suite) checkAnswers() string {
	keys, answers, crossed := 0, 0, 0
	var bad []string
	for _, k := range s.api.all() {
		keys++
		answers += len(k.answers)
		var done *answer
		var problems []string
		for i, a := range k.answers {
			if a.taskID != k.answers[0].taskID {
				problems = append(problems, fmt.Sprintf("answer %d (%s) names task %s, the first %s", i+1, a.phase, a.taskID, k.answers[0].taskID))
			}
			if done != nil && (a.code != 200 || a.state != done.state || a.result != done.result) {
				problems = append(problems, fmt.Sprintf("answer %d (%s) is %d %s %s after %d %s %s (%s)", i+1, a.phase, a.code, a.state, a.result,
					done.code, done.state, done.result, done.phase))
			}
			if done == nil && a.state == dtqclient.StatusSucceeded {
				done = &k.answers[i]
			}
		}
		if len(k.answers) > 1 && k.answers[0].phase != k.answers[len(k.answers)-1].phase {
			crossed++
		}
		if len(problems) > 0 {
			bad = append(bad, fmt.Sprintf("API key %s: %s", k.key, strings.Join(problems, "; ")))
		}
	}
	for ns, tasks := range s.tasks() {
		byKey := map[string][]*dtqv1alpha1.Task{}
		for _, task := range tasks {
			if task.Spec.IdempotencyKey != "" && task.Labels[controllers.LabelSchedule] == "" {
				byKey[task.Spec.IdempotencyKey] = append(byKey[task.Spec.IdempotencyKey], task)
			}
		}
		for _, key := range slices.Sorted(maps.Keys(byKey)) {
			ts := byKey[key]
			if len(ts) < 2 {
				continue
			}
			keys++
			answers += len(ts)
			phases := map[string]bool{}
			for _, task := range ts {
				phases[task.Labels[labelPhase]] = true
			}
			if len(phases) > 1 {
				crossed++
			}
			for _, task := range ts[1:] {
				a, b := ts[0].Status, task.Status
				if idOf(a) != idOf(b) || a.State != b.State || a.Result != b.Result {
					bad = append(bad, fmt.Sprintf("Task CRs of key %s/%s: %s %s %s %q and %s %s %s %q", ns, key, ts[0].Name, idOf(a), a.State,
						a.Result, task.Name, idOf(b), b.State, b.Result))
				}
			}
		}
	}
	if len(bad) > 0 {
		s.t.Errorf("%d idempotency keys answered differently, e.g.\n%s", len(bad), strings.Join(bad[:min(10, len(bad))], "\n"))
	}
	return fmt.Sprintf("idempotency keys submitted more than once: %d keys answered %d times (%d of them in different phases), %d answered differently",
		keys, answers, crossed, len(bad))
}

// checkHit checks that each phase's swaps hit running work: of the tasks
// placed to hold 40 s while the workers die (class long, on each Queue and
// through the API), some ran again.
func (s *suite) checkHit(tasks map[string][]*dtqv1alpha1.Task) string {
	type hits struct{ ran, again int }
	byPhase := map[string]*hits{} // "<placed in phase> <where>"
	count := func(k string, again bool) {
		if byPhase[k] == nil {
			byPhase[k] = &hits{}
		}
		byPhase[k].ran++
		if again {
			byPhase[k].again++
		}
	}
	for ns, ts := range tasks {
		for _, task := range ts {
			if task.Labels[labelClass] == classLong {
				count(task.Labels[labelPhase]+" "+ns, task.Status.Attempt > 1)
			}
		}
	}
	for _, k := range s.api.all() {
		if k.class == classLong {
			task, err := s.apiTask(k)
			count(k.phase+" api", err == nil && task.Attempt > 1)
		}
	}
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(byPhase)) {
		h := byPhase[k]
		lines = append(lines, fmt.Sprintf("%s %d of %d", k, h.again, h.ran))
		if h.again == 0 {
			s.t.Errorf("placed in %s: none of the %d tasks running when the workers died ran again: the swap hit no running work", k, h.ran)
		}
	}
	return "tasks running when the workers died, run again (placed in phase, queue): " + strings.Join(lines, "; ")
}

// idOf is the task a Task's status names: its own, or the one it duplicates.
func idOf(st dtqv1alpha1.TaskStatus) string {
	if st.Idempotency != nil && st.Idempotency.Duplicate {
		return st.Idempotency.TaskID
	}
	return st.TaskID
}

// validate re-reads the test's Queues, TaskSchedule and Tasks and checks
// each is still valid: it decodes into this commit's types with unknown
// fields refused (this manager reads all of it), is written back unchanged
// (an update the API server validates against the installed CRDs, rel's,
// ratcheting what did not change), and comes back from that update
// unchanged (no field pruned by the installed schema); a sample of each
// kind, class and state is also created again under a new name by a dry run
// (a create, validated whole). Only the sample is checked unless all.
func (s *suite) validate(rel *release, all bool) {
	t := s.t
	type check struct {
		o   *unstructured.Unstructured
		dry bool
	}
	var checks []check
	sampled := map[string]int{}
	for _, ns := range []string{nsChaos, nsHTTP} {
		for _, kind := range []string{"Queue", "TaskSchedule", "Task"} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(dtqv1alpha1.GroupVersion.WithKind(kind + "List"))
			must(t, s.stack.Client.List(t.Context(), list, client.InNamespace(ns)))
			for i := range list.Items {
				o := &list.Items[i]
				state, _, _ := unstructured.NestedString(o.Object, "status", "state")
				sample := ns + kind + o.GetLabels()[labelClass] + state
				dry := sampled[sample] < 3
				sampled[sample]++
				if all || dry {
					checks = append(checks, check{o, dry})
				}
			}
		}
	}
	var mu sync.Mutex
	var problems []string
	work := make(chan check)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for c := range work {
				if err := s.validateOne(c.o, c.dry); err != nil {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s %s/%s: %v", c.o.GetKind(), c.o.GetNamespace(), c.o.GetName(), err))
					mu.Unlock()
				}
			}
		})
	}
	dry := 0
	for _, c := range checks {
		work <- c
		if c.dry {
			dry++
		}
	}
	close(work)
	wg.Wait()
	sort.Strings(problems)
	for _, p := range problems[:min(20, len(problems))] {
		t.Errorf("stored object not valid under the CRDs of %s: %s", rel.name, p)
	}
	s.logf("stored objects: %d checked under the CRDs of %s (%d of them also created again by a dry run), %d problems", len(checks),
		rel.name, dry, len(problems))
}

// validateOne checks one object (see validate); dry: a dry-run create too.
func (s *suite) validateOne(o *unstructured.Unstructured, dry bool) error {
	ctx := s.t.Context()
	typed := map[string]any{"Queue": &dtqv1alpha1.Queue{}, "TaskSchedule": &dtqv1alpha1.TaskSchedule{}, "Task": &dtqv1alpha1.Task{}}[o.GetKind()]
	raw, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(typed); err != nil {
		return fmt.Errorf("this commit's types cannot read it: %w", err)
	}
	for try := 0; ; try++ {
		before := o.DeepCopy()
		err := s.stack.Client.Update(ctx, o)
		if err == nil {
			for _, f := range []string{"spec", "status"} {
				if !equality.Semantic.DeepEqual(before.Object[f], o.Object[f]) {
					return fmt.Errorf("a no-op update changed its %s: %v -> %v", f, before.Object[f], o.Object[f])
				}
			}
			break
		}
		if !apierrors.IsConflict(err) || try == 10 {
			return fmt.Errorf("a no-op update was refused: %w", err)
		}
		if err := s.stack.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
	}
	if !dry {
		return nil
	}
	copied := &unstructured.Unstructured{Object: map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(),
		"metadata": map[string]any{"name": o.GetName() + "-dry", "namespace": o.GetNamespace(), "labels": toAny(o.GetLabels())},
		"spec":     o.Object["spec"]}}
	if err := s.stack.Client.Create(ctx, copied, client.DryRunAll); err != nil {
		return fmt.Errorf("a dry-run create of a copy was refused: %w", err)
	}
	return nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// checkReconciled checks that this commit's manager reconciles what the
// previous release stored: every Task's status reflects its generation, the
// retried ones their retryGeneration, and each Queue and the TaskSchedule,
// their spec changed now, observe the change (Queues Ready).
func (s *suite) checkReconciled(tasks map[string][]*dtqv1alpha1.Task) {
	t := s.t
	stale := 0
	for _, ts := range tasks {
		for _, task := range ts {
			if task.Status.ObservedGeneration != task.Generation || task.Status.ObservedRetryGeneration != task.Spec.RetryGeneration {
				stale++
				if stale <= 10 {
					t.Errorf("Task %s/%s: status observed generation %d and retryGeneration %d, spec %d and %d", task.Namespace, task.Name,
						task.Status.ObservedGeneration, task.Status.ObservedRetryGeneration, task.Generation, task.Spec.RetryGeneration)
				}
			}
		}
	}
	for _, ns := range []string{nsChaos, nsHTTP} {
		q := &dtqv1alpha1.Queue{}
		must(t, s.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: queue}, q))
		base := client.MergeFrom(q.DeepCopy())
		q.Spec.Scaling.ScaleDownStabilization = dtqv1alpha1.NewDuration(17 * time.Second)
		must(t, s.stack.Client.Patch(t.Context(), q, base))
		must(t, poll(t.Context(), time.Minute, func() error {
			if err := s.stack.Client.Get(t.Context(), client.ObjectKeyFromObject(q), q); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(q.Status.Conditions, dtqv1alpha1.QueueReady); q.Status.ObservedGeneration != q.Generation ||
				c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != q.Generation {
				return fmt.Errorf("Queue %s/%s: generation %d, observed %d, Ready %+v", ns, queue, q.Generation, q.Status.ObservedGeneration, c)
			}
			return nil
		}))
	}
	must(t, poll(t.Context(), time.Minute, func() error {
		ts := &dtqv1alpha1.TaskSchedule{}
		if err := s.stack.Client.Get(t.Context(), client.ObjectKey{Namespace: nsChaos, Name: scheduleName}, ts); err != nil {
			return err
		}
		if ts.Status.ObservedGeneration != ts.Generation {
			return fmt.Errorf("TaskSchedule %s: generation %d (suspended), observed %d", scheduleName, ts.Generation, ts.Status.ObservedGeneration)
		}
		return nil
	}))
	s.logf("reconciled by this commit's manager: every Task's status (%d stale), both Queues and the TaskSchedule after a spec change", stale)
}
