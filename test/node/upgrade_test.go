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

package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
)

// The upgrade step (docs/upgrade.md#upgrading-on-a-real-node): the previous release
// (test/upgrade/previous-release, built by hack/previous-images.sh) installed
// with Helm, work on it, then `helm upgrade` to this commit's chart and
// images with tasks in flight. It runs first, on the empty cluster, in
// namespaces of its own, and removes its release before the install of
// dist/install.yaml.
const (
	upgradeRelease = "dtq"
	upgradeSystem  = "dtq-upgrade"  // the release's namespace
	upgradeNS      = "node-upgrade" // the Queues' namespace
)

// chartImages are the images of `make images` by the chart's values key.
var chartImages = map[string]string{"manager": "dtq-manager", "workers": "dtq-worker", "api": "dtq-api"}

// upgradeDeployments are the Deployments that run dtq's images during the
// upgrade, by namespace: the release's, and the worker Deployments of the
// chaos Queue q (its template names the dtq-worker image) and of the Queue
// plain (no containers: the manager's --worker-image).
var upgradeDeployments = map[string][]string{
	upgradeSystem: {"dtq-controller-manager", "dtq-api"},
	upgradeNS:     {"q-workers", "plain-workers"},
}

// release is one side of the upgrade: a chart and its images.
type release struct {
	name   string              // for messages
	chart  string              // the chart's folder
	images string              // the folder of its OCI layouts
	tag    string              // the tag of all its images
	refs   map[string]name.Tag // by image name (dtq-manager ...)
	ids    map[string]string   // image ID (config digest) by reference
}

// readRelease reads the chart folder and the OCI layouts of `make images`
// in images: the tag and the image ID of each image.
func readRelease(what, chartDir, images string) (*release, error) {
	r := &release{name: what, chart: chartDir, images: images, refs: map[string]name.Tag{}, ids: map[string]string{}}
	for _, img := range chartImages {
		ref, id, err := layoutRef(filepath.Join(images, img))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if r.tag != "" && ref.TagStr() != r.tag {
			return nil, fmt.Errorf("%s: %s is tagged %s, another image %s", what, img, ref.TagStr(), r.tag)
		}
		r.tag = ref.TagStr()
		r.refs[img] = ref
		r.ids[ref.String()] = id
	}
	return r, nil
}

// values are the Helm values of both installs: the Redis URL (the chart
// keeps it in a Secret), the API on, and the release's images.
func (r *release) values(redisURL string) map[string]any {
	v := map[string]any{"redis": map[string]any{"url": redisURL}}
	for key, img := range chartImages {
		v[key] = map[string]any{"image": map[string]any{"repository": r.refs[img].Context().Name(), "tag": r.tag}}
	}
	v["api"].(map[string]any)["enabled"] = true
	return v
}

