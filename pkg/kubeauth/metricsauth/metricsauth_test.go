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

package metricsauth_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/dtq-dev/dtq/pkg/kubeauth/metricsauth"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
	"github.com/dtq-dev/dtq/pkg/worker"
	"github.com/dtq-dev/dtq/pkg/worker/workermetrics"
)

// A worker Server with the Kubernetes middleware, against a real API server:
// /metrics answers 401 without a token, 403 to a service account not allowed
// to GET /metrics, 200 to one that is; the probes stay open. The envtest
// API server answers TokenReview and SubjectAccessReview like a cluster's.
func TestKubernetesGuardsMetricsOnly(t *testing.T) {
	env := &envtest.Environment{} // its binaries from KUBEBUILDER_ASSETS, as make test sets it
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: sa}}
		if err := cl.Create(ctx, acct); err != nil {
			t.Fatal(err)
		}
		tr := &authenticationv1.TokenRequest{}
		if err := cl.SubResource("token").Create(ctx, acct, tr); err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("prometheus"), token("stranger")
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "prometheus"}}},
	} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	mw, err := metricsauth.Kubernetes(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := worker.NewServer(worker.Config{
		Redis: redistest.Start(t).Client(), Namespace: "ns", Queue: "q", MetricsAddr: addr, Metrics: workermetrics.New(), MetricsMiddleware: mw,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, worker.NewMux())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done }) //nolint:errcheck // Run ends with the cancel

	get := func(path, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				return resp.StatusCode, string(b)
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		// A token TokenReview cannot parse is an authentication error:
		// controller-runtime's filter answers 500, and nothing is served.
		{"/metrics", "not-a-token", http.StatusInternalServerError},
		{"/metrics", stranger, http.StatusForbidden},
		{"/metrics", scraper, http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		code, body := get(tc.path, tc.token)
		if code != tc.want {
			t.Errorf("GET %s with token %.8q: %d, want %d (%s)", tc.path, tc.token, code, tc.want, body)
		}
		if code == http.StatusOK && tc.path == "/metrics" && !strings.Contains(body, "dtq_worker_tasks_in_flight") {
			t.Errorf("GET /metrics: no worker metrics in %q", body)
		}
	}
}
