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
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/controllers"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// seeds are the tasks placed in one state each to cross the swaps, as Task
// CRs and through the HTTP API.
type seeds struct {
	s           *suite
	retry, dead []string // poisoned chaos keys, Task CRs' and the API's
	lastDue     time.Time
	round       int
}

// startLoad starts the steady load: Task CRs on both Queues (3 and 2 a
// second) and the HTTP API clients (4 a second, plus resubmissions).
func (s *suite) startLoad() {
	s.crChaos = s.newCRLoad(nsChaos, "cr", 333*time.Millisecond)
	s.crHTTP = s.newCRLoad(nsHTTP, "http", 500*time.Millisecond)
	s.api = s.newAPILoad()
	s.api.start()
	s.t.Cleanup(func() { // a test that ended early: before the stack stops
		s.crChaos.halt()
		s.crHTTP.halt()
		s.api.halt()
	})
	s.logf("load started: Task CRs on both Queues, HTTP API submissions with idempotency keys and their resubmissions")
}

// seed places, beside the load, tasks that stay Retrying (poisoned: the
// chaos handler's counter holds no integer, so every attempt fails until
// cure), DeadLettered (poisoned, two attempts) and delayed to later phases,
// as Task CRs and through the API.
func (s *suite) seed() {
	sd := &seeds{s: s}
	s.seeds = sd
	var tasks []*dtqv1alpha1.Task
	for i := range 6 {
		for class, attempts := range map[string]int32{classRetry: maxAttempts, classDead: 2} {
			key := fmt.Sprintf("cr-%s-%d", class, i)
			sd.poison(class, key)
			tasks = append(tasks, s.chaosTask(nsChaos, key, key, class, demo.ChaosPayload{Key: key}, attempts))
			if i < 3 {
				key := fmt.Sprintf("api-%s-%d", class, i)
				sd.poison(class, key)
				s.api.submit(s.api.add(key, class, 0, int(attempts), 0))
			}
		}
	}
	now := time.Now()
	for i := range 8 {
		key := fmt.Sprintf("cr-delay-%d", i)
		d := 30*time.Second + time.Duration(i)*15*time.Second
		w := testutil.MakeTask(key, nsChaos).Queue(queue).Type(demo.Chaos).Payload(demo.ChaosPayload{Key: key}).Key(key).
			MaxAttempts(maxAttempts).Delay(d)
		w.Labels = map[string]string{labelClass: classDelay, labelPhase: s.phaseName()}
		tasks = append(tasks, w.Obj())
		sd.lastDue = now.Add(d)
		if i < 4 {
			s.api.submit(s.api.add(fmt.Sprintf("api-delay-%d", i), classDelay, 0, maxAttempts, 40*time.Second+time.Duration(i)*25*time.Second))
		}
	}
	for _, task := range tasks {
		must(s.t, s.stack.Client.Create(s.t.Context(), task))
	}
	s.logf("seeded: %d retrying and %d dead-lettered keys (poisoned), 12 delayed tasks due until %s", len(sd.retry), len(sd.dead),
		sd.lastDue.UTC().Format("15:04:05"))
}

// poison makes the chaos handler fail every attempt of key (its counter
// holds no integer) until cure.
func (sd *seeds) poison(class, key string) {
	must(sd.s.t, sd.s.rdb.Set(sd.s.t.Context(), demo.ChaosEffectKey(nsChaos, key), "poison", 0).Err())
	if class == classRetry {
		sd.retry = append(sd.retry, key)
	} else {
		sd.dead = append(sd.dead, key)
	}
}

// cure lets keys' next attempts succeed.
func (sd *seeds) cure(keys []string) {
	for _, k := range keys {
		must(sd.s.t, sd.s.rdb.Del(sd.s.t.Context(), demo.ChaosEffectKey(nsChaos, k)).Err())
	}
	sd.s.logf("cured %d poisoned keys: their next attempts succeed", len(keys))
}

