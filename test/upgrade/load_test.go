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
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// Labels of the test's Task CRs: what the Task is for, and the phase it was
// created in.
const (
	labelClass = "upgrade.dtq.dev/class"
	labelPhase = "upgrade.dtq.dev/phase"
)

// Classes of tasks: the steady load and its resubmissions, and the seeds
// placed in one state each to cross the swaps.
const (
	classLoad    = "load"    // a new key, holding 20 ms (every tenth 3 s)
	classTwin    = "twin"    // a second Task of an earlier key
	classRetry   = "retry"   // failing until cured: Retrying across the swaps
	classDead    = "dead"    // failing, two attempts: DeadLettered across the swaps
	classDelay   = "delay"   // delayed to a later phase: Pending across the swaps
	classLong    = "long"    // holding 25 s: Running when the workers die
	classBacklog = "backlog" // a burst holding 1 s each: Queued when the workers die
	classFlow    = "flow"    // with a flow key, around flow control's layout change (flow_test.go)
)

// chaosTask is a chaos Task CR of Queue <ns>/q for key.
func (s *suite) chaosTask(ns, name, key, class string, payload any, maxAttempts int32) *dtqv1alpha1.Task {
	w := testutil.MakeTask(name, ns).Queue(queue).Type(demo.Chaos).Payload(payload).Key(key).MaxAttempts(maxAttempts)
	w.Labels = map[string]string{labelClass: class, labelPhase: s.phaseName()}
	return w.Obj()
}

// chaosPayload is a payload for the reference worker's chaos handler, or for
// the Python handler (its "chaos" is any task with a key).
func chaosPayload(ns, key string, hold float64) any {
	if ns == nsHTTP {
		return map[string]any{"key": key, "sleep": hold}
	}
	return demo.ChaosPayload{Key: key, HoldSeconds: hold}
}

// crLoad creates Task CRs on Queue <ns>/q at a steady pace until stopped: a
// new key each tick, and every fifth key a twin 40 ticks later (a second
// Task of the key: the CR form of a resubmission), so twins cross the swaps.
type crLoad struct {
	s        *suite
	ns       string
	prefix   string
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu   sync.Mutex
	keys []string
	errs []error
}

func (s *suite) newCRLoad(ns, prefix string, every time.Duration) *crLoad {
	l := &crLoad{s: s, ns: ns, prefix: prefix, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(every)
	return l
}

func (l *crLoad) run(every time.Duration) {
	defer close(l.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("%s-%05d", l.prefix, i)
		hold := 0.02
		if i%10 == 5 {
			hold = 3
		}
		l.create(l.s.chaosTask(l.ns, key, key, classLoad, chaosPayload(l.ns, key, hold), maxAttempts))
		l.mu.Lock()
		l.keys = append(l.keys, key)
		l.mu.Unlock()
		if j := i - 40; j >= 0 && j%5 == 0 {
			twin := fmt.Sprintf("%s-%05d", l.prefix, j)
			l.create(l.s.chaosTask(l.ns, twin+"-t1", twin, classTwin, chaosPayload(l.ns, twin, 0.02), maxAttempts))
		}
	}
}

// create creates a Task; the API server never goes away in this test, so
// an error is a failure, reported at the end.
func (l *crLoad) create(task *dtqv1alpha1.Task) {
	if err := l.s.stack.Client.Create(context.Background(), task); err != nil {
		l.mu.Lock()
		l.errs = append(l.errs, fmt.Errorf("create Task %s/%s: %w", task.Namespace, task.Name, err))
		l.mu.Unlock()
	}
}

// halt stops the load and returns the errors it met.
func (l *crLoad) halt() []error {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errs
}

// apiKey is one idempotency key submitted through the HTTP API, and every
// answer it got.
type apiKey struct {
	key, class, phase string
	hold              float64
	maxAttempts       int
	priority          int // 0: the default
	delay             time.Duration
	flowKey           string // "": none
	at                time.Time
	answers           []answer
}

// answer is one answer to a submission of a key: 202 (new), 200 (a replay
// of its finished task) or 409 (its task has not finished).
type answer struct {
	phase  string
	code   int
	taskID string
	state  dtqclient.TaskStatus
	result string
}

// apiLoad submits chaos tasks through the HTTP API with idempotency keys:
// four clients, each a new key a second (back to back during a burst), and
// every third time also an earlier key again. A submission the API could not
// answer (it was killed, or not yet started) is sent again with its key
// until it is answered, as a client should.
type apiLoad struct {
	s        *suite
	c        *dtqclient.Client
	q        *dtqclient.Queue
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	fast     atomic.Bool
	count    atomic.Int64

	mu    sync.Mutex
	keys  []*apiKey // in submission order
	byKey map[string]*apiKey
	errs  []error
}

func (s *suite) newAPILoad() *apiLoad {
	tok, err := s.stack.APIToken(s.t.Context(), devstack.AdminNamespace, devstack.AdminServiceAccount, time.Hour)
	must(s.t, err)
	c, err := dtqclient.New(s.stack.APIURL, dtqclient.WithToken(tok), dtqclient.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}))
	must(s.t, err)
	return &apiLoad{s: s, c: c, q: c.Queue(nsChaos, queue), stop: make(chan struct{}), byKey: map[string]*apiKey{}}
}

