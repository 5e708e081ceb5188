package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisConfig configures a Redis limiter. Zero values take the defaults
// given.
type RedisConfig struct {
	// Client reaches Redis (a single server, Cluster or Ring). The caller
	// owns it. Give it ContextTimeoutEnabled, so that Timeout bounds the
	// socket I/O; otherwise an unresponsive Redis holds each request for
	// the client's ReadTimeout before the fallback answers.
	Client redis.UniversalClient
	Limit  Limit
	// Prefix is prepended to every key (default "keygate:ratelimit:"). Use
	// one prefix per Limit: the bucket of a key is shared by whoever uses
	// the same prefix. Keys longer than 128 bytes are replaced by their
	// SHA-256.
	Prefix string
	// Timeout bounds each decision made in Redis (default 100 ms).
	Timeout time.Duration
	// Fallback decides while Redis does not answer (default a Local with the
	// same Limit). Its buckets are this node's own: with n nodes falling
	// back, a key may get up to n times the limit. Give it a smaller Limit
	// to stay under the fleet's, or a Limiter that always denies to fail
	// closed.
	Fallback Limiter
	// Cooldown is how long after Redis fails Allow asks only the fallback
	// before trying Redis again, with a single request (default 1 s).
	Cooldown time.Duration
	// Logger receives the switches to and from the fallback at Warn and
	// Info (default slog.Default()).
	Logger *slog.Logger
}

const (
	defaultPrefix   = "keygate:ratelimit:"
	defaultTimeout  = 100 * time.Millisecond
	defaultCooldown = time.Second
	maxKeyLen       = 128
)

// Redis is a Limiter whose buckets live in Redis, shared by every node that
// uses the same prefix. Each decision is one atomic script run on the
// key's server (EVALSHA, EVAL when the script is not cached), timed by the
// server's clock so that nodes' clocks need not agree; a bucket key expires
// once its bucket is full again.
//
// When Redis fails (an error or Timeout), Allow answers from the fallback
// limiter with a nil error, and for Cooldown asks only the fallback; then a
// single request probes Redis, and the next ones use it again once it
// answers. The caller's own cancelled context is not a Redis failure: Allow
// returns its error.
type Redis struct {
	cfg      RedisConfig
	log      *slog.Logger
	script   *redis.Script
	t, tau   string // emission interval and tolerance, µs
	fallback Limiter

	// downUntil is 0 while Redis is trusted; otherwise the Unix ns until
	// which only the fallback decides. The request that moves it forward
	// past its expiry is the probe.
	downUntil atomic.Int64
	redisN    atomic.Uint64 // decisions made in Redis
	fallbackN atomic.Uint64 // decisions made by the fallback

	mu      sync.Mutex
	lastErr error
}

var _ Limiter = (*Redis)(nil)

// gcraScript is the whole decision.
//
//	KEYS[1]  the bucket: its theoretical arrival time, µs since the epoch
//	ARGV[1]  emission interval T, µs
//	ARGV[2]  tolerance τ = Burst·T, µs
//
// It returns {1, 0} when the request passes, {0, wait µs} when not.
var gcraScript = redis.NewScript(gcraSource)

const gcraSource = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tau = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or 0
if tat < now then tat = now end
local next = tat + interval
local ahead = next - now
if ahead > tau then
  return {0, ahead - tau}
end
redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', math.ceil(ahead / 1000))
return {1, 0}
`

// NewRedis returns a Redis limiter.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	if cfg.Client == nil {
		return nil, errors.New("ratelimit.RedisConfig.Client is required")
	}
	if err := cfg.Limit.Validate(); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = defaultPrefix
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = defaultCooldown
	}
	if cfg.Timeout < 0 || cfg.Cooldown < 0 {
		return nil, errors.New("ratelimit.RedisConfig durations must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Fallback == nil {
		l, err := NewLocal(LocalConfig{Limit: cfg.Limit})
		if err != nil {
			return nil, err
		}
		cfg.Fallback = l
	}
	t, tau := cfg.Limit.interval()
	r := &Redis{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "ratelimit.redis", "prefix", cfg.Prefix),
		script:   gcraScript,
		t:        strconv.FormatInt(t.Microseconds(), 10),
		tau:      strconv.FormatInt(tau.Microseconds(), 10),
		fallback: cfg.Fallback,
	}
	if !contextTimeouts(cfg.Client) {
		r.log.Warn("the Redis client ignores context deadlines (ContextTimeoutEnabled is false): " +
			"an unresponsive Redis will hold requests for its ReadTimeout, not RedisConfig.Timeout")
	}
	return r, nil
}

// contextTimeouts reports whether the client lets context deadlines bound
// its socket I/O, when it can tell.
func contextTimeouts(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Allow decides in Redis whether a request under key may proceed, or in
// the fallback while Redis fails.
func (r *Redis) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if until := r.downUntil.Load(); until != 0 {
		now := time.Now().UnixNano()
		if now < until || !r.downUntil.CompareAndSwap(until, now+int64(r.cfg.Cooldown)) {
			return r.fall(ctx, key)
		}
		// This request probes Redis; the others keep falling back.
	}
	ok, wait, err := r.allowRedis(ctx, key)
	if err == nil {
		r.redisN.Add(1)
		if r.downUntil.Swap(0) != 0 {
			r.log.Info("Redis answers again: limits are shared")
			r.setErr(nil)
		}
		return ok, wait, nil
	}
	if ctx.Err() != nil {
		// The caller gave up; that says nothing about Redis.
		return false, 0, ctx.Err()
	}
	if r.downUntil.Swap(time.Now().UnixNano()+int64(r.cfg.Cooldown)) == 0 {
		r.log.Warn("Redis failed: limiting with local buckets", "err", err, "cooldown", r.cfg.Cooldown)
	}
	r.setErr(err)
	return r.fall(ctx, key)
}

func (r *Redis) allowRedis(ctx context.Context, key string) (bool, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	res, err := r.script.Run(ctx, r.cfg.Client, []string{r.key(key)}, r.t, r.tau).Int64Slice()
	if err != nil {
		return false, 0, err
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("script returned %d values", len(res))
	}
	if res[0] == 1 {
		return true, 0, nil
	}
	return false, time.Duration(res[1]) * time.Microsecond, nil
}

func (r *Redis) fall(ctx context.Context, key string) (bool, time.Duration, error) {
	r.fallbackN.Add(1)
	return r.fallback.Allow(ctx, key)
}

func (r *Redis) setErr(err error) {
	r.mu.Lock()
	r.lastErr = err
	r.mu.Unlock()
}

// key is the bucket's Redis key.
func (r *Redis) key(key string) string {
	if len(key) > maxKeyLen {
		sum := sha256.Sum256([]byte(key))
		return r.cfg.Prefix + "sha256:" + hex.EncodeToString(sum[:])
	}
	return r.cfg.Prefix + key
}

// RedisStats describes a Redis limiter, for readiness and metrics.
type RedisStats struct {
	RedisDecisions    uint64 // requests decided in Redis
	FallbackDecisions uint64 // requests decided by the fallback
	// Degraded: Redis failed and has not answered since; the fallback
	// decides.
	Degraded  bool
	LastError error // the last Redis failure, nil once it answers again
}

// Stats reports the limiter's counters and state.
func (r *Redis) Stats() RedisStats {
	r.mu.Lock()
	err := r.lastErr
	r.mu.Unlock()
	return RedisStats{
		RedisDecisions:    r.redisN.Load(),
		FallbackDecisions: r.fallbackN.Load(),
		Degraded:          r.downUntil.Load() != 0,
		LastError:         err,
	}
}
