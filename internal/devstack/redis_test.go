package devstack_test

import "github.com/redis/go-redis/v9"

func newRedis(addr string) *redis.Client { return redis.NewClient(&redis.Options{Addr: addr}) }
