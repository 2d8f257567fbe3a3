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

// Package kubeauth authenticates a dtq API client (pkg/client) as a
// Kubernetes user, with client-go: the current user of a kubeconfig, the user
// of a rest.Config (kubectl plugins), or tokens for the dtq API's audience
// requested with the TokenRequest API. It is a module of its own, so that
// pkg/client needs no k8s.io:
//
//	c, err := client.New(url, kubeauth.WithTokenRequest(cfg, "", "", client.DefaultAudience))
package kubeauth

import (
	"errors"
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dtq-dev/dtq/pkg/client"
)

// ErrNotServiceAccount is WithTokenRequest's error for a user who is not a
// ServiceAccount (a person with a client certificate or an OIDC token) and
// so cannot request tokens for itself: give a token of a ServiceAccount
// (`kubectl create token SA --audience dtq-api`), or name one.
var ErrNotServiceAccount = errors.New("kubeauth: not a ServiceAccount")

// WithKubeconfig authenticates as the current user of a kubeconfig: path, or
// when empty the default rules (KUBECONFIG, then ~/.kube/config), with the
// user's own credentials: a token, a token file or an exec or auth-provider
// plugin that yields one (the API accepts no client certificates). Those are
// tokens for the Kubernetes API server, which the dtq API accepts only when
// started with --token-audiences= (empty); with its default audience, load
// the kubeconfig and use WithTokenRequest.
func WithKubeconfig(path string) client.Option {
	return client.WithTransport(func(base http.RoundTripper) (http.RoundTripper, error) {
		return KubeconfigTransport(path, base)
	})
}

// WithRESTConfig authenticates as the user of a client-go configuration (a
// kubeconfig loaded with its context, user and flag overrides, as kubectl
// plugins do), as WithKubeconfig does: with its own token, token file or
// plugin, for an API started with --token-audiences= (empty). Only its
// credentials are used, not its host or TLS settings.
func WithRESTConfig(cfg *rest.Config) client.Option {
	return client.WithTransport(func(base http.RoundTripper) (http.RoundTripper, error) {
		return RESTConfigTransport(cfg, base)
	})
}

// kubeconfigConfig loads the kubeconfig's current context (path, or the
// default loading rules when path is empty).
func kubeconfigConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeauth: kubeconfig: %w", err)
	}
	return cfg, nil
}

// KubeconfigTransport returns base (http.DefaultTransport when nil) wrapped
// by client-go's authentication for the current user of the kubeconfig at
// path, or of the default rules when path is empty (token, token file re-read
// by client-go, exec or auth-provider plugin): every request without an
// Authorization header gets the user's bearer token. It fails when the user
// has no way to a token (a client certificate cannot authenticate to the API).
func KubeconfigTransport(path string, base http.RoundTripper) (http.RoundTripper, error) {
	cfg, err := kubeconfigConfig(path)
	if err != nil {
		return nil, err
	}
	return RESTConfigTransport(cfg, base)
}

// RESTConfigTransport wraps base (http.DefaultTransport when nil) with
// client-go's authentication for cfg's user, as KubeconfigTransport does for a
// kubeconfig file.
func RESTConfigTransport(cfg *rest.Config, base http.RoundTripper) (http.RoundTripper, error) {
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil {
		return nil, errors.New("kubeauth: the kubeconfig's user has no token (a client certificate cannot authenticate to the dtq API)")
	}
	if base == nil {
		base = http.DefaultTransport
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, base)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: kubeconfig credentials: %w", err)
	}
	return rt, nil
}
