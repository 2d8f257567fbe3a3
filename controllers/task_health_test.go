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
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil"
)

// argoHealth evaluates an Argo CD health script on obj the way Argo CD does:
// obj is a global Lua table (JSON numbers as Lua numbers, arrays as
// sequences), the script returns a table with status and message.
func argoHealth(script string, obj map[string]any) (healthStatus, message string, err error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable, lua.StringLibName: lua.OpenString} {
		l.Push(l.NewFunction(open))
		l.Push(lua.LString(name))
		l.Call(1, 0)
	}
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	hs, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	return lua.LVAsString(hs.RawGetString("status")), lua.LVAsString(hs.RawGetString("message")), nil
}

func toLua(l *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := l.CreateTable(0, len(x))
		for k, item := range x {
			t.RawSetString(k, toLua(l, item))
		}
		return t
	case []any:
		t := l.CreateTable(len(x), 0)
		for _, item := range x {
			t.Append(toLua(l, item))
		}
		return t
	case string:
		return lua.LString(x)
	case bool:
		return lua.LBool(x)
	case int64:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	}
	return lua.LNil
}

func unstructuredTask(t *dtqv1alpha1.Task) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
	Expect(err).NotTo(HaveOccurred())
	return &unstructured.Unstructured{Object: m}
}

var _ = Describe("Status tools on real Task objects", func() {
	It("kstatus and the Argo CD health check read each state as documented", func() {
		script, err := os.ReadFile(filepath.Join("..", "config", "argocd", "task-health.lua"))
		Expect(err).NotTo(HaveOccurred())
		ns := newNamespace("health")
		for _, q := range []*dtqv1alpha1.Queue{
			testutil.MakeQueue("work", ns).RetryDelays(time.Minute, time.Minute).Obj(),
			testutil.MakeQueue("nodlq", ns).DeadLetter(false).Obj(),
			testutil.MakeQueue("idle", ns).MaxPayloadBytes(64).Obj(), // no worker
		} {
			Expect(k8sClient.Create(ctx, q)).To(Succeed())
		}
		DeferCleanup(startWorker(ns, "work"))
		DeferCleanup(startWorker(ns, "nodlq"))

		type row struct {
			task    *dtqv1alpha1.Task
			state   dtqv1alpha1.TaskState // waited for
			kstatus status.Status
			argo    string
		}
		task := func(name, queue, typ string) *testutil.TaskWrapper {
			return testutil.MakeTask(name, ns).Queue(queue).Type(typ)
		}
		rows := []row{
			{task("pending", "missing", demo.Echo).Obj(), dtqv1alpha1.TaskPending, status.InProgressStatus, "Progressing"},
			{task("queued", "idle", demo.Echo).Key("k").Obj(), dtqv1alpha1.TaskQueued, status.InProgressStatus, "Progressing"},
			{task("running", "work", demo.Sleep).Payload(demo.SleepPayload{Seconds: 120}).Obj(), dtqv1alpha1.TaskRunning, status.InProgressStatus, "Progressing"},
			{task("retrying", "work", demo.Flaky).Payload(demo.FlakyPayload{FailTimes: 3}).Obj(), dtqv1alpha1.TaskRetrying, status.InProgressStatus, "Progressing"},
			{task("succeeded", "work", demo.Echo).Obj(), dtqv1alpha1.TaskSucceeded, status.CurrentStatus, "Healthy"},
			{task("failed", "nodlq", demo.Fail).Obj(), dtqv1alpha1.TaskFailed, status.FailedStatus, "Degraded"},
			{task("dead", "work", demo.Fail).Obj(), dtqv1alpha1.TaskDeadLettered, status.FailedStatus, "Degraded"},
			{task("cancelled", "idle", demo.Echo).Cancel().Obj(), dtqv1alpha1.TaskCancelled, status.FailedStatus, "Degraded"},
			{task("expired", "work", demo.Echo).Delay(time.Second).TTL(500 * time.Millisecond).Obj(), dtqv1alpha1.TaskExpired, status.FailedStatus, "Degraded"},
			{task("rejected", "idle", demo.Echo).Payload(map[string]string{"blob": fmt.Sprintf("%0100d", 0)}).Obj(), dtqv1alpha1.TaskFailed, status.FailedStatus, "Degraded"},
		}
		check := func(name string, obj *unstructured.Unstructured, wantKstatus status.Status, wantArgo string) {
			res, err := status.Compute(obj)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(wantKstatus), "kstatus of %s: %s", name, res.Message)
			hs, msg, err := argoHealth(string(script), obj.Object)
			Expect(err).NotTo(HaveOccurred())
			Expect(hs).To(Equal(wantArgo), "Argo CD health of %s: %s", name, msg)
		}

		By("reading a Task the controller has not written yet as in progress")
		fresh := unstructuredTask(task("fresh", "idle", demo.Echo).Obj())
		fresh.SetGroupVersionKind(dtqv1alpha1.GroupVersion.WithKind("Task"))
		Expect(k8sClient.Create(ctx, fresh)).To(Succeed()) // fresh is now the API server's answer
		check("fresh", fresh, status.InProgressStatus, "Progressing")

		for _, r := range rows {
			Expect(k8sClient.Create(ctx, r.task)).To(Succeed())
		}
		dup := task("duplicate", "idle", demo.Echo).Key("k").Obj()
		Eventually(getTask(rows[1].task), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskQueued))
		Expect(k8sClient.Create(ctx, dup)).To(Succeed())
		rows = append(rows, row{dup, dtqv1alpha1.TaskQueued, status.InProgressStatus, "Progressing"})

		for _, r := range rows {
			By(fmt.Sprintf("%s: %s", r.task.Name, r.state))
			Eventually(getTask(r.task), timeout, poll).Should(HaveField("Status.State", r.state))
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(dtqv1alpha1.GroupVersion.WithKind("Task"))
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(r.task), u)).To(Succeed())
			check(r.task.Name, u, r.kstatus, r.argo)
		}

		By("reading a retry the controller has not acted on yet as in progress")
		dead := getTask(rows[6].task)(Default)
		patch := client.MergeFrom(dead.DeepCopy())
		dead.Spec.RetryGeneration = 1
		Expect(k8sClient.Patch(ctx, dead, patch)).To(Succeed()) // dead is now the API server's answer
		Expect(dead.Status.ObservedGeneration).To(BeNumerically("<", dead.Generation))
		check("dead, retry asked", unstructuredTask(dead), status.InProgressStatus, "Progressing")
	})
})

