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

package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-dev/dtq/pkg/redisconn"
)

// Environment variables read by ConfigFromEnv. They are the contract with the
// Queue controller, which injects them into worker pods (docs/worker.md).
const (
	EnvRedisURL          = redisconn.EnvURL         // required; see package redisconn for the credential variables
	EnvQueueNamespace    = "DTQ_QUEUE_NAMESPACE"    // default "default"
	EnvQueueName         = "DTQ_QUEUE_NAME"         // required
	EnvConcurrency       = "DTQ_WORKER_CONCURRENCY" // default 4
	EnvVisibilityTimeout = "DTQ_VISIBILITY_TIMEOUT" // Go duration, default 30s
	EnvHeartbeatInterval = "DTQ_HEARTBEAT_INTERVAL" // Go duration, default 5s, < visibility timeout
	EnvDrainTimeout      = "DTQ_DRAIN_TIMEOUT"      // Go duration, default 30s
	EnvWorkerID          = "DTQ_WORKER_ID"          // default $POD_NAME, else hostname-<8 hex>
	EnvMetricsAddr       = "DTQ_METRICS_ADDR"       // default ":8080"; "0" disables
	EnvLogLevel          = "DTQ_LOG_LEVEL"          // debug, info (default), warn, error
)

// Defaults.
const (
	DefaultConcurrency       = 4
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultDrainTimeout      = 30 * time.Second
	DefaultNamespace         = "default"
	DefaultMetricsAddr       = ":8080"
)

// Config configures a Server. Zero fields take the defaults above, except
// MetricsAddr: from code, "" listens on nothing; ConfigFromEnv defaults it to
// ":8080".
type Config struct {
	// RedisConn says how to reach Redis (URL, credentials, CA bundle). Ignored
	// when Redis is set.
	RedisConn redisconn.Config
	// Redis is a client to use instead of RedisURL. The server does not close it.
	Redis redis.UniversalClient

	Namespace string // the Queue's Kubernetes namespace
	Queue     string // the Queue's name

	Concurrency       int           // execution slots
	VisibilityTimeout time.Duration // idle time after which peers reclaim a dead worker's entries
	HeartbeatInterval time.Duration // heartbeat and in-flight touch period; must be < VisibilityTimeout
	DrainTimeout      time.Duration // budget for in-flight handlers after Run's context ends

	WorkerID string // consumer name in the group; unique per process
	// Metrics receives the server's measurements (package workermetrics:
	// Prometheus); nil measures nothing.
	Metrics     Metrics
	MetricsAddr string // listen address of /healthz, /readyz and Metrics' /metrics; "" or "0" disables
	// MetricsMiddleware, when set, wraps the /metrics handler (not /healthz
	// and /readyz, which the kubelet probes without credentials), e.g. the
	// Kubernetes authentication of package kubeauth/metricsauth.
	MetricsMiddleware func(http.Handler) (http.Handler, error)

	// Hold, when set, is asked before each read: while it returns a
	// non-empty status the server reads no new tasks (those in flight run
	// on), reports that status in its heartbeat record instead of ready or
	// busy, and /readyz answers 503; a handler's ErrHandBack then hands its
	// task back uncounted, as during a drain, and so does a task that a read
	// already waiting when the hold began delivers (its handler does not
	// run). The HTTP delivery sidecar
	// holds while the app is not ready, answers 404 to tasks or asked to
	// wait (Retry-After).
	Hold func() string

	// TracerProvider gives the spans of tasks that carry trace context
	// (dtq.start, dtq.complete: package tracing); nil for OpenTelemetry's
	// global provider.
	TracerProvider trace.TracerProvider

	// Logger receives the server's logs; default slog.Default(). ConfigFromEnv
	// sets NewLogger on stderr at DTQ_LOG_LEVEL (docs/observability.md).
	Logger *slog.Logger
}

// ConfigFromEnv reads the DTQ_* variables (see the Env* constants).
func ConfigFromEnv() (Config, error) {
	var errs []error
	c := Config{
		RedisConn:   redisconn.FromEnv(),
		Namespace:   os.Getenv(EnvQueueNamespace),
		Queue:       os.Getenv(EnvQueueName),
		WorkerID:    os.Getenv(EnvWorkerID),
		MetricsAddr: DefaultMetricsAddr,
	}
	if c.RedisConn.URL == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvRedisURL))
	}
	if c.Queue == "" {
		errs = append(errs, fmt.Errorf("%s is required", EnvQueueName))
	}
	if v, ok := os.LookupEnv(EnvMetricsAddr); ok && v != "" {
		c.MetricsAddr = v
	}
	if v := os.Getenv(EnvConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s: want a positive integer, got %q", EnvConcurrency, v))
		}
		c.Concurrency = n
	}
	dur := func(name string, dst *time.Duration) {
		v := os.Getenv(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s: want a positive Go duration such as 30s, got %q", name, v))
			return
		}
		*dst = d
	}
	dur(EnvVisibilityTimeout, &c.VisibilityTimeout)
	dur(EnvHeartbeatInterval, &c.HeartbeatInterval)
	dur(EnvDrainTimeout, &c.DrainTimeout)
	if log, err := loggerFromEnv(); err != nil {
		errs = append(errs, err)
	} else {
		c.Logger = log
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
		if c.HeartbeatInterval >= c.VisibilityTimeout {
			c.HeartbeatInterval = c.VisibilityTimeout / 3
		}
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.WorkerID == "" {
		c.WorkerID = defaultWorkerID()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MetricsAddr == "0" {
		c.MetricsAddr = ""
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Redis == nil && c.RedisConn.URL == "" {
		errs = append(errs, errors.New("worker: RedisConn.URL or Redis is required"))
	}
	if c.Queue == "" {
		errs = append(errs, errors.New("worker: Queue is required"))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("worker: Concurrency must be >= 1, got %d", c.Concurrency))
	}
	if c.VisibilityTimeout <= 0 || c.HeartbeatInterval <= 0 || c.DrainTimeout <= 0 {
		errs = append(errs, errors.New("worker: VisibilityTimeout, HeartbeatInterval and DrainTimeout must be positive"))
	}
	if c.HeartbeatInterval >= c.VisibilityTimeout {
		errs = append(errs, fmt.Errorf("worker: heartbeat interval %s must be shorter than the visibility timeout %s (%s < %s)",
			c.HeartbeatInterval, c.VisibilityTimeout, EnvHeartbeatInterval, EnvVisibilityTimeout))
	}
	if strings.ContainsAny(c.WorkerID, " \t\n") {
		errs = append(errs, fmt.Errorf("worker: WorkerID %q contains whitespace", c.WorkerID))
	}
	return errors.Join(errs...)
}

// defaultWorkerID is $POD_NAME (unique within the namespace, and stable in logs),
// else hostname-<8 random hex> (never the hostname alone: two processes in one
// container must not share a consumer).
func defaultWorkerID() string {
	if p := os.Getenv("POD_NAME"); p != "" {
		return p
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return h + "-" + hex.EncodeToString(b[:])
}
