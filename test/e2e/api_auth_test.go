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
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/apitest"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/kubeauth"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// The API authenticates Kubernetes tokens and authorises each request with
// the RBAC of the dtq.dev resources: 401 without or with a bad token, 403
// for a ServiceAccount without the verb, success with it. The roles are the
// shipped config/rbac ClusterRoles dtq-producer and dtq-queue-operator.
func TestAPIAuth(t *testing.T) {
	ns := single.namespace(t, "api-auth")
	apiQueue(t, ns, "q", nil)
	q := queuePath(ns, "q")
	nobody := serviceAccount(t, ns, "nobody")
	producer := serviceAccount(t, ns, "producer", "dtq-producer")
	operator := serviceAccount(t, ns, "operator", "dtq-queue-operator")
	submit := `{"task_type":"echo"}`

	expect(t, "no token", call(t, "", "POST", q+"/tasks", submit), http.StatusUnauthorized, dtqclient.CodeUnauthorized)
	expect(t, "not a token", call(t, "garbage", "POST", q+"/tasks", submit), http.StatusUnauthorized, dtqclient.CodeUnauthorized)
	expect(t, "a token of no user", call(t, nobody+"x", "GET", q, nil), http.StatusUnauthorized, dtqclient.CodeUnauthorized)
	// The API requires tokens for its audience (dtq-api, the default of
	// --token-audiences): the producer's token for the Kubernetes API server
	// (a plain `kubectl create token`) or for another audience is 401.
	for _, aud := range [][]string{nil, {"other-api"}} {
		tok, err := single.stack.Token(t.Context(), ns, "producer", time.Hour, aud...)
		must(t, err)
		expect(t, fmt.Sprintf("a producer's token for audiences %q", aud), call(t, tok, "POST", q+"/tasks", submit),
			http.StatusUnauthorized, dtqclient.CodeUnauthorized)
	}

	r := call(t, producer, "POST", q+"/tasks", submit)
	expect(t, "producer submits", r, http.StatusAccepted, "")
	var task dtqclient.Task
	r.decode(t, &task)

	// Each route needs its verb: the producer has create/get/list/watch on
	// tasks, the operator the queue and dead-letter verbs and update on tasks.
	for _, c := range []struct {
		what, method, path, body   string
		nobody, producer, operator int
	}{
		{"submit (create tasks)", "POST", q + "/tasks", submit, 403, 202, 403},
		{"batch (create tasks)", "POST", q + "/tasks:batch", `{"tasks":[` + submit + `]}`, 403, 200, 403},
		{"get (get tasks)", "GET", q + "/tasks/" + task.TaskID, "", 403, 200, 200},
		{"list (list tasks)", "GET", q + "/tasks", "", 403, 200, 200},
		{"cancel (update tasks)", "POST", q + "/tasks/none/cancel", "", 403, 403, 404},
		{"stats (get queues)", "GET", q, "", 403, 403, 200},
		{"workers (get queues)", "GET", q + "/workers", "", 403, 403, 200},
		{"list queues (list queues)", "GET", "/api/v1/namespaces/" + ns + "/queues", "", 403, 403, 200},
		{"pause (patch queues)", "POST", q + "/resume", "", 403, 403, 200},
		{"dead letters (get queues/deadletter)", "GET", q + "/dead-letter", "", 403, 403, 200},
		{"requeue (update queues/deadletter)", "POST", q + "/dead-letter/none/requeue", "", 403, 403, 404},
		{"requeue all (update queues/deadletter)", "POST", q + "/dead-letter/requeue", "", 403, 403, 200},
		{"discard (delete queues/deadletter)", "POST", q + "/dead-letter/none/discard", "", 403, 403, 404},
		{"purge (delete queues/deadletter)", "POST", q + "/dead-letter/purge", "", 403, 403, 200},
		{"queue purge (delete queues/tasks)", "POST", q + "/purge", "", 403, 403, 200},
		{"list schedules (list taskschedules)", "GET", "/api/v1/namespaces/" + ns + "/schedules", "", 403, 403, 200},
		{"metrics (get /metrics)", "GET", "/metrics", "", 403, 403, 403},
	} {
		for who, tok := range map[string]string{"nobody": nobody, "producer": producer, "operator": operator} {
			want := map[string]int{"nobody": c.nobody, "producer": c.producer, "operator": c.operator}[who]
			var body any
			if c.body != "" {
				body = c.body
			}
			r := call(t, tok, c.method, c.path, body)
			if r.status != want {
				t.Errorf("%s as %s: %v, want %d", c.what, who, r, want)
			}
			if want == http.StatusForbidden && r.status == want && r.apiError(t).Code != dtqclient.CodeForbidden {
				t.Errorf("%s as %s: %v, want FORBIDDEN", c.what, who, r)
			}
		}
	}
	// Events need watch on tasks: the stream opens for the producer only.
	for who, tok := range map[string]string{"nobody": nobody, "producer": producer} {
		_, err := apiClient(t, tok).Queue(ns, "q").Events(t.Context(), dtqclient.EventsOptions{})
		if allowed := err == nil; allowed != (who == "producer") {
			t.Errorf("events as %s: %v", who, err)
		}
	}
	// Another namespace's RoleBinding gives nothing here.
	other := single.namespace(t, "api-auth-other")
	apiQueue(t, other, "q", nil)
	expect(t, "producer in another namespace", call(t, producer, "POST", queuePath(other, "q")+"/tasks", submit),
		http.StatusForbidden, dtqclient.CodeForbidden)

	// A RoleBinding made now takes effect once the cached denial expires
	// (--authz-deny-cache-ttl, 2s here).
	bind(t, ns, "nobody", "dtq-producer")
	must(t, poll(t.Context(), 30*time.Second, func() error {
		if r := call(t, nobody, "POST", q+"/tasks", submit); r.status != http.StatusAccepted {
			return fmt.Errorf("after the binding: %v", r)
		}
		return nil
	}))
}

