package testnet

import (
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
