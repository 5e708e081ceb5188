package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/ratelimit"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/revoke/redisfanout"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/internal/tlscert"
)

// A fleet is the nodes that share one store and one Redis. Through Redis
// they share revocations (package redisfanout), rate limits (package
// ratelimit) and notices: messages on named channels that every node
// receives, such as KeysChannel's signing-key rotations.

// KeysChannel carries signing-key rotation notices (the new kid): every
// node reloads its signing keys on one.
const KeysChannel = "keys"

// TenantsChannel carries tenant deletion notices (the tenant's name):
// every node forgets what it holds of the tenant (see OnTenantDeleted).
const TenantsChannel = "tenants"

// fleet is what a node shares with the others through Redis.
type fleet struct {
	client  redis.UniversalClient
	fanout  *redisfanout.Fanout
	prefix  string
	notices *redis.PubSub
	cancel  context.CancelFunc // stops the notices
	done    chan struct{}      // closed when they have stopped

	mu       sync.Mutex
	handlers map[string]func(ctx context.Context, payload string) // by channel name in Redis
	limiters []namedLimiter                                       // the Redis rate limiters, for the metrics
}

type namedLimiter struct {
	name string
	l    *ratelimit.Redis
}

// FleetStats reports the state of what the node shares through Redis:
// the revocation set's staleness and each rate limiter's decisions. It is
// zero without a fleet. The metrics read it at scrape time.
func (n *Node) FleetStats() telemetry.FleetStats {
	if n.fleet == nil {
		return telemetry.FleetStats{}
	}
	return n.fleet.stats()
}

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

// openFleet connects to Redis: the revocation fan-out around the node's
// memory, and the notices, with the signing keys reloaded on every one on
// KeysChannel. Without a Redis URL it does nothing.
func (n *Node) openFleet(ctx context.Context) error {
	if n.ts.RedisURL == "" {
		return nil
	}
	routeRedisLogs(n.log)
	client, cluster, err := redisClient(n.ts.RedisURL, n.ts)
	if err != nil {
		return fmt.Errorf("redis URL: %w", err)
	}
	if n.cfg.Traced {
		client.AddHook(redisTrace{})
	}
	prefix := n.ts.RedisPrefix
	// On a cluster, sharded pub/sub keeps revocation events on the shard
	// that holds the set instead of broadcasting them over the bus.
	fo, err := redisfanout.NewFanout(redisfanout.FanoutConfig{Client: client, Prefix: prefix + ":revoke", Sharded: cluster,
		Memory: n.revs.mem, MaxStaleness: n.ts.RevocationMaxStaleness, Grace: RevocationGrace,
		SubjectRetention: n.subjectRetention(), Logger: n.log, Now: n.cfg.Now})
	if err != nil {
		client.Close()
		return fmt.Errorf("revocation fan-out: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, n.cfg.RedisStartWait)
	err = fo.Start(sctx)
	cancel()
	if err != nil {
		// The fan-out keeps trying in the background; /readyz reports it.
		n.log.Warn("revocation fan-out: first sync from Redis failed", "err", err)
	}
	f := &fleet{client: client, fanout: fo, prefix: prefix, done: make(chan struct{}),
		handlers: map[string]func(context.Context, string){}}
	nctx, ncancel := context.WithCancel(context.Background())
	f.cancel = ncancel
	// Subscribe before returning, so that no notice sent after Open is lost.
	f.handlers[f.channel(KeysChannel)] = n.keysNotice
	f.handlers[f.channel(TenantsChannel)] = n.tenantNotice
	f.handlers[f.channel(RekeyChannel)] = func(context.Context, string) { n.rekey.poke() }
	f.notices = client.Subscribe(nctx, f.channel(KeysChannel), f.channel(TenantsChannel), f.channel(RekeyChannel))
	go f.dispatch(nctx, n.log)
	n.fleet = f
	n.revs.fanout = fo
	if m := n.cfg.Metrics; m != nil {
		m.Fleet(f.stats)
	}
	return nil
}

// channel is a notice channel's name in Redis.
func (f *fleet) channel(name string) string { return f.prefix + ":" + name }

// dispatch hands every notice to its channel's handler until ctx is done.
func (f *fleet) dispatch(ctx context.Context, log interface{ Warn(string, ...any) }) {
	defer close(f.done)
	ch := f.notices.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			f.mu.Lock()
			h := f.handlers[msg.Channel]
			f.mu.Unlock()
			if h != nil {
				h(ctx, msg.Payload)
			}
		}
	}
}

