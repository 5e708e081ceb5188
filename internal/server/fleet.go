package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/keys"
	"github.com/keygate/keygate/internal/ratelimit"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/revoke/redisfanout"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
	"github.com/redis/go-redis/v9"
)

// DefaultRedisPrefix names keygate's keys and channels in Redis.
const DefaultRedisPrefix = "keygate"

// LoginLimit bounds /v1/login attempts per account and per address.
var LoginLimit = ratelimit.Limit{Rate: 10.0 / 60, Burst: 5}

// redisStartWait bounds how long New waits for the first revocation sync
// from Redis; past it the node starts anyway and keeps trying.
var redisStartWait = 5 * time.Second

// fleet is what a node shares with the others through Redis.
type fleet struct {
	client  redis.UniversalClient
	fanout  *redisfanout.Fanout
	channel string // key-rotation notices
	cancel  context.CancelFunc
	done    chan struct{}
	limiter atomic.Pointer[ratelimit.Redis] // the login limiter, once made
}

// stats reads the fleet's state for the metrics at scrape time.
func (f *fleet) stats() telemetry.FleetStats {
	st := f.fanout.Status()
	fs := telemetry.FleetStats{Staleness: st.Staleness, FailClosed: st.FailClosed}
	if l := f.limiter.Load(); l != nil {
		ls := l.Stats()
		fs.Limiter, fs.LimiterRedis, fs.LimiterFallback, fs.LimiterDegraded = true, ls.RedisDecisions, ls.FallbackDecisions, ls.Degraded
	}
	return fs
}

// openFleet connects to Redis: the revocation fan-out around mem, and the
// key-rotation notices. Without a Redis URL it does nothing.
func (s *Server) openFleet(ctx context.Context, mem *revoke.Memory) error {
	cfg := &s.cfg
	if cfg.RedisURL == "" {
		return nil
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("server: redis URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	client := redis.NewClient(opt)
	prefix := cfg.RedisPrefix
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	fo, err := redisfanout.NewFanout(redisfanout.FanoutConfig{Client: client, Prefix: prefix + ":revoke",
		Memory: mem, MaxStaleness: cfg.RevocationMaxStaleness, Logger: s.log, Now: cfg.Now})
	if err != nil {
		client.Close()
		return fmt.Errorf("server: revocation fan-out: %w", err)
	}
	f := &fleet{client: client, fanout: fo, channel: prefix + ":keys", done: make(chan struct{})}
	sctx, cancel := context.WithTimeout(ctx, redisStartWait)
	err = fo.Start(sctx)
	cancel()
	if err != nil {
		// The fan-out keeps trying in the background; /readyz reports it.
		s.log.Warn("revocation fan-out: first sync from Redis failed", "err", err)
	}
	// Subscribe before returning, so that no notice sent after New is lost.
	nctx, ncancel := context.WithCancel(context.Background())
	f.cancel = ncancel
	ps := client.Subscribe(nctx, f.channel)
	go s.keyNotices(nctx, ps, f.done)
	s.fleet = f
	if s.metrics != nil {
		s.metrics.Fleet(f.stats)
	}
	return nil
}

// keyNotices re-reads the signing keys on every rotation notice until ctx
// is done.
func (s *Server) keyNotices(ctx context.Context, ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			if err := s.keys.Tick(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("reloading signing keys after a rotation notice failed", "err", err)
				continue
			}
			s.log.Info("signing keys reloaded after a rotation notice", "kid", msg.Payload)
		}
	}
}

// rotated publishes a rotation notice to the fleet.
func (s *Server) rotated(kid string) {
	if s.fleet == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.fleet.client.Publish(ctx, s.fleet.channel, kid).Err(); err != nil {
		s.log.Warn("publishing a key rotation notice failed; other nodes pick the key up on their next tick", "kid", kid, "err", err)
	}
}

// revokeID and revokeSubject share a revocation the store already holds.
func (s *Server) revokeID(iss, jti string, until time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.shared(s.fleet.fanout.RevokeID(ctx, iss, jti, until))
}

func (s *Server) revokeSubject(iss, sub string, before time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.shared(s.fleet.fanout.RevokeSubject(ctx, iss, sub, before))
}

func (s *Server) shared(err error) {
	switch {
	case err == nil:
	case errors.Is(err, redisfanout.ErrNotShared):
		s.log.Warn("revocation not shared through Redis; it is in the store, other nodes load it on restart", "err", err)
	default:
		s.log.Error("revocation fan-out", "err", err)
	}
}

// loginLimiter is the /v1/login limiter: in Redis with a fleet, else local.
func (s *Server) loginLimiter() (issuer.Limiter, error) {
	if s.fleet != nil {
		prefix := s.cfg.RedisPrefix
		if prefix == "" {
			prefix = DefaultRedisPrefix
		}
		l, err := ratelimit.NewRedis(ratelimit.RedisConfig{Client: s.fleet.client, Limit: LoginLimit,
			Prefix: prefix + ":ratelimit:", Logger: s.log})
		if err != nil {
			return nil, err
		}
		s.fleet.limiter.Store(l)
		return l, nil
	}
	return ratelimit.NewLocal(ratelimit.LocalConfig{Limit: LoginLimit, Now: s.cfg.Now})
}

// closeFleet stops the notices and the fan-out and closes the client.
func (s *Server) closeFleet() {
	f := s.fleet
	if f == nil {
		return
	}
	s.fleet = nil
	f.cancel()
	<-f.done
	if err := f.fanout.Close(); err != nil {
		s.log.Warn("closing the revocation fan-out", "err", err)
	}
	if err := f.client.Close(); err != nil {
		s.log.Warn("closing the Redis client", "err", err)
	}
}

// managedKeys is the keys.Source of the dev-mode policy: the token
// service's published signing keys. An unknown kid re-reads them from the
// store, at most once a second, so that a key another node just rotated in
// is accepted before its notice arrives.
type managedKeys struct {
	km   *issuer.KeyManager
	last *atomic.Int64 // unix nanoseconds of the last re-read
}

func (m managedKeys) Current() *jose.KeySet {
	if ks := m.km.KeySet(); ks != nil {
		return ks
	}
	return jose.NewKeySet()
}

func (m managedKeys) Refetch(ctx context.Context) *jose.KeySet {
	if m.last != nil {
		now := time.Now().UnixNano()
		prev := m.last.Load()
		if now-prev >= int64(time.Second) && m.last.CompareAndSwap(prev, now) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			m.km.Load(ctx) //nolint:errcheck // the keys in force stay; the tick logs store failures
			cancel()
		}
	}
	return m.Current()
}

func (m managedKeys) Status() keys.Status {
	st := keys.Status{}
	if m.km.Signer() != nil {
		st.Keys = m.Current().Len()
		st.LastSuccess = time.Now()
		st.LastAttempt = st.LastSuccess
	} else {
		st.LastError = issuer.ErrNoActiveKey
	}
	return st
}