// The way a make dev user reaches the API from Go: the URL in <dir>/api-url
// and tokens for the API's audience that the client requests with the dev
// kubeconfig (a ServiceAccount's token) for that ServiceAccount
// (WithTokenRequest). The kubeconfig's own token (WithKubeconfig) is for
// the Kubernetes API server: 401.
func TestAPIWithTheDevKubeconfig(t *testing.T) {
	url, err := os.ReadFile(filepath.Join(single.stack.Dir, "api-url"))
	must(t, err)
	if strings.TrimSpace(string(url)) != single.stack.APIURL {
		t.Fatalf("api-url holds %q, the API is at %s", url, single.stack.APIURL)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", single.stack.Kubeconfig)
	must(t, err)
	validated := dtqclient.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil)})
	c, err := dtqclient.New(strings.TrimSpace(string(url)), kubeauth.WithTokenRequest(cfg, "", "", dtqclient.DefaultAudience), validated)
	must(t, err)
	ns := single.namespace(t, "api-kubeconfig")
	apiQueue(t, ns, "q", nil)
	own, err := dtqclient.New(single.stack.APIURL, kubeauth.WithKubeconfig(single.stack.Kubeconfig), validated)
	must(t, err)
	if _, err := own.Queue(ns, "q").Stats(t.Context()); !errors.Is(err, dtqclient.ErrUnauthorized) {
		t.Errorf("the kubeconfig's own token: %v, want UNAUTHORIZED", err)
	}
	task, err := c.Queue(ns, "q").Submit(t.Context(), "echo", map[string]string{"from": "kubeconfig"})
	must(t, err)
	if task, err = c.Queue(ns, "q").Wait(t.Context(), task.TaskID); err != nil || task.Status != dtqclient.StatusSucceeded {
		t.Fatalf("task submitted with the dev kubeconfig: %+v %v", task, err)
	}
}

// --token-audiences= (empty) is the explicit opt-out: an API started with it
// (a second API process on the stack's Redis and control plane) accepts a
// token for the Kubernetes API server, which the stack's API (the default,
// dtq-api) refuses, and it logs a warning at start.
func TestAPITokenAudiencesOptOut(t *testing.T) {
	ns := single.namespace(t, "api-audience-optout")
	apiQueue(t, ns, "q", nil)
	kubeTok, err := single.stack.Token(t.Context(), devstack.AdminNamespace, devstack.AdminServiceAccount, time.Hour)
	must(t, err)
	path := queuePath(ns, "q") + "/tasks"
	expect(t, "a token for the API server at the default API", call(t, kubeTok, "POST", path, `{"task_type":"echo"}`),
		http.StatusUnauthorized, dtqclient.CodeUnauthorized)

	addr, err := loopback.FreeAddr()
	must(t, err)
	var log redistest.SyncBuffer
	api := exec.CommandContext(t.Context(), filepath.Join(binDir, "api"), "--bind-address="+addr, "--redis-url="+single.stack.RedisURL(),
		"--kubeconfig="+filepath.Join(single.stack.Dir, "admin.kubeconfig"), "--token-audiences=")
	api.Stdout, api.Stderr = &log, &log
	must(t, api.Start())
	t.Cleanup(func() { _ = api.Process.Kill(); _ = api.Wait() })
	base := "http://" + addr
	must(t, poll(t.Context(), time.Minute, func() error {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	}))
	c, err := dtqclient.New(base, dtqclient.WithToken(kubeTok), dtqclient.WithHTTPClient(&http.Client{Transport: apitest.Transport(t, nil)}))
	must(t, err)
	if _, err := c.Queue(ns, "q").Submit(t.Context(), "echo", nil); err != nil {
		t.Errorf("a token for the API server at an API with --token-audiences=: %v, want accepted", err)
	}
	if !strings.Contains(log.String(), "--token-audiences is empty") {
		t.Errorf("no warning for --token-audiences= in the API's log:\n%s", log.String())
	}
}
