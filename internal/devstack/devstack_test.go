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

package devstack_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
)

// binaries returns a directory with the manager and worker binaries: built
// from this checkout into a temporary directory, or $DTQ_DEV_BIN_DIR when set.
func binaries(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("DTQ_DEV_BIN_DIR"); dir != "" {
		return dir
	}
	dir := t.TempDir()
	if err := devstack.Build(t.Context(), envtestutil.RepoRoot(), dir, "./cmd/manager", "./cmd/worker"); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startStack(t *testing.T, opts ...func(*devstack.Options)) *devstack.Stack {
	t.Helper()
	bin := binaries(t)
	root := envtestutil.RepoRoot()
	o := devstack.Options{
		Dir:        filepath.Join(t.TempDir(), "dev"),
		AssetsDir:  envtestutil.AssetsDir(),
		ManagerBin: filepath.Join(bin, "manager"),
		WorkerBin:  filepath.Join(bin, "worker"),
		CRDDir:     filepath.Join(root, "config", "crd", "bases"),
	}
	for _, f := range opts {
		f(&o)
	}
	s, err := devstack.Start(t.Context(), o)
	if err != nil {
		t.Fatalf("start the dev stack: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

func workerDeployment(name, queue string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{devstack.QueueLabel: queue}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					Containers: []corev1.Container{{
						Name:  "worker",
						Image: "example.com/ignored:latest",
						Env: []corev1.EnvVar{
							{Name: "DTQ_REDIS_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: "dtq-redis"}, Key: "url"}}},
							{Name: "DTQ_QUEUE_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							{Name: "DTQ_QUEUE_NAME", Value: queue},
							{Name: "DTQ_DRAIN_TIMEOUT", Value: "2s"},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "DTQ_METRICS_ADDR", Value: ":8080"},
						},
					}},
				},
			},
		},
	}
}

// TestStandInKubelet drives a hand-made worker Deployment through scale up,
// a crash, scale down and deletion, and checks that Stop leaves no process.
func TestStandInKubelet(t *testing.T) {
	s := startStack(t)
	ctx := t.Context()
	c := s.Client

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dtq-redis", Namespace: "default"},
		StringData: map[string]string{"url": s.RedisURL()}}
	must(t, c.Create(ctx, secret))
	d := workerDeployment("manual-workers", "manual", 2)
	must(t, c.Create(ctx, d))

	pods := waitPods(t, s, d, 2)
	var pids []int
	for _, p := range pods {
		pids = append(pids, p.PID)
		env := environ(t, p.PID)
		for _, want := range []string{"POD_NAME=" + p.Name, "DTQ_REDIS_URL=" + s.RedisURL(), "DTQ_QUEUE_NAMESPACE=default", "DTQ_QUEUE_NAME=manual"} {
			if !env[want] {
				t.Errorf("pod %s: env lacks %s", p.Name, want)
			}
		}
		if env["DTQ_METRICS_ADDR=:8080"] {
			t.Errorf("pod %s: DTQ_METRICS_ADDR was not rewritten to a free port", p.Name)
		}
		if !strings.HasPrefix(p.Name, "manual-workers-") || len(p.Name) != len("manual-workers-")+5 {
			t.Errorf("pod name %q, want manual-workers-<5 random>", p.Name)
		}
	}

	// A crash: the process is restarted in the same pod.
	must(t, s.SignalPod("default", pods[0].Name, syscall.SIGKILL))
	eventually(t, 30*time.Second, func() error {
		for _, p := range s.Pods() {
			if p.Name == pods[0].Name && p.Restarts >= 1 && p.Ready && p.PID != pods[0].PID {
				return nil
			}
		}
		return fmt.Errorf("pod %s not restarted: %+v", pods[0].Name, s.Pods())
	})
	waitStatus(t, s, d, 2)

	scale(t, s, d, 1)
	waitPods(t, s, d, 1)
	waitStatus(t, s, d, 1)
	scale(t, s, d, 0)
	waitPods(t, s, d, 0)
	waitStatus(t, s, d, 0)
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("worker pid %d still runs after scale to 0", pid)
		}
	}

	// Deleting the Deployment stops its pods.
	scale(t, s, d, 1)
	waitPods(t, s, d, 1)
	must(t, c.Delete(ctx, d))
	waitPods(t, s, d, 0)

	// Scale up once more so Stop has workers to stop.
	d2 := workerDeployment("more-workers", "more", 2)
	must(t, c.Create(ctx, d2))
	waitPods(t, s, d2, 2)
	must(t, s.Stop())
	left, err := devstack.Leftovers(s.Dir)
	must(t, err)
	if len(left) > 0 {
		t.Fatalf("processes survived Stop: %+v", left)
	}
}

