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
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dtq-dev/dtq/pkg/client"
)

// A requested token is held until 80% of its hour has passed, then
// requested anew; a forgotten one (the API answered 401) at once. The
// end-to-end test against a real API server is in test/client.
func TestRequestedTokenRenewal(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	cs := fake.NewClientset()
	requests := 0
	cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		requests++
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: fmt.Sprintf("token-%d", requests), ExpirationTimestamp: metav1.NewTime(clk.Now().Add(time.Hour))}}, nil
	})
	r := &requestedToken{accounts: cs.CoreV1(), reviews: cs.AuthenticationV1(), audience: client.DefaultAudience, clock: clk,
		namespace: "default", name: "checkout"}
	token := func() string {
		t.Helper()
		tok, err := r.Token(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	first := token()
	clk.SetTime(clk.Now().Add(47 * time.Minute))
	if got := token(); got != first {
		t.Errorf("a token was requested anew before 80%% of its lifetime: %s, then %s", first, got)
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	second := token()
	if second == first {
		t.Error("the token was not requested anew after 80% of its lifetime")
	}
	r.Forget(second)
	if got := token(); got == second || requests != 3 {
		t.Errorf("after Forget: %s (%d requests), want a new token", got, requests)
	}
}