// keysNotice reloads the signing keys after a rotation notice.
func (n *Node) keysNotice(ctx context.Context, kid string) {
	if err := n.keys.Reload(ctx); err != nil && ctx.Err() == nil {
		n.log.Error("reloading signing keys after a rotation notice failed", "err", err)
		return
	}
	n.log.Info("signing keys reloaded after a rotation notice", "kid", kid)
}

// tenantNotice forgets a tenant another node (or this one) deleted.
func (n *Node) tenantNotice(_ context.Context, tenant string) {
	if store.ValidTenantName(tenant) != nil {
		n.log.Warn("malformed tenant notice ignored")
		return
	}
	n.tenantDeleted(tenant)
}

// publishWait bounds how long a change is being shared through Redis.
const publishWait = 5 * time.Second

// Subscribe calls handle with the payload of every notice published on the
// named channel by any node of the fleet (this one included) from now
// until Close. Notices are not stored: one sent while this node was not
// subscribed is never seen, so what they announce must also be in the
// store. Without Redis there is no fleet, and nothing is ever received.
func (n *Node) Subscribe(ctx context.Context, channel string, handle func(ctx context.Context, payload string)) error {
	f := n.fleet
	if f == nil {
		return nil
	}
	name := f.channel(channel)
	f.mu.Lock()
	f.handlers[name] = handle
	f.mu.Unlock()
	if err := f.notices.Subscribe(ctx, name); err != nil {
		return fmt.Errorf("subscribe to %s: %w", name, err)
	}
	return nil
}

// Publish sends payload on the named channel to every node of the fleet.
// Without Redis there is no other node, and it does nothing.
func (n *Node) Publish(ctx context.Context, channel, payload string) error {
	f := n.fleet
	if f == nil {
		return nil
	}
	return f.client.Publish(ctx, f.channel(channel), payload).Err()
}

// Limiter enforces lim in Redis (GCRA, shared by the fleet, with a local
// fallback while Redis fails) when the node has a fleet, else locally.
// Limiters tell their buckets apart by the keys they are asked about; name
// labels a Redis limiter's metrics.
func (n *Node) Limiter(name string, lim ratelimit.Limit) (ratelimit.Limiter, error) {
	if n.fleet == nil {
		return ratelimit.NewLocal(ratelimit.LocalConfig{Limit: lim, Now: n.cfg.Now})
	}
	r, err := ratelimit.NewRedis(ratelimit.RedisConfig{Client: n.fleet.client, Limit: lim,
		Prefix: n.ts.RedisPrefix + ":ratelimit:", Logger: n.log})
	if err != nil {
		return nil, err
	}
	n.fleet.mu.Lock()
	n.fleet.limiters = append(n.fleet.limiters, namedLimiter{name, r})
	n.fleet.mu.Unlock()
	return r, nil
}

// closeFleet stops the notices and the fan-out and closes the client.
func (n *Node) closeFleet() {
	f := n.fleet
	if f == nil {
		return
	}
	n.fleet = nil
	f.cancel()
	<-f.done
	if err := f.notices.Close(); err != nil {
		n.log.Warn("closing the notice subscription", "err", err)
	}
	if err := f.fanout.Close(); err != nil {
		n.log.Warn("closing the revocation fan-out", "err", err)
	}
	if err := f.client.Close(); err != nil {
		n.log.Warn("closing the Redis client", "err", err)
	}
}

// RevocationStatus reports the shared revocation set's state; shared is
// false without a fleet, whose set is the node's memory alone and is
// always current.
func (n *Node) RevocationStatus() (st redisfanout.Status, shared bool) {
	if n.revs.fanout == nil {
		return redisfanout.Status{}, false
	}
	return n.revs.fanout.Status(), true
}

// revocations is the node's revocation set: the memory every check reads,
// and in a fleet the fan-out that keeps it current through Redis.
type revocations struct {
	mem    *revoke.Memory
	fanout *redisfanout.Fanout // nil without Redis
}

func (r *revocations) checker() revoke.Checker {
	if r.fanout != nil {
		return r.fanout
	}
	return r.mem
}

// publisher is the token service's issuer.Publisher: it applies a
// revocation to the node's memory, and with Redis shares it and rotation
// notices with the fleet. A request that ends does not cut a publication
// short: what it shares is stored already, and must reach every node.
type publisher struct{ n *Node }

