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
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/demo"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/worker"
)

func getRedisUserSecret(ns string) func(Gomega) *corev1.Secret {
	return func(g Gomega) *corev1.Secret {
		s := &corev1.Secret{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: RedisUserSecret}, s)).To(Succeed())
		g.Expect(s.Data).To(HaveKey(corev1.BasicAuthPasswordKey))
		return s
	}
}

// redisAs connects to the suite's Redis with the credential in a Secret.
func redisAs(s *corev1.Secret, password string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, Username: string(s.Data[corev1.BasicAuthUsernameKey]),
		Password: password, MaxRetries: -1})
	DeferCleanup(c.Close)
	return c
}

// startWorkerWith plays a worker pod of ns/queue that reaches Redis with the
// URL and credential of env, as the operator gives them to pods, and runs the
// reference worker's demo handlers.
func startWorkerWith(ns, queue string, env map[string]string) func() {
	conn := redisconn.Config{URL: env[redisconn.EnvURL], Username: env[redisconn.EnvUsername], Password: env[redisconn.EnvPassword]}
	c, err := conn.Client()
	Expect(err).NotTo(HaveOccurred())
	mux := worker.NewMux()
	demo.Register(mux, c)
	srv, err := worker.NewServer(worker.Config{
		Redis: c, Namespace: ns, Queue: queue, Concurrency: 4,
		VisibilityTimeout: 10 * time.Second, HeartbeatInterval: time.Second, DrainTimeout: 2 * time.Second,
		WorkerID: fmt.Sprintf("acl-worker-%d", workerSeq.Add(1)), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, mux)
	Expect(err).NotTo(HaveOccurred())
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(srv.Run(wctx)).To(Succeed())
	}()
	return func() { stop(); <-done; _ = c.Close() }
}

// workerEnvOf resolves the first container's env of a worker Deployment as a
// kubelet would (values and secretKeyRefs).
func workerEnvOf(ns, deployment string) map[string]string {
	env := map[string]string{}
	for _, e := range getDeployment(ns, deployment)(Default).Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			s := &corev1.Secret{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: e.ValueFrom.SecretKeyRef.Name}, s)).To(Succeed())
			env[e.Name] = string(s.Data[e.ValueFrom.SecretKeyRef.Key])
		}
	}
	return env
}

