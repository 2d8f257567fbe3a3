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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// API: dtq's HTTP API against the engine's own Submit, in the same run on the
// same Redis. The API is the real bin/api process (built from this
// checkout), authenticating with TokenReview and authorising with
// SubjectAccessReview against an envtest kube-apiserver
// (KUBEBUILDER_ASSETS); one token, so after the first request every decision
// comes from the API's caches, as for a steady producer. The producers are
// pkg/client clients with keep-alive connections, one per producer. Tasks
// have unique idempotency keys. A third row measures the HTTP exchange alone
// (httpFloor), the part of the cost no API can avoid.
func init() {
	register(Case{Group: "API", Name: "HTTP submit, unique key", PeerName: "engine Submit", Dtq: httpSubmit, Peer: dtqSubmit(false)})
	register(Case{Group: "API", Name: "HTTP batch of 100, unique key", PeerName: "engine Submit", Dtq: httpBatch, Peer: dtqSubmit(false)})
	register(Case{Group: "API", Name: "HTTP exchange alone (floor)", PeerName: "engine Submit", Dtq: httpFloor, Peer: dtqSubmit(false)})
}

// apiBatch is the batch size of the batch case.
const apiBatch = 100

var (
	apiOnce sync.Once
	apiEnv  *apiStack
	apiErr  error
)

// apiStack is the control plane and API process the group shares.
type apiStack struct {
	url, token string
	pid        int
}

// cpu returns the API process's used CPU seconds (user+sys), from /proc.
func (s *apiStack) cpu() float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis; utime and stime are the
	// 12th and 13th of them, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// timed runs fn and, with -v, prints the API process's CPU per operation.
func (s *apiStack) timed(name string, ops int, fn func() (time.Duration, error)) (time.Duration, error) {
	cpu0 := s.cpu()
	d, err := fn()
	if *verbose {
		c := s.cpu() - cpu0
		fmt.Fprintf(os.Stderr, "API/%s: API process cpu %.2fs (%.1f us/op)\n", name, c, c*1e6/float64(ops))
	}
	return d, err
}

// startAPI starts the control plane and the API on Redis addr once.
func startAPI(addr string) (*apiStack, error) {
	apiOnce.Do(func() { apiEnv, apiErr = launchAPI(addr) })
	return apiEnv, apiErr
}

func launchAPI(addr string) (*apiStack, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("the API group needs KUBEBUILDER_ASSETS (make bench sets it; or run with -run 'Submission|Workers')")
	}
	dir, err := os.MkdirTemp("", "dtq-bench-api-")
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { _ = os.RemoveAll(dir) })
	_, file, _, _ := runtime.Caller(0)
	if err := devstack.Build(context.Background(), filepath.Join(filepath.Dir(file), "..", ".."), dir, "./cmd/api"); err != nil {
		return nil, err
	}
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	cleanups = append(cleanups, func() { _ = env.Stop() })
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	token, err := producerToken(cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(filepath.Join(dir, "api"), "--bind-address=127.0.0.1:"+strconv.Itoa(port),
		"--redis-url=redis://"+addr+"/0", "--kubeconfig="+kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	s := &apiStack{url: "http://127.0.0.1:" + strconv.Itoa(port), token: token, pid: cmd.Process.Pid}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(s.url + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
	}
	return nil, errors.New("the API did not get ready")
}

// producerToken creates ServiceAccount bench/producer allowed to create
// tasks in namespace bench (the dtq-producer role's rule) and returns a
// token of it for the API's audience (dtq-api).
func producerToken(cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	const ns, name = "bench", "producer"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"dtq.dev"}, Resources: []string{"tasks"}, Verbs: []string{"create"}}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{client.DefaultAudience}, ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// ensureBenchQueue creates the bench queue with room for depth tasks.
func ensureBenchQueue(ctx context.Context, p Params, depth int) error {
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer rdb.Close()
	cfg := broker.DefaultQueueConfig()
	cfg.MaxDepth = int64(depth)
	return broker.New(rdb).EnsureQueue(ctx, benchQueue, cfg)
}