var _ issuer.Publisher = publisher{}

func (p publisher) RevokeID(ctx context.Context, iss, jti string, until time.Time) {
	fo := p.n.revs.fanout
	if fo == nil {
		p.n.revs.mem.RevokeID(iss, jti, until)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishWait)
	defer cancel()
	p.shared(fo.RevokeID(ctx, iss, jti, until))
}

func (p publisher) RevokeSubject(ctx context.Context, iss, sub string, before, until time.Time) {
	fo := p.n.revs.fanout
	if fo == nil {
		p.n.revs.mem.RevokeSubjectUntil(iss, sub, before, until)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishWait)
	defer cancel()
	p.shared(fo.RevokeSubjectUntil(ctx, iss, sub, before, until))
}

func (p publisher) shared(err error) {
	switch {
	case err == nil:
	case errors.Is(err, redisfanout.ErrNotShared):
		p.n.log.Warn("revocation not shared through Redis; it is in the store, other nodes load it on restart", "err", err)
	default:
		p.n.log.Error("revocation fan-out", "err", err)
	}
}

// Rotated announces a new signing key on KeysChannel: every node of the
// fleet loads it at once.
func (p publisher) Rotated(ctx context.Context, kid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishWait)
	defer cancel()
	if err := p.n.Publish(ctx, KeysChannel, kid); err != nil {
		p.n.log.Warn("publishing a key rotation notice failed; other nodes pick the key up on their next tick", "kid", kid, "err", err)
	}
}

// TenantDeleted forgets what this node holds of the tenant the admin API
// deleted, and announces the deletion on TenantsChannel so that every node
// of the fleet forgets it at once.
func (p publisher) TenantDeleted(ctx context.Context, tenant string) {
	p.n.tenantDeleted(tenant)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishWait)
	defer cancel()
	if err := p.n.Publish(ctx, TenantsChannel, tenant); err != nil {
		p.n.log.Warn("publishing a tenant deletion failed; other nodes find the tenant's new data key when they next change or open its keys",
			"tenant", tenant, "err", err)
	}
}

// redisClient connects to the Redis a URL names: one server
// (redis://host:port/db), or a Redis Cluster when the URL lists further
// seed nodes (redis://host1:port?addr=host2:port&addr=host3:port). Socket
// I/O honours context deadlines, so a dead Redis cannot hold a request
// longer than its caller allows.
func redisClient(rawURL string, ts config.TokenService) (client redis.UniversalClient, cluster bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, false, errors.New("not a URL") // the URL may hold a password: do not echo it
	}
	if u.Query().Has("addr") {
		opt, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, false, err
		}
		if opt.TLSConfig, err = redisTLS(ts, u); err != nil {
			return nil, false, err
		}
		opt.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opt), true, nil
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, false, err
	}
	if opt.TLSConfig, err = redisTLS(ts, u); err != nil {
		return nil, false, err
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), false, nil
}

// redisTLS returns the TLS config of a rediss:// URL, nil for redis://:
// the CAs Redis's certificate must chain to and the client certificate,
// from the files in ts (tlscert.ClientConfig), with the URL's host as the
// server name, as go-redis sets it. It refuses the files with a redis://
// URL, and skip_verify, which would turn verification off. This is the
// one check of the Redis TLS settings: it sees the URL and the files in
// force, whether they came from the environment, the configuration file or
// a file named there.
func redisTLS(ts config.TokenService, u *url.URL) (*tls.Config, error) {
	if u.Query().Has("skip_verify") {
		if v, err := strconv.ParseBool(u.Query().Get("skip_verify")); err != nil || v {
			return nil, errors.New("skip_verify would accept any certificate from Redis: give its CA with token_service.redis_ca_file instead")
		}
	}
	if u.Scheme != "rediss" {
		if ts.RedisCAFile != "" || ts.RedisCertFile != "" || ts.RedisKeyFile != "" {
			return nil, errors.New("token_service.redis_ca_file, redis_cert_file and redis_key_file are for TLS: the Redis URL must be rediss://")
		}
		return nil, nil
	}
	tc, err := tlscert.ClientConfig(ts.RedisCAFile, ts.RedisCertFile, ts.RedisKeyFile)
	if err != nil {
		return nil, fmt.Errorf("token_service.redis_ca_file, redis_cert_file, redis_key_file: %w", err)
	}
	tc.ServerName = u.Hostname()
	return tc, nil
}
