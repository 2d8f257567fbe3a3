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

package controllers

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
)

// Budgets of the API requests the manager makes per Task CR, from its create
// (the user's, not counted here) to Succeeded, for a task that finishes within
// the coalescing window (one status write). The test below fails with the
// breakdown when a change adds a request; raising a budget on purpose is one
// edit here, with the reason in the comment.
const (
	// budgetTaskGets: none; the cache keeps payloads up to
	// cachedPayloadLimit (task_payload.go), and these Tasks' are smaller.
	budgetTaskGets = 0
	// budgetLargePayloadTaskGets: the one read of a payload larger than
	// cachedPayloadLimit, which the cache drops.
	budgetLargePayloadTaskGets = 1
	// budgetTaskStatusUpdates: the one status write of a fast task; with the
	// user's create, 2.0 Task writes per task.
	budgetTaskStatusUpdates = 1
)

// The budgets per Task of each "verb resource[/subresource]" the manager may
// request per Task; any other request on tasks or events is over budget.
var (
	smallPayloadBudget = map[string]int{
		"get tasks":           budgetTaskGets,
		"update tasks/status": budgetTaskStatusUpdates,
	}
	largePayloadBudget = map[string]int{
		"get tasks":           budgetLargePayloadTaskGets,
		"update tasks/status": budgetTaskStatusUpdates,
	}
)

// perQueueAllowance bounds the requests on any other resource while the Tasks
// run: those are per Queue and per timer (Queue status, worker Deployment,
// Redis user Secret), not per Task, so with requestRuns Tasks a request added
// per Task exceeds it.
const (
	requestRuns        = 40
	perQueueAllowance  = requestRuns / 4
	requestsSettleTime = time.Second
)

var _ = Describe("API requests per Task", func() {
	It("stay within the budget of each verb and resource", func() {
		ns := newNamespace("requests")
		By("running the manager on a connection that counts its requests")
		counter := &requestCounter{namespace: ns}
		counted := rest.CopyConfig(cfg)
		counted.Wrap(counter.wrap)
		stopManager()
		stopManager = nil
		DeferCleanup(func() {
			if stopManager != nil {
				stopManager()
			}
			stopManager = startManager(Options{})
		})
		// A long coalescing window: each Task gets the one status write of a
		// task that finishes within it, however loaded the machine is.
		stopManager = startManagerOn(counted, Options{CoalesceWindow: time.Minute})

		q := testutil.MakeQueue("q", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(func(g Gomega) bool {
			return meta.IsStatusConditionTrue(getQueue(q)(g).Status.Conditions, dtqv1alpha1.QueueReady)
		}, timeout, poll).Should(BeTrue())
		DeferCleanup(startWorker(ns, "q"))

		By(fmt.Sprintf("running %d Tasks with small payloads to Succeeded", requestRuns))
		small := func(name string) *testutil.TaskWrapper {
			return testutil.MakeTask(name, ns).Queue("q").Payload(map[string]any{"n": 1})
		}
		got := runCounted(counter, "small", requestRuns, small)
		expectWithinBudget(got, smallPayloadBudget, requestRuns, counter)

		By(fmt.Sprintf("running %d Tasks with payloads larger than the cache keeps", requestRuns))
		large := func(name string) *testutil.TaskWrapper {
			return testutil.MakeTask(name, ns).Queue("q").Payload(map[string]any{"blob": strings.Repeat("x", cachedPayloadLimit)})
		}
		got = runCounted(counter, "large", requestRuns, large)
		expectWithinBudget(got, largePayloadBudget, requestRuns, counter)

		By(fmt.Sprintf("running %d Tasks with flow keys on a flow-controlled Queue", requestRuns))
		fq := testutil.MakeQueue("flow", ns).FlowControl(&dtqv1alpha1.FlowControl{
			PerKey: &dtqv1alpha1.KeyLimits{Concurrency: ptr.To[int32](requestRuns)}}).Obj()
		Expect(k8sClient.Create(ctx, fq)).To(Succeed())
		Eventually(func(g Gomega) bool {
			return meta.IsStatusConditionTrue(getQueue(fq)(g).Status.Conditions, dtqv1alpha1.QueueReady)
		}, timeout, poll).Should(BeTrue())
		DeferCleanup(startWorker(ns, "flow"))
		keyed := func(name string) *testutil.TaskWrapper {
			return testutil.MakeTask(name, ns).Queue("flow").FlowKey("tenant-" + name[len(name)-1:]).Payload(map[string]any{"n": 1})
		}
		got = runCounted(counter, "keyed", requestRuns, keyed)
		expectWithinBudget(got, smallPayloadBudget, requestRuns, counter)
	})
})

// What the API server stores in managedFields for a succeeded Task. Every byte
// there is decoded, converted and validated on each read of the stored object
// (the status write reads it, validates it and decodes its result; the watch
// cache decodes the new and the old object), so a status whose fields and
// conditions were listed one by one doubled the stored Task and made a status
// write cost about twice a create (docs/benchmarks.md, "The status write's
// managedFields"). Status and payload are atomic in the CRD, so each is one
// entry.
const (
	wantStatusFields = `{"f:status":{}}`
	wantPayloadField = `{}`
)

var _ = Describe("The stored Task after its status write", func() {
	It("lists status and payload in managedFields as one field each", func() {
		ns := newNamespace("managed")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		DeferCleanup(startWorker(ns, "q"))
		t := testutil.MakeTask("t", ns).Queue("q").Key("k").
			Payload(map[string]any{"a": map[string]any{"b": 1, "c": "d"}, "e": []any{1, 2}}).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))

		got := getTask(t)(Default)
		var status, spec []string
		for _, e := range got.ManagedFields {
			Expect(e.FieldsV1).NotTo(BeNil())
			if e.Subresource == "status" {
				status = append(status, e.FieldsV1.GetRawString())
				continue
			}
			var fields map[string]map[string]json.RawMessage
			Expect(json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
			if p, ok := fields["f:spec"]["f:payload"]; ok {
				spec = append(spec, string(p))
			}
		}
		Expect(status).To(Equal([]string{wantStatusFields}), "managedFields of the status writer")
		Expect(spec).To(Equal([]string{wantPayloadField}), "managedFields of spec.payload")
	})
})

