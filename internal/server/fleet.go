package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
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

// PreAuthLimit bounds, per client address, the store reads the token
// endpoints make for client_ids not read in the last 2 s: enough for a
// hundred clients behind one address, few enough that random client_ids
// cannot make the store the bottleneck.
var PreAuthLimit = ratelimit.Limit{Rate: 50, Burst: 200}

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

	mu       sync.Mutex
	limiters []namedLimiter // the Redis rate limiters, for the metrics
}

type namedLimiter struct {
	name string
	l    *ratelimit.Redis
}

// stats reads the fleet's state for the metrics at scrape time.
func (f *fleet) stats() telemetry.FleetStats {
	st := f.fanout.Status()
	fs := telemetry.FleetStats{Staleness: st.Staleness, FailClosed: st.FailClosed}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.limiters {
		ls := n.l.Stats()
		fs.Limiters = append(fs.Limiters, telemetry.LimiterStats{Name: n.name, Redis: ls.RedisDecisions,
			Fallback: ls.FallbackDecisions, Degraded: ls.Degraded})
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
	routeRedisLogs(s.log)
	client, cluster, err := redisClient(cfg.RedisURL, cfg)
	if err != nil {
		return fmt.Errorf("server: redis URL: %w", err)
	}
	prefix := cfg.RedisPrefix
	// On a cluster, sharded pub/sub keeps revocation events on the shard
	// that holds the set instead of broadcasting them over the bus.
	fo, err := redisfanout.NewFanout(redisfanout.FanoutConfig{Client: client, Prefix: prefix + ":revoke", Sharded: cluster,
		Memory: mem, MaxStaleness: cfg.RevocationMaxStaleness, Grace: RevocationGrace, SubjectRetention: s.subjectRetention(),
		Logger: s.log, Now: cfg.Now})
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

// redisClient connects to the Redis a URL names: one server
// (redis://host:port/db), or a Redis Cluster when the URL lists further
// seed nodes (redis://host1:port?addr=host2:port&addr=host3:port). Socket
// I/O honours context deadlines, so a dead Redis cannot hold a request
// longer than its caller allows.
func redisClient(rawURL string, cfg *Config) (client redis.UniversalClient, cluster bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, false, errors.New("not a URL") // the URL may hold a password: do not echo it
	}
	if u.Query().Has("addr") {
		opt, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, false, err
		}
		if opt.TLSConfig, err = redisTLS(cfg, u); err != nil {
			return nil, false, err
		}
		opt.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opt), true, nil
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, false, err
	}
	if opt.TLSConfig, err = redisTLS(cfg, u); err != nil {
		return nil, false, err
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), false, nil
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
			if err := s.keys.Reload(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("reloading signing keys after a rotation notice failed", "err", err)
				continue
			}
			s.log.Info("signing keys reloaded after a rotation notice", "kid", msg.Payload)
		}
	}
}

// publishWait bounds how long a change is being shared through Redis.
const publishWait = 5 * time.Second

// publisher is the token service's issuer.Publisher: it applies a
// revocation to the node's memory, and with Redis shares it and rotation
// notices with the fleet. A request that ends does not cut a publication
// short: what it shares is stored already, and must reach every node.
type publisher struct{ s *Server }

var _ issuer.Publisher = publisher{}

func (p publisher) RevokeID(ctx context.Context, iss, jti string, until time.Time) {
	if p.s.fleet == nil {
		p.s.revoked.RevokeID(iss, jti, until)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishWait)
	defer cancel()
	p.s.shared(p.s.fleet.fanout.RevokeID(ctx, iss, jti, until))
}

func (p publisher) RevokeSubject(ctx context.Context, iss, sub string, before, until time.Time) {
	if p.s.fleet == nil {
		p.s.revoked.RevokeSubjectUntil(iss, sub, before, until)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishWait)
	defer cancel()
	p.s.shared(p.s.fleet.fanout.RevokeSubjectUntil(ctx, iss, sub, before, until))
}

// Rotated tells the fleet to load the signing keys again.
func (p publisher) Rotated(ctx context.Context, kid string) { p.s.rotated(ctx, kid) }

// rotated publishes a rotation notice to the fleet.
func (s *Server) rotated(ctx context.Context, kid string) {
	if s.fleet == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishWait)
	defer cancel()
	if err := s.fleet.client.Publish(ctx, s.fleet.channel, kid).Err(); err != nil {
		s.log.Warn("publishing a key rotation notice failed; other nodes pick the key up on their next tick", "kid", kid, "err", err)
	}
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
	return s.limiter("login", LoginLimit)
}

// tokenLimiter is the /oauth2/token per-client limiter, or nil without a
// configured limit.
func (s *Server) tokenLimiter() (issuer.Limiter, error) {
	if s.cfg.TokenLimit == (ratelimit.Limit{}) {
		return nil, nil
	}
	return s.limiter("token", s.cfg.TokenLimit)
}

// limiter enforces lim in Redis (GCRA, shared by the fleet, with a local
// fallback while Redis fails) when the node has a fleet, else locally.
// Limiters tell their buckets apart by the keys they are asked about; name
// labels a Redis limiter's metrics.
func (s *Server) limiter(name string, lim ratelimit.Limit) (issuer.Limiter, error) {
	if s.fleet == nil {
		return ratelimit.NewLocal(ratelimit.LocalConfig{Limit: lim, Now: s.cfg.Now})
	}
	r, err := ratelimit.NewRedis(ratelimit.RedisConfig{Client: s.fleet.client, Limit: lim,
		Prefix: s.cfg.RedisPrefix + ":ratelimit:", Logger: s.log})
	if err != nil {
		return nil, err
	}
	s.fleet.mu.Lock()
	s.fleet.limiters = append(s.fleet.limiters, namedLimiter{name, r})
	s.fleet.mu.Unlock()
	return r, nil
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
			m.km.Reload(ctx) //nolint:errcheck // the keys in force stay; the tick logs store failures
			cancel()
		}
	}
	return m.Current()
}

// Status is ready while keys are published, sealed or not: a sealed node
// still verifies the tokens its fleet issues.
func (m managedKeys) Status() keys.Status {
	st := keys.Status{}
	if n := m.Current().Len(); n > 0 {
		st.Keys = n
		st.LastSuccess = time.Now()
		st.LastAttempt = st.LastSuccess
	} else {
		st.LastError = issuer.ErrNoActiveKey
	}
	return st
}
