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
