// Package redisfanout shares revocations across a fleet through Redis: each
// node answers from its own in-memory revoke.Memory, revocations made at any
// node are written to Redis and published, every node applies what it hears
// and reloads the whole set periodically, and a node whose set grows too
// stale can fail closed. It is kept apart from package revoke so that the
// verification path and the public middleware do not link a Redis client.
package redisfanout

import (
	"context"
	"errors"
	"fmt"
	"github.com/keygate/keygate/internal/revoke"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors of the Redis fan-out, for errors.Is.
var (
	// ErrNotShared: a revocation was applied to this node's memory but not
	// written to Redis, so other nodes do not know of it. The wrapped error
	// says why. The caller should retry, or record the revocation where a
	// later sync will find it.
	ErrNotShared = errors.New("revocation applied locally but not shared")
	// ErrInvalid: a revocation names no jti or no subject.
	ErrInvalid = errors.New("revocation names nothing")
	// ErrClosed: the Fanout was closed.
	ErrClosed = errors.New("revocation fan-out closed")
)

// FanoutConfig configures a Fanout. Zero values take the defaults given.
type FanoutConfig struct {
	// Client reaches Redis: a *redis.Client, a *redis.ClusterClient or a
	// failover client. The caller owns it and closes it after the Fanout.
	// With ContextTimeoutEnabled, Timeout and Close cut Redis calls short;
	// without it they wait for the client's own read and write timeouts.
	Client redis.UniversalClient
	// Prefix names the shared set (default "keygate:revoke"). Its keys and
	// channel are "{Prefix}:jti", "{Prefix}:sub", "{Prefix}:subkeep" and
	// "{Prefix}:events": the braces are a Redis Cluster hash tag, so all of
	// them share one slot and the write script may touch them together.
	Prefix string
	// Sharded uses SSUBSCRIBE/SPUBLISH (Redis 7) instead of
	// SUBSCRIBE/PUBLISH. On Redis Cluster it keeps the fan-out on the one
	// shard that owns the keys instead of broadcasting over the cluster
	// bus; on a single server it makes no difference.
	Sharded bool
	// Memory is the set Revoked answers from (default a new one). Whatever
	// else writes to it stays local to this node.
	Memory *revoke.Memory

	// ResyncInterval is the time between two full reloads of the set from
	// Redis (default 30 s). A node also reloads at once whenever its
	// subscription is (re-)established, so this only bounds how long a
	// message lost on a live subscription goes unseen.
	ResyncInterval time.Duration
	// PingInterval is how often the subscription is pinged (default 1 s).
	// An answered ping proves no message was missed up to the moment it
	// was sent, so while Redis is healthy Staleness stays below about
	// PingInterval. A subscription that leaves pings unanswered for three
	// intervals is dropped and re-established.
	PingInterval time.Duration
	// MaxStaleness, when positive, makes the checker fail closed: once the
	// set has not been known current for longer than this (and before it
	// ever was), Revoked reports every token revoked. Zero keeps serving
	// the last known set however old it gets. Set it above PingInterval;
	// a few times it is a sensible floor.
	MaxStaleness time.Duration
	// Timeout bounds each Redis round trip: a write, one page of a resync,
	// a ping's write (default 2 s).
	Timeout time.Duration
	// Grace is how long past the token's expiry a jti revocation is kept
	// (default 5 min). It must cover the verifiers' clock-skew leeway on
	// exp (verify.DefaultLeeway is 60 s), or a token could outlive its
	// revocation by the difference.
	Grace time.Duration
	// SubjectRetention, when positive, drops a subject revocation this
	// long after its time, in Redis and in memory, unless it was made with
	// RevokeSubjectUntil to be kept longer. Set it to the longest lifetime
	// a token of these issuers can have, unless its revocation says
	// otherwise, plus Grace: every token such an entry refuses has expired
	// by then. Zero keeps subject revocations for ever.
	SubjectRetention time.Duration

	// Logger receives subscription losses and failed resyncs at Warn,
	// fail-closed transitions at Error, recoveries at Info (default
	// slog.Default()).
	Logger *slog.Logger
	// Now is the clock for staleness and expiry (default time.Now). The
	// ping and resync timers run on real time.
	Now func() time.Time
}

// Defaults of FanoutConfig.
const (
	defaultPrefix         = "keygate:revoke"
	defaultResyncInterval = 30 * time.Second
	defaultPingInterval   = time.Second
	defaultTimeout        = 2 * time.Second
	defaultGrace          = 5 * time.Minute
)

// Fanout is a revoke.Checker shared by every node of a fleet through Redis. Each
// node answers Revoked from its own in-memory [revoke.Memory], exactly as fast and
// as allocation-free; a revocation made at any node is written to Redis and
// published, every node applies what it receives, and a full resync from
// Redis (periodic, and on every (re-)subscription) repairs whatever a node
// missed.
//
// # Guarantees
//
//   - Revoked never touches the network, takes no lock and allocates
//     nothing. While Redis is unreachable it keeps answering from the last
//     known set, until that set is MaxStaleness old; then, if MaxStaleness
//     is set, it fails closed and reports every token revoked.
//   - A revocation is written to Redis before it is published, and a node
//     resyncs after its subscription is confirmed, so no revocation falls
//     between a node's subscription and its reload.
//   - Revocations only ever accumulate: a message or a resync can add a
//     revocation or make one later, never lift one. Entries leave memory
//     when they expire (jti: Grace past the token's exp; subject:
//     SubjectRetention past its time, if set, or Grace past the time
//     RevokeSubjectUntil asked to keep it until, if later).
//   - RevokeID and RevokeSubject apply the revocation to this node's memory
//     first, whatever happens next; if Redis cannot take it they say so
//     with an error wrapping [ErrNotShared].
//
// Redis is trusted: whoever can write to its keys or publish on the
// channel can revoke tokens on every node (though never un-revoke one a
// node already holds). Times are kept to the microsecond, rounded up. It
// needs Redis 7.0 or later, standalone, failover or Cluster.
//
// Create a Fanout with NewFanout, call Start, and Close it when done.
type Fanout struct {
	cfg    FanoutConfig
	log    *slog.Logger
	client redis.UniversalClient
	mem    *revoke.Memory

	keyIDs, keySubjects, keyKeep, channel string
	publish                               string // "PUBLISH" or "SPUBLISH"
	maxStale                              int64  // nanoseconds; 0: never fail closed

	// fresh is when the set was last known current (Unix nanoseconds by
	// cfg.Now; 0: never). Revoked reads it on every call.
	fresh atomic.Int64

	ctx       context.Context // the Fanout's life; cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the reader and the controller
	events    chan event     // reader → controller
	first     chan struct{}  // closed after the first successful resync
	firstOnce sync.Once

	mu         sync.Mutex // guards what follows
	started    bool
	closed     bool
	ps         *redis.PubSub // the current subscription, nil between two
	subscribed bool
	lastResync time.Time
	lastErr    error
	failClosed bool // as last logged
}

var _ revoke.Checker = (*Fanout)(nil)

// NewFanout returns a Fanout that has not started: it answers from
// cfg.Memory, which it does not yet keep in sync, and with MaxStaleness set
// it fails closed until Start's first resync succeeds.
func NewFanout(cfg FanoutConfig) (*Fanout, error) {
	if cfg.Client == nil {
		return nil, errors.New("redisfanout.FanoutConfig.Client is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = defaultPrefix
	}
	if cfg.Memory == nil {
		cfg.Memory = revoke.NewMemory()
	}
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = defaultResyncInterval
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = defaultPingInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Grace == 0 {
		cfg.Grace = defaultGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.ResyncInterval < 0, cfg.PingInterval < 0, cfg.Timeout < 0, cfg.Grace < 0,
		cfg.MaxStaleness < 0, cfg.SubjectRetention < 0:
		return nil, errors.New("redisfanout.FanoutConfig durations must not be negative")
	case cfg.MaxStaleness > 0 && cfg.MaxStaleness <= cfg.PingInterval:
		return nil, fmt.Errorf("MaxStaleness %v must exceed PingInterval %v", cfg.MaxStaleness, cfg.PingInterval)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tag := "{" + cfg.Prefix + "}"
	f := &Fanout{
		cfg:         cfg,
		log:         cfg.Logger.With("component", "revoke.fanout", "prefix", cfg.Prefix),
		client:      cfg.Client,
		mem:         cfg.Memory,
		keyIDs:      tag + ":jti",
		keySubjects: tag + ":sub",
		keyKeep:     tag + ":subkeep",
		channel:     tag + ":events",
		publish:     "PUBLISH",
		maxStale:    int64(cfg.MaxStaleness),
		ctx:         ctx,
		cancel:      cancel,
		events:      make(chan event, 256),
		first:       make(chan struct{}),
	}
	if cfg.Sharded {
		f.publish = "SPUBLISH"
	}
	return f, nil
}

// Start subscribes, begins the background sync and waits for the first
// full resync. It returns that resync's error, or ctx's, but the Fanout
// keeps trying in the background either way; Close stops it. ctx bounds
// only the wait.
func (f *Fanout) Start(ctx context.Context) error {
	f.mu.Lock()
	switch {
	case f.closed:
		f.mu.Unlock()
		return ErrClosed
	case f.started:
		f.mu.Unlock()
		return errors.New("revocation fan-out already started")
	}
	f.started = true
	f.wg.Add(2)
	f.mu.Unlock()
	go f.read()
	go f.control()

	select {
	case <-f.first:
		return nil
	case <-f.ctx.Done():
		return ErrClosed
	case <-ctx.Done():
		if err := f.Status().LastError; err != nil {
			return fmt.Errorf("waiting for the first resync: %w; last error: %w", ctx.Err(), err)
		}
		return fmt.Errorf("waiting for the first resync: %w", ctx.Err())
	}
}

// Close stops the subscription and the background sync and waits for every
// goroutine of the Fanout to end. It does not close the Redis client.
// Revoked keeps answering from the set as it was (failing closed once it is
// MaxStaleness old, if set). Close may be called more than once.
func (f *Fanout) Close() error {
	f.mu.Lock()
	f.closed = true
	ps := f.ps
	f.ps = nil
	f.mu.Unlock()
	f.cancel()
	if ps != nil {
		_ = ps.Close()
	}
	f.wg.Wait()
	return nil
}

// Revoked reports whether the token is revoked (see [revoke.Checker]). Once the
// set is older than MaxStaleness, if set, every token is.
func (f *Fanout) Revoked(issuer, jti, subject string, issuedAt time.Time) bool {
	return f.FailingClosed() || f.mem.Revoked(issuer, jti, subject, issuedAt)
}

// FailingClosed reports whether the set is older than the allowed
// staleness, so that Revoked refuses every token.
func (f *Fanout) FailingClosed() bool {
	if f.maxStale <= 0 {
		return false
	}
	fresh := f.fresh.Load()
	return fresh == 0 || f.cfg.Now().UnixNano()-fresh > f.maxStale
}

// Staleness returns how long ago the set was last known to be current: the
// start of the last successful resync, or the last message or answered
// ping on a subscription that has not broken since. Before the first
// resync it is math.MaxInt64.
func (f *Fanout) Staleness() time.Duration {
	fresh := f.fresh.Load()
	if fresh == 0 {
		return math.MaxInt64
	}
	return max(time.Duration(f.cfg.Now().UnixNano()-fresh), 0)
}

// RevokeID revokes the token of issuer with this jti on every node. until
// is the token's expiry; the revocation is kept Grace past it. The
// revocation applies to this node at once; an error wrapping ErrNotShared
// means Redis did not take it.
func (f *Fanout) RevokeID(ctx context.Context, issuer, jti string, until time.Time) error {
	if jti == "" {
		return fmt.Errorf("%w: empty jti", ErrInvalid)
	}
	us := ceilMicros(until)
	f.mem.RevokeID(issuer, jti, time.UnixMicro(us))
	if !time.UnixMicro(us).Add(f.cfg.Grace).After(f.cfg.Now()) {
		return nil // expired past any leeway: there is nothing to share
	}
	return f.share(ctx, kindID, issuer, jti, us, 0)
}

// RevokeSubject revokes, on every node, every token of issuer issued to
// subject before the given time. It applies to this node at once; an
// error wrapping ErrNotShared means Redis did not take it.
func (f *Fanout) RevokeSubject(ctx context.Context, issuer, subject string, before time.Time) error {
	if subject == "" {
		return fmt.Errorf("%w: empty subject", ErrInvalid)
	}
	us := ceilMicros(before)
	f.mem.RevokeSubject(issuer, subject, time.UnixMicro(us))
	return f.share(ctx, kindSubject, issuer, subject, us, 0)
}

// RevokeSubjectUntil is RevokeSubject for tokens that may live longer than
// SubjectRetention (an identity provider's): the revocation is kept, in
// Redis and in every node's memory, until Grace past until if that is
// later than SubjectRetention past before. With an until no later than
// that, or no SubjectRetention (kept for ever), it is RevokeSubject.
//
// Such a revocation is its own entry in "{Prefix}:subkeep", scored by
// until and named by before, issuer and subject, so that Redis drops it
// by its score like a jti revocation.
func (f *Fanout) RevokeSubjectUntil(ctx context.Context, issuer, subject string, before, until time.Time) error {
	if f.cfg.SubjectRetention <= 0 || !until.After(before.Add(f.cfg.SubjectRetention)) {
		return f.RevokeSubject(ctx, issuer, subject, before)
	}
	if subject == "" {
		return fmt.Errorf("%w: empty subject", ErrInvalid)
	}
	bus, uus := ceilMicros(before), ceilMicros(until)
	f.mem.RevokeSubjectUntil(issuer, subject, time.UnixMicro(bus), time.UnixMicro(uus))
	if !time.UnixMicro(uus).Add(f.cfg.Grace).After(f.cfg.Now()) {
		return nil // kept past its retention until a time already past
	}
	return f.share(ctx, kindSubjectUntil, issuer, subject, uus, bus)
}

// Resync reloads the whole set from Redis now, as the background sync
// does, and returns its error. The background sync makes calling it
// unnecessary; it is for tools and tests.
func (f *Fanout) Resync(ctx context.Context) error {
	return f.resync(ctx)
}

// Status describes a Fanout at one moment, for readiness and metrics.
type Status struct {
	// LastCurrent is when the set was last known current (zero if never);
	// Staleness is the time since.
	LastCurrent time.Time
	Staleness   time.Duration
	// LastResync is the start of the last successful full resync.
	LastResync time.Time
	// Subscribed: the subscription is confirmed and has not broken since.
	Subscribed bool
	// FailClosed: MaxStaleness is exceeded and Revoked refuses everything.
	FailClosed bool
	// LastError is the last error of the background sync, nil after a
	// successful resync.
	LastError error
	// IDs and Subjects count the revocations held in memory.
	IDs, Subjects int
}

// Ready reports whether the node can verify: it has loaded the set at
// least once and is not failing closed.
func (s Status) Ready() bool { return !s.LastCurrent.IsZero() && !s.FailClosed }

// Status reports the Fanout's state.
func (f *Fanout) Status() Status {
	f.mu.Lock()
	st := Status{Subscribed: f.subscribed, LastResync: f.lastResync, LastError: f.lastErr}
	f.mu.Unlock()
	if fresh := f.fresh.Load(); fresh != 0 {
		st.LastCurrent = time.Unix(0, fresh)
	}
	st.Staleness = f.Staleness()
	st.FailClosed = f.maxStale > 0 && st.Staleness > time.Duration(f.maxStale)
	st.IDs, st.Subjects = f.mem.Len()
	return st
}

// Kinds of revocation, as they appear in messages.
const (
	kindID           = 'j'
	kindSubject      = 's'
	kindSubjectUntil = 'k' // "k <until µs> <before µs> <member>"
)

// writeScript adds one revocation to its sorted set, drops the entries
// that have expired by the server's clock, extends the key's expiry to
// cover the new entry, and publishes it, all atomically: a node that
// reads the set after seeing the message finds the entry there.
//
//	KEYS[1]  the sorted set
//	ARGV[1]  member: <len(issuer)>:<issuer><jti or subject>
//	ARGV[2]  score: jti expiry or subject time, µs since the epoch
//	ARGV[3]  keep, µs: how long past its score an entry stays ("" = for ever)
//	ARGV[4]  PUBLISH or SPUBLISH
//	ARGV[5]  channel
//	ARGV[6]  message
//
// Redis ≥ 7.0: ZADD GT (6.2), PEXPIREAT GT and SPUBLISH (7.0).
var writeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[3] ~= '' then
  local keep = tonumber(ARGV[3])
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%.0f', now - keep))
end
redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
if ARGV[3] ~= '' then
  local at = math.floor((tonumber(ARGV[2]) + tonumber(ARGV[3]) + 999) / 1000)
  if at * 1000 > now then
    local ms = string.format('%.0f', at)
    if redis.call('PTTL', KEYS[1]) == -1 then
      redis.call('PEXPIREAT', KEYS[1], ms)
    else
      redis.call('PEXPIREAT', KEYS[1], ms, 'GT')
    end
  end
end
return redis.call(ARGV[4], ARGV[5], ARGV[6])
`)

// share writes one revocation to Redis and publishes it. us is its score:
// a jti's expiry, a subject's time, or for kindSubjectUntil the time to
// keep it until, whose subject time is before.
func (f *Fanout) share(ctx context.Context, kind byte, issuer, id string, us, before int64) error {
	key, keep := f.keyIDs, strconv.FormatInt(f.cfg.Grace.Microseconds(), 10)
	member := encodeMember(issuer, id)
	switch kind {
	case kindSubject:
		key, keep = f.keySubjects, ""
		if f.cfg.SubjectRetention > 0 {
			keep = strconv.FormatInt(f.cfg.SubjectRetention.Microseconds(), 10)
		}
	case kindSubjectUntil:
		key, member = f.keyKeep, encodeKeepMember(before, issuer, id)
	}
	msg := encodeMessage(kind, us, member)
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	err := writeScript.Run(ctx, f.client, []string{key},
		member, strconv.FormatInt(us, 10), keep, f.publish, f.channel, msg).Err()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotShared, err)
	}
	return nil
}

// ceilMicros returns t in microseconds since the epoch, rounded up, so
// that a revocation never narrows when it is shared.
func ceilMicros(t time.Time) int64 {
	us := t.UnixMicro()
	if time.UnixMicro(us).Before(t) {
		us++
	}
	return us
}

// encodeMember scopes id to its issuer in one string that splits back
// unambiguously, whatever bytes either holds.
func encodeMember(issuer, id string) string {
	return strconv.Itoa(len(issuer)) + ":" + issuer + id
}

func decodeMember(m string) (issuer, id string, ok bool) {
	i := 0
	for i < len(m) && m[i] != ':' {
		i++
	}
	n, err := strconv.Atoi(m[:i])
	if err != nil || i == len(m) || n < 0 || n > len(m)-i-1 {
		return "", "", false
	}
	rest := m[i+1:]
	issuer, id = rest[:n], rest[n:]
	return issuer, id, id != ""
}

// encodeMessage is what is published: "<kind> <µs> <member>".
func encodeMessage(kind byte, us int64, member string) string {
	return string(kind) + " " + strconv.FormatInt(us, 10) + " " + member
}

// encodeKeepMember is a member of "{Prefix}:subkeep", "<before µs> <member>".
func encodeKeepMember(before int64, issuer, id string) string {
	return strconv.FormatInt(before, 10) + " " + encodeMember(issuer, id)
}

// plainMember is decodeMember in the shape of decodeKeepMember.
func plainMember(m string) (before int64, issuer, id string, ok bool) {
	issuer, id, ok = decodeMember(m)
	return 0, issuer, id, ok
}

// decodeKeepMember splits a member of "{Prefix}:subkeep",
// "<before µs> <member>".
func decodeKeepMember(m string) (before int64, issuer, id string, ok bool) {
	before, rest, ok := leadingNumber(m)
	if !ok {
		return 0, "", "", false
	}
	issuer, id, ok = decodeMember(rest)
	return before, issuer, id, ok
}

// leadingNumber splits "<decimal> <rest>" into the number and rest.
func leadingNumber(s string) (n int64, rest string, ok bool) {
	num, rest, found := strings.Cut(s, " ")
	if !found {
		return 0, "", false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	return n, rest, err == nil
}

// message is a published revocation, decoded: its kind; us, its score (a
// jti's expiry, a subject's time, or for kindSubjectUntil the time to keep
// it until); for kindSubjectUntil the subject's time, before; and whose it
// is.
type message struct {
	kind       byte
	us, before int64
	issuer, id string
}

// decodeMessage reads a message of any kind, "<kind> <µs> <member>", whose
// member for kindSubjectUntil is "<before µs> <member>".
func decodeMessage(p string) (m message, ok bool) {
	if len(p) < 4 || p[1] != ' ' {
		return message{}, false
	}
	m.kind = p[0]
	var rest string
	if m.us, rest, ok = leadingNumber(p[2:]); !ok {
		return message{}, false
	}
	switch m.kind {
	case kindID, kindSubject:
		m.issuer, m.id, ok = decodeMember(rest)
	case kindSubjectUntil:
		m.before, m.issuer, m.id, ok = decodeKeepMember(rest)
	default:
		ok = false
	}
	if !ok {
		return message{}, false
	}
	return m, true
}
