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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/schedule"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// ScreenshotsEnv names a directory where TestConsole saves its screenshots
// (docs/images holds the committed ones: see docs/console.md).
const ScreenshotsEnv = "DTQ_CONSOLE_SCREENSHOTS"

// The web console in headless Chromium on the dev stack, the way a user goes:
// log in with a token, see a paused queue's backlog, find a task by its
// idempotency key and read its detail, requeue a dead letter once its cause
// is fixed and watch it succeed in the live feed (in a second tab), discard
// one, see the workers; then the same console through `kubectl dtq ui`,
// logged in by the kubeconfig. Each browser has its own sessionStorage, so
// its own login.
func TestConsole(t *testing.T) {
	ns := single.namespace(t, "console")
	apiQueue(t, ns, "q", nil)
	apiQueue(t, ns, "backlog", func(s *dtqv1alpha1.QueueSpec) { s.Paused = true })
	tok := adminToken(t)
	c := apiClient(t, tok)
	for i := range 3 {
		_, err := c.Queue(ns, "backlog").Submit(t.Context(), "echo", map[string]int{"n": i})
		must(t, err)
	}
	order, err := c.Queue(ns, "q").Submit(t.Context(), "echo", map[string]string{"order": "1001"}, dtqclient.IdempotencyKey("order-1001"))
	must(t, err)
	_, err = c.Queue(ns, "q").Wait(t.Context(), order.TaskID)
	must(t, err)
	// Two tasks of a closed gate run out of their one attempt.
	var dead [2]*dtqclient.Task
	for i := range dead {
		dead[i], err = c.Queue(ns, "q").Submit(t.Context(), demo.Gate, demo.GatePayload{Name: "billing"}, dtqclient.MaxAttempts(1))
		must(t, err)
		if dead[i], err = c.Queue(ns, "q").Wait(t.Context(), dead[i].TaskID); err != nil || dead[i].Status != dtqclient.StatusDeadLettered {
			t.Fatalf("gate task: %+v %v, want DeadLettered", dead[i], err)
		}
	}

	tab := startBrowser(t)
	login(t, tab, tok, ns)
	step(t, tab, "the paused queue's backlog",
		waitText(`tr[data-queue="backlog"] td[data-field="queued"]`, "3"),
		waitText(`tr[data-queue="backlog"] td[data-field="state"]`, "paused"))
	screenshot(t, tab, "queues")

	step(t, tab, "find the task by its idempotency key",
		chromedp.Click(chromedp.CSS(`#nav a[href="#/tasks"]`)),
		// The page's own form: the page before may have one with the same ids.
		chromedp.SetValue(chromedp.CSS("#page-tasks #queue"), "q"),
		chromedp.SetValue(chromedp.CSS("#page-tasks #idempotency-key"), "order-1001"),
		chromedp.Click(chromedp.CSS("#page-tasks #search")),
		// The key's task alone, not the queue's three tasks.
		waitJS(`[...document.querySelectorAll("#page-tasks tbody tr")].map(r => r.dataset.task).join() === `+strconv.Quote(order.TaskID)),
		chromedp.Click(chromedp.CSS(`tr[data-task="`+order.TaskID+`"] a`)),
		waitText(`dd[data-field="state"]`, "Succeeded"),
		waitText("#result", "{\n  \"order\": \"1001\"\n}"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-type="TaskSucceeded"]`)),
		// The timeline's rows under its header: each cell starts where its column's header does.
		waitJS(`(() => { const t = document.querySelector("#page-task table"); const rows = t && t.tBodies[0].rows;
			if (!rows || rows.length < 3) return false;
			const lefts = r => [...r.cells].map(c => Math.round(c.getBoundingClientRect().left)).join();
			return [...rows].every(r => lefts(r) === lefts(t.tHead.rows[0])); })()`))
	screenshot(t, tab, "task")

	step(t, tab, "tasks that never ran show no attempt",
		chromedp.Navigate(single.stack.APIURL+"/ui/#/tasks?queue=backlog"),
		waitJS(`(() => { const c = [...document.querySelectorAll('#page-tasks td[data-field="attempt"]')].map(td => td.textContent);
			return c.length === 3 && c.every(x => x.startsWith("- / ")); })()`))

	// A second browser rather than a second tab: in this test, actions on a
	// second tab of the same headless browser stalled.
	feed := startBrowser(t)
	login(t, feed, tok, ns)
	step(t, feed, "open the live feed",
		chromedp.Click(chromedp.CSS(`#nav a[href="#/events"]`)),
		chromedp.SetValue(chromedp.CSS("#queue"), "q"),
		chromedp.Click(chromedp.CSS("#search")),
		waitText("#feed-state", "live"))

	requeued := `tr[data-task="` + dead[0].TaskID + `"]`
	step(t, tab, "the dead letters",
		chromedp.Click(chromedp.CSS(`#nav a[href="#/dead-letters"]`)),
		// The page's own form: the page before may have one with the same ids.
		chromedp.SetValue(chromedp.CSS("#page-dead-letters #queue"), "q"),
		chromedp.Click(chromedp.CSS("#page-dead-letters #search")),
		chromedp.WaitVisible(chromedp.CSS(requeued+" button.requeue")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-task="`+dead[1].TaskID+`"]`)))
	screenshot(t, tab, "dead-letters")

	must(t, single.rdb.Set(t.Context(), demo.GateKey(ns, "billing"), "open", 0).Err())
	step(t, tab, "requeue the first",
		chromedp.Click(chromedp.CSS(requeued+" button.requeue")),
		waitText("#notice", "Requeue done."),
		chromedp.WaitNotPresent(chromedp.CSS(requeued)))
	step(t, feed, "the requeued task succeeds in the live feed",
		chromedp.WaitVisible(chromedp.CSS(`#feed tr[data-task="`+dead[0].TaskID+`"][data-type="TaskSucceeded"]`)))
	screenshot(t, feed, "live-events")
	if got, err := c.Queue(ns, "q").Get(t.Context(), dead[0].TaskID); err != nil || got.Status != dtqclient.StatusSucceeded || got.PreviousAttempts != 1 {
		t.Errorf("requeued task: %+v %v, want Succeeded after 1 previous attempt", got, err)
	}

	acceptDialogs(t, tab)
	discarded := `tr[data-task="` + dead[1].TaskID + `"]`
	step(t, tab, "discard the second",
		chromedp.Click(chromedp.CSS(discarded+" button.discard")),
		waitText("#notice", "Discard done."),
		chromedp.WaitVisible(chromedp.CSS("#no-dead-letters")))
	if got, err := c.Queue(ns, "q").Get(t.Context(), dead[1].TaskID); err != nil || got.Status != dtqclient.StatusDeadLettered {
		t.Errorf("discarded dead letter's task: %+v %v, want it still DeadLettered", got, err)
	}

	step(t, tab, "the workers",
		chromedp.Click(chromedp.CSS(`#nav a[href="#/workers"]`)),
		// The page's own form: the page before may have one with the same ids.
		chromedp.SetValue(chromedp.CSS("#page-workers #queue"), "q"),
		chromedp.Click(chromedp.CSS("#page-workers #search")),
		chromedp.WaitVisible(chromedp.CSS("tr[data-worker]")))
	screenshot(t, tab, "workers")

	// Work on q for the charts: sleeps that keep the workers busy for seconds,
	// a task that fails once and retries, two that fail for good.
	for range 30 {
		_, err := c.Queue(ns, "q").Submit(t.Context(), demo.Sleep, demo.SleepPayload{Seconds: 1})
		must(t, err)
	}
	_, err = c.Queue(ns, "q").Submit(t.Context(), demo.Flaky, demo.FlakyPayload{FailTimes: 1})
	must(t, err)
	for range 2 {
		_, err := c.Queue(ns, "q").Submit(t.Context(), demo.Gate, demo.GatePayload{Name: "charts"}, dtqclient.MaxAttempts(1))
		must(t, err)
	}
	// chartMax waits until the chart's series has had a value above zero.
	chartMax := func(chart, series string) chromedp.Action[chromedp.Void] {
		return waitJS(`Number(document.querySelector('figure[data-chart="` + chart + `"] li[data-series="` + series + `"]')?.dataset.max) > 0`)
	}
	step(t, tab, "the queue's charts: depth, throughput and failures over time",
		chromedp.Click(chromedp.CSS(`#nav a[href="#/queues"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-queue="q"] a[href="#/queue/q"]`)),
		waitJS(`document.querySelectorAll("#page-queue figure[data-chart] svg").length === 3`),
		chartMax("depth", "in flight"),
		chartMax("throughput", "submitted"),
		chartMax("throughput", "processed"),
		chartMax("failures", "failed"),
		chartMax("failures", "retried"))
	screenshot(t, tab, "queue")
	step(t, tab, "the paused queue's depth chart: its backlog of 3",
		chromedp.Navigate(single.stack.APIURL+"/ui/#/queue/backlog"),
		waitJS(`document.querySelector('#page-queue figure[data-chart="depth"] li[data-series="queued"]')?.dataset.latest === "3"`),
		chromedp.WaitVisible(chromedp.CSS(`#page-queue figure[data-chart="depth"] polyline[data-series="queued"]`)))

	// The sample TaskSchedule, yearly (its next run is the same all day long).
	ts := sampleSchedule(t, ns, "0 9 1 1 *")
	next, err := schedule.NextRuns(ts, time.Now(), 1)
	must(t, err)
	row := `tr[data-schedule="heartbeat"] `
	step(t, tab, "the schedules with their next runs",
		chromedp.Click(chromedp.CSS(`#nav a[href="#/schedules"]`)),
		waitText(row+`td[data-field="next_runs"] li:first-child`, next[0].Format("2006-01-02 15:04")),
		waitJS(`document.querySelectorAll(`+strconv.Quote(row+`td[data-field="next_runs"] li`)+`).length === 5`),
		waitText(row+`td[data-field="time_zone"]`, "Europe/Berlin"),
		waitText(row+`td[data-field="state"]`, "suspended"))
	screenshot(t, tab, "schedules")

	t.Run("kubectl dtq ui", func(t *testing.T) {
		link := startUIProxy(t)
		proxied := feed
		step(t, proxied, "the console through the proxy, without a login",
			chromedp.Navigate(link),
			chromedp.WaitVisible(chromedp.CSS("#page-queues")))
		// The user types the namespace into the header's field.
		_, err := chromedp.Run(proxied, chromedp.Evaluate[bool](`(() => { const f = document.getElementById("namespace"); f.value = `+
			strconv.Quote(ns)+`; return f.dispatchEvent(new Event("change")); })()`))
		must(t, err)
		step(t, proxied, "the backlog through the proxy", waitText(`tr[data-queue="backlog"] td[data-field="queued"]`, "3"))
	})
}

// startBrowser starts a headless Chromium for the test (make chromium
// installs it) and returns its tab; it fails the test when there is none.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.WindowSize(1280, 800))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(cancelCtx)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start headless Chromium ('make chromium' installs it): %v", err)
	}
	return ctx
}

