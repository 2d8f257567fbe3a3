//go:build node

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

// Package node runs dtq as a platform team installs it, on a real node: the
// images of `make images` imported into containerd, dist/install.yaml applied
// (through the overlay in overlay/, which changes only the images' tag), the
// manager, the API and the worker pods started by a real kubelet with runc,
// against a kube-apiserver, kube-controller-manager and kube-scheduler. See
// docs/install.md, "A real node". Before that install, on the same node, it
// upgrades the previous release with Helm (upgrade_test.go,
// docs/upgrade.md#upgrading-on-a-real-node). It needs root, the node parts of
// hack/node-assets.sh (make node) and the previous release of
// hack/previous-images.sh (make previous-images); it fails, never skips,
// without them.
package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/internal/testutil/chaoscheck"
	"github.com/dtq-dev/dtq/pkg/broker"
)

const system = "dtq-system"

func TestNode(t *testing.T) {
	prev, next := readReleases(t)
	cl := startCluster(t)
	// The upgrade runs first, on the empty cluster, and removes its release.
	if !t.Run("Upgrade", func(t *testing.T) { cl.upgrade(t, prev, next) }) {
		t.FailNow()
	}
	if !t.Run("Install", func(t *testing.T) { cl.install(t, cl.pki) }) {
		t.FailNow()
	}
	// Each step needs the ones before it (the workers, the chaos Queue): the
	// first failure ends the test.
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"Samples", cl.samples},
		{"API", cl.api},
		{"WorkerPodDeleted", cl.workerPodDeleted},
		{"WorkerOOMKilled", cl.workerOOMKilled},
		{"ManagerPodsDeleted", cl.managerPodsDeleted},
		{"Autoscaling", cl.autoscaling},
	} {
		if !t.Run(step.name, step.run) {
			t.FailNow()
		}
	}
}

// install applies the overlay of dist/install.yaml with the two Secrets a
// user creates (docs/install.md): the Redis URL and the API's TLS
// certificate, then waits for the manager and the API to be available.
func (cl *cluster) install(t *testing.T, p *pki) {
	out, err := exec.Command(filepath.Join(cl.root, "bin", "kustomize"), "build", "--load-restrictor", "LoadRestrictionsNone",
		filepath.Join(cl.root, "test", "node", "overlay")).Output()
	must(t, err)
	objs, err := devstack.DecodeManifests(out)
	must(t, err)
	ctx := t.Context()
	must(t, applyRetrying(ctx, cl.c, objs))
	must(t, cl.c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "dtq-redis", Namespace: system},
		StringData: map[string]string{"url": cl.redisURL()},
	}))
	crt, key := p.issue(t, "dtq-api", &x509.Certificate{
		DNSNames:    []string{"dtq-api", "dtq-api.dtq-system", "dtq-api.dtq-system.svc"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	must(t, cl.c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "dtq-api-tls", Namespace: system},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": readFile(t, crt), "tls.key": readFile(t, key)},
	}))
	for _, d := range []string{"dtq-controller-manager", "dtq-api"} {
		cl.waitFor(t, "Deployment "+d+" 2/2 ready", 3*time.Minute, func(ctx context.Context) error {
			var dep appsv1.Deployment
			if err := cl.c.Get(ctx, client.ObjectKey{Namespace: system, Name: d}, &dep); err != nil {
				return err
			}
			cl.failFast(t, ctx, system)
			if dep.Status.ReadyReplicas != 2 {
				return fmt.Errorf("%d/2 ready; pods: %s", dep.Status.ReadyReplicas, cl.podSummary(ctx, system))
			}
			return nil
		})
	}
}

