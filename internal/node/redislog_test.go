package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/testnet"
)

// TestRedisLogsRateLimited: go-redis's own lines reach the node's logger,
// at most one per redisLogEvery, with the count of those held back.
func TestRedisLogsRateLimited(t *testing.T) {
	buf := &testnet.SyncBuffer{}
	r := &redisLogger{}
	r.log.Store(slog.New(slog.NewTextHandler(buf, nil)))
	for i := range 50 {
		r.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %s", i, "connection refused")
	}
	if n := strings.Count(buf.String(), "redis client"); n != 1 {
		t.Fatalf("%d lines for 50 messages within %v, want 1:\n%s", n, redisLogEvery, buf)
	}
	r.mu.Lock()
	r.last = r.last.Add(-redisLogEvery)
	r.mu.Unlock()
	r.Printf(context.Background(), "redis: again")
	if !strings.Contains(buf.String(), "suppressed_since_last=49") {
		t.Errorf("the second line does not count the 49 held back:\n%s", buf)
	}
}