var _ = Describe("Per-namespace Redis users", func() {
	It("gives a namespace's workers a Redis user of their own: its tasks run, other namespaces and the server are out of reach", func() {
		nsA, nsB := newNamespace("tenant-a"), newNamespace("tenant-b")
		qa, qb := testutil.MakeQueue("q", nsA).Obj(), testutil.MakeQueue("q", nsB).Obj()
		Expect(k8sClient.Create(ctx, qa)).To(Succeed())
		Expect(k8sClient.Create(ctx, qb)).To(Succeed())

		sec := getRedisUserSecret(nsA)
		Eventually(sec, timeout, poll).ShouldNot(BeNil())
		Expect(sec(Default).OwnerReferences).To(ContainElement(And(HaveField("Kind", "Queue"), HaveField("UID", getQueue(qa)(Default).UID))))
		Eventually(getDeployment(nsA, "q-workers"), timeout, poll).ShouldNot(BeNil())
		Eventually(queueCondition(qa, dtqv1alpha1.QueueRedisIsolated), timeout, poll).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", dtqv1alpha1.ReasonNamespaceUser)))

		By("keeping the password out of the Deployment spec")
		secret := sec(Default)
		password := string(secret.Data[corev1.BasicAuthPasswordKey])
		spec, err := json.Marshal(getDeployment(nsA, "q-workers")(Default).Spec)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(spec)).NotTo(ContainSubstring(password))
		env := workerEnvOf(nsA, "q-workers")
		Expect(env).To(HaveKeyWithValue(redisconn.EnvUsername, broker.NamespaceUser(nsA)))
		Expect(env).To(HaveKeyWithValue(redisconn.EnvPassword, password))

		By("running namespace A's tasks as A's user, IdempotentOperation and the demo counter included")
		DeferCleanup(startWorkerWith(nsA, "q", env))
		counter := testutil.MakeTask("count-once", nsA).Queue("q").Type(demo.Counter).Key("once").Payload(map[string]any{"name": "visits"}).Obj()
		echo := testutil.MakeTask("echo", nsA).Queue("q").Type(demo.Echo).Payload(map[string]any{"hi": 1}).Obj()
		Expect(k8sClient.Create(ctx, counter)).To(Succeed())
		Expect(k8sClient.Create(ctx, echo)).To(Succeed())
		Eventually(getTask(counter), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		Eventually(getTask(echo), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))
		Expect(rdb.Get(ctx, demo.CounterKey(nsA, "visits")).Int()).To(Equal(1))

		By("refusing A's user namespace B's keys and the server-wide commands")
		asA := redisAs(secret, password)
		bKeys := broker.KeyPrefix(broker.QueueRef{Namespace: nsB, Name: "q"})
		for _, cmd := range [][]any{{"HGETALL", bKeys + "config"}, {"DEL", bKeys + "config"}, {"SET", worker.AppKeyPrefix(nsB) + "x", "1"},
			{"FLUSHALL"}, {"KEYS", "*"}, {"CONFIG", "GET", "*"}, {"ACL", "LIST"}} {
			Expect(asA.Do(ctx, cmd...).Err()).To(MatchError(ContainSubstring("NOPERM")), "%v", cmd)
		}
		Expect(rdb.Exists(ctx, bKeys+"config").Val()).To(Equal(int64(1)))

		By("deleting the user and the Secret with the namespace's last Queue")
		Expect(k8sClient.Delete(ctx, qa)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: nsA, Name: RedisUserSecret}, &corev1.Secret{}))
		}, timeout, poll).Should(BeTrue())
		Eventually(func() error { return redisAs(secret, password).Ping(ctx).Err() }, timeout, poll).
			Should(MatchError(Or(ContainSubstring("WRONGPASS"), ContainSubstring("invalid username-password"))))
	})

	It("rotates: a deleted Secret gets a new password, the old one stays valid for the grace period, and the workers roll", func() {
		ns := newNamespace("rotate")
		q := testutil.MakeQueue("q", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		old := getRedisUserSecret(ns)
		Eventually(old, timeout, poll).ShouldNot(BeNil())
		oldSecret := old(Default)
		oldPassword := string(oldSecret.Data[corev1.BasicAuthPasswordKey])
		Eventually(getDeployment(ns, "q-workers"), timeout, poll).ShouldNot(BeNil())
		oldDigest := getDeployment(ns, "q-workers")(Default).Spec.Template.Annotations[AnnotationRedisCredential]
		Expect(oldDigest).NotTo(BeEmpty())

		Expect(k8sClient.Delete(ctx, oldSecret)).To(Succeed())
		Eventually(func(g Gomega) {
			s := getRedisUserSecret(ns)(g)
			g.Expect(s.UID).NotTo(Equal(oldSecret.UID))
			g.Expect(s.Annotations).To(HaveKeyWithValue(AnnotationAcceptedHashes, broker.PasswordHash(oldPassword)))
		}, timeout, poll).Should(Succeed())
		newSecret := getRedisUserSecret(ns)(Default)
		newPassword := string(newSecret.Data[corev1.BasicAuthPasswordKey])
		Expect(newPassword).NotTo(Equal(oldPassword))
		Eventually(func(g Gomega) string {
			return getDeployment(ns, "q-workers")(g).Spec.Template.Annotations[AnnotationRedisCredential]
		}, timeout, poll).ShouldNot(Equal(oldDigest))
		for _, pw := range []string{oldPassword, newPassword} {
			Eventually(func() error { return redisAs(newSecret, pw).Ping(ctx).Err() }, timeout, poll).Should(Succeed())
		}
	})

	It("sets the user again when Redis loses it (a restart without an ACL file)", func() {
		ns := newNamespace("lost")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		sec := getRedisUserSecret(ns)
		Eventually(sec, timeout, poll).ShouldNot(BeNil())
		s := sec(Default)
		login := func() error { return redisAs(s, string(s.Data[corev1.BasicAuthPasswordKey])).Ping(ctx).Err() }
		Eventually(login, timeout, poll).Should(Succeed())
		Expect(rdb.Do(ctx, "ACL", "DELUSER", broker.NamespaceUser(ns)).Err()).To(Succeed())
		Expect(login()).NotTo(Succeed())
		Eventually(login, timeout, poll).Should(Succeed())
	})
})

