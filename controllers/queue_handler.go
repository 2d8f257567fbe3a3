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

// Queues with spec.handler.http: the worker pod is the user's app container
// plus the delivery sidecar (the worker image in delivery mode, a native
// sidecar), the checks of the template such a pod needs, and the
// HandlerReachable condition from the sidecars' records.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/delivery"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// DeliveryContainerName is the delivery sidecar's container name.
const DeliveryContainerName = "dtq-delivery"

// httpHandler returns the Queue's HTTP handler, nil when it has none.
func httpHandler(q *dtqv1alpha1.Queue) *dtqv1alpha1.HTTPHandler {
	if q.Spec.Handler == nil {
		return nil
	}
	return q.Spec.Handler.HTTP
}

// addDeliverySidecar turns ps, whose first container is the app, into an
// HTTP-handler worker pod: the app gets the sidecar's URL and the queue's
// identity (no Redis credential), and the sidecar, an init container with
// restartPolicy Always, gets the worker SDK's environment and the handler's
// URL. The pod's concurrency cap is handler.http.concurrency, else the
// queue's.
func addDeliverySidecar(q *dtqv1alpha1.Queue, h *dtqv1alpha1.HTTPHandler, opts WorkerOptions, cred *redisCredential, ps *corev1.PodSpec, drain time.Duration) {
	app := &ps.Containers[0]
	sidecarURL := "http://127.0.0.1:" + strconv.Itoa(delivery.DefaultSidecarPort)
	app.Env = mergeEnv(app.Env, []corev1.EnvVar{
		{Name: worker.EnvQueueNamespace, Value: q.Namespace},
		{Name: worker.EnvQueueName, Value: q.Name},
		{Name: delivery.EnvSidecarURL, Value: sidecarURL},
	}, nil)

	env := workerEnv(q, opts, drain)
	if h.Concurrency != nil {
		for i := range env {
			if env[i].Name == worker.EnvConcurrency {
				env[i].Value = strconv.Itoa(int(*h.Concurrency))
			}
		}
	}
	path := h.Path
	if path == "" {
		path = "/"
	}
	env = append(env,
		corev1.EnvVar{Name: delivery.EnvHandlerURL, Value: "http://127.0.0.1:" + strconv.Itoa(int(h.Port)) + path},
		corev1.EnvVar{Name: delivery.EnvSidecarAddr, Value: "127.0.0.1:" + strconv.Itoa(delivery.DefaultSidecarPort)})
	if u := readinessURL(app); u != "" {
		env = append(env, corev1.EnvVar{Name: delivery.EnvHandlerReadyURL, Value: u})
	}
	sidecar := corev1.Container{
		Name:          DeliveryContainerName,
		Image:         opts.Image,
		Args:          []string{"delivery"},
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Env:           mergeEnv(nil, reservedEnv(q, cred), env),
		Ports:         []corev1.ContainerPort{{Name: "metrics", ContainerPort: workerMetricsPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(workerMetricsPort)}},
			PeriodSeconds: 5,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(workerMetricsPort)}},
			PeriodSeconds:    10,
			FailureThreshold: 3,
		},
	}
	ps.InitContainers = append(ps.InitContainers, sidecar)
}

// handlerTemplateErrors says what in spec.workerTemplate a pod with the
// delivery sidecar cannot run. The CRD cannot say it: workerTemplate has no
// schema for CEL to read. The sidecar binds workerMetricsPort on every
// address and DefaultSidecarPort on loopback, in the network namespace all
// the pod's containers share: a container that declares either port would
// fail to bind it and crash-loop, and with hostNetwork they are the node's
// ports, so two workers on one node conflict.
func handlerTemplateErrors(q *dtqv1alpha1.Queue) []string {
	if httpHandler(q) == nil {
		return nil
	}
	ps := q.Spec.WorkerTemplate.Spec
	if len(ps.Containers) == 0 {
		return []string{"spec.handler.http delivers to the first container of spec.workerTemplate.spec.containers, and it has none: add the app container"}
	}
	var errs []string
	if ps.HostNetwork {
		errs = append(errs, fmt.Sprintf("spec.workerTemplate.spec.hostNetwork is true: the delivery sidecar would bind ports %d and %d of the node, "+
			"so two workers on one node conflict; HTTP-handler workers need the pod's own network", workerMetricsPort, delivery.DefaultSidecarPort))
	}
	for field, cs := range map[string][]corev1.Container{"containers": ps.Containers, "initContainers": ps.InitContainers} {
		for i, c := range cs {
			for j, p := range c.Ports {
				if p.ContainerPort == workerMetricsPort || p.ContainerPort == delivery.DefaultSidecarPort {
					errs = append(errs, fmt.Sprintf("spec.workerTemplate.spec.%s[%d].ports[%d].containerPort is %d: the delivery sidecar binds %d (metrics) and %d (its API) in the pod; use another port",
						field, i, j, p.ContainerPort, workerMetricsPort, delivery.DefaultSidecarPort))
				}
			}
		}
	}
	slices.Sort(errs)
	return errs
}

