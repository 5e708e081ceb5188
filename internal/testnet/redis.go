package testnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisOptions returns the options REDIS_URL names, with short timeouts,
// or skips the test when REDIS_URL is unset. With REDIS_URL set a test
// never skips: a server that does not answer must fail it.
func RedisOptions(t testing.TB) *redis.Options {
	t.Helper()
	u := os.Getenv("REDIS_URL")
	if u == "" {
		t.Skip("Redis tests skipped: set REDIS_URL (e.g. REDIS_URL=redis://127.0.0.1:6379/0) to run them")
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout = time.Second
	opt.DialerRetries = 1
	opt.ReadTimeout = 2 * time.Second
	opt.WriteTimeout = 2 * time.Second
	return opt
}

// RedisClient connects to REDIS_URL with mod applied to the options, and
// closes the client when the test ends.
func RedisClient(t testing.TB, mod func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := RedisOptions(t)
	if mod != nil {
		mod(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// RedisPrefix returns REDIS_URL and a fresh key prefix for t, whose keys
// are deleted when t ends; without REDIS_URL it skips.
func RedisPrefix(t testing.TB) (redisURL, prefix string) {
	t.Helper()
	redisURL = os.Getenv("REDIS_URL")
	if redisURL == "" {
		t.Skip("needs Redis: REDIS_URL=redis://127.0.0.1:6379/0")
	}
	var b [6]byte
	rand.Read(b[:])
	prefix = "kgtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		opt, err := redis.ParseURL(redisURL)
		if err != nil {
			return
		}
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, pattern := range []string{prefix + ":*", "{" + prefix + ":*"} {
			iter := c.Scan(ctx, 0, pattern, 100).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
		}
	})
	return redisURL, prefix
}