var _ = Describe("A manager without Redis isolation", Serial, func() {
	It("warns on every Queue that its workers share one Redis identity", func() {
		stopManager()
		stopManager = startManagerWith(Options{})
		DeferCleanup(func() {
			stopManager()
			stopManager = startManager(Options{})
		})
		ns := newNamespace("shared")
		q := testutil.MakeQueue("q", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(queueCondition(q, dtqv1alpha1.QueueRedisIsolated), timeout, poll).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", dtqv1alpha1.ReasonIsolationDisabled)))
		Eventually(getDeployment(ns, "q-workers"), timeout, poll).ShouldNot(BeNil())
		env := getDeployment(ns, "q-workers")(Default).Spec.Template.Spec.Containers[0].Env
		Expect(env).NotTo(ContainElement(HaveField("Name", redisconn.EnvPassword)))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: RedisUserSecret}, &corev1.Secret{}))).To(BeTrue())
	})
})

var _ = Describe("The manager's cache", func() {
	It("holds only the Deployments and Secrets the operator manages", func() {
		ns := newNamespace("cache")
		theirs := someonesDeployment(ns, "app", nil)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-secret"}, StringData: map[string]string{"k": "v"}}
		Expect(k8sClient.Create(ctx, theirs)).To(Succeed())
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		q := testutil.MakeQueue("q", ns).Obj()
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Eventually(func() error {
			return managerCache.Get(ctx, client.ObjectKey{Namespace: ns, Name: "q-workers"}, &appsv1.Deployment{})
		}, timeout, poll).Should(Succeed())
		Expect(apierrors.IsNotFound(managerCache.Get(ctx, client.ObjectKeyFromObject(theirs), &appsv1.Deployment{}))).To(BeTrue())
		Expect(apierrors.IsNotFound(managerCache.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}))).To(BeTrue())
		Expect(managerCache.Get(ctx, client.ObjectKey{Namespace: ns, Name: RedisUserSecret}, &corev1.Secret{})).To(Succeed())
		cached := &dtqv1alpha1.Queue{}
		Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(q), cached)).To(Succeed())
		Expect(cached.ManagedFields).To(BeEmpty())
	})

	It("holds no large payload and no managedFields, and the payload still reaches the handler", func() {
		ns := newNamespace("payload")
		ref := broker.QueueRef{Namespace: ns, Name: "q"}
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("q", ns).Obj())).To(Succeed())
		big := strings.Repeat("x", 64<<10)
		payload := `{"blob":"` + big + `"}`
		t := testutil.MakeTask("big", ns).Queue("q").Type(demo.Echo).Payload(map[string]any{"blob": big}).Obj()
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		// Submitted with its payload (read from the API server, not the cache),
		// checked before it runs: a succeeded task's payload is dropped.
		Eventually(func(g Gomega) {
			info, err := engine.GetTask(ctx, ref, string(t.UID))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(info.Payload)).To(MatchJSON(payload))
		}, timeout, poll).Should(Succeed())
		DeferCleanup(startWorker(ns, "q"))
		Eventually(getTask(t), timeout, poll).Should(HaveField("Status.State", dtqv1alpha1.TaskSucceeded))

		cached := &dtqv1alpha1.Task{}
		Eventually(func(g Gomega) dtqv1alpha1.TaskState { // the cache may lag behind the status write
			g.Expect(managerCache.Get(ctx, client.ObjectKeyFromObject(t), cached)).To(Succeed())
			return cached.Status.State
		}, timeout, poll).Should(Equal(dtqv1alpha1.TaskSucceeded))
		Expect(cached.Spec.Payload).To(BeNil())
		Expect(cached.ManagedFields).To(BeEmpty())
		// The handler got it: echo's result is the payload, truncated to the
		// queue's result limit (a JSON string of its first bytes).
		info, err := engine.GetTask(ctx, ref, string(t.UID))
		Expect(err).NotTo(HaveOccurred())
		var head string
		Expect(json.Unmarshal(info.Result, &head)).To(Succeed())
		Expect(info.ResultTruncated).To(BeTrue())
		Expect(payload).To(HavePrefix(head))
		Expect(head).To(HaveLen(int(broker.DefaultQueueConfig().ResultMaxBytes)))
	})
})
