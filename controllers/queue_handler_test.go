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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
)

func TestHTTPHandlerPod(t *testing.T) {
	opts := WorkerOptions{Image: "dtq-worker:1", RedisURL: "redis://r:6379/0"}
	cred := &redisCredential{Secret: RedisUserSecret, Digest: "d"}
	app := func(mod func(*corev1.Container)) *dtqv1alpha1.Queue {
		q := testutil.MakeQueue("q", "ns").Obj()
		c := corev1.Container{Name: "app", Image: "py:1", Command: []string{"python3", "handler.py"},
			Env: []corev1.EnvVar{{Name: "GREETING", Value: "hi"}, {Name: "DTQ_QUEUE_NAME", Value: "other"}}}
		if mod != nil {
			mod(&c)
		}
		q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{c}
		q.Spec.Handler = &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8000, Path: "/tasks"}}
		return q
	}
	appEnv := []corev1.EnvVar{
		{Name: "GREETING", Value: "hi"},
		{Name: "DTQ_QUEUE_NAME", Value: "q"},
		{Name: "DTQ_QUEUE_NAMESPACE", Value: "ns"},
		{Name: "DTQ_SIDECAR_URL", Value: "http://127.0.0.1:8081"},
	}
	for name, tc := range map[string]struct {
		queue        *dtqv1alpha1.Queue
		cred         *redisCredential
		concurrency  string
		readyURL     string
		appReadiness *corev1.Probe
	}{
		"plain": {queue: app(nil), concurrency: "4"},
		"handler concurrency caps the pod": {
			queue: func() *dtqv1alpha1.Queue {
				q := app(nil)
				q.Spec.Handler.HTTP.Concurrency = ptr.To[int32](2)
				return q
			}(),
			concurrency: "2",
		},
		"the app's HTTP readiness probe gates delivery, by port name": {
			queue: app(func(c *corev1.Container) {
				c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}
				c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "healthz", Port: intstr.FromString("http")}}}
			}),
			concurrency: "4", readyURL: "http://127.0.0.1:8000/healthz",
			appReadiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "healthz", Port: intstr.FromString("http")}}},
		},
		"isolated: the Redis user goes to the sidecar only": {queue: app(nil), cred: cred, concurrency: "4"},
	} {
		t.Run(name, func(t *testing.T) {
			d := desiredWorkerDeployment(tc.queue, opts, tc.cred)
			ps := d.Spec.Template.Spec
			if len(ps.Containers) != 1 || len(ps.InitContainers) != 1 {
				t.Fatalf("containers %d, init containers %d; want 1 and 1", len(ps.Containers), len(ps.InitContainers))
			}
			a, s := ps.Containers[0], ps.InitContainers[0]
			if diff := cmp.Diff(map[string]any{"image": "py:1", "env": appEnv, "readiness": tc.appReadiness, "ports": len(a.Ports) > 0 && tc.readyURL == ""},
				map[string]any{"image": a.Image, "env": a.Env, "readiness": a.ReadinessProbe, "ports": len(a.Ports) > 0 && tc.readyURL == ""}); diff != "" {
				t.Errorf("app container (-want +got):\n%s", diff)
			}
			env := map[string]string{}
			var secretEnv []string
			for _, e := range s.Env {
				env[e.Name] = e.Value
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					secretEnv = append(secretEnv, e.Name)
				}
			}
			want := map[string]any{
				"name": DeliveryContainerName, "image": "dtq-worker:1", "args": []string{"delivery"},
				"restartPolicy": ptr.To(corev1.ContainerRestartPolicyAlways), "handlerURL": "http://127.0.0.1:8000/tasks",
				"readyURL": tc.readyURL, "concurrency": tc.concurrency, "queue": "q", "namespace": "ns",
				"redisURL": "redis://r:6379/0", "readyz": "/readyz", "secure": restrictedContainerSecurityContext(),
				"secretEnv": []string(nil),
			}
			if tc.cred != nil {
				want["secretEnv"] = []string{"DTQ_REDIS_USERNAME", "DTQ_REDIS_PASSWORD"}
			}
			got := map[string]any{
				"name": s.Name, "image": s.Image, "args": s.Args, "restartPolicy": s.RestartPolicy,
				"handlerURL": env["DTQ_HANDLER_URL"], "readyURL": env["DTQ_HANDLER_READY_URL"],
				"concurrency": env["DTQ_WORKER_CONCURRENCY"], "queue": env["DTQ_QUEUE_NAME"], "namespace": env["DTQ_QUEUE_NAMESPACE"],
				"redisURL": env["DTQ_REDIS_URL"], "readyz": s.ReadinessProbe.HTTPGet.Path, "secure": s.SecurityContext,
				"secretEnv": secretEnv,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sidecar (-want +got):\n%s", diff)
			}
		})
	}
}
