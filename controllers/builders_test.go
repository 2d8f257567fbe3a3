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
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

func TestDesiredWorkerDeployment(t *testing.T) {
	opts := WorkerOptions{Image: "img:1", RedisURL: "redis://r:6379/0"}
	podName := corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	baseEnv := func(redis corev1.EnvVar) []corev1.EnvVar {
		return []corev1.EnvVar{
			{Name: "DTQ_QUEUE_NAMESPACE", Value: "ns"},
			{Name: "DTQ_QUEUE_NAME", Value: "q"},
			redis,
			{Name: "DTQ_WORKER_CONCURRENCY", Value: "4"},
			{Name: "DTQ_VISIBILITY_TIMEOUT", Value: "30s"},
			{Name: "DTQ_HEARTBEAT_INTERVAL", Value: "5s"},
			{Name: "DTQ_DRAIN_TIMEOUT", Value: "30s"},
			podName,
			{Name: "DTQ_METRICS_ADDR", Value: ":8080"},
		}
	}
	userContainer := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "billing"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			Containers: []corev1.Container{{
				Name: "mine", Image: "mine:2",
				Env:             []corev1.EnvVar{{Name: "DTQ_WORKER_CONCURRENCY", Value: "99"}},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(int64(1000))},
			}},
		},
	}
	secretRef := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: RedisUserSecret}, Key: key}}
	}
	cred := &redisCredential{Secret: RedisUserSecret, Digest: "d1"}
	for name, tc := range map[string]struct {
		queue     *dtqv1alpha1.Queue
		opts      WorkerOptions
		cred      *redisCredential
		image     string
		env       []corev1.EnvVar
		grace     int64
		labels    map[string]string
		sc        *corev1.SecurityContext
		container string
	}{
		"empty template runs the reference worker, restricted": {
			queue: testutil.MakeQueue("q", "ns").Obj(), opts: opts, image: "img:1", container: "worker",
			env: baseEnv(corev1.EnvVar{Name: "DTQ_REDIS_URL", Value: "redis://r:6379/0"}), grace: 45,
			labels: map[string]string{LabelQueue: "q"}, sc: restrictedContainerSecurityContext(),
		},
		"redis URL from a secret": {
			queue: testutil.MakeQueue("q", "ns").Obj(), image: "img:1", container: "worker",
			opts: WorkerOptions{Image: "img:1", RedisURL: "ignored", RedisSecretName: "redis", RedisSecretKey: "url"},
			env: baseEnv(corev1.EnvVar{Name: "DTQ_REDIS_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: "url"}}}),
			grace: 45, labels: map[string]string{LabelQueue: "q"}, sc: restrictedContainerSecurityContext(),
		},
		"isolation: the namespace's Redis user from its Secret, replacing the user's values": {
			queue: func() *dtqv1alpha1.Queue {
				q := testutil.MakeQueue("q", "ns").Obj()
				q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "worker", Image: "img:1", Env: []corev1.EnvVar{
					{Name: "DTQ_QUEUE_NAMESPACE", Value: "other-tenant"},
					{Name: "DTQ_REDIS_PASSWORD", Value: "guess"},
					{Name: "MINE", Value: "1"},
				}}}
				return q
			}(),
			opts: opts, cred: cred, image: "img:1", container: "worker", grace: 45,
			env: append([]corev1.EnvVar{
				{Name: "DTQ_QUEUE_NAMESPACE", Value: "ns"},
				{Name: "DTQ_REDIS_PASSWORD", ValueFrom: secretRef("password")},
				{Name: "MINE", Value: "1"},
				{Name: "DTQ_QUEUE_NAME", Value: "q"},
				{Name: "DTQ_REDIS_USERNAME", ValueFrom: secretRef("username")},
			}, baseEnv(corev1.EnvVar{Name: "DTQ_REDIS_URL", Value: "redis://r:6379/0"})[2:]...),
			labels: map[string]string{LabelQueue: "q"}, sc: restrictedContainerSecurityContext(),
		},
		"user fields are kept": {
			queue: func() *dtqv1alpha1.Queue {
				q := testutil.MakeQueue("q", "ns").TaskTimeout(2 * time.Minute).Obj()
				q.Spec.WorkerTemplate = userContainer
				return q
			}(),
			opts: opts, image: "mine:2", container: "mine", grace: 5,
			env: func() []corev1.EnvVar {
				env := []corev1.EnvVar{{Name: "DTQ_WORKER_CONCURRENCY", Value: "99"}}
				for _, e := range baseEnv(corev1.EnvVar{Name: "DTQ_REDIS_URL", Value: "redis://r:6379/0"}) {
					switch e.Name {
					case "DTQ_WORKER_CONCURRENCY":
					case "DTQ_DRAIN_TIMEOUT":
						env = append(env, corev1.EnvVar{Name: e.Name, Value: "2m0s"})
					default:
						env = append(env, e)
					}
				}
				return env
			}(),
			labels: map[string]string{LabelQueue: "q", "team": "billing"},
			sc:     &corev1.SecurityContext{RunAsUser: ptr.To(int64(1000))},
		},
	} {
		t.Run(name, func(t *testing.T) {
			before := tc.queue.DeepCopy()
			d := desiredWorkerDeployment(tc.queue, tc.opts, tc.cred)
			if diff := cmp.Diff(before, tc.queue); diff != "" {
				t.Errorf("builder mutated the Queue (-before +after):\n%s", diff)
			}
			if d.Name != "q-workers" || d.Namespace != "ns" {
				t.Errorf("name = %s/%s, want ns/q-workers", d.Namespace, d.Name)
			}
			if diff := cmp.Diff(map[string]string{LabelQueue: "q"}, d.Spec.Selector.MatchLabels); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
			c := d.Spec.Template.Spec.Containers[0]
			got := map[string]any{
				"image": c.Image, "container": c.Name, "env": c.Env, "labels": d.Spec.Template.Labels,
				"grace": *d.Spec.Template.Spec.TerminationGracePeriodSeconds, "securityContext": c.SecurityContext,
			}
			want := map[string]any{
				"image": tc.image, "container": tc.container, "env": tc.env, "labels": tc.labels,
				"grace": tc.grace, "securityContext": tc.sc,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("deployment (-want +got):\n%s", diff)
			}
			if d.Annotations[AnnotationTemplateHash] == "" {
				t.Error("no template hash annotation")
			}
			if got, want := d.Spec.Template.Annotations[AnnotationRedisCredential], ptr.Deref(tc.cred, redisCredential{}).Digest; got != want {
				t.Errorf("credential annotation %q, want %q", got, want)
			}
		})
	}
}

