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

package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/worker"
)

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("POD_NAME", "pod-7")
	for _, k := range []string{"DTQ_QUEUE_NAMESPACE", "DTQ_WORKER_CONCURRENCY", "DTQ_VISIBILITY_TIMEOUT", "DTQ_HEARTBEAT_INTERVAL",
		"DTQ_DRAIN_TIMEOUT", "DTQ_WORKER_ID", "DTQ_METRICS_ADDR", "DTQ_LOG_LEVEL"} {
		t.Setenv(k, "")
	}
	t.Setenv("DTQ_REDIS_URL", "")
	t.Setenv("DTQ_QUEUE_NAME", "")
	_, err := worker.ConfigFromEnv()
	if err == nil || !strings.Contains(err.Error(), "DTQ_REDIS_URL") || !strings.Contains(err.Error(), "DTQ_QUEUE_NAME") {
		t.Fatalf("missing required: %v", err)
	}

	t.Setenv("DTQ_REDIS_URL", "redis://127.0.0.1:6379/0")
	t.Setenv("DTQ_QUEUE_NAME", "emails")
	c, err := worker.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "default" || c.Concurrency != 4 || c.VisibilityTimeout != 30*time.Second || c.HeartbeatInterval != 5*time.Second ||
		c.DrainTimeout != 30*time.Second || c.WorkerID != "pod-7" || c.MetricsAddr != ":8080" {
		t.Fatalf("defaults: %+v", c)
	}

	t.Setenv("DTQ_QUEUE_NAMESPACE", "team-a")
	t.Setenv("DTQ_WORKER_CONCURRENCY", "32")
	t.Setenv("DTQ_VISIBILITY_TIMEOUT", "10s")
	t.Setenv("DTQ_HEARTBEAT_INTERVAL", "2s")
	t.Setenv("DTQ_DRAIN_TIMEOUT", "1m")
	t.Setenv("DTQ_WORKER_ID", "w1")
	t.Setenv("DTQ_METRICS_ADDR", "0")
	c, err = worker.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "team-a" || c.Concurrency != 32 || c.VisibilityTimeout != 10*time.Second || c.HeartbeatInterval != 2*time.Second ||
		c.DrainTimeout != time.Minute || c.WorkerID != "w1" || c.MetricsAddr != "" {
		t.Fatalf("explicit: %+v", c)
	}

	t.Setenv("DTQ_HEARTBEAT_INTERVAL", "10s")
	if _, err := worker.ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "shorter than the visibility timeout") {
		t.Fatalf("heartbeat >= visibility timeout: %v", err)
	}
	t.Setenv("DTQ_HEARTBEAT_INTERVAL", "2s")
	t.Setenv("DTQ_WORKER_CONCURRENCY", "zero")
	if _, err := worker.ConfigFromEnv(); err == nil {
		t.Fatal("bad concurrency accepted")
	}
	t.Setenv("DTQ_WORKER_CONCURRENCY", "")
	t.Setenv("DTQ_DRAIN_TIMEOUT", "30")
	if _, err := worker.ConfigFromEnv(); err == nil {
		t.Fatal("duration without unit accepted")
	}
}

func TestDefaultWorkerIDIsUnique(t *testing.T) {
	t.Setenv("POD_NAME", "")
	a, _ := worker.NewServer(worker.Config{RedisConn: redisconn.Config{URL: "redis://127.0.0.1:1/0"}, Queue: "q"}, worker.NewMux())
	b, _ := worker.NewServer(worker.Config{RedisConn: redisconn.Config{URL: "redis://127.0.0.1:1/0"}, Queue: "q"}, worker.NewMux())
	if a.WorkerID() == b.WorkerID() || !strings.Contains(a.WorkerID(), "-") {
		t.Fatalf("worker ids %q %q", a.WorkerID(), b.WorkerID())
	}
}