// upgrade is TestNode's Upgrade step, from prev to next (readReleases).
func (cl *cluster) upgrade(t *testing.T, prev, next *release) {
	cl.importReleases(t, prev, next)
	t.Logf("upgrading from %s (images %s) to %s (images %s)", prev.name, prev.tag, next.name, next.tag)
	hc := cl.helm(t)
	chaosLog := cl.installPrevious(t, hc, prev)
	finished := cl.createChaosWith(t, upgradeNS, "finished", 20, nil)
	if r := cl.checkChaos(t, upgradeNS, finished, chaosLog); !r.OK() || r.Accepted != len(finished) {
		t.Fatalf("before the upgrade: want %d accepted, 0 lost, 0 duplicated: %s\n%s", len(finished), r, r.Details(20))
	}
	oldWorkers := cl.podNames(t, upgradeNS, "q")

	// Tasks queued and running on the old workers; every tenth chaos task
	// holds 20 s, so the old workers still run them when the rollout stops
	// them (they drain for up to 30 s).
	var sleeps []string
	for i := range 8 {
		key := fmt.Sprintf("sleep-%03d", i)
		must(t, cl.createSleepTask(t.Context(), key))
		sleeps = append(sleeps, key)
	}
	inflight := cl.createChaosWith(t, upgradeNS, "inflight", 60, func(i int, p *demo.ChaosPayload) {
		if i%10 == 5 {
			p.HoldSeconds = 20
		}
	})
	during := cl.upgradeUnderLoad(t, hc, next)
	sleeps = append(sleeps, during.sleeps...)
	after := cl.createChaosWith(t, upgradeNS, "after", 20, nil)

	// The images the pods run, every task once, work done by both versions.
	cl.checkImageIDs(t, prev, next)
	all := slices.Concat(finished, inflight, during.chaos, after)
	r := cl.checkChaos(t, upgradeNS, all, chaosLog)
	if !r.OK() || r.Accepted != len(all) {
		t.Errorf("want %d accepted, 0 lost, 0 duplicated: %s\n%s", len(all), r, r.Details(20))
	}
	cl.checkVersions(t, chaosLog, oldWorkers, cl.podNames(t, upgradeNS, "q"))
	cl.checkSucceeded(t, upgradeNS, sleeps)
	t.Logf("%d chaos tasks (%d finished before, %d queued or running at, %d created during, %d after the upgrade), %d sleep tasks",
		len(all), len(finished), len(inflight), len(during.chaos), len(after), len(sleeps))

	cl.removeUpgrade(t, hc)
}

// installPrevious installs the previous release with Helm and the Queues q
// (chaos, on the previous worker image) and plain, and waits until their
// pods are ready. It returns the chaos log's path.
func (cl *cluster) installPrevious(t *testing.T, hc *action.Configuration, prev *release) string {
	ctx := t.Context()
	start := time.Now()
	in := action.NewInstall(hc)
	in.ReleaseName, in.Namespace, in.CreateNamespace = upgradeRelease, upgradeSystem, true
	if _, err := in.RunWithContext(ctx, loadChart(t, prev.chart), prev.values(cl.redisURL())); err != nil {
		t.Fatalf("helm install %s: %v", prev.name, err)
	}
	logDir := filepath.Join(cl.dir, "upgrade-chaos")
	must(t, os.MkdirAll(logDir, 0o777))
	must(t, os.Chmod(logDir, 0o777))
	must(t, cl.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upgradeNS}}))
	must(t, cl.c.Create(ctx, newChaosQueue(upgradeNS, prev.refs["dtq-worker"].String(), logDir)))
	must(t, cl.c.Create(ctx, testutil.MakeQueue("plain", upgradeNS).Replicas(1, 1).Obj()))
	cl.waitRolledOut(t, prev)
	t.Logf("the previous release's pods ready %s after helm install", time.Since(start).Round(time.Second))
	return filepath.Join(logDir, "log.jsonl")
}

// upgradeUnderLoad waits for a worker with tasks in flight, runs `helm
// upgrade` to next while it creates Tasks (createUntil), moves the chaos
// Queue to next's worker image, and waits until every pod runs next's
// images. It returns the Tasks it created.
func (cl *cluster) upgradeUnderLoad(t *testing.T, hc *action.Configuration, next *release) load {
	ctx := t.Context()
	_, active := cl.busyWorker(t, upgradeNS)
	stop := make(chan struct{})
	created := make(chan load, 1)
	go func() { created <- cl.createUntil(ctx, t, stop) }()
	var during load
	stopCreating := sync.OnceFunc(func() { close(stop); during = <-created })
	t.Cleanup(stopCreating)
	start := time.Now()
	up := action.NewUpgrade(hc)
	up.Namespace = upgradeSystem
	if _, err := up.RunWithContext(ctx, upgradeRelease, loadChart(t, next.chart), next.values(cl.redisURL())); err != nil {
		t.Fatalf("helm upgrade to %s: %v", next.name, err)
	}
	t.Logf("helm upgrade to %s with %d tasks running on the busiest old worker", next.name, active)
	// The chaos Queue names the worker image itself, as a Queue with its own
	// handlers names its own: its owner moves it to the new tag.
	var q dtqv1alpha1.Queue
	must(t, cl.c.Get(ctx, client.ObjectKey{Namespace: upgradeNS, Name: "q"}, &q))
	patch := client.MergeFrom(q.DeepCopy())
	q.Spec.WorkerTemplate.Spec.Containers[0].Image = next.refs["dtq-worker"].String()
	must(t, cl.c.Patch(ctx, &q, patch))
	cl.waitRolledOut(t, next)
	stopCreating()
	t.Logf("every pod on %s %s after helm upgrade", next.tag, time.Since(start).Round(time.Second))
	return during
}

