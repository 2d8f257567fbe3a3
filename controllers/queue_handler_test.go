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

// A template the delivery sidecar cannot run beside is named field by field:
// a container port the sidecar binds, hostNetwork, no app container.
func TestHandlerTemplateErrors(t *testing.T) {
	queue := func(mod func(*corev1.PodSpec)) *dtqv1alpha1.Queue {
		q := testutil.MakeQueue("q", "ns").Obj()
		q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "app", Image: "py:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}}
		q.Spec.Handler = &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8000}}
		if mod != nil {
			mod(&q.Spec.WorkerTemplate.Spec)
		}
		return q
	}
	for name, tc := range map[string]struct {
		queue *dtqv1alpha1.Queue
		want  []string
	}{
		"fine": {queue: queue(nil)},
		"no handler: not checked": {queue: func() *dtqv1alpha1.Queue {
			q := queue(func(ps *corev1.PodSpec) { ps.HostNetwork = true })
			q.Spec.Handler = nil
			return q
		}()},
		"no app container": {
			queue: queue(func(ps *corev1.PodSpec) { ps.Containers = nil }),
			want:  []string{"spec.handler.http delivers to the first container of spec.workerTemplate.spec.containers, and it has none: add the app container"},
		},
		"the app's metrics on 8080": {
			queue: queue(func(ps *corev1.PodSpec) {
				ps.Containers[0].Ports = append(ps.Containers[0].Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 8080})
			}),
			want: []string{"spec.workerTemplate.spec.containers[0].ports[1].containerPort is 8080: the delivery sidecar binds 8080 (metrics) and 8081 (its API) in the pod; use another port"},
		},
		"another container and an init container on 8081, hostNetwork": {
			queue: queue(func(ps *corev1.PodSpec) {
				ps.HostNetwork = true
				ps.Containers = append(ps.Containers, corev1.Container{Name: "proxy", Ports: []corev1.ContainerPort{{ContainerPort: 8081}}})
				ps.InitContainers = []corev1.Container{{Name: "side", Ports: []corev1.ContainerPort{{ContainerPort: 8081}}}}
			}),
			want: []string{
				"spec.workerTemplate.spec.containers[1].ports[0].containerPort is 8081: the delivery sidecar binds 8080 (metrics) and 8081 (its API) in the pod; use another port",
				"spec.workerTemplate.spec.hostNetwork is true: the delivery sidecar would bind ports 8080 and 8081 of the node, so two workers on one node conflict; HTTP-handler workers need the pod's own network",
				"spec.workerTemplate.spec.initContainers[0].ports[0].containerPort is 8081: the delivery sidecar binds 8080 (metrics) and 8081 (its API) in the pod; use another port",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, handlerTemplateErrors(tc.queue)); diff != "" {
				t.Errorf("handlerTemplateErrors (-want +got):\n%s", diff)
			}
		})
	}
}
