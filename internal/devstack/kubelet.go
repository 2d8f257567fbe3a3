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

package devstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
	"github.com/dtq-dev/dtq/pkg/wait"
)

// QueueLabel marks the worker Deployments the stand-in runs.
const QueueLabel = "dtq.dev/queue"

const (
	syncPeriod     = 500 * time.Millisecond
	probePeriod    = 250 * time.Millisecond
	stableRun      = 10 * time.Second
	defaultGrace   = 30 * time.Second
	metricsAddrEnv = "DTQ_METRICS_ADDR"
)

// kubelet is the local stand-in for a kubelet and the Deployment controller:
// for every Deployment labelled dtq.dev/queue it keeps spec.replicas local
// worker processes ("pods") running with the pod template's environment and
// writes the Deployment's status. The image is ignored: every pod runs the
// worker binary, or the worker container's command when it is the absolute
// path of an executable on this machine (a user's own worker).
type kubelet struct {
	api       client.Client     // uncached: secrets, config maps, status writes
	reader    client.Reader     // the Deployment informer
	workerBin atomic.Value      // string; Stack.SetWorkerBin changes it for pods started after
	appDirs   map[string]string // image -> directory its app container runs in
	stackDir  string
	logDir    string
	log       *slog.Logger

	trigger chan struct{}

	mu   sync.Mutex
	deps map[types.NamespacedName]map[string]*pod // pods by name, per Deployment
}

// pod is one worker process and its restarts.
type pod struct {
	name      string
	deploy    types.NamespacedName
	hash      string // of the template it runs
	template  corev1.PodTemplateSpec
	createdAt time.Time

	ready       atomic.Bool
	terminating atomic.Bool
	restarts    atomic.Int32
	pid         atomic.Int64
	appPID      atomic.Int64  // the app container's process (HTTP handler pods)
	metricsAddr atomic.Value  // string: host:port of the running process's /metrics
	bin         atomic.Value  // string: the binary the worker container or sidecar last started
	stopCh      chan struct{} // closed to terminate
	done        chan struct{} // closed when the pod is gone
}

// PodInfo describes a worker process the stand-in runs.
type PodInfo struct {
	Namespace, Deployment, Name string
	PID                         int    // 0 while not running (restart backoff)
	AppPID                      int    // an HTTP handler pod's app process; 0 when none or not running
	MetricsAddr                 string // host:port serving the worker's /metrics, /healthz and /readyz
	Bin                         string // the binary of the worker container (or delivery sidecar) last started
	Ready, Terminating          bool
	Restarts                    int
}

func newKubelet(api client.Client, reader client.Reader, workerBin string, appDirs map[string]string, stackDir, logDir string, log *slog.Logger) *kubelet {
	k := &kubelet{
		api: api, reader: reader, appDirs: appDirs, stackDir: stackDir, logDir: logDir, log: log,
		trigger: make(chan struct{}, 1),
		deps:    map[types.NamespacedName]map[string]*pod{},
	}
	k.workerBin.Store(workerBin)
	return k
}

// deploymentCacheOptions makes the cache watch only worker Deployments.
func deploymentCacheOptions(scheme *runtime.Scheme) cache.Options {
	req, _ := labels.NewRequirement(QueueLabel, selection.Exists, nil)
	return cache.Options{
		Scheme:   scheme,
		ByObject: map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Label: labels.NewSelector().Add(*req)}},
	}
}

// watch pokes the sync loop on every Deployment event.
func (k *kubelet) watch(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		return err
	}
	poke := func(any) { k.poke() }
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(any, any) { k.poke() },
		DeleteFunc: poke,
	})
	return err
}

func (k *kubelet) poke() {
	select {
	case k.trigger <- struct{}{}:
	default:
	}
}

// run syncs until ctx ends, then terminates every pod and waits for them.
func (k *kubelet) run(ctx context.Context) {
	t := time.NewTicker(syncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			k.shutdown()
			return
		case <-k.trigger:
		case <-t.C:
		}
		if err := k.sync(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("Stand-in kubelet sync failed", "error", err)
		}
	}
}

