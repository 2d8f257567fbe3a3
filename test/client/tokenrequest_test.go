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

package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/dtq-dev/dtq/internal/httpapi"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/kubeauth"
)

// kubeauth.WithTokenRequest against a real API server (envtest): the tokens it
// requests are for the dtq API's audience, which an API with
// KubernetesAuth{Audiences: dtq-api} accepts and the Kubernetes API server
// itself does not; a ServiceAccount's kubeconfig requests tokens of itself;
// a user who is not a ServiceAccount gets ErrNotServiceAccount; a token the
// API refuses is dropped. (pkg/kubeauth's TestRequestedTokenRenewal: a
// token is held until 80% of its lifetime has passed.)
func TestWithTokenRequest(t *testing.T) {
	env := &envtest.Environment{BinaryAssetsDirectory: envtestutil.AssetsDir()}
	admin, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(admin)
	// ServiceAccount shop/checkout may submit; shop/self may also request
	// tokens of itself, and nothing else.
	for _, sa := range []string{"checkout", "self"} {
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(role *rbacv1.ClusterRole, sa string) {
		t.Helper()
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + sa},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: sa}}}
		if _, err := cs.RbacV1().RoleBindings("default").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "lister"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{httpapi.Group}, Resources: []string{"queues"}, Verbs: []string{"list"}}}}, "checkout")
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "self-token"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"},
			ResourceNames: []string{"self"}}}}, "self")
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "self-lister"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{httpapi.Group}, Resources: []string{"queues"}, Verbs: []string{"list"}}}}, "self")

	auth, err := httpapi.KubernetesAuth(admin, httpapi.AuthOptions{TokenTTL: time.Minute, AllowTTL: time.Minute, DenyTTL: time.Second,
		Audiences: []string{client.DefaultAudience}})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Options{Broker: engine, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t.Cleanup(api.Stop)
	listQueues := func(opts ...client.Option) error {
		t.Helper()
		c, err := client.New(srv.URL, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Queues(ctx, "default")
		return err
	}
	review := func(token string, audiences ...string) authenticationv1.TokenReviewStatus {
		t.Helper()
		tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status
	}

	// A named ServiceAccount, by the admin: its token is for dtq-api only.
	if err := listQueues(kubeauth.WithTokenRequest(admin, "default", "checkout", "")); err != nil {
		t.Fatalf("a requested token of default/checkout: %v", err)
	}
	src, err := kubeauth.TokenRequest(admin, "default", "checkout", "")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := review(tok, client.DefaultAudience); !st.Authenticated || st.User.Username != "system:serviceaccount:default:checkout" {
		t.Errorf("TokenReview for %s: %+v, want default/checkout", client.DefaultAudience, st)
	}
	if st := review(tok); st.Authenticated {
		t.Errorf("the Kubernetes API server accepts a token for %s: %+v", client.DefaultAudience, st)
	}
	// A token for the API server's own audience is 401 at the dtq API.
	kubeTok, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "checkout", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := listQueues(client.WithToken(kubeTok.Status.Token)); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("a token for the Kubernetes API server: %v, want UNAUTHORIZED", err)
	}
	other, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "checkout", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"other"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := listQueues(client.WithToken(other.Status.Token)); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("a token for audience other: %v, want UNAUTHORIZED", err)
	}

	// A ServiceAccount's own kubeconfig (its API-server token): tokens of itself.
	selfTok, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "self", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	self := &rest.Config{Host: admin.Host, BearerToken: selfTok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}}
	if err := listQueues(kubeauth.WithTokenRequest(self, "", "", client.DefaultAudience)); err != nil {
		t.Fatalf("a requested token of the kubeconfig's ServiceAccount: %v", err)
	}
	// It may not request another's.
	if err := listQueues(kubeauth.WithTokenRequest(self, "default", "checkout", "")); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("default/self requesting default/checkout's token: %v, want forbidden", err)
	}
	// envtest's admin has a client certificate: not a ServiceAccount.
	if err := listQueues(kubeauth.WithTokenRequest(admin, "", "", "")); !errors.Is(err, kubeauth.ErrNotServiceAccount) {
		t.Errorf("a client-certificate user: %v, want ErrNotServiceAccount", err)
	}

	// A token the API refuses (401) is dropped: the next request has a new one.
	var (
		mu   sync.Mutex
		sent []string
	)
	refuseFirst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Authorization"))
		n := len(sent)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"UNAUTHORIZED","message":"token revoked"}`))
			return
		}
		_, _ = w.Write([]byte(`{"queues":[]}`))
	}))
	t.Cleanup(refuseFirst.Close)
	c, err := client.New(refuseFirst.URL, kubeauth.WithTokenRequest(admin, "default", "checkout", ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Queues(ctx, "default"); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("first request: %v, want 401", err)
	}
	if _, err := c.Queues(ctx, "default"); err != nil {
		t.Fatalf("second request: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 || sent[0] == sent[1] {
		t.Errorf("after a 401 the client sent the same token again")
	}
}
