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

package httpapi

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/dtq-dev/dtq/pkg/client"
)

// Group is the API group of the custom resources whose RBAC governs the HTTP
// API: one policy covers kubectl and HTTP.
const Group = "dtq.dev"

// Attributes is what a request asks to do, in Kubernetes RBAC terms: a verb
// on a resource (tasks, queues, queues/deadletter) of a namespace, or on a
// non-resource path (/metrics).
type Attributes struct {
	Verb        string
	Namespace   string
	Resource    string
	Subresource string
	Name        string // the queue, for queues and queues/deadletter
	Path        string // a non-resource path; Resource is then empty
}

// Authorizer decides whether a request may do what Attributes say.
type Authorizer interface {
	// Authorize returns nil when the request's user may act; a *client.Error
	// with 401 UNAUTHORIZED (no or a rejected bearer token) or 403 FORBIDDEN;
	// or another error when the decision could not be made.
	Authorize(r *http.Request, a Attributes) (user string, err error)
}

// AuthOptions configures KubernetesAuth.
type AuthOptions struct {
	// TokenTTL is the longest a TokenReview answer (valid or not) is used.
	TokenTTL time.Duration
	// AllowTTL and DenyTTL are the longest SubjectAccessReview answers are used.
	AllowTTL, DenyTTL time.Duration
	// Audiences, when set, are the token audiences the API accepts: each
	// TokenReview asks for them (spec.audiences) and a token whose audiences
	// (status.audiences) share none is rejected (401). Empty: any token the
	// API server accepts, whatever its audience.
	Audiences []string
}

// DefaultAuthOptions accepts tokens for audience client.DefaultAudience
// (dtq-api) only, and caches TokenReviews and allowed decisions for a minute
// and denials for ten seconds: a revoked token or removed RoleBinding stops
// working within that time.
func DefaultAuthOptions() AuthOptions {
	return AuthOptions{TokenTTL: time.Minute, AllowTTL: time.Minute, DenyTTL: 10 * time.Second,
		Audiences: []string{client.DefaultAudience}}
}

// kubeAuth authenticates bearer tokens with TokenReview and authorises with
// SubjectAccessReview, both with k8s.io/apiserver's delegating factories (as
// kube-rbac-proxy and controller-runtime's metrics filter do), whose caches
// hold answers for half the configured TokenTTL and AllowTTL. In front of
// them, allowed holds the allowed decisions of a token and Attributes for
// half the shorter of the two, so a steady producer's request skips building
// their cache keys (a SubjectAccessReview marshalled to JSON per request),
// and an allow is never older than the configured TTLs: half in a delegating
// cache, then half here. Denials are not held there: they take the slow path,
// with its own DenyTTL.
type kubeAuth struct {
	authn   authenticator.Request
	authz   authorizer.Authorizer
	ttl     time.Duration
	clock   clock.PassiveClock
	allowed sync.Map // allowKey -> allowEntry
	size    atomic.Int64
	// audiences the TokenReviews ask for (AuthOptions.Audiences): the
	// delegating authenticator reads them from the request's context, as
	// kube-apiserver's own filters set them.
	audiences authenticator.Audiences
}

// maxAllowed bounds kubeAuth.allowed; when full it is emptied (the slow path
// refills it).
const maxAllowed = 10000

// allowKey is a token, by its SHA-256 (the token itself is not kept), and
// what it was allowed to do.
type allowKey struct {
	token [sha256.Size]byte
	a     Attributes
}

type allowEntry struct {
	user  string
	until time.Time
}

// webhookBackoff retries TokenReview and SubjectAccessReview calls (the
// values of k8s.io/apiserver's DefaultAuthWebhookRetryBackoff).
var webhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// KubernetesAuth returns an Authorizer that asks the API server of cfg. Its
// identity needs create on tokenreviews and subjectaccessreviews (the
// ClusterRole system:auth-delegator).
func KubernetesAuth(cfg *rest.Config, o AuthOptions) (Authorizer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		APIAudiences:             o.Audiences,
		TokenAccessReviewClient:  cs.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &webhookBackoff,
		CacheTTL:                 o.TokenTTL / 2,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cs.AuthorizationV1(),
		AllowCacheTTL:             o.AllowTTL / 2,
		DenyCacheTTL:              o.DenyTTL,
		WebhookRetryBackoff:       &webhookBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return &kubeAuth{authn: authn, authz: authz, ttl: min(o.TokenTTL, o.AllowTTL) / 2, clock: clock.RealClock{},
		audiences: o.Audiences}, nil
}

func (k *kubeAuth) Authorize(r *http.Request, a Attributes) (string, error) {
	token, hasToken := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	var key allowKey
	if hasToken {
		key = allowKey{token: sha256.Sum256([]byte(token)), a: a}
		if v, ok := k.allowed.Load(key); ok && k.clock.Now().Before(v.(allowEntry).until) {
			r.Header.Del("Authorization") // as the authenticator does
			return v.(allowEntry).user, nil
		}
	}
	user, err := k.authorize(r, a)
	if err == nil && hasToken && k.ttl > 0 {
		if k.size.Add(1) > maxAllowed {
			k.allowed.Clear()
			k.size.Store(1)
		}
		k.allowed.Store(key, allowEntry{user: user, until: k.clock.Now().Add(k.ttl)})
	}
	return user, err
}

// authorize asks the delegating authenticator and authorizer.
func (k *kubeAuth) authorize(r *http.Request, a Attributes) (string, error) {
	// The bearer token authenticator removes the Authorization header once it
	// has accepted it; nothing after this step sees the token.
	ar := r
	if len(k.audiences) > 0 {
		ar = r.WithContext(authenticator.WithAudiences(r.Context(), k.audiences)) // shares r's header
	}
	res, ok, err := k.authn.AuthenticateRequest(ar)
	if !ok {
		// A missing, malformed, expired or revoked token; err (when set) says
		// which, or that the TokenReview failed.
		msg := "a valid Kubernetes bearer token is required (Authorization: Bearer <token>)"
		if err != nil {
			msg += ": " + err.Error()
		}
		return "", &client.Error{StatusCode: http.StatusUnauthorized, Code: client.CodeUnauthorized, Message: msg}
	}
	u := res.User
	rec := authorizer.AttributesRecord{User: u, Verb: a.Verb, Namespace: a.Namespace, APIGroup: Group,
		Resource: a.Resource, Subresource: a.Subresource, Name: a.Name, ResourceRequest: a.Resource != "", Path: a.Path}
	decision, reason, err := k.authz.Authorize(r.Context(), rec)
	if err != nil {
		return u.GetName(), fmt.Errorf("authorize %s: %w", u.GetName(), err)
	}
	if decision != authorizer.DecisionAllow {
		return u.GetName(), &client.Error{StatusCode: http.StatusForbidden, Code: client.CodeForbidden,
			Message: fmt.Sprintf("%s may not %s", u.GetName(), describe(a)), Details: map[string]any{"reason": reason}}
	}
	return u.GetName(), nil
}

// describe says what a denied request asked for, as kubectl auth can-i would.
func describe(a Attributes) string {
	if a.Resource == "" {
		return a.Verb + " " + a.Path
	}
	res := a.Resource + "." + Group
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	if a.Name != "" {
		res += " " + a.Name
	}
	return fmt.Sprintf("%s %s in namespace %s", a.Verb, res, a.Namespace)
}

// NoAuth allows every request: --insecure-no-auth, for local use only.
type NoAuth struct{}

func (NoAuth) Authorize(*http.Request, Attributes) (string, error) { return "", nil }
