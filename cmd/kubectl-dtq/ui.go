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
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dtq-dev/dtq/internal/console"
	"github.com/dtq-dev/dtq/pkg/client"
)

type uiFlags struct {
	address string
	open    bool
}

func newUICommand(c *cli) *cobra.Command {
	var f uiFlags
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the web console through a local proxy that authenticates you to the API",
		Long: `ui serves the dtq API (and its web console under /ui/) on a loopback port and
forwards every request to the API. A request that carries the proxy's session
secret as its bearer token is sent with a token for the API instead, the one
the other API verbs send: --api-token or --api-token-file, else a token for
--api-audience (dtq-api) requested for the ServiceAccount your kubeconfig's
user is, so the API's authentication and RBAC decide as for kubectl; other
requests are forwarded unchanged. It prints the console's URL, whose fragment carries the
secret (the console keeps it in the tab's session storage), opens it in your
browser (--open), and runs until Ctrl-C.

The API is found and trusted as for the other API verbs (--api-url,
$DTQ_API_URL, or the api-url file beside the kubeconfig, which make dev
writes; --api-ca-file, --api-tls-server-name), and the user is the one of
--kubeconfig and --context.`,
		Example: `  kubectl dtq ui
  kubectl dtq ui --open=false --address 127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return runUI(ctx, c, f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.address, "address", "127.0.0.1:0", "Address the proxy listens on (port 0: any free port).")
	fl.BoolVar(&f.open, "open", true, "Open the console in the default browser.")
	return cmd
}

// runUI serves the proxy until ctx ends; it prints the console's URL to out.
func runUI(ctx context.Context, c *cli, f uiFlags, out io.Writer) error {
	apiURL, err := c.apiURL()
	if err != nil {
		return err
	}
	opts, err := c.apiCredentials()
	if err != nil {
		return err
	}
	base, err := c.apiTransport()
	if err != nil {
		return err
	}
	creds, err := client.Transport(base, opts...)
	if err != nil {
		return err
	}
	if base == nil {
		base = http.DefaultTransport
	}
	proxy, err := newUIProxy(apiURL, creds, base)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.address)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	link := "http://" + ln.Addr().String() + console.Path + "#token=" + proxy.secret
	fmt.Fprintf(out, "dtq ui: console at %s (proxy to %s; Ctrl-C to stop)\n", link, apiURL)
	if f.open {
		if err := openBrowser(link); err != nil {
			fmt.Fprintf(out, "dtq ui: could not open a browser (%v): open the URL above\n", err)
		}
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown) // open event streams end with the timeout
	return nil
}

// uiProxy forwards requests to the API; those whose bearer token is the
// session secret go out with the API verbs' credentials instead. Both
// trust the API's certificate as --api-ca-file and --api-tls-server-name say.
type uiProxy struct {
	secret string
	proxy  *httputil.ReverseProxy
}

// newUIProxy returns the proxy to apiURL: creds sends the requests that carry
// the session secret, plain every other.
func newUIProxy(apiURL string, creds, plain http.RoundTripper) (*uiProxy, error) {
	target, err := url.Parse(apiURL)
	if err != nil || target.Scheme == "" || target.Host == "" {
		return nil, fmt.Errorf("API URL %q must be absolute (http[s]://host[:port])", apiURL)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	p := &uiProxy{secret: hex.EncodeToString(b)}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("Authorization") == "Bearer "+p.secret {
				r.Header.Del("Authorization") // the API verbs' token goes in its place
				return creds.RoundTrip(r)
			}
			return plain.RoundTrip(r)
		}),
		// Events streams are flushed as they come (text/event-stream is
		// flushed at once anyway).
		FlushInterval: -1,
	}
	return p, nil
}

func (p *uiProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.proxy.ServeHTTP(w, r) }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func openBrowser(link string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, link)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
