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

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

var (
	adminOnce  sync.Once
	adminTok   string
	adminError error
)

// adminToken is a token of the dev stack's cluster-admin ServiceAccount for
// the API's audience (dtq-api).
func adminToken(t *testing.T) string {
	t.Helper()
	adminOnce.Do(func() {
		adminTok, adminError = single.stack.APIToken(context.Background(), devstack.AdminNamespace, devstack.AdminServiceAccount, time.Hour)
	})
	must(t, adminError)
	return adminTok
}

// serviceAccount creates ServiceAccount ns/name bound in ns to the given
// ClusterRoles and returns a token of it for the API's audience.
func serviceAccount(t *testing.T, ns, name string, clusterRoles ...string) string {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := single.stack.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, role := range clusterRoles {
		bind(t, ns, name, role)
	}
	tok, err := single.stack.APIToken(ctx, ns, name, time.Hour)
	must(t, err)
	return tok
}

// bind binds ServiceAccount ns/sa to ClusterRole role in ns.
func bind(t *testing.T, ns, sa, role string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	if err := single.stack.Client.Create(t.Context(), rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// apiResponse is an answer of the real API process.
type apiResponse struct {
	status int
	header http.Header
	body   []byte
}

// decode decodes the body into v.
func (r apiResponse) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiError decodes an error body.
func (r apiResponse) apiError(t *testing.T) dtqclient.Error {
	t.Helper()
	var e dtqclient.Error
	r.decode(t, &e)
	return e
}

func (r apiResponse) String() string { return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body)) }

// apiHTTP is the HTTP client of the tests: every response it receives is
// validated against the OpenAPI document (a mismatch fails the test).
func apiHTTP(t *testing.T) *http.Client {
	return &http.Client{Transport: apitest.Transport(t, nil), Timeout: time.Minute}
}

// call sends one request to the API: body is sent as is when it is a string
// or []byte, else as JSON; header holds name, value pairs.
func call(t *testing.T, token, method, path string, body any, header ...string) apiResponse {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		must(t, err)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, single.stack.APIURL+path, rd)
	must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := apiHTTP(t).Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return apiResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

// expect fails the test unless r has status and, when code is not empty,
// that error code.
func expect(t *testing.T, what string, r apiResponse, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: %v, want %d %s", what, r, status, code)
	}
	if code != "" {
		if e := r.apiError(t); e.Code != code || e.RequestID == "" || r.header.Get("X-Request-ID") != e.RequestID {
			t.Fatalf("%s: %v, want code %s and the request ID in body and header", what, r, code)
		}
	}
}

// queuePath is the API path of queue ns/name.
func queuePath(ns, name string) string { return "/api/v1/namespaces/" + ns + "/queues/" + name }

// apiQueue creates Queue ns/name and waits until the API knows it (its
// controller has written its config to Redis).
func apiQueue(t *testing.T, ns, name string, mutate func(*dtqv1alpha1.QueueSpec)) {
	t.Helper()
	q := &dtqv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if mutate != nil {
		mutate(&q.Spec)
	}
	must(t, single.stack.Client.Create(t.Context(), q))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = single.stack.Client.DeleteAllOf(ctx, &dtqv1alpha1.Task{}, client.InNamespace(ns))
		_ = single.stack.Client.Delete(ctx, q)
	})
	tok := adminToken(t)
	must(t, poll(t.Context(), 30*time.Second, func() error {
		if r := call(t, tok, http.MethodGet, queuePath(ns, name), nil); r.status != http.StatusOK {
			return fmt.Errorf("queue %s/%s: %v", ns, name, r)
		}
		return nil
	}))
}

// apiClient is a pkg/client client of the real API with token, validating
// every response.
func apiClient(t *testing.T, token string) *dtqclient.Client {
	t.Helper()
	c, err := dtqclient.New(single.stack.APIURL, dtqclient.WithToken(token), dtqclient.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil)}))
	must(t, err)
	return c
}
