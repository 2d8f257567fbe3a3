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
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dtq-dev/dtq/pkg/client"
)

// countingAuth stands for the delegating authenticator and authorizer (a pure
// unit test of kubeAuth's own cache; TestAPIAuth in test/e2e runs the real
// ones against an API server): token "good" is user alice, who may create
// tasks; every call is counted.
type countingAuth struct{ authn, authz int }

func (c *countingAuth) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	c.authn++
	if r.Header.Get("Authorization") != "Bearer good" {
		return nil, false, errors.New("invalid bearer token")
	}
	r.Header.Del("Authorization")
	return &authenticator.Response{User: &user.DefaultInfo{Name: "alice"}}, true, nil
}

func (c *countingAuth) authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	c.authz++
	if a.GetVerb() == "create" && a.GetResource() == "tasks" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no rule", nil
}

// kubeAuth answers an allowed token and request from its own cache until half
// the shorter TTL has passed, never a denial, and removes the token from the
// request either way.
func TestKubeAuthHoldsAllowedDecisions(t *testing.T) {
	delegates := &countingAuth{}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1e9, 0))
	k := &kubeAuth{authn: delegates, authz: authorizer.AuthorizerFunc(delegates.authorize), ttl: 30 * time.Second, clock: clk}
	create := Attributes{Verb: "create", Namespace: "team-a", Resource: "tasks"}
	ask := func(token string, a Attributes) error {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		name, err := k.Authorize(r, a)
		if err == nil && name != "alice" {
			t.Errorf("user %q, want alice", name)
		}
		if h := r.Header.Get("Authorization"); err == nil && h != "" {
			t.Errorf("Authorization header %q left on an allowed request", h)
		}
		return err
	}
	calls := func(want int) {
		t.Helper()
		if delegates.authn != want || delegates.authz != want {
			t.Errorf("delegates asked %d/%d times, want %d", delegates.authn, delegates.authz, want)
		}
	}

	if err := ask("good", create); err != nil {
		t.Fatal(err)
	}
	calls(1)
	if err := ask("good", create); err != nil {
		t.Fatal(err)
	}
	calls(1) // from the cache

	// Another request of the same token is decided anew, and so is a denial,
	// every time.
	list := Attributes{Verb: "list", Namespace: "team-a", Resource: "tasks"}
	for range 2 {
		var ce *client.Error
		if err := ask("good", list); !errors.As(err, &ce) || ce.StatusCode != http.StatusForbidden {
			t.Fatalf("list: %v, want 403", err)
		}
	}
	calls(3)
	other := create
	other.Namespace = "team-b"
	if err := ask("good", other); err != nil {
		t.Fatal(err)
	}
	calls(4)
	for range 2 {
		if err := ask("bad", create); err == nil || !strings.Contains(err.Error(), "bearer token") {
			t.Fatalf("bad token: %v, want 401", err)
		}
	}
	if delegates.authn != 6 {
		t.Errorf("a rejected token was held: %d authentications, want 6", delegates.authn)
	}

	// Once the entry's time is up, the delegates decide again.
	clk.SetTime(clk.Now().Add(30 * time.Second))
	before := delegates.authz
	if err := ask("good", create); err != nil {
		t.Fatal(err)
	}
	if delegates.authz != before+1 {
		t.Errorf("an expired entry answered: %d authorizations, want %d", delegates.authz, before+1)
	}
}

// validName agrees with validation.IsDNS1123Label.
func TestValidNameIsDNSLabel(t *testing.T) {
	for _, s := range []string{"", "a", "team-a", "-a", "a-", "A", "a.b", "a_b", "0", "9-x",
		strings.Repeat("a", 63), strings.Repeat("a", 64), "ümlaut", "a b", "a/b", "{a}"} {
		if got, want := validName(s), len(validation.IsDNS1123Label(s)) == 0; got != want {
			t.Errorf("validName(%q) = %v, IsDNS1123Label says %v", s, got, want)
		}
	}
}

// With Audiences set, each TokenReview asks for them and a token bound to
// another audience is 401. An HTTP stand-in plays the API server's
// TokenReview and SubjectAccessReview (a pure unit test of the wiring; the
// audience check itself is k8s.io/apiserver's, and the real API server's in
// the e2e tests): a token "aud:<x>" is valid for audience x only.
func TestKubeAuthRequiresAudience(t *testing.T) {
	var mu sync.Mutex
	var asked [][]string
	apiServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "subjectaccessreviews") {
			var sar authzv1.SubjectAccessReview
			_ = json.NewDecoder(r.Body).Decode(&sar)
			sar.Status.Allowed = true
			_ = json.NewEncoder(w).Encode(&sar)
			return
		}
		var tr authnv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		mu.Lock()
		asked = append(asked, tr.Spec.Audiences)
		mu.Unlock()
		aud, _ := strings.CutPrefix(tr.Spec.Token, "aud:")
		if len(tr.Spec.Audiences) > 0 && !slices.Contains(tr.Spec.Audiences, aud) {
			tr.Status = authnv1.TokenReviewStatus{Error: "token audiences do not match"}
		} else {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{aud}, User: authnv1.UserInfo{Username: "alice"}}
		}
		_ = json.NewEncoder(w).Encode(&tr)
	}))
	t.Cleanup(apiServer.Close)
	k, err := KubernetesAuth(&rest.Config{Host: apiServer.URL},
		AuthOptions{TokenTTL: time.Minute, AllowTTL: time.Minute, DenyTTL: time.Second, Audiences: []string{"dtq-api"}})
	if err != nil {
		t.Fatal(err)
	}
	create := Attributes{Verb: "create", Namespace: "team-a", Resource: "tasks"}
	for token, want := range map[string]int{"aud:dtq-api": 0, "aud:https://kubernetes.default.svc": http.StatusUnauthorized} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		_, err := k.Authorize(r, create)
		var ce *client.Error
		switch {
		case want == 0 && err != nil:
			t.Errorf("%s: %v, want allowed", token, err)
		case want != 0 && (!errors.As(err, &ce) || ce.StatusCode != want):
			t.Errorf("%s: %v, want %d", token, err, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 0 {
		t.Error("no TokenReview was made")
	}
	for _, auds := range asked {
		if !slices.Equal(auds, []string{"dtq-api"}) {
			t.Errorf("a TokenReview asked for audiences %q, want [dtq-api]", auds)
		}
	}
}