// TestRestarts restarts the manager and Redis (one redis-server, or every
// master of a cluster, then one master of it) and checks the data survives.
func TestRestarts(t *testing.T) {
	for name, cluster := range map[string]bool{"single": false, "cluster": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// With everysec a SIGKILL may lose the last writes (Redis postpones
			// an AOF write while a background fsync runs); always loses none.
			s := startStack(t, func(o *devstack.Options) { o.RedisCluster, o.RedisFsync = cluster, "always" })
			ctx := t.Context()
			before := s.ManagerPID()
			must(t, s.RestartManager(ctx, syscall.SIGKILL))
			if s.ManagerPID() == before || s.ManagerPID() == 0 {
				t.Fatalf("manager pid %d after restart, was %d", s.ManagerPID(), before)
			}
			must(t, s.RestartManager(ctx, syscall.SIGTERM))

			keys := []string{"a", "b", "c", "d", "e", "f"} // on every master of a cluster
			rdb := newRedis(t, s.RedisURL())
			for _, k := range keys {
				must(t, rdb.Set(ctx, k, k, 0).Err())
			}
			must(t, rdb.Close())
			must(t, s.RestartRedis(ctx, syscall.SIGKILL))
			rdb = newRedis(t, s.RedisURL())
			defer rdb.Close()
			for _, k := range keys {
				if got, err := rdb.Get(ctx, k).Result(); err != nil || got != k {
					t.Fatalf("after a Redis restart: GET %s = %q, %v; want %s (AOF)", k, got, err, k)
				}
			}
			if !cluster {
				return
			}
			// One master down past the node timeout: the others serve their
			// keys (cluster-require-full-coverage no), and its own come back.
			back := make(chan error, 1)
			go func() { back <- s.RestartRedisNode(ctx, 0, syscall.SIGKILL, 15*time.Second) }()
			killed := time.Now()
			live := redis.NewClient(&redis.Options{Addr: s.RedisAddrs()[1]})
			defer live.Close()
			eventually(t, 12*time.Second, func() error { // the others mark it failed
				nodes, err := live.ClusterNodes(ctx).Result()
				if err != nil {
					return err
				}
				for _, l := range strings.Split(nodes, "\n") {
					if f := strings.Fields(l); len(f) > 2 && strings.HasPrefix(f[1], s.RedisAddrs()[0]+"@") && strings.Contains(f[2], "fail") && !strings.Contains(f[2], "fail?") {
						return nil
					}
				}
				return fmt.Errorf("master 0 not marked failed yet:\n%s", nodes)
			})
			t.Logf("master 0 marked failed %v after its kill", time.Since(killed).Round(time.Millisecond))
			served := 0
			for _, k := range keys {
				if got, err := rdb.Get(ctx, k).Result(); err == nil && got == k {
					served++
				}
			}
			must(t, <-back)
			if served == 0 || served == len(keys) {
				t.Errorf("with one of 3 masters down, %d of %d keys were served, want those of the other two", served, len(keys))
			}
			for _, k := range keys {
				if got, err := rdb.Get(ctx, k).Result(); err != nil || got != k {
					t.Fatalf("after one master's restart: GET %s = %q, %v; want %s (AOF)", k, got, err, k)
				}
			}
		})
	}
}

func scale(t *testing.T, s *devstack.Stack, d *appsv1.Deployment, n int32) {
	t.Helper()
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To(n)
	must(t, s.Client.Patch(t.Context(), d, patch))
}

// waitPods waits until exactly n running, ready, non-terminating pods of d
// exist and no terminating one is left.
func waitPods(t *testing.T, s *devstack.Stack, d *appsv1.Deployment, n int) []devstack.PodInfo {
	t.Helper()
	var got []devstack.PodInfo
	eventually(t, 60*time.Second, func() error {
		got = got[:0]
		for _, p := range s.Pods() {
			if p.Deployment != d.Name {
				continue
			}
			if p.Terminating || !p.Ready || p.PID == 0 {
				return fmt.Errorf("pod %+v not settled", p)
			}
			got = append(got, p)
		}
		if len(got) != n {
			return fmt.Errorf("%d pods, want %d", len(got), n)
		}
		return nil
	})
	return got
}

func waitStatus(t *testing.T, s *devstack.Stack, d *appsv1.Deployment, n int32) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		var got appsv1.Deployment
		if err := s.Client.Get(t.Context(), client.ObjectKeyFromObject(d), &got); err != nil {
			return err
		}
		st := got.Status
		if st.ObservedGeneration != got.Generation || st.Replicas != n || st.ReadyReplicas != n ||
			st.AvailableReplicas != n || st.UpdatedReplicas != n {
			return fmt.Errorf("status %+v at generation %d, want %d replicas", st, got.Generation, n)
		}
		return nil
	})
}

func environ(t *testing.T, pid int) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	must(t, err)
	env := map[string]bool{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		env[string(kv)] = true
	}
	return env
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		if errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
