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

// Package delivery is the worker binary's delivery mode: the sidecar of a
// Queue with spec.handler.http. It is a pkg/worker Server (leases,
// heartbeats, fencing, retries, dead letters, cancel and drain are the Go
// SDK's own) whose handler forwards each task over HTTP to the app container
// on localhost, and it serves the app a small loopback API (progress, cancel
// state, idempotent operations). The contract is docs/http-handlers.md.
package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"

	"github.com/dtq-dev/dtq/pkg/worker"
)

// Environment of the delivery sidecar, set by the Queue controller beside the
// worker SDK's DTQ_* variables.
const (
	// EnvHandlerURL is where tasks are POSTed: http://127.0.0.1:<port><path>.
	EnvHandlerURL = "DTQ_HANDLER_URL"
	// EnvHandlerReadyURL, when set, is the app container's readiness probe
	// (an HTTP GET on localhost); unset, a TCP connect to the handler's port.
	EnvHandlerReadyURL = "DTQ_HANDLER_READY_URL"
	// EnvSidecarAddr is the loopback address of the sidecar's API.
	EnvSidecarAddr = "DTQ_SIDECAR_ADDR"
	// EnvSidecarURL is given to the app container: the sidecar API's base URL.
	EnvSidecarURL = "DTQ_SIDECAR_URL"
)

// DefaultSidecarPort is the loopback port of the sidecar's API in a pod.
const DefaultSidecarPort = 8081

// Statuses the sidecar reports in its worker record (worker.Config.Hold)
// while it reads no new tasks.
const (
	// StatusAppNotReady: the app container has not passed its readiness
	// check yet, or a connection to it failed since.
	StatusAppNotReady = "app-not-ready"
	// StatusHandlerNotFound: the app answered 404 without a verdict: its
	// route (spec.handler.http.path or port) is likely wrong.
	StatusHandlerNotFound = "handler-not-found"
	// StatusThrottled: the app answered 429 or 503 with a Retry-After that
	// has not passed yet.
	StatusThrottled = "app-throttled"
)

// Config is the sidecar's own configuration.
type Config struct {
	HandlerURL string // POST target
	ReadyURL   string // GET readiness check; "" connects to HandlerURL's host instead
	APIAddr    string // the loopback API's listen address; "" serves none
	// Token is the secret the loopback API requires (header Dtq-Sidecar-Token);
	// sent to the app with every task. Random when empty.
	Token string
}

// ConfigFromEnv reads the sidecar's variables.
func ConfigFromEnv() (Config, error) {
	c := Config{HandlerURL: os.Getenv(EnvHandlerURL), ReadyURL: os.Getenv(EnvHandlerReadyURL), APIAddr: os.Getenv(EnvSidecarAddr)}
	if c.APIAddr == "" {
		c.APIAddr = fmt.Sprintf("127.0.0.1:%d", DefaultSidecarPort)
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	u, err := url.Parse(c.HandlerURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("%s: want http://127.0.0.1:<port><path>, got %q", EnvHandlerURL, c.HandlerURL)
	}
	if c.Token == "" {
		var b [24]byte
		_, _ = rand.Read(b[:])
		c.Token = hex.EncodeToString(b[:])
	}
	return nil
}

// Run serves the queue of wcfg, delivering to the app, until ctx ends, then
// drains like a worker.Server.
func Run(ctx context.Context, wcfg worker.Config, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	f := newForwarder(cfg, wcfg.Logger)
	wcfg.Hold = f.gate.holdStatus
	srv, err := worker.NewServer(wcfg, f)
	if err != nil {
		return err
	}
	f.ns, f.queue = wcfg.Namespace, wcfg.Queue
	if f.ns == "" {
		f.ns = worker.DefaultNamespace
	}
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	f.gate.drain = ctx
	go f.gate.run(bg)
	if cfg.APIAddr != "" {
		stop, err := serveAPI(cfg.APIAddr, newAPI(cfg.Token, f, srv.Redis(), f.log))
		if err != nil {
			return err
		}
		defer stop()
	}
	err = srv.Run(ctx)
	f.client.closeIdle()
	return err
}
