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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/worker"
)

// Labels and annotations of worker Deployments.
const (
	LabelQueue = "dtq.dev/queue"
	// AnnotationTemplateHash is the hash of the desired Deployment spec
	// (replicas excluded); the controller updates the Deployment when it changes.
	AnnotationTemplateHash = "dtq.dev/template-hash"
	// AnnotationRedisCredential, on the pod template, is a digest of the
	// namespace's Redis password: a new password rolls the workers.
	AnnotationRedisCredential = "dtq.dev/redis-credential"
	// FieldOwner is the field manager of the operator's server-side applies.
	FieldOwner          = "dtq-operator"
	workerContainerName = "worker"
	workerMetricsPort   = 8080
	// drainMargin is added to the drain timeout for the pod's grace period.
	drainMargin = 15 * time.Second
)

// WorkerOptions are the manager-wide settings of worker Deployments.
type WorkerOptions struct {
	// Image runs when the Queue's pod template has no containers.
	Image string
	// RedisURL is the DTQ_REDIS_URL value given to workers when RedisSecret is empty.
	RedisURL string
	// RedisSecretName and RedisSecretKey, when set, make DTQ_REDIS_URL a
	// secretKeyRef instead of a plain value.
	RedisSecretName string
	RedisSecretKey  string
	// Isolation gives each namespace's workers a Redis ACL user of their own
	// (see redis_users.go); off, workers share the URL's identity.
	Isolation bool
}

// redisCredential is the namespace's Redis user that workers log in as: the
// Secret holding it and a digest of its password.
type redisCredential struct {
	Secret string
	Digest string
}

// defaultWorkerRequests are the resource requests of worker containers that
// set no resources at all, so the scheduler and quotas see them.
var defaultWorkerRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("100m"),
	corev1.ResourceMemory: resource.MustParse("128Mi"),
}

// workerDeploymentName is the name of a Queue's worker Deployment.
func workerDeploymentName(q *dtqv1alpha1.Queue) string { return q.Name + "-workers" }

// desiredWorkerDeployment builds a Queue's worker Deployment from its pod
// template: the reference worker image when the template has no containers,
// the worker SDK's DTQ_* environment injected into the first container, and
// a restricted-profile security context, no service account token and
// resource requests wherever the user set none. Fields the user set are kept,
// except the variables the operator owns (reservedEnv). cred is the
// namespace's Redis user, nil without isolation. Replicas and the owner
// reference are the controller's.
func desiredWorkerDeployment(q *dtqv1alpha1.Queue, opts WorkerOptions, cred *redisCredential) *appsv1.Deployment {
	labels := map[string]string{LabelQueue: q.Name}
	tpl := *q.Spec.WorkerTemplate.DeepCopy()
	tpl.Labels = mergeLabels(tpl.Labels, labels)
	ps := &tpl.Spec
	if len(ps.Containers) == 0 {
		ps.Containers = []corev1.Container{{Name: workerContainerName, Image: opts.Image}}
	}
	drain := q.Spec.TaskTimeout.Duration
	if drain <= 0 {
		drain = worker.DefaultDrainTimeout
	}
	if cred != nil {
		tpl.Annotations = mergeLabels(tpl.Annotations, map[string]string{AnnotationRedisCredential: cred.Digest})
	}
	if h := httpHandler(q); h != nil {
		addDeliverySidecar(q, h, opts, cred, ps, drain)
	} else {
		addWorkerContract(q, opts, cred, &ps.Containers[0], drain)
	}
	for i := range ps.Containers {
		ci := &ps.Containers[i]
		if ci.SecurityContext == nil {
			ci.SecurityContext = restrictedContainerSecurityContext()
		}
		if len(ci.Resources.Requests) == 0 && len(ci.Resources.Limits) == 0 {
			ci.Resources.Requests = defaultWorkerRequests.DeepCopy()
		}
	}
	for i := range ps.InitContainers {
		if ci := &ps.InitContainers[i]; ci.Name == DeliveryContainerName {
			ci.SecurityContext = restrictedContainerSecurityContext()
			ci.Resources.Requests = defaultWorkerRequests.DeepCopy()
		}
	}
	if ps.AutomountServiceAccountToken == nil {
		// Workers talk to Redis, not to the API server.
		ps.AutomountServiceAccountToken = ptr.To(false)
	}
	if ps.SecurityContext == nil {
		ps.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	if ps.TerminationGracePeriodSeconds == nil {
		ps.TerminationGracePeriodSeconds = ptr.To(int64((drain + drainMargin) / time.Second))
	}

	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      workerDeploymentName(q),
			Namespace: q.Namespace,
			Labels:    labels,
		},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: tpl,
			// Workers drain on SIGTERM; a rollout replaces them one at a time.
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
				},
			},
		},
	}
	d.Annotations = map[string]string{AnnotationTemplateHash: specHash(d.Spec)}
	return d
}

