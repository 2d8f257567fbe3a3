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

package devstack_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-dev/dtq/pkg/redisconn"
)

// newRedis is a client of the stack's Redis, built from its URL as the
// manager and the workers build theirs.
func newRedis(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.Config{URL: url}.Client()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
