package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis logs its own connection failures through one process-wide
// logger, by default to stderr in its own format, once per failed dial:
// while Redis is down that is a line every few milliseconds. redisLogger
// sends them to the node's slog logger instead, at most one line per
// redisLogEvery with a count of those it held back. The readiness and
// staleness metrics are the signal an operator watches; these lines are
// the detail.

const redisLogEvery = 10 * time.Second

type redisLogger struct {
	log atomic.Pointer[slog.Logger]

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

var redisLog = &redisLogger{}

var redisLogOnce sync.Once

// routeRedisLogs makes go-redis log through l (the latest node's logger
// when a process runs several).
func routeRedisLogs(l *slog.Logger) {
	redisLog.log.Store(l)
	redisLogOnce.Do(func() { redis.SetLogger(redisLog) })
}

func (r *redisLogger) Printf(_ context.Context, format string, v ...any) {
	l := r.log.Load()
	if l == nil {
		return
	}
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < redisLogEvery {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	held := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	l.Warn("redis client", "msg", strings.TrimSpace(fmt.Sprintf(format, v...)), "suppressed_since_last", held)
}
