package redisfanout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis tests need a server: REDIS_URL=redis://127.0.0.1:6379/0. With
// REDIS_URL set they never skip; a server that does not answer fails them.

// mustPing fails the test unless c reaches Redis.
func mustPing(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("REDIS_URL is set but Redis does not answer: %v", err)
	}
}

// testPrefix returns a key prefix of the test's own, and deletes its keys
// when the test ends.
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	p := "keygate-test:" + hex.EncodeToString(b)
	t.Cleanup(func() {
		tag := "{" + p + "}"
		_ = c.Del(context.Background(), tag+":jti", tag+":sub", tag+":subkeep").Err()
	})
	return p
}

// eventually polls cond every millisecond until it holds or d passes, and
// returns how long it took.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// checkNoFanoutGoroutines fails the test if a goroutine of a Fanout is
// still running.
func checkNoFanoutGoroutines(t testing.TB) {
	t.Helper()
	var stacks string
	for range 100 {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "revoke.(*Fanout)") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	var leaked []string
	for g := range strings.SplitSeq(stacks, "\n\n") {
		if strings.Contains(g, "revoke.(*Fanout)") {
			leaked = append(leaked, g)
		}
	}
	t.Fatalf("Fanout goroutines still running after Close:\n%s", strings.Join(leaked, "\n\n"))
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

// t0 is a fixed instant for revocations in tests.
var t0 = time.Unix(1_800_000_000, 0)