// crossing places the tasks that cross one phase's swaps: four holding 40 s
// on each Queue and through the API (running when the workers die) and four
// on the HTTP handler's Queue failing their first attempt (retrying with a
// 30 s delay), then, once they are so, a backlog of 100 holding 2 s (queued
// when the workers die). Their states are the engine's (read through the
// API by task ID, a Task's UID), which the Task CRs' status follows with
// the manager's lag. Before the first phase it also waits until the seeds
// and the load are in their states. A state no task crossed the swaps in is
// a state the test proved nothing about: the test fails then.
func (sd *seeds) crossing(first bool) {
	s := sd.s
	if first {
		sd.await(s.census, map[string]dtqv1alpha1.TaskState{
			nsChaos + "/" + classLoad:  dtqv1alpha1.TaskSucceeded,
			nsChaos + "/" + classRetry: dtqv1alpha1.TaskRetrying,
			nsChaos + "/" + classDead:  dtqv1alpha1.TaskDeadLettered,
			nsChaos + "/" + classDelay: dtqv1alpha1.TaskPending,
			nsHTTP + "/" + classLoad:   dtqv1alpha1.TaskSucceeded,
			"api/" + classLoad:         dtqv1alpha1.TaskSucceeded,
			"api/" + classRetry:        dtqv1alpha1.TaskRetrying,
			"api/" + classDead:         dtqv1alpha1.TaskDeadLettered,
			"api/" + classDelay:        dtqv1alpha1.TaskPending,
		})
	}
	sd.round++
	// Priority 9: they start at once, ahead of any backlog.
	var long []*dtqv1alpha1.Task
	var keys []*apiKey
	for i := range 4 {
		key := fmt.Sprintf("cr-long-%d-%d", sd.round, i)
		long = append(long, s.chaosTask(nsChaos, key, key, classLong, chaosPayload(nsChaos, key, 40), maxAttempts))
		key = fmt.Sprintf("http-long-%d-%d", sd.round, i)
		long = append(long, s.chaosTask(nsHTTP, key, key, classLong, chaosPayload(nsHTTP, key, 40), maxAttempts))
		key = fmt.Sprintf("http-retry-%d-%d", sd.round, i)
		long = append(long, s.chaosTask(nsHTTP, key, key, classRetry, map[string]any{"key": key, "fail_first_attempt": true}, maxAttempts))
		k := s.api.add(fmt.Sprintf("api-long-%d-%d", sd.round, i), classLong, 40, maxAttempts, 0)
		k.priority = 9
		keys = append(keys, k)
		go s.api.submit(k)
	}
	for _, task := range long {
		task.Spec.Priority = ptr.To[int32](9)
	}
	sd.create(long)
	sd.await(func() (census, error) { return s.engineCensus(long, keys), nil }, map[string]dtqv1alpha1.TaskState{
		nsChaos + "/" + classLong: dtqv1alpha1.TaskRunning, nsHTTP + "/" + classLong: dtqv1alpha1.TaskRunning,
		nsHTTP + "/" + classRetry: dtqv1alpha1.TaskRetrying, "api/" + classLong: dtqv1alpha1.TaskRunning,
	})
	var backlog []*dtqv1alpha1.Task
	for i := range 100 {
		key := fmt.Sprintf("cr-backlog-%d-%03d", sd.round, i)
		backlog = append(backlog, s.chaosTask(nsChaos, key, key, classBacklog, chaosPayload(nsChaos, key, 2), maxAttempts))
	}
	sd.create(backlog)
	placed := slices.Concat(long, backlog[len(backlog)-20:])
	var c census
	sd.await(func() (census, error) { c = s.engineCensus(placed, keys); return c, nil },
		map[string]dtqv1alpha1.TaskState{nsChaos + "/" + classBacklog: dtqv1alpha1.TaskQueued})
	s.logf("tasks placed to cross the swaps (the backlog's last 20), by the engine's state as the swaps begin:\n%s", c)
}

// create creates Tasks.
func (sd *seeds) create(tasks []*dtqv1alpha1.Task) {
	for _, task := range tasks {
		must(sd.s.t, sd.s.stack.Client.Create(sd.s.t.Context(), task))
	}
}