func (l *apiLoad) start() {
	var n atomic.Int64
	for range 4 {
		l.wg.Go(func() {
			for {
				pause := time.Second
				if l.fast.Load() {
					pause = 10 * time.Millisecond
				}
				select {
				case <-l.stop:
					return
				case <-time.After(pause):
				}
				i := n.Add(1)
				hold := 0.02
				if i%10 == 5 {
					hold = 3
				}
				l.submit(l.add(fmt.Sprintf("api-%05d", i), classLoad, hold, maxAttempts, 0))
				if i%3 == 0 {
					if k := l.earlier(10 * time.Second); k != nil {
						l.submit(k)
					}
				}
			}
		})
	}
}

// burst makes the clients submit back to back (or at their pace again).
func (l *apiLoad) burst(on bool) { l.fast.Store(on) }

// submissions is how many submissions were answered so far.
func (l *apiLoad) submissions() int64 { return l.count.Load() }

// add registers a key of the current phase.
func (l *apiLoad) add(key, class string, hold float64, maxAttempts int, delay time.Duration) *apiKey {
	k := &apiKey{key: key, class: class, phase: l.s.phaseName(), hold: hold, maxAttempts: maxAttempts, delay: delay, at: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, k)
	l.byKey[key] = k
	return k
}

// earlier picks a random load key first submitted more than age ago.
func (l *apiLoad) earlier(age time.Duration) *apiKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for n < len(l.keys) && time.Since(l.keys[n].at) > age {
		n++
	}
	for range 10 {
		if n == 0 {
			return nil
		}
		if k := l.keys[rand.IntN(n)]; k.class == classLoad {
			return k
		}
	}
	return nil
}

// submit sends k's submission until the API answers it, and records the
// answer; after two minutes without one it records an error.
func (l *apiLoad) submit(k *apiKey) {
	opts := []dtqclient.SubmitOption{dtqclient.IdempotencyKey(k.key), dtqclient.MaxAttempts(k.maxAttempts)}
	if k.delay > 0 {
		opts = append(opts, dtqclient.Delay(k.delay))
	}
	if k.priority > 0 {
		opts = append(opts, dtqclient.Priority(k.priority))
	}
	if k.flowKey != "" {
		opts = append(opts, dtqclient.FlowKey(k.flowKey))
	}
	payload := demo.ChaosPayload{Key: k.key, HoldSeconds: k.hold}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		a, err := l.post(payload, opts)
		if err == nil {
			l.mu.Lock()
			k.answers = append(k.answers, a)
			l.mu.Unlock()
			l.count.Add(1)
			return
		}
		if !retryable(err) || time.Now().After(deadline) {
			l.mu.Lock()
			l.errs = append(l.errs, fmt.Errorf("submit %s: %w", k.key, err))
			l.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// post submits once and returns the answer, or the error that prevented one.
func (l *apiLoad) post(payload demo.ChaosPayload, opts []dtqclient.SubmitOption) (answer, error) {
	phase := l.s.phaseName()
	task, err := l.q.Submit(context.Background(), demo.Chaos, payload, opts...)
	var e *dtqclient.Error
	switch {
	case err == nil:
		code := http.StatusAccepted
		if task.Duplicate {
			code = http.StatusOK
		}
		return answer{phase: phase, code: code, taskID: task.TaskID, state: task.Status, result: string(task.Result)}, nil
	case errors.As(err, &e) && errors.Is(err, dtqclient.ErrIdempotencyInProgress):
		return answer{phase: phase, code: e.StatusCode, taskID: e.TaskID}, nil
	}
	return answer{}, err
}

// retryable: the API did not answer (killed, starting), or answered that it
// cannot serve now.
func retryable(err error) bool {
	var e *dtqclient.Error
	if !errors.As(err, &e) {
		return true // no answer: a connection refused or cut
	}
	return e.StatusCode == http.StatusServiceUnavailable || e.StatusCode == http.StatusGatewayTimeout ||
		e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusBadGateway
}

// halt stops the clients and returns the errors they met.
func (l *apiLoad) halt() []error {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errs
}

// all returns every key, in submission order.
func (l *apiLoad) all() []*apiKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*apiKey(nil), l.keys...)
}

// taskID is the task ID k's answers name (the first; checkAnswers compares
// them), "" before its first answer.
func (l *apiLoad) taskID(k *apiKey) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range k.answers {
		if a.taskID != "" {
			return a.taskID
		}
	}
	return ""
}