func (k *kubelet) sync(ctx context.Context) error {
	var list appsv1.DeploymentList
	if err := k.reader.List(ctx, &list, client.HasLabels{QueueLabel}); err != nil {
		return err
	}
	seen := map[types.NamespacedName]bool{}
	var errs []error
	for i := range list.Items {
		d := &list.Items[i]
		key := client.ObjectKeyFromObject(d)
		seen[key] = true
		if d.DeletionTimestamp != nil {
			continue
		}
		k.reconcilePods(d)
		if err := k.writeStatus(ctx, d); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	k.mu.Lock()
	for key, pods := range k.deps {
		if !seen[key] {
			for _, p := range pods {
				k.terminate(p)
			}
		}
		for name, p := range pods {
			if isClosed(p.done) {
				delete(pods, name)
			}
		}
		if len(pods) == 0 && !seen[key] {
			delete(k.deps, key)
		}
	}
	k.mu.Unlock()
	return errors.Join(errs...)
}

// reconcilePods starts and terminates pods so that spec.replicas pods of the
// current template run; pods of an older template are replaced.
func (k *kubelet) reconcilePods(d *appsv1.Deployment) {
	key := client.ObjectKeyFromObject(d)
	hash := templateHash(&d.Spec.Template)
	want := 1
	if d.Spec.Replicas != nil {
		want = int(*d.Spec.Replicas)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	pods := k.deps[key]
	if pods == nil {
		pods = map[string]*pod{}
		k.deps[key] = pods
	}
	var current []*pod
	for _, p := range pods {
		if p.terminating.Load() {
			continue
		}
		if p.hash != hash {
			k.terminate(p)
			continue
		}
		current = append(current, p)
	}
	for len(current) < want {
		p := &pod{
			name: d.Name + "-" + randomSuffix(), deploy: key, hash: hash,
			template: *d.Spec.Template.DeepCopy(), createdAt: time.Now(),
			stopCh: make(chan struct{}), done: make(chan struct{}),
		}
		if _, taken := pods[p.name]; taken {
			continue
		}
		pods[p.name] = p
		current = append(current, p)
		k.log.Info("Starting worker pod", "deployment", key.String(), "pod", p.name)
		go k.runPod(p)
	}
	if len(current) > want {
		// Like the ReplicaSet controller: not-ready pods first, then the newest.
		sort.Slice(current, func(i, j int) bool {
			ri, rj := current[i].ready.Load(), current[j].ready.Load()
			if ri != rj {
				return !ri
			}
			return current[i].createdAt.After(current[j].createdAt)
		})
		for _, p := range current[:len(current)-want] {
			k.log.Info("Stopping worker pod", "deployment", key.String(), "pod", p.name)
			k.terminate(p)
		}
	}
}

func (k *kubelet) terminate(p *pod) {
	if p.terminating.CompareAndSwap(false, true) {
		close(p.stopCh)
	}
}

// writeStatus sets the Deployment's status from its pods, when it changed.
func (k *kubelet) writeStatus(ctx context.Context, d *appsv1.Deployment) error {
	hash := templateHash(&d.Spec.Template)
	var replicas, updated, ready int32
	k.mu.Lock()
	for _, p := range k.deps[client.ObjectKeyFromObject(d)] {
		if p.terminating.Load() {
			continue
		}
		replicas++
		if p.hash == hash {
			updated++
		}
		if p.ready.Load() {
			ready++
		}
	}
	k.mu.Unlock()
	want := d.Status.DeepCopy()
	want.ObservedGeneration = d.Generation
	want.Replicas = replicas
	want.UpdatedReplicas = updated
	want.ReadyReplicas = ready
	want.AvailableReplicas = ready
	want.UnavailableReplicas = max(0, replicas-ready)
	if equality.Semantic.DeepEqual(*want, d.Status) {
		return nil
	}
	patched := d.DeepCopy()
	patched.Status = *want
	return k.api.Status().Patch(ctx, patched, client.MergeFrom(d))
}

// runPod runs the pod's processes until it is terminated: the worker binary
// (the worker container, or the delivery sidecar of an HTTP handler pod,
// whose app container's command runs beside it). Each is restarted when it
// exits (restartPolicy Always) with exponential backoff. Like a kubelet, a
// terminated pod stops its app container before its sidecar.
func (k *kubelet) runPod(p *pod) {
	defer func() {
		p.ready.Store(false)
		p.pid.Store(0)
		close(p.done)
		k.poke()
	}()
	grace := defaultGrace
	if s := p.template.Spec.TerminationGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	sidecar, app := podContainers(&p.template.Spec)
	if app == nil {
		k.runContainer(p, "worker", p.stopCh, grace, func(logPath string) (*child, string, error) { return k.startWorker(p, sidecar, nil, logPath) }, &p.pid)
		return
	}
	ports, err := newPodPorts()
	if err != nil {
		k.log.Warn("Worker pod cannot start", "pod", p.name, "error", err)
		<-p.stopCh
		return
	}
	sidecarStop := make(chan struct{})
	sidecarDone := make(chan struct{})
	go func() {
		defer close(sidecarDone)
		k.runContainer(p, sidecar.Name, sidecarStop, grace, func(logPath string) (*child, string, error) { return k.startWorker(p, sidecar, ports, logPath) }, &p.pid)
	}()
	k.runContainer(p, app.Name, p.stopCh, grace, func(logPath string) (*child, string, error) { return k.startApp(p, app, ports, logPath) }, &p.appPID)
	close(sidecarStop)
	<-sidecarDone
}

// podContainers returns the container running the worker binary (the
// delivery sidecar, a restartable init container, when the pod has one;
// else the first container) and the app container beside a sidecar (nil
// without one).
func podContainers(ps *corev1.PodSpec) (worker, app *corev1.Container) {
	for i := range ps.InitContainers {
		c := &ps.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways && slices.Contains(c.Args, "delivery") {
			if len(ps.Containers) > 0 {
				return c, &ps.Containers[0]
			}
		}
	}
	if len(ps.Containers) == 0 {
		return nil, nil
	}
	return &ps.Containers[0], nil
}

// runContainer runs one container's process, restarting it when it exits,
// until stop closes; start returns the process and the URL probed for the
// pod's readiness ("" for none).
func (k *kubelet) runContainer(p *pod, name string, stop <-chan struct{}, grace time.Duration,
	start func(logPath string) (*child, string, error), pid *atomic.Int64) {
	logName := p.name
	if name != "worker" {
		logName += "_" + name
	}
	logPath := filepath.Join(k.logDir, fmt.Sprintf("worker_%s_%s.log", p.deploy.Namespace, logName))
	bo := wait.Backoff{Initial: time.Second, Max: 10 * time.Second, Jitter: 0.1}
	backoff := bo.Next()
	for {
		started := time.Now()
		proc, probeURL, err := start(logPath)
		if err == nil {
			pid.Store(int64(proc.pid()))
			if stopped := k.superviseProcess(p, proc, stop, probeURL, grace); stopped {
				pid.Store(0)
				return
			}
			pid.Store(0)
			k.log.Warn("Worker pod container exited; restarting", "pod", p.name, "container", name, "exit", fmt.Sprint(proc.err),
				"backoff", backoff.String(), "log", logPath)
		} else {
			k.log.Warn("Worker pod container cannot start; retrying", "pod", p.name, "container", name, "error", err, "backoff", backoff.String())
		}
		if time.Since(started) > stableRun {
			bo.Reset()
			backoff = bo.Next()
		}
		select {
		case <-stop:
			return
		case <-time.After(backoff):
		}
		backoff = bo.Next()
		p.restarts.Add(1)
	}
}

// superviseProcess probes probeURL (when set) for the pod's readiness until the
// process exits (false) or stop closes, in which case it stops the process
// and returns true.
func (k *kubelet) superviseProcess(p *pod, proc *child, stop <-chan struct{}, probeURL string, grace time.Duration) bool {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	t := time.NewTicker(probePeriod)
	defer t.Stop()
	for {
		select {
		case <-proc.done:
			if probeURL != "" {
				p.ready.Store(false)
				k.poke()
			}
			return false
		case <-stop:
			if probeURL != "" {
				p.ready.Store(false)
				k.poke()
			}
			if !proc.stop(grace) {
				k.log.Warn("Worker pod killed after its grace period", "pod", p.name, "grace", grace.String())
			}
			return true
		case <-t.C:
			if probeURL == "" {
				continue
			}
			ok, _ := probe(hc, probeURL)
			if p.ready.Swap(ok) != ok {
				k.poke()
			}
		}
	}
}

// startWorker resolves the environment of c (the worker container or the
// delivery sidecar) and starts the worker binary with it, serving /metrics
// and /healthz on a free port; ports, for a sidecar, are its pod's.
func (k *kubelet) startWorker(p *pod, c *corev1.Container, ports *podPorts, logPath string) (*child, string, error) {
	if c == nil {
		return nil, "", errors.New("the pod template has no containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, err := k.resolveEnv(ctx, p, c)
	if err != nil {
		return nil, "", err
	}
	port, err := loopback.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(k.workerBin.Load().(string), c.Args...)
	if ports == nil && len(c.Command) > 0 && localBinary(c.Command[0]) {
		// A worker built on this machine (docs/worker.md, "Your own
		// handlers on make dev"): run it instead of the reference worker.
		cmd = exec.Command(c.Command[0], append(c.Command[1:len(c.Command):len(c.Command)], c.Args...)...)
	}
	env = append(env, metricsAddrEnv+"="+addr)
	if ports != nil {
		env = ports.sidecarEnv(env)
	}
	cmd.Env = env
	proc, err := startChild("worker "+p.name, k.stackDir, logPath, cmd)
	if err == nil {
		p.metricsAddr.Store(addr)
		p.bin.Store(cmd.Path)
	}
	probe := "/healthz"
	if ports != nil {
		probe = "/readyz" // a sidecar is ready once it delivers to a ready app
	}
	return proc, "http://" + addr + probe, err
}

// localBinary reports whether a worker container's command names an
// executable file on this machine by its absolute path; an image's own
// command (say /manager or /worker) names none here.
func localBinary(path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// startApp starts an app container's command and args as a local process
// in the directory given for its image (Options.AppDirs), else its
// workingDir, else the stack's working directory. The stand-in has no
// network namespaces, so each pod's app gets a free port in $PORT and the
// sidecar's URL rewritten to that pod's (podPorts).
func (k *kubelet) startApp(p *pod, c *corev1.Container, ports *podPorts, logPath string) (*child, string, error) {
	argv := append(append([]string(nil), c.Command...), c.Args...)
	if len(c.Command) == 0 {
		return nil, "", fmt.Errorf("container %s has no command: the local stand-in runs commands, not images", c.Name)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, "", fmt.Errorf("container %s: %w (make dev installs python3 and nodejs: hack/handler-runtimes.sh)", c.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, err := k.resolveEnv(ctx, p, c)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = ports.appEnv(env)
	switch dir, ok := k.appDirs[c.Image]; {
	case ok:
		cmd.Dir = dir
	case c.WorkingDir != "":
		if st, err := os.Stat(c.WorkingDir); err == nil && st.IsDir() {
			cmd.Dir = c.WorkingDir
		}
	}
	proc, err := startChild("app "+p.name, k.stackDir, logPath, cmd)
	return proc, "", err
}

// podPorts are an HTTP handler pod's loopback ports: the app's (its $PORT)
// and the sidecar API's, fixed for the pod's life.
type podPorts struct{ app, api int }

func newPodPorts() (*podPorts, error) {
	app, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	api, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	return &podPorts{app: app, api: api}, nil
}

// sidecarEnv points the sidecar's handler URLs at the app's port and its
// API at the pod's.
func (pp *podPorts) sidecarEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, v, _ := strings.Cut(kv, "=")
		switch name {
		case "DTQ_HANDLER_URL", "DTQ_HANDLER_READY_URL":
			if u, err := url.Parse(v); err == nil {
				u.Host = "127.0.0.1:" + strconv.Itoa(pp.app)
				v = u.String()
			}
		case "DTQ_SIDECAR_ADDR":
			v = "127.0.0.1:" + strconv.Itoa(pp.api)
		}
		out = append(out, name+"="+v)
	}
	return out
}

// appEnv sets the app's $PORT and its sidecar URL to the pod's.
func (pp *podPorts) appEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name != "PORT" && name != "DTQ_SIDECAR_URL" {
			out = append(out, kv)
		}
	}
	return append(out, "PORT="+strconv.Itoa(pp.app), "DTQ_SIDECAR_URL=http://127.0.0.1:"+strconv.Itoa(pp.api))
}

// resolveEnv turns c's env and envFrom into KEY=value pairs, the way a
// kubelet would: secret and config map references are read from the API,
// field references name the local pod.
func (k *kubelet) resolveEnv(ctx context.Context, p *pod, c *corev1.Container) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(name, v string) {
		if _, ok := vals[name]; !ok {
			order = append(order, name)
		}
		vals[name] = v
	}
	set("PATH", os.Getenv("PATH"))
	set("HOSTNAME", p.name)
	ns := p.deploy.Namespace
	for _, from := range c.EnvFrom {
		data, err := k.envFromSource(ctx, ns, from)
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(data))
		for n := range data {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			set(from.Prefix+n, data[n])
		}
	}
	for _, e := range c.Env {
		v, err := k.envValue(ctx, p, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, v)
	}
	delete(vals, metricsAddrEnv) // rewritten to a free loopback port
	env := make([]string, 0, len(order))
	for _, n := range order {
		if v, ok := vals[n]; ok {
			env = append(env, n+"="+v)
		}
	}
	return env, nil
}

func (k *kubelet) envValue(ctx context.Context, p *pod, e corev1.EnvVar) (string, error) {
	src := e.ValueFrom
	if src == nil {
		return e.Value, nil
	}
	ns := p.deploy.Namespace
	switch {
	case src.SecretKeyRef != nil:
		var s corev1.Secret
		return keyOf(k.api.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.SecretKeyRef.Name}, &s),
			bytesToStrings(s.Data), src.SecretKeyRef.Key, src.SecretKeyRef.Optional)
	case src.ConfigMapKeyRef != nil:
		var cm corev1.ConfigMap
		return keyOf(k.api.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.ConfigMapKeyRef.Name}, &cm),
			cm.Data, src.ConfigMapKeyRef.Key, src.ConfigMapKeyRef.Optional)
	case src.FieldRef != nil:
		switch src.FieldRef.FieldPath {
		case "metadata.name":
			return p.name, nil
		case "metadata.namespace":
			return ns, nil
		case "spec.nodeName":
			return "dtq-dev", nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", nil
		case "spec.serviceAccountName":
			return p.template.Spec.ServiceAccountName, nil
		}
		return "", fmt.Errorf("fieldRef %s is not supported by the local stand-in", src.FieldRef.FieldPath)
	case src.ResourceFieldRef != nil:
		return "", nil
	}
	return "", errors.New("unsupported valueFrom")
}

