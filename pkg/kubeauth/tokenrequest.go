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

package kubeauth

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/dtq-dev/dtq/pkg/client"
)

// WithTokenRequest authenticates with tokens for audience
// (client.DefaultAudience when empty) that the client requests itself with
// the TokenRequest API of the Kubernetes API server of cfg, as `kubectl
// create token --audience` does: tokens of ServiceAccount
// namespace/serviceAccount, or, when both are empty, of the ServiceAccount
// cfg authenticates as (found with a SelfSubjectReview; any other user is
// ErrNotServiceAccount). cfg's user needs create on serviceaccounts/token of
// that ServiceAccount. Each token is asked for an hour and requested anew
// once 80% of its lifetime has passed or the API has answered 401 to it, on
// the first request that needs it. New returns the error of a wrong
// namespace/serviceAccount pair or of cfg.
func WithTokenRequest(cfg *rest.Config, namespace, serviceAccount, audience string) client.Option {
	src, err := TokenRequest(cfg, namespace, serviceAccount, audience)
	if err != nil {
		return client.WithTransport(func(http.RoundTripper) (http.RoundTripper, error) { return nil, err })
	}
	return client.WithTokenSource(src)
}

// TokenRequest returns WithTokenRequest's client.TokenSource.
func TokenRequest(cfg *rest.Config, namespace, serviceAccount, audience string) (client.TokenSource, error) {
	return newRequestedToken(cfg, namespace, serviceAccount, audience)
}

// requestTTL is the lifetime WithTokenRequest asks of each token (the API
// server may grant less).
const requestTTL = time.Hour

// requestedToken requests tokens of a ServiceAccount for an audience with
// the TokenRequest API and holds each until 80% of its lifetime has passed
// (as the kubelet renews projected tokens), or until the API refuses it.
type requestedToken struct {
	accounts corev1client.ServiceAccountsGetter
	reviews  authenticationv1client.SelfSubjectReviewsGetter
	audience string
	clock    clock.PassiveClock

	mu              sync.Mutex
	namespace, name string // empty until the SelfSubjectReview names them
	value           string
	renew           time.Time
}

func newRequestedToken(cfg *rest.Config, namespace, name, audience string) (*requestedToken, error) {
	if (namespace == "") != (name == "") {
		return nil, fmt.Errorf("kubeauth: WithTokenRequest needs both the ServiceAccount's namespace and name, or neither (got %q and %q)", namespace, name)
	}
	if audience == "" {
		audience = client.DefaultAudience
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: WithTokenRequest: %w", err)
	}
	core, err := corev1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: WithTokenRequest: %w", err)
	}
	authn, err := authenticationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: WithTokenRequest: %w", err)
	}
	return &requestedToken{accounts: core, reviews: authn, audience: audience, clock: clock.RealClock{},
		namespace: namespace, name: name}, nil
}

func (r *requestedToken) Token(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.value != "" && now.Before(r.renew) {
		return r.value, nil
	}
	if r.name == "" {
		if err := r.whoAmI(ctx); err != nil {
			return "", err
		}
	}
	tr, err := r.accounts.ServiceAccounts(r.namespace).CreateToken(ctx, r.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{r.audience}, ExpirationSeconds: ptr.To(int64(requestTTL.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("kubeauth: request a token of ServiceAccount %s/%s for audience %q (create serviceaccounts/token): %w",
			r.namespace, r.name, r.audience, err)
	}
	life := tr.Status.ExpirationTimestamp.Sub(now)
	if life <= 0 || life > requestTTL { // a clock apart from the API server's
		life = requestTTL
	}
	r.value, r.renew = tr.Status.Token, now.Add(life*8/10)
	return r.value, nil
}

// whoAmI sets namespace and name to the ServiceAccount the configuration
// authenticates as.
func (r *requestedToken) whoAmI(ctx context.Context) error {
	ssr, err := r.reviews.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("kubeauth: who the kubeconfig's user is (SelfSubjectReview): %w", err)
	}
	user := ssr.Status.UserInfo.Username
	parts := strings.Split(strings.TrimPrefix(user, "system:serviceaccount:"), ":")
	if !strings.HasPrefix(user, "system:serviceaccount:") || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("%w: user %q cannot request a token for audience %q for itself", ErrNotServiceAccount, user, r.audience)
	}
	r.namespace, r.name = parts[0], parts[1]
	return nil
}

// Forget drops tok if it is the token held, so the next request asks for a
// new one.
func (r *requestedToken) Forget(tok string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.value == tok {
		r.value = ""
	}
}