func TestWorkerPodDefaults(t *testing.T) {
	q := testutil.MakeQueue("q", "ns").Obj()
	ps := desiredWorkerDeployment(q, WorkerOptions{Image: "i"}, nil).Spec.Template.Spec
	if diff := cmp.Diff(map[string]any{"automount": ptr.To(false), "requests": defaultWorkerRequests}, map[string]any{
		"automount": ps.AutomountServiceAccountToken, "requests": ps.Containers[0].Resources.Requests}); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	q.Spec.WorkerTemplate.Spec = corev1.PodSpec{AutomountServiceAccountToken: ptr.To(true),
		Containers: []corev1.Container{{Name: "w", Image: "i", Resources: corev1.ResourceRequirements{Limits: limits}}}}
	ps = desiredWorkerDeployment(q, WorkerOptions{Image: "i"}, nil).Spec.Template.Spec
	if diff := cmp.Diff(map[string]any{"automount": ptr.To(true), "resources": corev1.ResourceRequirements{Limits: limits}}, map[string]any{
		"automount": ps.AutomountServiceAccountToken, "resources": ps.Containers[0].Resources}); diff != "" {
		t.Errorf("user's choices (-want +got):\n%s", diff)
	}
}

func TestOverriddenEnv(t *testing.T) {
	cred := &redisCredential{Secret: RedisUserSecret, Digest: "d"}
	withEnv := func(env ...corev1.EnvVar) *dtqv1alpha1.Queue {
		q := testutil.MakeQueue("q", "ns").Obj()
		q.Spec.WorkerTemplate.Spec.Containers = []corev1.Container{{Name: "w", Env: env}}
		return q
	}
	for name, tc := range map[string]struct {
		q    *dtqv1alpha1.Queue
		cred *redisCredential
		want []string
	}{
		"no template":              {q: testutil.MakeQueue("q", "ns").Obj()},
		"same values":              {q: withEnv(corev1.EnvVar{Name: "DTQ_QUEUE_NAMESPACE", Value: "ns"}, corev1.EnvVar{Name: "DTQ_QUEUE_NAME", Value: "q"})},
		"another namespace":        {q: withEnv(corev1.EnvVar{Name: "DTQ_QUEUE_NAMESPACE", Value: "b"}), want: []string{"DTQ_QUEUE_NAMESPACE"}},
		"another queue, twice":     {q: withEnv(corev1.EnvVar{Name: "DTQ_QUEUE_NAME", Value: "x"}, corev1.EnvVar{Name: "DTQ_QUEUE_NAME", Value: "y"}), want: []string{"DTQ_QUEUE_NAME"}},
		"credential, isolated":     {q: withEnv(corev1.EnvVar{Name: "DTQ_REDIS_USERNAME", Value: "default"}), cred: cred, want: []string{"DTQ_REDIS_USERNAME"}},
		"credential, shared":       {q: withEnv(corev1.EnvVar{Name: "DTQ_REDIS_USERNAME", Value: "default"})},
		"unreserved is the user's": {q: withEnv(corev1.EnvVar{Name: "DTQ_WORKER_CONCURRENCY", Value: "9"})},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, overriddenEnv(tc.q, tc.cred)); diff != "" {
				t.Errorf("overriddenEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTemplateHashIgnoresReplicas(t *testing.T) {
	q := testutil.MakeQueue("q", "ns").Obj()
	a := desiredWorkerDeployment(q, WorkerOptions{Image: "i"}, nil)
	b := desiredWorkerDeployment(q, WorkerOptions{Image: "i"}, nil)
	b.Spec.Replicas = ptr.To(int32(7))
	if specHash(a.Spec) != specHash(b.Spec) {
		t.Error("hash changed with replicas")
	}
	c := desiredWorkerDeployment(q, WorkerOptions{Image: "other"}, nil)
	if a.Annotations[AnnotationTemplateHash] == c.Annotations[AnnotationTemplateHash] {
		t.Error("hash did not change with the image")
	}
}

func TestDecideScale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	earlier := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	scaling := dtqv1alpha1.QueueScaling{
		MinReplicas: ptr.To(int32(1)), MaxReplicas: 5, TargetBacklogPerWorker: 10,
		ScaleDownStabilization: dtqv1alpha1.NewDuration(time.Minute),
	}
	zeroMin := *scaling.DeepCopy()
	zeroMin.MinReplicas = ptr.To(int32(0))
	for name, tc := range map[string]struct {
		scaling dtqv1alpha1.QueueScaling
		stats   broker.QueueStats
		current int32
		since   *time.Time
		want    scaleDecision
	}{
		"idle stays at min":           {scaling, broker.QueueStats{}, 1, nil, scaleDecision{Replicas: 1, Wanted: 1}},
		"backlog rounds up":           {scaling, broker.QueueStats{Queued: 11}, 1, nil, scaleDecision{Replicas: 2, Wanted: 2}},
		"in flight counts":            {scaling, broker.QueueStats{Queued: 15, InFlight: 10}, 1, nil, scaleDecision{Replicas: 3, Wanted: 3}},
		"clamped to max":              {scaling, broker.QueueStats{Queued: 1000}, 1, nil, scaleDecision{Replicas: 5, Wanted: 5}},
		"scale-up clears the window":  {scaling, broker.QueueStats{Queued: 50}, 2, earlier(time.Hour), scaleDecision{Replicas: 5, Wanted: 5}},
		"scale-down starts a window":  {scaling, broker.QueueStats{}, 5, nil, scaleDecision{Replicas: 5, Wanted: 1, ScaleDownSince: &now, Recheck: time.Minute}},
		"scale-down inside window":    {scaling, broker.QueueStats{}, 5, earlier(20 * time.Second), scaleDecision{Replicas: 5, Wanted: 1, ScaleDownSince: earlier(20 * time.Second), Recheck: 40 * time.Second}},
		"scale-down after the window": {scaling, broker.QueueStats{Queued: 12}, 5, earlier(time.Minute), scaleDecision{Replicas: 2, Wanted: 2}},
		"to zero when min is 0":       {zeroMin, broker.QueueStats{}, 1, earlier(2 * time.Minute), scaleDecision{Replicas: 0, Wanted: 0}},
		"from zero at once":           {zeroMin, broker.QueueStats{Queued: 1}, 0, nil, scaleDecision{Replicas: 1, Wanted: 1}},
		"paused keeps in-flight only": {scaling, broker.QueueStats{Queued: 40, InFlight: 0, Paused: true}, 1, nil, scaleDecision{Replicas: 1, Wanted: 1}},
		"new max applies at once":     {scaling, broker.QueueStats{Queued: 1000}, 9, nil, scaleDecision{Replicas: 5, Wanted: 5}},
	} {
		t.Run(name, func(t *testing.T) {
			got := decideScale(&dtqv1alpha1.Queue{Spec: dtqv1alpha1.QueueSpec{Scaling: tc.scaling}}, tc.stats, tc.current, tc.since, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decideScale (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueueConfig(t *testing.T) {
	def := broker.DefaultQueueConfig()
	custom := testutil.MakeQueue("q", "ns").MaxDepth(5).MaxPayloadBytes(64).IdempotencyTTL(2 * time.Second).TaskTimeout(time.Minute).Obj()
	custom.Spec.Retry = dtqv1alpha1.RetryPolicy{MaxAttempts: 3, BaseDelay: dtqv1alpha1.NewDuration(2 * time.Second),
		MaxDelay: dtqv1alpha1.NewDuration(10 * time.Second), JitterPercent: ptr.To(int32(50))}
	custom.Spec.DeadLetter = dtqv1alpha1.DeadLetterPolicy{Enabled: ptr.To(false), MaxLength: 7}
	custom.Spec.VisibilityTimeout = dtqv1alpha1.NewDuration(9 * time.Second)
	custom.Spec.Durability = dtqv1alpha1.QueueDurability{ReplicaAcks: 1, ReplicaAckTimeout: dtqv1alpha1.NewDuration(250 * time.Millisecond)}
	custom.Spec.Idempotency.OnMismatch = dtqv1alpha1.IdempotencyMismatchReject
	want := def
	want.MaxDepth, want.MaxPayloadBytes, want.IdempotencyTTL, want.DefaultTimeout = 5, 64, 2*time.Second, time.Minute
	want.DefaultMaxAttempts, want.Retry = 3, broker.RetryPolicy{BaseDelay: 2 * time.Second, MaxDelay: 10 * time.Second, Jitter: 0.5}
	want.DeadLetter, want.DeadLetterMaxLen, want.VisibilityTimeout = false, 7, 9*time.Second
	want.ReplicaAcks, want.ReplicaAckTimeout = 1, 250*time.Millisecond
	want.OnMismatch = broker.MismatchReject
	flowQueue := testutil.MakeQueue("q", "ns").FlowControl(&dtqv1alpha1.FlowControl{
		RateLimit:      &dtqv1alpha1.FlowRate{Limit: 200, Period: dtqv1alpha1.NewDuration(time.Minute), Burst: 20},
		MaxConcurrency: ptr.To[int32](400),
		PerKey:         &dtqv1alpha1.KeyLimits{Concurrency: ptr.To[int32](3), RateLimit: &dtqv1alpha1.FlowRate{Limit: 10}},
		Fairness:       dtqv1alpha1.FairnessFIFO,
		Overrides: []dtqv1alpha1.KeyOverride{{Key: "gold", Weight: 5, Concurrency: ptr.To[int32](10)},
			{Key: "slow", RateLimit: &dtqv1alpha1.FlowRate{Limit: 1, Period: dtqv1alpha1.NewDuration(time.Hour), Burst: 1}}},
	}).Obj()
	flowWant := def
	flowWant.Flow = &broker.FlowControl{
		Rate:           &broker.FlowRate{Limit: 200, Period: time.Minute, Burst: 20},
		MaxConcurrency: 400,
		PerKey:         broker.KeyLimits{Concurrency: 3, Rate: &broker.FlowRate{Limit: 10, Period: time.Second, Burst: 1}},
		Fairness:       broker.FairnessFIFO,
		Overrides: map[string]broker.KeyOverride{
			"gold": {Weight: 5, KeyLimits: broker.KeyLimits{Concurrency: 10}},
			"slow": {Weight: 1, KeyLimits: broker.KeyLimits{Rate: &broker.FlowRate{Limit: 1, Period: time.Hour, Burst: 1}}},
		},
	}
	for name, tc := range map[string]struct {
		queue *dtqv1alpha1.Queue
		want  broker.QueueConfig
	}{
		"unset fields keep the engine defaults":     {testutil.MakeQueue("q", "ns").Obj(), def},
		"every field maps":                          {custom, want},
		"flowControl maps, with the CRD's defaults": {flowQueue, flowWant},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, queueConfig(tc.queue)); diff != "" {
				t.Errorf("queueConfig (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubmitRequest(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	task := func(mutate func(*dtqv1alpha1.Task)) *dtqv1alpha1.Task {
		tk := testutil.MakeTask("t", "ns").Queue("q").Key("k").Obj()
		tk.UID = types.UID("0b4a2c1e-1111-2222-3333-444455556666")
		tk.CreationTimestamp = metav1.Time{Time: created}
		mutate(tk)
		return tk
	}
	base := broker.SubmitRequest{ID: "0b4a2c1e-1111-2222-3333-444455556666", Type: "echo", IdempotencyKey: "k", Priority: 5, FromTaskCR: true}
	for name, tc := range map[string]struct {
		task *dtqv1alpha1.Task
		want broker.SubmitRequest
	}{
		"defaults": {task(func(*dtqv1alpha1.Task) {}), base},
		"flow key": {task(func(t *dtqv1alpha1.Task) { t.Spec.FlowKey = "tenant-a" }),
			func() broker.SubmitRequest { r := base; r.FlowKey = "tenant-a"; return r }()},
		"every field": {task(func(t *dtqv1alpha1.Task) {
			t.Spec.Payload = &runtime.RawExtension{Raw: []byte(`{"a":1}`)}
			t.Spec.Priority, t.Spec.MaxAttempts = ptr.To(int32(9)), ptr.To(int32(3))
			t.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
			t.Spec.Delay = &metav1.Duration{Duration: time.Hour}
			t.Spec.TTL = &metav1.Duration{Duration: 2 * time.Hour}
		}), func() broker.SubmitRequest {
			r := base
			r.Payload, r.Priority, r.MaxAttempts, r.Timeout = json.RawMessage(`{"a":1}`), 9, 3, time.Minute
			r.NotBefore, r.ExpiresAt = created.Add(time.Hour), created.Add(2*time.Hour)
			return r
		}()},
		"notBefore": {task(func(t *dtqv1alpha1.Task) { t.Spec.NotBefore = &metav1.Time{Time: created.Add(time.Minute)} }),
			func() broker.SubmitRequest { r := base; r.NotBefore = created.Add(time.Minute); return r }()},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, submitRequest(tc.task)); diff != "" {
				t.Errorf("submitRequest (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyTaskInfo(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 500_000_000, time.UTC)
	keyed := testutil.MakeTask("t", "ns").Key("k").Obj()
	info := broker.TaskInfo{ID: "own", State: broker.StateSucceeded, Attempt: 2, StartedAt: at, FinishedAt: at,
		WorkerID: "w", Result: json.RawMessage(`{"ok":true}`)}
	sec := &metav1.Time{Time: at.Truncate(time.Second)}
	for name, tc := range map[string]struct {
		task *dtqv1alpha1.Task
		info broker.TaskInfo
		dup  bool
		want dtqv1alpha1.TaskStatus
	}{
		"own task": {keyed, info, false, dtqv1alpha1.TaskStatus{State: dtqv1alpha1.TaskSucceeded, TaskID: "own", Attempt: 2,
			StartedAt: sec, FinishedAt: sec, WorkerID: "w", Result: `{"ok":true}`,
			Idempotency: &dtqv1alpha1.TaskIdempotency{Key: "k", State: dtqv1alpha1.IdempotencyCompleted, TaskID: "own"}}},
		"duplicate of a failed original": {keyed, broker.TaskInfo{ID: "orig", State: broker.StateDeadLettered, Attempt: 5, LastError: "boom"}, true,
			dtqv1alpha1.TaskStatus{State: dtqv1alpha1.TaskDeadLettered, Attempt: 5, LastError: "boom",
				Idempotency: &dtqv1alpha1.TaskIdempotency{Key: "k", State: dtqv1alpha1.IdempotencyFailed, TaskID: "orig", Duplicate: true}}},
		"no key, running": {testutil.MakeTask("t", "ns").Obj(), broker.TaskInfo{ID: "own", State: broker.StateRetrying, Attempt: 1}, false,
			dtqv1alpha1.TaskStatus{State: dtqv1alpha1.TaskRetrying, TaskID: "own", Attempt: 1}},
		"queued, with the engine's wait reason": {testutil.MakeTask("t", "ns").Obj(), broker.TaskInfo{ID: "own", State: broker.StateQueued,
			WaitReason: "key tenant-a at concurrency 3/3"}, false,
			dtqv1alpha1.TaskStatus{State: dtqv1alpha1.TaskQueued, TaskID: "own", WaitReason: "key tenant-a at concurrency 3/3"}},
		"a wait reason outside Queued is dropped": {testutil.MakeTask("t", "ns").Obj(), broker.TaskInfo{ID: "own", State: broker.StateRunning,
			WaitReason: "key tenant-a at concurrency 3/3"}, false,
			dtqv1alpha1.TaskStatus{State: dtqv1alpha1.TaskRunning, TaskID: "own"}},
		"long result is truncated": {testutil.MakeTask("t", "ns").Obj(), broker.TaskInfo{ID: "own", State: broker.StateSucceeded,
			Result: json.RawMessage(`"` + string(make([]byte, 5000)) + `"`)}, false,
			dtqv1alpha1.TaskStatus{State: dtqv1alpha1.TaskSucceeded, TaskID: "own", Result: (`"` + string(make([]byte, 5000)))[:maxResult], ResultTruncated: true}},
	} {
		t.Run(name, func(t *testing.T) {
			var got dtqv1alpha1.TaskStatus
			applyTaskInfo(&got, tc.task, tc.info, tc.dup)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}
