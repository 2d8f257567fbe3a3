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
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
)

// The namespace's Redis credential.
const (
	// RedisUserSecret is the Secret, in each namespace that has Queues, that
	// holds the namespace's Redis ACL user (keys username and password).
	RedisUserSecret = "dtq-redis-user"
	// LabelRedisUser marks the Secrets the operator manages; the manager's
	// cache holds only Secrets with it.
	LabelRedisUser = "dtq.dev/redis-user"
	// AnnotationAcceptedUntil and AnnotationAcceptedHashes, on a Secret written
	// for a new password, keep the previous passwords (SHA-256 hex, comma
	// separated) valid until the time (RFC 3339), so workers started with the
	// old one keep working while the Deployments roll.
	AnnotationAcceptedUntil  = "dtq.dev/previous-passwords-until"
	AnnotationAcceptedHashes = "dtq.dev/previous-password-hashes"
	// RedisPasswordGrace is how long a replaced password stays valid.
	RedisPasswordGrace = time.Hour
	// DefaultRedisUserResync is how often each namespace's user is checked in
	// Redis (ACL users live in memory: a Redis restart without an ACL file, a
	// failover to a replica or a new cluster node loses them).
	DefaultRedisUserResync = 10 * time.Second
)

// RedisUsers manages the namespace users in Redis; *broker.ACL implements it.
type RedisUsers interface {
	SetNamespaceUser(ctx context.Context, ns, password string, acceptHashes []string) error
	HasNamespaceUser(ctx context.Context, ns string, hashes []string) (bool, error)
	PasswordHashes(ctx context.Context, ns string) ([]string, error)
	DeleteNamespaceUser(ctx context.Context, ns string) error
	NamespaceUsers(ctx context.Context) ([]string, error)
}

// RedisUserReconciler keeps, for each namespace that has Queues, one Redis
// ACL user allowed only that namespace's keys and the commands workers need,
// and its password in the Secret RedisUserSecret. The Secret is owned by the
// namespace's Queues, and the user and the Secret are deleted with the last
// Queue. Requests are namespaces (Name is the namespace).
type RedisUserReconciler struct {
	client.Client
	Users    RedisUsers
	Clock    clock.Clock
	Recorder events.EventRecorder
	Resync   time.Duration

	// applied is the digest of the rules this manager last set per
	// namespace; a namespace not in it (manager start) is set unconditionally,
	// so an upgrade that changes the rules applies them.
	applied sync.Map
}

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=dtq.dev,resources=queues,verbs=get;list;watch

// Reconcile brings one namespace's Redis user and Secret to its Queues.
func (r *RedisUserReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Name
	var queues dtqv1alpha1.QueueList
	if err := r.List(ctx, &queues, client.InNamespace(ns)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list queues: %w", err)
	}
	queues.Items = slices.DeleteFunc(queues.Items, func(q dtqv1alpha1.Queue) bool { return !q.DeletionTimestamp.IsZero() })
	sec := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: RedisUserSecret}, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get secret: %w", err)
	}
	if apierrors.IsNotFound(err) {
		sec = nil
	}
	if len(queues.Items) == 0 {
		return ctrl.Result{}, r.remove(ctx, ns, sec)
	}
	if sec == nil || len(sec.Data[corev1.BasicAuthPasswordKey]) == 0 {
		if sec, err = r.newPassword(ctx, ns, sec, queues.Items); err != nil {
			return ctrl.Result{}, err
		}
	} else if err := r.setOwners(ctx, sec, queues.Items); err != nil {
		return ctrl.Result{}, err
	}
	accept, until := acceptedHashes(sec, r.Clock.Now())
	if err := r.ensureUser(ctx, ns, string(sec.Data[corev1.BasicAuthPasswordKey]), accept); err != nil {
		return ctrl.Result{}, err
	}
	next := r.Resync
	if !until.IsZero() {
		next = min(next, until.Sub(r.Clock.Now())+time.Second)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// ensureUser sets the user's rules when this manager has not set these yet,
// and otherwise only when Redis lost the user or its passwords.
func (r *RedisUserReconciler) ensureUser(ctx context.Context, ns, password string, accept []string) error {
	hashes := append([]string{broker.PasswordHash(password)}, accept...)
	digest := strings.Join(hashes, ",")
	if v, ok := r.applied.Load(ns); ok && v == digest {
		ok, err := r.Users.HasNamespaceUser(ctx, ns, hashes)
		if err != nil || ok {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("Redis lost the namespace's user; setting it again", "user", broker.NamespaceUser(ns))
	}
	if err := r.Users.SetNamespaceUser(ctx, ns, password, accept); err != nil {
		return err
	}
	r.applied.Store(ns, digest)
	return nil
}

// newPassword writes a Secret with a new password (creating it, or filling a
// managed Secret whose password was removed). When Redis already has the
// user, its passwords stay accepted for RedisPasswordGrace: this is a rotation.
func (r *RedisUserReconciler) newPassword(ctx context.Context, ns string, sec *corev1.Secret, queues []dtqv1alpha1.Queue) (*corev1.Secret, error) {
	prev, err := r.Users.PasswordHashes(ctx, ns)
	if err != nil {
		return nil, err
	}
	password, err := randomPassword()
	if err != nil {
		return nil, err
	}
	// The user first: workers start as soon as the Secret exists.
	if err := r.ensureUser(ctx, ns, password, prev); err != nil {
		return nil, err
	}
	create := sec == nil
	if create {
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: RedisUserSecret}}
	}
	sec.Labels = mergeLabels(sec.Labels, map[string]string{LabelRedisUser: "true"})
	sec.Type = corev1.SecretTypeBasicAuth
	sec.Data = map[string][]byte{
		corev1.BasicAuthUsernameKey: []byte(broker.NamespaceUser(ns)),
		corev1.BasicAuthPasswordKey: []byte(password),
	}
	delete(sec.Annotations, AnnotationAcceptedUntil)
	delete(sec.Annotations, AnnotationAcceptedHashes)
	if len(prev) > 0 {
		sec.Annotations = mergeLabels(sec.Annotations, map[string]string{
			AnnotationAcceptedUntil:  r.Clock.Now().Add(RedisPasswordGrace).UTC().Format(time.RFC3339),
			AnnotationAcceptedHashes: strings.Join(prev, ","),
		})
	}
	sec.OwnerReferences = queueOwners(queues)
	if create {
		err = r.Create(ctx, sec)
	} else {
		err = r.Update(ctx, sec)
	}
	if apierrors.IsAlreadyExists(err) {
		for i := range queues {
			r.event(&queues[i], corev1.EventTypeWarning, "SecretConflict",
				"Secret %s exists and is not managed by dtq (no %s label); workers cannot get their Redis user until it is removed", RedisUserSecret, LabelRedisUser)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("write secret %s: %w", RedisUserSecret, err)
	}
	ctrl.LoggerFrom(ctx).Info("Wrote a new Redis password", "secret", RedisUserSecret, "user", broker.NamespaceUser(ns), "rotation", len(prev) > 0)
	return sec, nil
}

// setOwners makes the namespace's Queues the Secret's owners, so it is
// garbage-collected with them even when no manager runs.
func (r *RedisUserReconciler) setOwners(ctx context.Context, sec *corev1.Secret, queues []dtqv1alpha1.Queue) error {
	owners := queueOwners(queues)
	if slices.EqualFunc(owners, sec.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID }) {
		return nil
	}
	sec = sec.DeepCopy()
	sec.OwnerReferences = owners
	if err := r.Update(ctx, sec); err != nil {
		return fmt.Errorf("set owners of secret %s: %w", RedisUserSecret, err)
	}
	return nil
}