// readinessURL is the app container's HTTP readiness probe as a loopback
// URL, "" when it has none the sidecar can call (TCP, exec, HTTPS or a port
// name it does not declare): the sidecar then connects to the handler's port.
func readinessURL(c *corev1.Container) string {
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		return ""
	}
	g := c.ReadinessProbe.HTTPGet
	if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
		return ""
	}
	port := int(g.Port.IntVal)
	if g.Port.Type == intstr.String {
		port = 0
		for _, p := range c.Ports {
			if p.Name == g.Port.StrVal {
				port = int(p.ContainerPort)
			}
		}
	}
	if port == 0 {
		return ""
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return "http://127.0.0.1:" + strconv.Itoa(port) + path
}

// setHandlerCondition sets HandlerReachable on a Queue with an HTTP handler
// from its workers' records, and removes it from a Queue without one. It is
// False while a worker holds delivery: HandlerNotFound while the app answers
// 404 without a verdict (a wrong route, which every pod shares), else
// AppNotReady while the app has not passed its readiness check.
func (r *QueueReconciler) setHandlerCondition(ctx context.Context, st *dtqv1alpha1.QueueStatus, q *dtqv1alpha1.Queue) error {
	h := httpHandler(q)
	if h == nil {
		meta.RemoveStatusCondition(&st.Conditions, dtqv1alpha1.QueueHandlerReachable)
		return nil
	}
	ws, err := r.Engine.Workers(ctx, queueRefOf(q))
	if err != nil {
		return fmt.Errorf("read workers: %w", err)
	}
	held := map[string][]string{} // hold status -> worker IDs
	for _, w := range ws {
		held[w.Status] = append(held[w.Status], w.ID)
	}
	if ids := held[delivery.StatusHandlerNotFound]; len(ids) > 0 {
		r.setCondition(st, q, dtqv1alpha1.QueueHandlerReachable, metav1.ConditionFalse, dtqv1alpha1.ReasonHandlerNotFound,
			fmt.Sprintf("Delivery paused on %d worker(s) (%s): the app answers 404 to tasks at 127.0.0.1:%d%s; check spec.handler.http.path and port",
				len(ids), strings.Join(ids, ", "), h.Port, h.Path))
		return nil
	}
	if ids := held[delivery.StatusAppNotReady]; len(ids) > 0 {
		r.setCondition(st, q, dtqv1alpha1.QueueHandlerReachable, metav1.ConditionFalse, dtqv1alpha1.ReasonAppNotReady,
			fmt.Sprintf("Delivery held on %d of %d worker(s) (%s): the app is not ready: %s; tasks wait in the queue until it is (the %s container's log says more)",
				len(ids), len(ws), strings.Join(ids, ", "), readinessCheck(q, h), DeliveryContainerName))
		return nil
	}
	r.setCondition(st, q, dtqv1alpha1.QueueHandlerReachable, metav1.ConditionTrue, dtqv1alpha1.ReasonHandlerAnswering,
		"No worker holds delivery")
	return nil
}

// readinessCheck says which check the sidecar waits on to deliver.
func readinessCheck(q *dtqv1alpha1.Queue, h *dtqv1alpha1.HTTPHandler) string {
	if u := readinessURL(&q.Spec.WorkerTemplate.Spec.Containers[0]); u != "" {
		return "its readinessProbe, GET " + u + ", does not answer 2xx or 3xx"
	}
	return fmt.Sprintf("nothing accepts connections on 127.0.0.1:%d (spec.handler.http.port)", h.Port)
}