// await waits until each class (census keys) has a task in its state; the
// test fails when that does not happen within a minute (at once before the
// first swap, where it could prove nothing; later it goes on to its checks).
func (sd *seeds) await(count func() (census, error), want map[string]dtqv1alpha1.TaskState) {
	s := sd.s
	var c census
	err := poll(s.t.Context(), time.Minute, func() error {
		var err error
		if c, err = count(); err != nil {
			return err
		}
		var missing []string
		for k, st := range want {
			if c[k][st] == 0 {
				missing = append(missing, k+" "+string(st))
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Errorf("no task yet in %v", missing)
		}
		return nil
	})
	switch {
	case err != nil && s.phaseName() == "old":
		s.t.Fatalf("not every state is crossing the swaps: %v; tasks by class and state:\n%s", err, c)
	case err != nil:
		s.t.Errorf("not every state is crossing the swaps: %v; tasks by class and state:\n%s", err, c)
	}
}

// engineCensus counts tasks and API keys by the engine's state, read
// through the API: a Task's task ID is its UID ("not submitted" until the
// manager has).
func (s *suite) engineCensus(tasks []*dtqv1alpha1.Task, keys []*apiKey) census {
	c := census{}
	for _, task := range tasks {
		got, err := s.api.c.Queue(task.Namespace, queue).Get(s.t.Context(), string(task.UID))
		st := dtqv1alpha1.TaskState("not submitted")
		if err == nil {
			st = apiState(got.Status)
		}
		c.add(task.Namespace+"/"+task.Labels[labelClass], st)
	}
	for _, k := range keys {
		if task, err := s.apiTask(k); err == nil {
			c.add("api/"+k.class, apiState(task.Status))
		}
	}
	return c
}

// census counts tasks by "<namespace or api>/<class>" and state: the Task
// CRs of both Queues, and the API's seeded keys and a sample of its load.
type census map[string]map[dtqv1alpha1.TaskState]int

func (c census) add(k string, st dtqv1alpha1.TaskState) {
	if c[k] == nil {
		c[k] = map[dtqv1alpha1.TaskState]int{}
	}
	c[k][st]++
}

func (c census) String() string {
	var lines []string
	for k, states := range c {
		var parts []string
		for st, n := range states {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
		sort.Strings(parts)
		lines = append(lines, fmt.Sprintf("  %-22s %s", k, strings.Join(parts, ", ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (s *suite) census() (census, error) {
	c := census{}
	for _, ns := range []string{nsChaos, nsHTTP} {
		var list dtqv1alpha1.TaskList
		if err := s.stack.Client.List(s.t.Context(), &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for i := range list.Items {
			task := &list.Items[i]
			class := task.Labels[labelClass]
			if task.Labels[controllers.LabelSchedule] != "" {
				class = "schedule"
			}
			if (class == classLong || class == classBacklog || ns == nsHTTP && class == classRetry) && task.Labels[labelPhase] != s.phaseName() {
				class += " (earlier)"
			}
			c.add(ns+"/"+class, task.Status.State)
		}
	}
	sampled := map[string]int{}
	for _, k := range s.api.all() {
		if k.class == classLoad && sampled[k.class] >= 50 || k.class == classLong && k.phase != s.phaseName() || s.api.taskID(k) == "" {
			continue
		}
		sampled[k.class]++
		task, err := s.api.q.Get(s.t.Context(), s.api.taskID(k))
		if err != nil {
			return nil, fmt.Errorf("get the API's task of %s: %w", k.key, err)
		}
		c.add("api/"+k.class, apiState(task.Status))
	}
	return c, nil
}

// apiState is the Task CR state of an API task status (the same names).
func apiState(st dtqclient.TaskStatus) dtqv1alpha1.TaskState { return dtqv1alpha1.TaskState(st) }

// inFlight is how many tasks the worker pod of ns had in flight at its last
// heartbeat, as the current engine reads it (0 when it cannot).
func (s *suite) inFlight(ns, pod string) int {
	ctx, cancel := context.WithTimeout(s.t.Context(), 5*time.Second)
	defer cancel()
	ws, _ := broker.New(s.rdb).Workers(ctx, broker.QueueRef{Namespace: ns, Name: queue})
	for _, w := range ws {
		if w.ID == pod {
			return w.Active
		}
	}
	return 0
}