func (k *kubelet) envFromSource(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.SecretRef != nil:
		var s corev1.Secret
		err := k.api.Get(ctx, types.NamespacedName{Namespace: ns, Name: from.SecretRef.Name}, &s)
		if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
			return nil, nil
		}
		return bytesToStrings(s.Data), err
	case from.ConfigMapRef != nil:
		var cm corev1.ConfigMap
		err := k.api.Get(ctx, types.NamespacedName{Namespace: ns, Name: from.ConfigMapRef.Name}, &cm)
		if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
			return nil, nil
		}
		return cm.Data, err
	}
	return nil, nil
}

func keyOf(getErr error, data map[string]string, key string, optional *bool) (string, error) {
	opt := optional != nil && *optional
	if getErr != nil {
		if apierrors.IsNotFound(getErr) && opt {
			return "", nil
		}
		return "", getErr
	}
	v, ok := data[key]
	if !ok && !opt {
		return "", fmt.Errorf("key %q not found", key)
	}
	return v, nil
}

func bytesToStrings(in map[string][]byte) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = string(v)
	}
	return out
}

// shutdown terminates every pod and waits until all are gone.
func (k *kubelet) shutdown() {
	k.mu.Lock()
	var all []*pod
	for _, pods := range k.deps {
		for _, p := range pods {
			k.terminate(p)
			all = append(all, p)
		}
	}
	k.mu.Unlock()
	for _, p := range all {
		<-p.done
	}
}