// apiQueue creates the bench queue, a client of the API for p's producers,
// and warms the API's auth caches with one (untimed) submission.
func apiQueue(ctx context.Context, p Params) (*apiStack, *client.Queue, error) {
	s, err := startAPI(p.Addr)
	if err != nil {
		return nil, nil, err
	}
	if err := ensureBenchQueue(ctx, p, p.Tasks+1); err != nil {
		return nil, nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = p.Producers
	c, err := client.New(s.url, client.WithToken(s.token), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return nil, nil, err
	}
	q := c.Queue(benchQueue.Namespace, benchQueue.Name)
	_, err = q.Submit(ctx, "bench", json.RawMessage(p.Payload), client.IdempotencyKey("warm-up"))
	return s, q, err
}

func httpSubmit(ctx context.Context, p Params) (int, time.Duration, error) {
	s, q, err := apiQueue(ctx, p)
	if err != nil {
		return 0, 0, err
	}
	d, err := s.timed("submit", p.Tasks, func() (time.Duration, error) {
		return parallel(p.Tasks, p.Producers, func(i int) error {
			_, err := q.Submit(ctx, "bench", json.RawMessage(p.Payload), client.IdempotencyKey(fmt.Sprintf("key-%d", i)))
			return err
		})
	})
	return p.Tasks, d, err
}

func httpBatch(ctx context.Context, p Params) (int, time.Duration, error) {
	s, q, err := apiQueue(ctx, p)
	if err != nil {
		return 0, 0, err
	}
	batches := (p.Tasks + apiBatch - 1) / apiBatch
	d, err := s.timed("batch", p.Tasks, func() (time.Duration, error) { return parallel(batches, p.Producers, batch(ctx, p, q)) })
	return p.Tasks, d, err
}

// batch submits batch b of p's tasks.
func batch(ctx context.Context, p Params, q *client.Queue) func(int) error {
	return func(b int) error {
		reqs := make([]client.SubmitRequest, 0, apiBatch)
		for i := b * apiBatch; i < min((b+1)*apiBatch, p.Tasks); i++ {
			r, err := client.NewSubmitRequest("bench", json.RawMessage(p.Payload), client.IdempotencyKey(fmt.Sprintf("key-%d", i)))
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		res, err := q.SubmitBatch(ctx, reqs)
		if err != nil {
			return err
		}
		for _, r := range res {
			if err := r.Err(); err != nil {
				return err
			}
		}
		return nil
	}
}

// httpFloor is the HTTP exchange of "HTTP submit" alone: the same producers,
// keep-alive connections, request body and answer size, against a handler in
// this process that reads the body and answers a task's JSON, with no
// decoding, authentication, engine or Redis. What the HTTP submit row can
// reach here is bounded by this row's rate and the engine's own cost.
func httpFloor(ctx context.Context, p Params) (int, time.Duration, error) {
	now := time.Now().UTC()
	answer, err := json.Marshal(client.Task{TaskID: broker.NewTaskID(), Namespace: benchQueue.Namespace, Queue: benchQueue.Name,
		TaskType: "bench", Payload: p.Payload, IdempotencyKey: "key-0", Status: client.StatusQueued, Priority: 5, Attempt: 1,
		MaxAttempts: 3, TimeoutMs: 30000, CreatedAt: now, AvailableAt: now})
	if err != nil {
		return 0, 0, err
	}
	body, err := json.Marshal(client.SubmitRequest{TaskType: "bench", Payload: p.Payload, IdempotencyKey: "key-0"})
	if err != nil {
		return 0, 0, err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(answer)
	}))
	defer srv.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = p.Producers
	hc := &http.Client{Transport: tr}
	url := srv.URL + "/api/v1/namespaces/" + benchQueue.Namespace + "/queues/" + benchQueue.Name + "/tasks"
	d, err := parallel(p.Tasks, p.Producers, func(int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	})
	return p.Tasks, d, err
}
