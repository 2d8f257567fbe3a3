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
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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
)

// QueueLabel marks the worker Deployments the stand-in runs.
const QueueLabel = "dtq.dev/queue"

const (
	syncPeriod     = 500 * time.Millisecond
	probePeriod    = 250 * time.Millisecond
	maxBackoff     = 10 * time.Second
	stableRun      = 10 * time.Second
	defaultGrace   = 30 * time.Second
	metricsAddrEnv = "DTQ_METRICS_ADDR"
)

// kubelet is the local stand-in for a kubelet and the Deployment controller:
// for every Deployment labelled dtq.dev/queue it keeps spec.replicas local
// worker processes ("pods") running with the pod template's environment and
// writes the Deployment's status. The image is ignored: every pod runs the
// worker binary.
type kubelet struct {
	api       client.Client // uncached: secrets, config maps, status writes
	reader    client.Reader // the Deployment informer
	workerBin string
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
	metricsAddr atomic.Value  // string: host:port of the running process's /metrics
	stopCh      chan struct{} // closed to terminate
	done        chan struct{} // closed when the pod is gone
}

// PodInfo describes a worker process the stand-in runs.
type PodInfo struct {
	Namespace, Deployment, Name string
	PID                         int    // 0 while not running (restart backoff)
	MetricsAddr                 string // host:port serving the worker's /metrics, /healthz and /readyz
	Ready, Terminating          bool
	Restarts                    int
}

func newKubelet(api client.Client, reader client.Reader, workerBin, stackDir, logDir string, log *slog.Logger) *kubelet {
	return &kubelet{
		api: api, reader: reader, workerBin: workerBin, stackDir: stackDir, logDir: logDir, log: log,
		trigger: make(chan struct{}, 1),
		deps:    map[types.NamespacedName]map[string]*pod{},
	}
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

// runPod runs the pod's process and restarts it when it exits (restartPolicy
// Always) with exponential backoff, until the pod is terminated.
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
	logPath := filepath.Join(k.logDir, fmt.Sprintf("worker_%s_%s.log", p.deploy.Namespace, p.name))
	backoff := time.Second
	for {
		started := time.Now()
		proc, addr, err := k.startPod(p, logPath)
		if err == nil {
			p.pid.Store(int64(proc.pid()))
			p.metricsAddr.Store(addr)
			if stopped := k.superviseProcess(p, proc, "http://"+addr+"/healthz", grace); stopped {
				return
			}
			p.pid.Store(0)
			k.log.Warn("Worker pod exited; restarting", "pod", p.name, "exit", fmt.Sprint(proc.err),
				"backoff", backoff.String(), "log", logPath)
		} else {
			k.log.Warn("Worker pod cannot start; retrying", "pod", p.name, "error", err, "backoff", backoff.String())
		}
		if time.Since(started) > stableRun {
			backoff = time.Second
		}
		select {
		case <-p.stopCh:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
		p.restarts.Add(1)
	}
}

// superviseProcess probes the process until it exits (false) or the pod is
// terminated, in which case it stops the process and returns true.
func (k *kubelet) superviseProcess(p *pod, proc *child, url string, grace time.Duration) bool {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	t := time.NewTicker(probePeriod)
	defer t.Stop()
	for {
		select {
		case <-proc.done:
			p.ready.Store(false)
			k.poke()
			return false
		case <-p.stopCh:
			p.ready.Store(false)
			k.poke()
			if !proc.stop(grace) {
				k.log.Warn("Worker pod killed after its grace period", "pod", p.name, "grace", grace.String())
			}
			return true
		case <-t.C:
			ok, _ := probe(hc, url)
			if p.ready.Swap(ok) != ok {
				k.poke()
			}
		}
	}
}

// startPod resolves the first container's environment and starts the worker
// binary with it, serving /metrics and /healthz on the returned address.
func (k *kubelet) startPod(p *pod, logPath string) (*child, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, err := k.resolveEnv(ctx, p)
	if err != nil {
		return nil, "", err
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(k.workerBin)
	env = append(env, metricsAddrEnv+"="+addr)
	cmd.Env = env
	proc, err := startChild("worker "+p.name, k.stackDir, logPath, cmd)
	return proc, addr, err
}

// resolveEnv turns the first container's env and envFrom into KEY=value
// pairs, the way a kubelet would: secret and config map references are read
// from the API, field references name the local pod.
func (k *kubelet) resolveEnv(ctx context.Context, p *pod) ([]string, error) {
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
	if len(p.template.Spec.Containers) == 0 {
		return nil, errors.New("the pod template has no containers")
	}
	c := p.template.Spec.Containers[0]
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
			out = append(out, PodInfo{
				Namespace: key.Namespace, Deployment: key.Name, Name: p.name, PID: int(p.pid.Load()), MetricsAddr: addr,
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