var _ = Describe("Task field selectors", func() {
	It("filters Tasks by spec.queue, spec.type, spec.idempotencyKey, spec.flowKey and status.state on the API server", func() {
		ns := newNamespace("fields")
		for _, t := range []*dtqv1alpha1.Task{
			testutil.MakeTask("e1", ns).Queue("emails").Type("send").Key("order-1").FlowKey("tenant-a").Obj(),
			testutil.MakeTask("e2", ns).Queue("emails").Type("bounce").FlowKey("tenant-b").Obj(),
			testutil.MakeTask("r1", ns).Queue("reports").Type("send").Obj(),
		} {
			Expect(k8sClient.Create(ctx, t)).To(Succeed())
		}
		names := func(sel string) []string {
			s, err := fields.ParseSelector(sel)
			Expect(err).NotTo(HaveOccurred())
			var list dtqv1alpha1.TaskList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: s})).To(Succeed())
			var out []string
			for _, t := range list.Items {
				out = append(out, t.Name)
			}
			return out
		}
		Expect(names("spec.queue=emails")).To(ConsistOf("e1", "e2"))
		Expect(names("spec.type=send")).To(ConsistOf("e1", "r1"))
		Expect(names("spec.queue=emails,spec.type=send")).To(ConsistOf("e1"))
		Expect(names("spec.idempotencyKey=order-1")).To(ConsistOf("e1"))
		Expect(names("spec.flowKey=tenant-b")).To(ConsistOf("e2"))
		Eventually(func() []string { return names("status.state=Pending") }, timeout, poll).Should(ConsistOf("e1", "e2", "r1"))
		Expect(names("status.state=Succeeded")).To(BeEmpty())
	})
})