// samples runs config/samples as make dev does (with Queue default/default):
// every Task of them ends Succeeded in real worker pods.
func (cl *cluster) samples(t *testing.T) {
	objs, err := devstack.LoadManifests(filepath.Join(cl.root, "config", "samples"))
	must(t, err)
	q := &unstructured.Unstructured{}
	q.SetAPIVersion(dtqv1alpha1.GroupVersion.String())
	q.SetKind("Queue")
	q.SetNamespace("default")
	q.SetName("default")
	objs = append([]*unstructured.Unstructured{q}, objs...)
	must(t, applyRetrying(t.Context(), cl.c, objs))
	var names []string
	for _, o := range objs {
		if o.GetKind() == "Task" {
			names = append(names, o.GetName())
		}
	}
	if len(names) == 0 {
		t.Fatal("no Tasks in config/samples")
	}
	cl.waitFor(t, "the samples' Tasks Succeeded", 5*time.Minute, func(ctx context.Context) error {
		var pending []string
		for _, n := range names {
			var task dtqv1alpha1.Task
			if err := cl.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: n}, &task); err != nil {
				return err
			}
			if task.Status.State != dtqv1alpha1.TaskSucceeded {
				pending = append(pending, fmt.Sprintf("%s=%s", n, task.Status.State))
			}
		}
		if len(pending) > 0 {
			cl.failFast(t, ctx, "default")
			return fmt.Errorf("not Succeeded: %v; pods: %s", pending, cl.podSummary(ctx, "default"))
		}
		return nil
	})
	t.Logf("%d sample Tasks Succeeded in real pods: %s", len(names), cl.podSummary(t.Context(), "default"))
}