func login(t *testing.T, tab context.Context, token, ns string) {
	t.Helper()
	step(t, tab, "log in",
		chromedp.Navigate(single.stack.APIURL+"/ui/"),
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.SetValue(chromedp.CSS("#login-namespace"), ns),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#page-queues table")))
}

// step runs actions in tab within a minute; on failure it logs the page's
// text and address.
func step(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, time.Minute)
	defer cancel()
	for i, a := range actions {
		if err := chromedp.Do(ctx, a); err != nil {
			dump, cancel := context.WithTimeout(tab, 10*time.Second)
			defer cancel()
			text, derr := chromedp.Run(dump, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("%s, action %d of %d: %v\nthe page (%v):\n%s", what, i+1, len(actions), err, derr, text)
		}
	}
}

// waitText waits until the element of sel has exactly text want.
func waitText(sel, want string) chromedp.Action[chromedp.Void] {
	return waitJS(fmt.Sprintf(`document.querySelector(%s)?.textContent === %s`, strconv.Quote(sel), strconv.Quote(want)))
}

// waitJS waits until the JavaScript expression expr is true. It evaluates
// through DevTools in a loop: chromedp.Poll compiles its predicate with new
// Function, which the console's Content-Security-Policy forbids.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			ok, err := chromedp.Evaluate[bool](expr)(ctx, t)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("wait for %s: %w", expr, context.Cause(ctx))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// acceptDialogs answers OK to every confirm() of tab.
func acceptDialogs(t *testing.T, tab context.Context) {
	dialogs := chromedp.Events(tab, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			if _, err := chromedp.Call(tab, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				t.Errorf("accept a dialog: %v", err)
			}
		}
	}()
}

// screenshot saves the tab's page as console-<name>.png in $DTQ_CONSOLE_SCREENSHOTS, if set.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(tab, time.Minute)
	defer cancel()
	// Headless Chromium paints only the tab in front.
	_, err := chromedp.Call(ctx, page.BringToFront, cdp.Empty{})
	must(t, err)
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "console-"+name+".png"), b, 0o644))
}

// startUIProxy runs `kubectl-dtq ui` with the dev kubeconfig and returns the
// console URL it prints.
func startUIProxy(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	must(t, devstack.Build(t.Context(), envtestutil.RepoRoot(), bin, "./cmd/kubectl-dtq"))
	cmd := exec.Command(filepath.Join(bin, "kubectl-dtq"), "ui", "--api-url", single.stack.APIURL, "--kubeconfig", single.stack.Kubeconfig, "--open=false")
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`console at (http://\S+#token=\S+) `).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("kubectl dtq ui printed %q (%v), want its console URL", line, err)
	}
	return m[1]
}