// addWorkerContract makes c a worker SDK container: the DTQ_* environment,
// and the metrics port and the probes of /readyz and /healthz unless set.
func addWorkerContract(q *dtqv1alpha1.Queue, opts WorkerOptions, cred *redisCredential, c *corev1.Container, drain time.Duration) {
	c.Env = mergeEnv(c.Env, reservedEnv(q, cred), workerEnv(q, opts, drain))
	if len(c.Ports) == 0 {
		c.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: workerMetricsPort, Protocol: corev1.ProtocolTCP}}
	}
	if c.ReadinessProbe == nil {
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(workerMetricsPort)}},
			PeriodSeconds: 5,
		}
	}
	if c.LivenessProbe == nil {
		c.LivenessProbe = &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(workerMetricsPort)}},
			PeriodSeconds:    10,
			FailureThreshold: 3,
		}
	}
}

// reservedEnv is the environment the operator owns: the queue's identity
// and, with isolation, the namespace's Redis user. It replaces any value the
// user's template sets, so a worker never serves another namespace's queue.
func reservedEnv(q *dtqv1alpha1.Queue, cred *redisCredential) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: worker.EnvQueueNamespace, Value: q.Namespace},
		{Name: worker.EnvQueueName, Value: q.Name},
	}
	if cred != nil {
		ref := func(key string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: cred.Secret}, Key: key}}
		}
		env = append(env,
			corev1.EnvVar{Name: redisconn.EnvUsername, ValueFrom: ref(corev1.BasicAuthUsernameKey)},
			corev1.EnvVar{Name: redisconn.EnvPassword, ValueFrom: ref(corev1.BasicAuthPasswordKey)})
	}
	return env
}

// workerEnv is the environment the operator injects unless the user's
// template sets it.
func workerEnv(q *dtqv1alpha1.Queue, opts WorkerOptions, drain time.Duration) []corev1.EnvVar {
	redisURL := corev1.EnvVar{Name: worker.EnvRedisURL, Value: opts.RedisURL}
	if opts.RedisSecretName != "" {
		redisURL = corev1.EnvVar{Name: worker.EnvRedisURL, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: opts.RedisSecretName},
				Key:                  opts.RedisSecretKey,
			},
		}}
	}
	concurrency := q.Spec.Concurrency
	if concurrency <= 0 {
		concurrency = worker.DefaultConcurrency
	}
	dur := func(d, def time.Duration) string {
		if d <= 0 {
			d = def
		}
		return d.String()
	}
	return []corev1.EnvVar{
		redisURL,
		{Name: worker.EnvConcurrency, Value: strconv.Itoa(int(concurrency))},
		{Name: worker.EnvVisibilityTimeout, Value: dur(q.Spec.VisibilityTimeout.Duration, worker.DefaultVisibilityTimeout)},
		{Name: worker.EnvHeartbeatInterval, Value: dur(q.Spec.HeartbeatInterval.Duration, worker.DefaultHeartbeatInterval)},
		{Name: worker.EnvDrainTimeout, Value: drain.String()},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: worker.EnvMetricsAddr, Value: ":" + strconv.Itoa(workerMetricsPort)},
	}
}

// mergeEnv returns the user's variables with the reserved ones replaced in
// place (or appended), then the injected ones the user did not set.
func mergeEnv(user, reserved, injected []corev1.EnvVar) []corev1.EnvVar {
	res := map[string]corev1.EnvVar{}
	for _, e := range reserved {
		res[e.Name] = e
	}
	set := map[string]bool{}
	out := make([]corev1.EnvVar, 0, len(user)+len(reserved)+len(injected))
	for _, e := range user {
		if r, ok := res[e.Name]; ok {
			if set[e.Name] {
				continue
			}
			e = r
		}
		out = append(out, e)
		set[e.Name] = true
	}
	for _, e := range append(append([]corev1.EnvVar(nil), reserved...), injected...) {
		if !set[e.Name] {
			out = append(out, e)
			set[e.Name] = true
		}
	}
	return out
}

// overriddenEnv names the reserved variables the Queue's template sets to
// something else than the operator's value.
func overriddenEnv(q *dtqv1alpha1.Queue, cred *redisCredential) []string {
	cs := q.Spec.WorkerTemplate.Spec.Containers
	if len(cs) == 0 {
		return nil
	}
	res := map[string]corev1.EnvVar{}
	for _, e := range reservedEnv(q, cred) {
		res[e.Name] = e
	}
	var out []string
	for _, e := range cs[0].Env {
		if r, ok := res[e.Name]; ok && !equality.Semantic.DeepEqual(e, r) && !slices.Contains(out, e.Name) {
			out = append(out, e.Name)
		}
	}
	return out
}

func mergeLabels(user, ours map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range user {
		out[k] = v
	}
	for k, v := range ours {
		out[k] = v
	}
	return out
}

func restrictedContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// specHash identifies a desired spec; replicas are the autoscaler's and excluded.
func specHash(spec appsv1.DeploymentSpec) string {
	spec.Replicas = nil
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