// redisURL is the test's Redis as pods reach it.
func (cl *cluster) redisURL() string {
	return "redis://" + gatewayIP + ":" + port(cl.redis.Addr) + "/0"
}

// readReleases reads the previous release (the folder in
// DTQ_PREVIOUS_RELEASE, or hack/previous-images.sh's, which builds it when
// needed and fails when the commit is missing) and this commit's chart and
// images (bin/images). TestNode calls it before it starts the node.
func readReleases(t *testing.T) (prev, next *release) {
	root := envtestutil.RepoRoot()
	dir := os.Getenv("DTQ_PREVIOUS_RELEASE")
	if dir == "" {
		out, err := exec.Command(filepath.Join(root, "hack", "previous-images.sh")).Output()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("hack/previous-images.sh: %v: %s", err, exit.Stderr)
		}
		must(t, err)
		dir = strings.TrimSpace(string(out))
	}
	prev, err := readRelease("the previous release", filepath.Join(dir, "chart"), filepath.Join(dir, "images"))
	must(t, err)
	next, err = readRelease("this commit", filepath.Join(root, "dist", "chart"), filepath.Join(root, "bin", "images"))
	if err != nil {
		t.Fatalf("%v (make images builds bin/images)", err)
	}
	for _, r := range []*release{prev, next} {
		if r.tag == "latest" {
			t.Fatalf("%s's images are tagged latest: the kubelet pulls :latest (worker pods get imagePullPolicy Always) and this node has no registry", r.name)
		}
	}
	if prev.tag == next.tag {
		t.Fatalf("the previous release's images and this commit's have one tag, %s: the upgrade could not tell them apart", next.tag)
	}
	return prev, next
}

// importReleases imports the previous release's images into containerd, and
// tags this commit's (imported by startContainerd under imageTag) with
// their own tag.
func (cl *cluster) importReleases(t *testing.T, prev, next *release) {
	ctx := t.Context()
	for img, ref := range prev.refs {
		archive := filepath.Join(cl.dir, img+"-previous.tar")
		must(t, layoutToArchive(filepath.Join(prev.images, img), ref.String(), archive))
		if out, err := cl.ctr(ctx, "images", "import", archive); err != nil {
			t.Fatalf("import %s: %v: %s", ref, err, out)
		}
	}
	for img, ref := range next.refs {
		if out, err := cl.ctr(ctx, "images", "tag", "--force", "ghcr.io/dtq-dev/"+img+":"+imageTag, ref.String()); err != nil {
			t.Fatalf("tag %s: %v: %s", ref, err, out)
		}
	}
}

// helm is a Helm action configuration for the release's namespace, on the
// cluster's admin kubeconfig, with its discovery cache in the scratch
// directory.
func (cl *cluster) helm(t *testing.T) *action.Configuration {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptr.To(cl.kubeconfig)
	flags.Namespace = ptr.To(upgradeSystem)
	flags.CacheDir = ptr.To(filepath.Join(cl.dir, "helm-cache"))
	cfg := &action.Configuration{}
	must(t, cfg.Init(flags, upgradeSystem, "secret", func(string, ...any) {}))
	return cfg
}

func loadChart(t *testing.T, dir string) *chart.Chart {
	ch, err := loader.Load(dir)
	must(t, err)
	return ch
}

// load names the Tasks created during the upgrade.
type load struct{ chaos, sleeps []string }

// createUntil creates a chaos Task every half second and a sleep Task every
// two seconds until stop closes or ctx ends (at most 200 chaos Tasks).
func (cl *cluster) createUntil(ctx context.Context, t *testing.T, stop <-chan struct{}) load {
	var chaos, sleeps []string
	for i := range 200 {
		select {
		case <-stop:
			return load{chaos, sleeps}
		case <-ctx.Done():
			return load{chaos, sleeps}
		case <-time.After(500 * time.Millisecond):
		}
		key := fmt.Sprintf("during-%03d", i)
		if err := cl.createChaosTask(ctx, upgradeNS, chaosPayload(key, i)); err != nil {
			t.Errorf("create %s during the upgrade: %v", key, err)
			break
		}
		chaos = append(chaos, key)
		if i%4 == 0 {
			key := fmt.Sprintf("sleep-during-%03d", i)
			if err := cl.createSleepTask(ctx, key); err != nil {
				t.Errorf("create %s during the upgrade: %v", key, err)
				break
			}
			sleeps = append(sleeps, key)
		}
	}
	return load{chaos, sleeps}
}

// createSleepTask creates a Task of the Queue plain that sleeps 2 s.
func (cl *cluster) createSleepTask(ctx context.Context, key string) error {
	return cl.c.Create(ctx, testutil.MakeTask(key, upgradeNS).Queue("plain").Type("sleep").
		Payload(map[string]any{"seconds": 2}).Obj())
}

// waitRolledOut waits until every Deployment of upgradeDeployments has all
// its replicas updated and available, and every pod of their namespaces is
// ready and runs r's images only: no pod of an older ReplicaSet left, none
// terminating, none with a mixed image set.
func (cl *cluster) waitRolledOut(t *testing.T, r *release) {
	t.Helper()
	want := map[string]bool{}
	for _, ref := range r.refs {
		want[ref.String()] = true
	}
	cl.waitFor(t, "every dtq pod on "+r.tag, 5*time.Minute, func(ctx context.Context) error {
		for ns, deployments := range upgradeDeployments {
			cl.failFast(t, ctx, ns)
			if err := cl.rolledOut(ctx, ns, deployments, want); err != nil {
				return fmt.Errorf("%s: %w; pods: %s", ns, err, cl.podSummary(ctx, ns))
			}
		}
		return nil
	})
}

func (cl *cluster) rolledOut(ctx context.Context, ns string, deployments []string, images map[string]bool) error {
	for _, n := range deployments {
		var d appsv1.Deployment
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &d); err != nil {
			return err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.ObservedGeneration < d.Generation || d.Status.Replicas != want ||
			d.Status.UpdatedReplicas != want || d.Status.AvailableReplicas != want {
			return fmt.Errorf("Deployment %s: %d pods, %d updated, %d available, want %d", n,
				d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas, want)
		}
	}
	var pods corev1.PodList
	if err := cl.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s terminating", p.Name)
		}
		if !podReady(&p) {
			return fmt.Errorf("pod %s not ready", p.Name)
		}
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			if !images[c.Image] {
				return fmt.Errorf("pod %s container %s runs %s", p.Name, c.Name, c.Image)
			}
		}
	}
	return nil
}

// checkImageIDs checks the image every container of the upgrade's pods runs
// by the image ID the kubelet reports (containerd's ID of an imported image,
// its config digest): this commit's image of the reference the pod names.
func (cl *cluster) checkImageIDs(t *testing.T, prev, next *release) {
	same := 0
	for img, ref := range next.refs {
		if prev.ids[prev.refs[img].String()] == next.ids[ref.String()] {
			same++
		}
	}
	if same > 0 {
		t.Logf("%d of this commit's images are byte for byte the previous release's: the image IDs cannot tell those apart", same)
	}
	n := 0
	for ns := range upgradeDeployments {
		var pods corev1.PodList
		must(t, cl.c.List(t.Context(), &pods, client.InNamespace(ns)))
		for _, p := range pods.Items {
			for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
				spec := containerImage(&p, s.Name)
				if want := next.ids[spec]; want == "" || s.ImageID != want {
					t.Errorf("pod %s/%s container %s (%s) runs image %s, want %s", ns, p.Name, s.Name, spec, s.ImageID, want)
					continue
				}
				n++
			}
		}
	}
	t.Logf("%d containers run this commit's images by their image ID", n)
}

func containerImage(p *corev1.Pod, container string) string {
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

// checkVersions counts the chaos executions by the worker pods of each
// version (the pods' names are the log's workers): both ran tasks.
func (cl *cluster) checkVersions(t *testing.T, chaosLog string, oldPods, newPods []string) {
	log, err := demo.ReadChaosLog(chaosLog)
	must(t, err)
	byKey := map[string]map[bool]bool{} // key -> ran on old, on new
	old, nw, other := 0, 0, 0
	for _, e := range log {
		switch {
		case slices.Contains(oldPods, e.Worker):
			old++
		case slices.Contains(newPods, e.Worker):
			nw++
		default:
			other++
			continue
		}
		if byKey[e.Key] == nil {
			byKey[e.Key] = map[bool]bool{}
		}
		byKey[e.Key][slices.Contains(oldPods, e.Worker)] = true
	}
	both := 0
	for _, v := range byKey {
		if len(v) == 2 {
			both++
		}
	}
	t.Logf("executions: %d by the previous release's workers %v, %d by this commit's %v, %d by other pods; %d tasks ran on both",
		old, oldPods, nw, newPods, other, both)
	if old == 0 || nw == 0 {
		t.Errorf("want executions by both versions' workers")
	}
}

// checkSucceeded checks the Tasks of ns named are Succeeded.
func (cl *cluster) checkSucceeded(t *testing.T, ns string, names []string) {
	cl.waitFor(t, "the sleep Tasks terminal", 2*time.Minute, func(ctx context.Context) error {
		for _, n := range names {
			var task dtqv1alpha1.Task
			if err := cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &task); err != nil {
				return err
			}
			if !task.Status.State.Finished() {
				return fmt.Errorf("%s %s", n, task.Status.State)
			}
		}
		return nil
	})
	for _, n := range names {
		var task dtqv1alpha1.Task
		must(t, cl.c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: n}, &task))
		if task.Status.State != dtqv1alpha1.TaskSucceeded {
			t.Errorf("Task %s/%s %s, want Succeeded", ns, n, task.Status.State)
		}
	}
}

// podNames lists the worker pods of the Queue ns/queue.
func (cl *cluster) podNames(t *testing.T, ns, queue string) []string {
	var pods corev1.PodList
	must(t, cl.c.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{"dtq.dev/queue": queue}))
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	return out
}

// removeUpgrade deletes the Queues' namespace (the upgraded manager removes
// the Queues' finalizers) and uninstalls the release, waiting until their
// pods are gone: the install of dist/install.yaml then starts from a cluster
// with the CRDs only (helm uninstall keeps them).
func (cl *cluster) removeUpgrade(t *testing.T, hc *action.Configuration) {
	ctx := t.Context()
	start := time.Now()
	defer func() { t.Logf("upgrade removed in %s", time.Since(start).Round(time.Second)) }()
	must(t, cl.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upgradeNS}}))
	cl.waitGone(t, upgradeNS)
	un := action.NewUninstall(hc)
	un.Wait, un.Timeout = true, 3*time.Minute
	if _, err := un.Run(upgradeRelease); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	must(t, cl.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upgradeSystem}}))
	cl.waitGone(t, upgradeSystem)
}

func (cl *cluster) waitGone(t *testing.T, ns string) {
	cl.waitFor(t, "namespace "+ns+" gone", 3*time.Minute, func(ctx context.Context) error {
		var n corev1.Namespace
		err := cl.c.Get(ctx, client.ObjectKey{Name: ns}, &n)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s; pods: %s", n.Status.Phase, cl.podSummary(ctx, ns))
	})
}