// api submits a task through the API's pod (HTTPS on its pod IP) with a
// ServiceAccount token minted for the audience dtq-api, and reads it back
// until it succeeded.
func (cl *cluster) api(t *testing.T) {
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "node-producer", Namespace: "default"}}
	must(t, cl.c.Create(ctx, sa))
	must(t, cl.c.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node-producer", Namespace: "default"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "dtq-producer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}},
	}))
	cs, err := kubernetes.NewForConfig(cl.cfg)
	must(t, err)
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"dtq-api"}, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	must(t, err)
	token := tr.Status.Token

	var pods corev1.PodList
	must(t, cl.c.List(ctx, &pods, client.InNamespace(system), client.MatchingLabels{"app.kubernetes.io/component": "api"}))
	var ip string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && podReady(&p) {
			ip = p.Status.PodIP
		}
	}
	if ip == "" {
		t.Fatalf("no ready API pod: %s", cl.podSummary(ctx, system))
	}
	// The API's certificate names the Service; the test dials the pod.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: cl.caPool(t), ServerName: "dtq-api.dtq-system.svc",
	}}}
	base := "https://" + ip + ":8443/api/v1/namespaces/default/queues/default/tasks"
	do := func(method, url, tok string, body []byte) (int, []byte) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		must(t, err)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, body := do(http.MethodPost, base, "", []byte(`{"task_type":"echo","payload":{}}`)); code != http.StatusUnauthorized {
		t.Fatalf("submit without a token: %d %s, want 401", code, body)
	}
	code, body := do(http.MethodPost, base, token, []byte(`{"task_type":"echo","payload":{"via":"api pod"}}`))
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %s, want 202", code, body)
	}
	var task struct {
		TaskID string          `json:"task_id"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	must(t, json.Unmarshal(body, &task))
	cl.waitFor(t, "the API's task completed", 2*time.Minute, func(context.Context) error {
		code, body := do(http.MethodGet, base+"/"+task.TaskID, token, nil)
		if code != http.StatusOK {
			return fmt.Errorf("get: %d %s", code, body)
		}
		must(t, json.Unmarshal(body, &task))
		if task.Status != "Succeeded" {
			return fmt.Errorf("status %s", task.Status)
		}
		return nil
	})
	if !strings.Contains(string(task.Result), "api pod") {
		t.Errorf("result %s, want the echoed payload", task.Result)
	}
	t.Logf("API pod %s: task %s completed with result %s", ip, task.TaskID, task.Result)
}

// The chaos queue of the fault scenarios (as test/e2e's fault suite): its
// workers run the chaos handler, which logs every execution to a file on a
// hostPath volume the checker reads.
const (
	faultNS       = "node-faults"
	chaosAttempts = 10
)

func (cl *cluster) chaosQueue(t *testing.T) string {
	ctx := t.Context()
	logDir := filepath.Join(cl.dir, "chaos")
	if cl.chaosReady {
		return filepath.Join(logDir, "log.jsonl")
	}
	cl.chaosReady = true
	must(t, os.MkdirAll(logDir, 0o777))
	must(t, os.Chmod(logDir, 0o777))
	must(t, cl.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: faultNS}}))
	q := newChaosQueue(faultNS, "ghcr.io/dtq-dev/dtq-worker:"+imageTag, logDir)
	// Room for the worker, not for a task's 512 MiB (WorkerOOMKilled).
	q.Spec.WorkerTemplate.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("192Mi")},
	}
	// A second's grace: a deleted worker pod is killed in the middle of its
	// slow tasks instead of draining them (its default grace period covers
	// the worker's 30 s drain, and then nothing is handed back).
	q.Spec.WorkerTemplate.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	must(t, cl.c.Create(ctx, q))
	cl.waitFor(t, "2 ready chaos workers", 2*time.Minute, func(ctx context.Context) error {
		if n := cl.readyPods(ctx, faultNS); n < 2 {
			return fmt.Errorf("%d ready; pods: %s", n, cl.podSummary(ctx, faultNS))
		}
		return nil
	})
	return filepath.Join(logDir, "log.jsonl")
}

// newChaosQueue is the Queue "q" of ns whose two workers run image with the
// chaos handler, logging every execution to log.jsonl in logDir (a hostPath
// volume the checker reads).
func newChaosQueue(ns, image, logDir string) *dtqv1alpha1.Queue {
	q := testutil.MakeQueue("q", ns).Replicas(2, 2).Timeouts(3*time.Second, 500*time.Millisecond).Obj()
	q.Spec.Concurrency = 8
	q.Spec.Retry.BaseDelay = dtqv1alpha1.NewDuration(200 * time.Millisecond)
	q.Spec.Retry.MaxDelay = dtqv1alpha1.NewDuration(2 * time.Second)
	q.Spec.Retry.MaxAttempts = chaosAttempts
	q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{{
		Name: "worker", Image: image,
		Env:          []corev1.EnvVar{{Name: demo.EnvChaosLog, Value: "/chaos/log.jsonl"}},
		VolumeMounts: []corev1.VolumeMount{{Name: "chaos", MountPath: "/chaos"}},
	}}
	q.Spec.WorkerTemplate.Spec.Volumes = []corev1.Volume{{Name: "chaos", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: logDir},
	}}}
	return q
}

// workerPodDeleted force-deletes (grace period 0) the busiest worker pod
// while it runs tasks: they are handed back and succeed elsewhere, 0 lost and
// 0 duplicated by the fault suite's checker.
func (cl *cluster) workerPodDeleted(t *testing.T) {
	chaosLog := cl.chaosQueue(t)
	const n = 60
	tasks := cl.createChaos(t, "delete", n)
	name, active := cl.busyWorker(t, faultNS)
	must(t, cl.c.Delete(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: faultNS}},
		client.GracePeriodSeconds(0)))
	t.Logf("force-deleted worker pod %s with %d tasks in flight", name, active)
	r := cl.checkChaos(t, faultNS, tasks, chaosLog)
	if !r.OK() || r.Accepted != n {
		t.Errorf("want %d accepted, 0 lost, 0 duplicated: %s\n%s", n, r, r.Details(20))
	}
	if r.Redeliveries == 0 {
		t.Errorf("no task ran again: the deletion hit no running work")
	}
}

// workerOOMKilled runs chaos tasks of which one allocates 512 MiB on its
// first attempt in a worker container limited to 192 MiB: the kernel kills
// the container (OOMKilled, restarted by the kubelet) in the middle of that
// task and of its neighbours, which are handed back and succeed.
func (cl *cluster) workerOOMKilled(t *testing.T) {
	chaosLog := cl.chaosQueue(t)
	const n = 20
	tasks := cl.createChaosWith(t, faultNS, "oom", n, func(i int, p *demo.ChaosPayload) {
		if i == 0 {
			p.HoldSeconds, p.FirstAttemptMiB = 2, 512
		}
	})
	r := cl.checkChaos(t, faultNS, tasks, chaosLog)
	if !r.OK() || r.Accepted != n {
		t.Errorf("want %d accepted, 0 lost, 0 duplicated: %s\n%s", n, r, r.Details(20))
	}
	var pods corev1.PodList
	must(t, cl.c.List(t.Context(), &pods, client.InNamespace(faultNS)))
	oom := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.LastTerminationState.Terminated != nil && c.LastTerminationState.Terminated.Reason == "OOMKilled" {
				oom++
			}
		}
	}
	if oom == 0 {
		t.Errorf("no worker container was OOMKilled: %s", cl.podSummary(t.Context(), faultNS))
	}
	if r.Redeliveries == 0 {
		t.Errorf("no task ran again: the OOM kill hit no running work")
	}
	t.Logf("%d worker container(s) OOMKilled: %s", oom, cl.podSummary(t.Context(), faultNS))
}

// managerPodsDeleted force-deletes both manager pods while Tasks are being
// created: the new pods take over and nothing is lost or duplicated.
func (cl *cluster) managerPodsDeleted(t *testing.T) {
	chaosLog := cl.chaosQueue(t)
	const n = 100
	done := make(chan []string, 1)
	go func() { done <- cl.createChaos(t, "burst", n) }()
	cl.waitFor(t, "a quarter of the burst created", time.Minute, func(ctx context.Context) error {
		var list dtqv1alpha1.TaskList
		if err := cl.c.List(ctx, &list, client.InNamespace(faultNS)); err != nil {
			return err
		}
		burst := 0
		for _, task := range list.Items {
			if strings.HasPrefix(task.Name, "burst-") {
				burst++
			}
		}
		if burst < n/4 {
			return fmt.Errorf("%d created", burst)
		}
		return nil
	})
	must(t, cl.c.DeleteAllOf(t.Context(), &corev1.Pod{}, client.InNamespace(system),
		client.MatchingLabels{"control-plane": "controller-manager"}, client.GracePeriodSeconds(0)))
	t.Log("force-deleted both manager pods mid-burst")
	tasks := <-done
	r := cl.checkChaos(t, faultNS, tasks, chaosLog)
	if !r.OK() || r.Accepted != n {
		t.Errorf("want %d accepted, 0 lost, 0 duplicated: %s\n%s", n, r, r.Details(20))
	}
	t.Logf("manager pods now: %s", cl.podSummary(t.Context(), system))
}

// autoscaling: a Queue scaled from zero gets real worker pods for a backlog
// and goes back to zero once it is done.
func (cl *cluster) autoscaling(t *testing.T) {
	const ns = "node-scale"
	ctx := t.Context()
	must(t, cl.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	q := testutil.MakeQueue("q", ns).Replicas(0, 3).TargetBacklog(5).Obj()
	q.Spec.Concurrency = 2
	q.Spec.Scaling.ScaleDownStabilization = dtqv1alpha1.NewDuration(5 * time.Second)
	must(t, cl.c.Create(ctx, q))
	var names []string
	for i := range 30 {
		task := testutil.MakeTask(fmt.Sprintf("sleep-%02d", i), ns).Queue("q").Type("sleep").
			Payload(map[string]any{"seconds": 2}).Obj()
		must(t, cl.c.Create(ctx, task))
		names = append(names, task.Name)
	}
	most := 0
	cl.waitFor(t, "the backlog done", 4*time.Minute, func(ctx context.Context) error {
		most = max(most, cl.readyPods(ctx, ns))
		pending := 0
		for _, n := range names {
			var task dtqv1alpha1.Task
			if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &task); err != nil {
				return err
			}
			if task.Status.State != dtqv1alpha1.TaskSucceeded {
				pending++
			}
		}
		if pending > 0 {
			return fmt.Errorf("%d of %d not Succeeded; pods: %s", pending, len(names), cl.podSummary(ctx, ns))
		}
		return nil
	})
	if most < 2 {
		t.Errorf("at most %d ready worker pods for a backlog of 30 (target 5 per worker, max 3), want 2 or more", most)
	}
	cl.waitFor(t, "the workers scaled to zero", 3*time.Minute, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := cl.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods: %s", len(pods.Items), cl.podSummary(ctx, ns))
		}
		return nil
	})
	t.Logf("scaled from 0 to %d ready worker pods and back to 0", most)
}

// createChaos creates n chaos Tasks of a scenario in faultNS, every tenth
// holding 6 s (so a worker hit has work in flight), the rest 20 ms.
func (cl *cluster) createChaos(t *testing.T, scenario string, n int) []string {
	return cl.createChaosWith(t, faultNS, scenario, n, nil)
}

// createChaosWith is createChaos in ns with edit applied to each payload.
func (cl *cluster) createChaosWith(t *testing.T, ns, scenario string, n int, edit func(int, *demo.ChaosPayload)) []string {
	var names []string
	for i := range n {
		key := fmt.Sprintf("%s-%03d", scenario, i)
		p := chaosPayload(key, i)
		if edit != nil {
			edit(i, &p)
		}
		if err := cl.createChaosTask(t.Context(), ns, p); err != nil {
			t.Error(err)
			return names
		}
		names = append(names, key)
	}
	return names
}

// chaosPayload is the payload of the i-th chaos Task of a batch: every tenth
// holds 6 s, the rest 20 ms.
func chaosPayload(key string, i int) demo.ChaosPayload {
	p := demo.ChaosPayload{Key: key, HoldSeconds: 0.02}
	if i%10 == 5 {
		p.HoldSeconds = 6
	}
	return p
}

// createChaosTask creates the chaos Task p.Key of the Queue ns/q, with p.Key
// as its idempotency key.
func (cl *cluster) createChaosTask(ctx context.Context, ns string, p demo.ChaosPayload) error {
	return cl.c.Create(ctx, testutil.MakeTask(p.Key, ns).Queue("q").Type(demo.Chaos).
		Payload(p).Key(p.Key).MaxAttempts(chaosAttempts).Obj())
}

// checkChaos waits for the chaos Tasks of ns to end and runs the fault
// suite's checker (internal/testutil/chaoscheck) on their statuses, the
// execution log and the side-effect counters.
func (cl *cluster) checkChaos(t *testing.T, ns string, names []string, chaosLog string) chaoscheck.Report {
	got := map[string]*dtqv1alpha1.Task{}
	cl.waitFor(t, "the chaos Tasks terminal", 4*time.Minute, func(ctx context.Context) error {
		pending := 0
		for _, n := range names {
			var task dtqv1alpha1.Task
			if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &task); err != nil {
				return err
			}
			got[n] = &task
			if !task.Status.State.Finished() {
				pending++
			}
		}
		if pending > 0 {
			return fmt.Errorf("%d of %d not terminal; pods: %s", pending, len(names), cl.podSummary(ctx, ns))
		}
		return nil
	})
	rdb := cl.redis.Client()
	var logical []chaoscheck.Logical
	effects := map[string]int64{}
	for _, n := range names {
		st := got[n].Status
		logical = append(logical, chaoscheck.Logical{Key: n, TaskIDs: []string{st.TaskID},
			Succeeded: st.State == dtqv1alpha1.TaskSucceeded, Attempt: int(st.Attempt), MaxAttempts: chaosAttempts})
		v, err := rdb.Get(t.Context(), demo.ChaosEffectKey(ns, n)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		effects[n] = v
	}
	log, err := demo.ReadChaosLog(chaosLog)
	must(t, err)
	r := chaoscheck.Check(logical, log, effects)
	t.Logf("checker: %s", r)
	return r
}

// busyWorker waits for a ready worker pod of the chaos queue with tasks in
// flight (by its heartbeat) and returns the busiest.
func (cl *cluster) busyWorker(t *testing.T, ns string) (name string, active int) {
	t.Helper()
	b := broker.New(cl.redis.Client())
	cl.waitFor(t, "a busy worker pod", time.Minute, func(ctx context.Context) error {
		var pods corev1.PodList
		if err := cl.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		ready := map[string]bool{}
		for _, p := range pods.Items {
			ready[p.Name] = podReady(&p) && p.DeletionTimestamp == nil
		}
		ws, err := b.Workers(ctx, broker.QueueRef{Namespace: ns, Name: "q"})
		if err != nil {
			return err
		}
		for _, w := range ws {
			if ready[w.ID] && w.Active > active {
				name, active = w.ID, w.Active
			}
		}
		if active == 0 {
			return fmt.Errorf("no ready worker pod with tasks in flight (workers %d)", len(ws))
		}
		return nil
	})
	return name, active
}

func (cl *cluster) readyPods(ctx context.Context, ns string) int {
	var pods corev1.PodList
	if cl.c.List(ctx, &pods, client.InNamespace(ns)) != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if podReady(&p) && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// podSummary describes the namespace's pods: name, phase, ready, and the
// waiting or terminated reason of each container.
func (cl *cluster) podSummary(ctx context.Context, ns string) string {
	var pods corev1.PodList
	if err := cl.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		s := fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, podReady(&p))
		for _, c := range p.Status.ContainerStatuses {
			switch {
			case c.State.Waiting != nil:
				s += fmt.Sprintf(" %s:%s(%s)", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Terminated != nil:
				s += fmt.Sprintf(" %s:%s(%d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			}
			if c.RestartCount > 0 {
				s += fmt.Sprintf(" restarts=%d", c.RestartCount)
			}
		}
		out = append(out, s)
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// failFast fails the test at once when a container of the namespace
// crash-loops or cannot start, or a Queue of it reports a forbidden request
// (the manager's RBAC), instead of waiting for a timeout.
func (cl *cluster) failFast(t *testing.T, ctx context.Context, ns string) {
	if r := cl.crashLooping(ctx, ns); r != "" {
		t.Fatalf("%s crash-loops or cannot start: %s", r, cl.podSummary(ctx, ns))
	}
	var qs dtqv1alpha1.QueueList
	if cl.c.List(ctx, &qs, client.InNamespace(ns)) != nil {
		return
	}
	for _, q := range qs.Items {
		for _, c := range q.Status.Conditions {
			if strings.Contains(c.Message, "forbidden") {
				t.Fatalf("Queue %s/%s %s: %s", ns, q.Name, c.Type, c.Message)
			}
		}
	}
}

// crashLooping names a container of the namespace restarted 3 times or more,
// or waiting with a start error.
func (cl *cluster) crashLooping(ctx context.Context, ns string) string {
	var pods corev1.PodList
	if cl.c.List(ctx, &pods, client.InNamespace(ns)) != nil {
		return ""
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount >= 3 {
				return p.Name + "/" + c.Name
			}
			if w := c.State.Waiting; w != nil && (w.Reason == "CreateContainerError" || w.Reason == "RunContainerError" ||
				w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" || w.Reason == "InvalidImageName") {
				return p.Name + "/" + c.Name + " " + w.Reason
			}
		}
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// applyRetrying applies objs, retrying while new CRDs' REST mappings lag.
func applyRetrying(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	var err error
	for range 100 {
		if err = devstack.Apply(ctx, c, objs); err == nil || !meta.IsNoMatchError(errors.Unwrap(err)) && !apierrors.IsNotFound(errors.Unwrap(err)) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}

func (cl *cluster) caPool(t *testing.T) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(readFile(t, filepath.Join(cl.dir, "pki", "ca.crt")))
	return pool
}

func readFile(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}

func port(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }
