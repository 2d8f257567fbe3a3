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
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/delivery"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/worker"
)

var _ = Describe("Queue with an HTTP handler", func() {
	// The user's scenario: an app whose readiness path answers 501 leaves
	// every task queued; the Queue says why, not only WorkersStarting.
	It("reports AppNotReady while the app's readiness check fails, and drops HandlerReachable with spec.handler", func() {
		ns := newNamespace("handler")
		var ready atomic.Bool
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" && !ready.Load() {
				w.WriteHeader(http.StatusNotImplemented)
			}
		}), ReadHeaderTimeout: time.Second}
		go func() { _ = app.Serve(ln) }()
		DeferCleanup(app.Close)
		port := ln.Addr().(*net.TCPAddr).Port

		q := testutil.MakeQueue("web", ns).Obj()
		q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1",
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromInt(port)}}}}}
		q.Spec.Handler = &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: int32(port), Path: "/tasks"}}
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		ref := broker.QueueRef{Namespace: ns, Name: "web"}
		Eventually(func() error { _, err := engine.QueueConfig(ctx, ref); return err }, timeout, poll).Should(Succeed())

		By("running the delivery sidecar of one worker pod, in-process")
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			base := "http://127.0.0.1:" + strconv.Itoa(port)
			Expect(delivery.Run(sctx, worker.Config{Redis: rdb, Namespace: ns, Queue: "web", Concurrency: 1,
				VisibilityTimeout: 10 * time.Second, HeartbeatInterval: 500 * time.Millisecond, DrainTimeout: time.Second,
				WorkerID: "web-pod-1", Logger: slog.New(slog.DiscardHandler)},
				delivery.Config{HandlerURL: base + "/tasks", ReadyURL: base + "/healthz"})).To(Succeed())
		}()
		DeferCleanup(func() { stop(); <-done })

		Eventually(queueCondition(q, dtqv1alpha1.QueueHandlerReachable), timeout, poll).Should(And(
			HaveField("Status", BeEquivalentTo("False")),
			HaveField("Reason", dtqv1alpha1.ReasonAppNotReady),
			HaveField("Message", And(ContainSubstring("web-pod-1"),
				ContainSubstring("GET http://127.0.0.1:"+strconv.Itoa(port)+"/healthz, does not answer 2xx or 3xx")))))

		By("the app turning ready")
		ready.Store(true)
		Eventually(queueCondition(q, dtqv1alpha1.QueueHandlerReachable), timeout, poll).Should(And(
			HaveField("Status", BeEquivalentTo("True")), HaveField("Reason", dtqv1alpha1.ReasonHandlerAnswering)))

		By("removing spec.handler")
		patchQueue(q, func(q *dtqv1alpha1.Queue) { q.Spec.Handler = nil })
		Eventually(func(g Gomega) *metav1.Condition {
			return meta.FindStatusCondition(getQueue(q)(g).Status.Conditions, dtqv1alpha1.QueueHandlerReachable)
		}, timeout, poll).Should(BeNil())
	})

	It("refuses a template whose container declares a port of the sidecar, naming the field", func() {
		ns := newNamespace("handler")
		q := testutil.MakeQueue("web", ns).Obj()
		q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}, {Name: "metrics", ContainerPort: 8080}}}}
		q.Spec.Handler = &dtqv1alpha1.QueueHandler{HTTP: &dtqv1alpha1.HTTPHandler{Port: 8000}}
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(queueCondition(q, dtqv1alpha1.QueueReady), timeout, poll).Should(And(
			HaveField("Status", BeEquivalentTo("False")),
			HaveField("Reason", dtqv1alpha1.ReasonInvalidConfig),
			HaveField("Message", ContainSubstring("spec.workerTemplate.spec.containers[0].ports[1].containerPort is 8080"))))
		Consistently(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-workers"}, &appsv1.Deployment{})
		}, time.Second, poll).Should(Satisfy(apierrors.IsNotFound), "workers were created from a template the sidecar cannot run beside")
	})
})
