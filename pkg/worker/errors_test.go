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
	"context"
	"testing"

	"github.com/dtq-dev/dtq/pkg/redistest"
)

// Replies of a Redis that answers but is not serving yet (a restart loading its
// AOF, a failover) are retryable; other Redis errors are not. The replies come
// from a real server through a script's error_reply, so the test sees exactly
// the error values go-redis builds.
func TestRedisNotServingRepliesAreRetryable(t *testing.T) {
	rdb := redistest.Start(t).Client()
	for reply, want := range map[string]bool{
		"LOADING Redis is loading the dataset in memory":                    true,
		"READONLY You can't write against a read only replica.":             true,
		"MASTERDOWN Link with MASTER is down":                               true,
		"CLUSTERDOWN The cluster is down":                                   true,
		"TRYAGAIN Multiple keys request during rehashing":                   true,
		"ERR wrong number of arguments":                                     false,
		"WRONGTYPE Operation against a key holding the wrong kind of value": false,
	} {
		err := rdb.Eval(context.Background(), "return redis.error_reply(ARGV[1])", nil, reply).Err()
		if err == nil {
			t.Fatalf("%q: no error", reply)
		}
		if got := IsRetryable(err); got != want {
			t.Errorf("IsRetryable(%q) = %v, want %v", err, got, want)
		}
	}
}
