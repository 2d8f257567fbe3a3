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

// Package metricsauth guards a worker's /metrics with Kubernetes
// authentication and authorisation, as the manager's metrics endpoint is:
// a request needs a bearer token that TokenReview accepts and that
// SubjectAccessReview allows to GET the non-resource URL /metrics (the
// metrics-reader ClusterRole of config/rbac grants it). It lives apart from
// package worker so that workers without it do not link the Kubernetes
// client libraries.
//
// The worker's service account must be allowed to create tokenreviews and
// subjectaccessreviews (e.g. bound to the built-in system:auth-delegator
// ClusterRole), and its pod must mount its token
// (automountServiceAccountToken: true; the operator's default is false).
package metricsauth

import (
	"fmt"
	"net/http"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
)

// EnvMetricsAuth selects the authentication of a worker's /metrics:
// "kubernetes" (Kubernetes), or "" / "none" (open, the default).
const EnvMetricsAuth = "DTQ_METRICS_AUTH"

// Kubernetes returns a middleware (worker.Config.MetricsMiddleware) that
// checks requests against the API server of cfg with TokenReview and
// SubjectAccessReview. Decisions are cached (a minute for tokens, five
// minutes for allowed and 30 s for denied requests). It answers 401 without
// a valid token and 403 when the token's user may not GET the path.
func Kubernetes(cfg *rest.Config, log logr.Logger) (func(http.Handler) (http.Handler, error), error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metricsauth: %w", err)
	}
	return func(h http.Handler) (http.Handler, error) { return filter(log, h) }, nil
}

// FromEnv returns the middleware EnvMetricsAuth asks for, nil for none. With
// "kubernetes" it talks to the API server of the pod's service account (or
// of KUBECONFIG).
func FromEnv(log logr.Logger) (func(http.Handler) (http.Handler, error), error) {
	switch v := os.Getenv(EnvMetricsAuth); v {
	case "", "none":
		return nil, nil
	case "kubernetes":
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("metricsauth: %s=kubernetes needs the pod's service account token "+
				"(automountServiceAccountToken: true): %w", EnvMetricsAuth, err)
		}
		return Kubernetes(cfg, log)
	default:
		return nil, fmt.Errorf("metricsauth: %s: want kubernetes or none, got %q", EnvMetricsAuth, v)
	}
}
