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
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dtq-dev/dtq/pkg/client"
	"github.com/dtq-dev/dtq/pkg/kubeauth"
)

// EnvAPIURL names the HTTP API's base URL when --api-url is not given.
const EnvAPIURL = "DTQ_API_URL"

// apiFlags say where the HTTP API is, how to trust its certificate and
// which token to send it.
type apiFlags struct {
	url, caFile, serverName string
	token, tokenFile        string
	audience                string
}

func (f *apiFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.token, "api-token", "", "Bearer token for the HTTP API, for its audience (e.g. from kubectl create token SA --audience dtq-api); "+
		"default: a token requested for the kubeconfig's ServiceAccount (see --api-audience).")
	fl.StringVar(&f.tokenFile, "api-token-file", "", "File holding the bearer token for the HTTP API (read again when it changes), like --api-token.")
	fl.StringVar(&f.audience, "api-audience", client.DefaultAudience, "Without --api-token(-file): the audience of the token requested (TokenRequest) "+
		"for the ServiceAccount the kubeconfig's user is; empty sends the kubeconfig's own credentials, for an API started with --token-audiences=.")
	fl.StringVar(&f.url, "api-url", "", "Base URL of the dtq HTTP API (default: $"+EnvAPIURL+", else the api-url file beside the kubeconfig, which make dev writes).")
	fl.StringVar(&f.caFile, "api-ca-file", "", "CA certificate (PEM) to trust for the API's TLS certificate (default: the system's).")
	fl.StringVar(&f.serverName, "api-tls-server-name", "", "Name to check in the API's TLS certificate (through a port-forward: dtq-api.dtq-system.svc).")
}

// apiURL is --api-url, else $DTQ_API_URL, else the content of the file
// api-url in the directory of the kubeconfig in use (make dev writes
// .dev/kubeconfig and .dev/api-url side by side).
func (c *cli) apiURL() (string, error) {
	if c.api.url != "" {
		return c.api.url, nil
	}
	if u := os.Getenv(EnvAPIURL); u != "" {
		return u, nil
	}
	if kc := c.kubeconfigPath(); kc != "" {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(kc), "api-url"))
		if err == nil && strings.TrimSpace(string(b)) != "" {
			return strings.TrimSpace(string(b)), nil
		}
	}
	return "", errors.New("no dtq HTTP API URL: give --api-url or $" + EnvAPIURL +
		", or write it to the file api-url beside the kubeconfig (make dev does)" +
		" (in a cluster, e.g.: kubectl -n dtq-system port-forward svc/dtq-api 8443:443, then --api-url https://localhost:8443" +
		" --api-tls-server-name dtq-api.dtq-system.svc --api-ca-file CA.crt); see docs/cli.md")
}

// kubeconfigPath is the kubeconfig file in use: --kubeconfig, else the first
// file of $KUBECONFIG, else ~/.kube/config.
func (c *cli) kubeconfigPath() string {
	if p := *c.kube.KubeConfig; p != "" {
		return p
	}
	for _, p := range filepath.SplitList(os.Getenv(clientcmd.RecommendedConfigPathEnvVar)) {
		if p != "" {
			return p
		}
	}
	return clientcmd.RecommendedHomeFile
}

// apiCredentials are the client options that authenticate to the HTTP API:
// --api-token or --api-token-file as given; else tokens for --api-audience
// requested with the TokenRequest API for the ServiceAccount the kubeconfig's
// user (with --context, --user, --token ... applied) is, which fails with
// kubeauth.ErrNotServiceAccount for another user (see apiTokenHint); else, with
// --api-audience empty, the kubeconfig user's own token, token file or exec
// plugin (a client certificate cannot authenticate; the error says so).
func (c *cli) apiCredentials() ([]client.Option, error) {
	switch {
	case c.api.token != "" && c.api.tokenFile != "":
		return nil, errors.New("give --api-token or --api-token-file, not both")
	case c.api.token != "":
		return []client.Option{client.WithToken(c.api.token)}, nil
	case c.api.tokenFile != "":
		return []client.Option{client.WithTokenFile(c.api.tokenFile)}, nil
	}
	cfg, err := c.kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	if c.api.audience == "" {
		return []client.Option{kubeauth.WithRESTConfig(cfg)}, nil
	}
	return []client.Option{kubeauth.WithTokenRequest(cfg, "", "", c.api.audience)}, nil
}

// apiTokenHint says how to get a token for the API when the kubeconfig's
// user is not a ServiceAccount (a person with a client certificate or OIDC).
func apiTokenHint(err error) string {
	if !errors.Is(err, kubeauth.ErrNotServiceAccount) {
		return ""
	}
	return "the dtq HTTP API accepts tokens of a ServiceAccount for its audience: give one with " +
		`--api-token "$(kubectl -n NAMESPACE create token SERVICEACCOUNT --audience ` + client.DefaultAudience + `)"` +
		" or --api-token-file (see docs/cli.md)"
}

// apiClient returns a client of the HTTP API with apiCredentials.
func (c *cli) apiClient() (*client.Client, error) {
	u, err := c.apiURL()
	if err != nil {
		return nil, err
	}
	opts, err := c.apiCredentials()
	if err != nil {
		return nil, err
	}
	tr, err := c.apiTransport()
	if err != nil {
		return nil, err
	}
	if tr != nil {
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: tr}))
	}
	api, err := client.New(u, opts...)
	if err != nil {
		return nil, fmt.Errorf("the dtq HTTP API at %s: %w", u, err)
	}
	return api, nil
}

// apiTransport returns the transport that trusts the API's certificate as
// --api-ca-file and --api-tls-server-name say, or nil (the default
// transport) when neither is given.
func (c *cli) apiTransport() (http.RoundTripper, error) {
	if c.api.caFile == "" && c.api.serverName == "" {
		return nil, nil
	}
	tc := &tls.Config{ServerName: c.api.serverName, MinVersion: tls.VersionTLS12}
	if c.api.caFile != "" {
		pem, err := os.ReadFile(c.api.caFile)
		if err != nil {
			return nil, fmt.Errorf("--api-ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--api-ca-file %s holds no PEM certificate", c.api.caFile)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return tr, nil
}

// apiQueue returns the HTTP API's handle on queue of the namespace of -n.
func (c *cli) apiQueue(queue string) (*client.Queue, error) {
	api, err := c.apiClient()
	if err != nil {
		return nil, err
	}
	ns, err := c.namespace()
	if err != nil {
		return nil, err
	}
	return api.Queue(ns, queue), nil
}