// runCounted creates n Tasks named <prefix>-<i>, each from task(name) with
// the idempotency key <name>, waits until all succeeded and returns the
// requests counter saw meanwhile.
func runCounted(counter *requestCounter, prefix string, n int, task func(name string) *testutil.TaskWrapper) map[string]int {
	counter.reset()
	tasks := make([]*dtqv1alpha1.Task, n)
	for i := range tasks {
		name := fmt.Sprintf("%s-%d", prefix, i)
		tasks[i] = task(name).Key(name).Obj()
		Expect(k8sClient.Create(ctx, tasks[i])).To(Succeed())
	}
	for _, t := range tasks {
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
	}
	time.Sleep(requestsSettleTime) // a request made after the last status write counts too
	return counter.snapshot()
}

// expectWithinBudget fails with the breakdown when the requests got for n
// Tasks exceed budget per Task, or perQueueAllowance on other resources.
func expectWithinBudget(got, budget map[string]int, n int, counter *requestCounter) {
	var over []string
	others := 0
	for key, count := range got {
		b, budgeted := budget[key]
		switch {
		case budgeted && count > b*n:
			over = append(over, fmt.Sprintf("%s: %d, budget %d", key, count, b*n))
		case !budgeted && perTaskResource(key):
			over = append(over, fmt.Sprintf("%s: %d, budget 0", key, count))
		case !budgeted:
			others += count
		}
	}
	if others > perQueueAllowance {
		over = append(over, fmt.Sprintf("requests on other resources: %d, allowance %d", others, perQueueAllowance))
	}
	slices.Sort(over)
	Expect(over).To(BeEmpty(), "API requests of the manager for %d Tasks over budget: %s\nall requests: %s",
		n, strings.Join(over, "; "), counter.breakdown(got))
	GinkgoWriter.Printf("API requests of the manager for %d Tasks: %s\n", n, counter.breakdown(got))
}

// perTaskResource says whether key names a resource the manager requests per
// Task: every request on those is budgeted.
func perTaskResource(key string) bool {
	_, res, _ := strings.Cut(key, " ")
	res, _, _ = strings.Cut(res, "/")
	return res == "tasks" || res == "events"
}

// requestCounter counts the requests sent through its transport by "verb
// resource[/subresource]", verbs as the API server names them (get, list,
// watch, create, update, patch, delete).
// requestCounter counts the requests in one namespace: the Queues that
// earlier specs left in theirs are reconciled on the manager's timers too,
// and would count here in proportion to how many specs ran before.
type requestCounter struct {
	namespace string
	mu        sync.Mutex
	counts    map[string]int
}

var requestInfos = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if info, err := requestInfos.NewRequestInfo(req); err == nil && info.IsResourceRequest && info.Namespace == c.namespace {
			key := info.Verb + " " + info.Resource
			if info.Subresource != "" {
				key += "/" + info.Subresource
			}
			c.mu.Lock()
			if c.counts == nil {
				c.counts = map[string]int{}
			}
			c.counts[key]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

func (c *requestCounter) breakdown(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