// pods lists the pods, sorted by Deployment and name.
func (k *kubelet) pods() []PodInfo {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []PodInfo
	for key, pods := range k.deps {
		for _, p := range pods {
			addr, _ := p.metricsAddr.Load().(string)
			bin, _ := p.bin.Load().(string)
			out = append(out, PodInfo{
				Namespace: key.Namespace, Deployment: key.Name, Name: p.name, PID: int(p.pid.Load()), AppPID: int(p.appPID.Load()), MetricsAddr: addr, Bin: bin,
				Ready: p.ready.Load(), Terminating: p.terminating.Load(), Restarts: int(p.restarts.Load()),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace+"/"+out[i].Deployment != out[j].Namespace+"/"+out[j].Deployment {
			return out[i].Namespace+"/"+out[i].Deployment < out[j].Namespace+"/"+out[j].Deployment
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// signalPod sends sig to the named pod's process group.
func (k *kubelet) signalPod(namespace, name string, sig syscall.Signal) error {
	for _, p := range k.pods() {
		if p.Namespace == namespace && p.Name == name {
			if p.PID == 0 {
				return fmt.Errorf("pod %s/%s has no running process", namespace, name)
			}
			return syscall.Kill(-p.PID, sig)
		}
	}
	return fmt.Errorf("pod %s/%s not found", namespace, name)
}

func templateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// randomSuffix is a five-character pod name suffix like the ReplicaSet
// controller's (consonants and digits only, so no words appear).
func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