// remove deletes the user and the Secret of a namespace with no Queue left.
func (r *RedisUserReconciler) remove(ctx context.Context, ns string, sec *corev1.Secret) error {
	if sec != nil {
		if err := r.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete secret %s: %w", RedisUserSecret, err)
		}
	}
	if err := r.Users.DeleteNamespaceUser(ctx, ns); err != nil {
		return err
	}
	r.applied.Delete(ns)
	return nil
}

func (r *RedisUserReconciler) event(q *dtqv1alpha1.Queue, typ, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(q, nil, typ, reason, reason, format, args...)
	}
}

// acceptedHashes returns the previous passwords a Secret keeps valid and until when.
func acceptedHashes(sec *corev1.Secret, now time.Time) ([]string, time.Time) {
	until, err := time.Parse(time.RFC3339, sec.Annotations[AnnotationAcceptedUntil])
	if err != nil || !now.Before(until) || sec.Annotations[AnnotationAcceptedHashes] == "" {
		return nil, time.Time{}
	}
	current := broker.PasswordHash(string(sec.Data[corev1.BasicAuthPasswordKey]))
	return slices.DeleteFunc(strings.Split(sec.Annotations[AnnotationAcceptedHashes], ","), func(h string) bool { return h == current }), until
}

// queueOwners are owner references to queues (not controllers: the Secret
// is the namespace's, shared by its Queues), sorted by UID.
func queueOwners(queues []dtqv1alpha1.Queue) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(queues))
	for _, q := range queues {
		out = append(out, metav1.OwnerReference{APIVersion: dtqv1alpha1.GroupVersion.String(), Kind: "Queue",
			Name: q.Name, UID: q.UID, BlockOwnerDeletion: ptr.To(false)})
	}
	slices.SortFunc(out, func(a, b metav1.OwnerReference) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return out
}

func randomPassword() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random password: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// credentialOf is the workers' view of a managed Secret, nil while it holds no password.
func credentialOf(sec *corev1.Secret) *redisCredential {
	pw := sec.Data[corev1.BasicAuthPasswordKey]
	if len(pw) == 0 {
		return nil
	}
	sum := sha256.Sum256(append([]byte("dtq-redis-credential:"), pw...))
	return &redisCredential{Secret: sec.Name, Digest: hex.EncodeToString(sum[:8])}
}

// SetupWithManager reconciles a namespace when a Queue appears or goes, when
// its managed Secret changes, and once at start for every user Redis has
// (users left by namespaces whose Queues went while no manager ran).
func (r *RedisUserReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetNamespace()}}}
	})
	start := make(chan event.GenericEvent)
	if err := mgr.Add(&redisUserSweep{users: r.Users, out: start}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("redisuser").
		Watches(&dtqv1alpha1.Queue{}, toNamespace, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
			},
		})).
		Watches(&corev1.Secret{}, toNamespace).
		WatchesRawSource(source.Channel(start, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetName()}}}
		}))).
		Complete(r)
}

// redisUserSweep sends, once at start, one event per namespace that has a
// user in Redis.
type redisUserSweep struct {
	users RedisUsers
	out   chan<- event.GenericEvent
}

func (s *redisUserSweep) NeedLeaderElection() bool { return true }

func (s *redisUserSweep) Start(ctx context.Context) error {
	nss, err := s.users.NamespaceUsers(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List the namespace users in Redis; users of namespaces without Queues stay until one is created and deleted")
		return nil
	}
	for _, ns := range nss {
		select {
		case s.out <- event.GenericEvent{Object: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}
