// Package verify is the token check every keygate front end shares
// (forward-auth, reverse proxy, Go middleware): it picks the issuer's
// policy by the token's "iss" in one map lookup, verifies the signature
// with that issuer's keys only, applies the policy's claim, scope and
// revocation checks, and caches the verified result until the token
// expires, so a repeated token costs a map lookup instead of a signature.
//
// Security properties: a token is accepted only if its exact bytes passed
// every check; an issuer's tokens are verified only with that issuer's keys
// and algorithms; a cached token is refused from the next request on once
// its key leaves the issuer's key set or it is revoked; refusals are never
// cached. The request path does no I/O (apart from the key source's
// rate-limited refetch on an unknown kid), takes no global lock and parses
// no key; a cache hit allocates nothing.
package verify

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
)

// Config configures a Pipeline.
type Config struct {
	// Policies, one per trusted issuer; issuers must be distinct.
	Policies []Policy
	// Revocation is consulted on every accepted token, cached or not
	// (default revoke.Nop).
	Revocation revoke.Checker
	// Cache bounds the verified-token cache.
	Cache CacheConfig
	// MaxTokenSize is checked before anything else (default
	// jose.DefaultMaxTokenSize).
	MaxTokenSize int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Observe, if set, is told how long each full verification (a cache
	// miss that got as far as the token's alg) took, and whether it
	// accepted; for latency metrics. ctx is the request's, for a trace id
	// as exemplar. It must not block.
	Observe func(ctx context.Context, alg jose.Alg, d time.Duration, accepted bool)
	// Traced gives the cache lookup and each full verification of a
	// request under a recording span a child span (keygate.cache,
	// keygate.verify). Off, Verify does not even look for a span.
	Traced bool
}

// Result is an accepted token. It is immutable and shared between all the
// requests that present the same token while it is cached: callers must not
// modify it or anything it points to. (A cached Result and its Token live in
// memory the garbage collector does not scan: a pointer stored into them
// would not keep its target alive.)
type Result struct {
	Issuer  string
	Subject string
	ID      string    // "jti"
	Scope   string    // space-separated, from "scope" and "scp"
	Expiry  time.Time // zero when the token has no exp
	// Headers are the policy's header mappings, in policy order.
	Headers []HeaderValue
	// Token is the verified token, for middleware that reads other claims
	// (Token.Claims.Raw, Token.Claims.Decode).
	Token *jose.Token
	// KeyID and KeyThumbprint (RFC 7638) identify the key that verified it.
	KeyID         string
	KeyThumbprint string
}

// Pipeline verifies tokens against per-issuer policies. It is safe for
// concurrent use and starts no goroutines: there is nothing to stop.
type Pipeline struct {
	policies map[string]*policy
	pols     []*policy // by policy.idx
	revoke   revoke.Checker
	cache    *cache
	maxSize  int
	parser   *jose.Parser
	now      func() time.Time
	observe  func(context.Context, jose.Alg, time.Duration, bool)
	traced   bool

	onVerify func() // test hook: called once per full verification
}

// New validates cfg and builds a Pipeline.
func New(cfg Config) (*Pipeline, error) {
	if len(cfg.Policies) == 0 {
		return nil, &PolicyError{Field: "Policies", Msg: "at least one issuer policy is needed"}
	}
	p := &Pipeline{
		policies: make(map[string]*policy, len(cfg.Policies)),
		revoke:   cfg.Revocation,
		maxSize:  cfg.MaxTokenSize,
		now:      cfg.Now,
		observe:  cfg.Observe,
		traced:   cfg.Traced,
	}
	for i := range cfg.Policies {
		c, err := compile(&cfg.Policies[i])
		if err != nil {
			return nil, err
		}
		if _, dup := p.policies[c.issuer]; dup {
			return nil, &PolicyError{Issuer: c.issuer, Field: "Issuer", Msg: "has more than one policy"}
		}
		c.idx = len(p.pols)
		p.policies[c.issuer] = c
		p.pols = append(p.pols, c)
	}
	if p.revoke == nil {
		p.revoke = revoke.Nop{}
	}
	if p.maxSize < 0 {
		return nil, &PolicyError{Field: "MaxTokenSize", Msg: "must not be negative"}
	}
	if p.maxSize == 0 {
		p.maxSize = jose.DefaultMaxTokenSize
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.parser = jose.NewParser(p.maxSize)
	var err error
	if p.cache, err = newCache(cfg.Cache); err != nil {
		return nil, err
	}
	return p, nil
}

// Verify checks token and returns what it proves, or why it is refused:
// a *jose.Error, or an *Error such as ErrInsufficientScope (see ReasonOf).
// It returns ctx's error if ctx ends while it waits for another request's
// verification of the same token; a request that verifies on behalf of
// others uses its own ctx for the key refetch, and they share its outcome.
// The cache keeps a copy of token, never the caller's string.
func (p *Pipeline) Verify(ctx context.Context, token string) (*Result, error) {
	if len(token) > p.maxSize {
		return nil, errTooLarge
	}
	s, h := p.cache.locate(token)
	now := p.now().UnixNano()
	if p.traced && trace.SpanFromContext(ctx).IsRecording() {
		return p.verifyTraced(ctx, s, h, token, now)
	}
	if e := s.get(h, token); e != nil {
		if res, err := p.hit(s, e, now); res != nil || err != nil {
			return res, err
		}
	}
	return p.miss(ctx, s, h, token, now)
}

// verifyTraced is Verify under a recording span: the cache lookup and, on a
// miss, the verification each get a child span (see telemetry's Tracing),
// with the cache hit, the reason of a refusal, and the issuer, kid and alg
// of an accepted token; never the token or a claim value.
func (p *Pipeline) verifyTraced(ctx context.Context, s *shard, h uint64, token string, now int64) (*Result, error) {
	_, span := telemetry.StartChild(ctx, telemetry.SpanCache, trace.SpanKindInternal)
	var res *Result
	var err error
	if e := s.get(h, token); e != nil {
		res, err = p.hit(s, e, now)
	}
	hit := res != nil || err != nil
	span.SetAttributes(telemetry.AttrCacheHit.Bool(hit))
	endVerifySpan(span, res, err)
	if hit {
		return res, err
	}
	ctx, span = telemetry.StartChild(ctx, telemetry.SpanVerify, trace.SpanKindInternal)
	res, err = p.miss(ctx, s, h, token, now)
	endVerifySpan(span, res, err)
	return res, err
}

func endVerifySpan(span trace.Span, res *Result, err error) {
	switch {
	case res != nil:
		span.SetAttributes(telemetry.AttrIssuer.String(res.Issuer), telemetry.AttrKeyID.String(res.KeyID))
		if res.Token != nil {
			span.SetAttributes(telemetry.AttrAlg.String(res.Token.Header.Alg.String()))
		}
	case err != nil:
		if reason := ReasonOf(err); reason != "" {
			span.SetAttributes(telemetry.AttrReason.String(reason))
		} else {
			telemetry.Fail(span, "internal") // no verdict: the error's text may quote the token's fields
		}
	}
	span.End()
}

// hit answers from a cached entry. It returns neither a result nor an
// error when the entry no longer stands (expired, or its key left the
// issuer's set) and has been dropped, so the token must be verified again.
func (p *Pipeline) hit(s *shard, c *cached, now int64) (*Result, error) {
	if now >= c.expires || !p.keyCurrent(c) {
		s.drop(c)
		return nil, nil
	}
	s.hits.Add(1)
	r := &c.res
	// A revoked token stays cached: refusing it again costs this check
	// rather than a signature verification.
	if p.revoke.Revoked(r.Issuer, r.ID, r.Subject, c.iat) {
		return nil, errRevoked
	}
	if !c.ref.Load() {
		c.ref.Store(true)
	}
	return r, nil
}

// keyCurrent reports whether the issuer's current key set still maps the
// entry's (kid, alg) to a key with the thumbprint of the one that verified
// it. Key sets are immutable snapshots, so while the source serves the set
// in which the entry's key was last found (by its serial, which the entry
// can keep without a pointer), the answer is the same and no lookup is
// needed.
func (p *Pipeline) keyCurrent(c *cached) bool {
	set := p.pols[c.pol].keys.Current()
	if set == nil {
		return false
	}
	if n := set.Serial(); n != 0 && n == c.keySet.Load() {
		return true
	}
	k, err := set.ResolveKey(c.kid, c.alg)
	if err != nil || k.Thumbprint() != c.res.KeyThumbprint {
		return false
	}
	c.keySet.Store(set.Serial())
	return true
}

// miss verifies token in full, once however many requests present it at
// the same time: the first registers a flight in the token's shard, the
// others wait for its outcome.
func (p *Pipeline) miss(ctx context.Context, s *shard, h uint64, token string, now int64) (*Result, error) {
	s.mu.Lock()
	// Between the lookup and this lock another request may have finished
	// verifying the token; use its entry rather than verify again.
	if i, ok := s.index[h]; ok && s.ring[i].token == token {
		c := s.ring[i]
		s.mu.Unlock()
		if res, err := p.hit(s, c, now); res != nil || err != nil {
			return res, err
		}
		s.mu.Lock()
	}
	s.misses.Add(1)
	f := s.flights[h]
	if f != nil && f.token == token {
		if f.done == nil {
			f.done = make(chan struct{})
		}
		s.mu.Unlock()
		f.waiters.Add(1)
		select {
		case <-f.done:
			if f.err != nil {
				return nil, f.err
			}
			return f.out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The flight keeps token itself; the cache keeps a copy (see pack),
	// so a caller that rewrote the token's memory afterwards, breaking
	// string immutability with unsafe, could not change a cached entry.
	e := flightPool.Get().(*flight)
	e.token, e.hash = token, h
	registered := f == nil // another token with the same hash in flight: verify without sharing
	if registered {
		s.flights[h] = e
	}
	s.mu.Unlock()

	// Whatever happens, even a panic in a key source, the flight ends and
	// its waiters are released.
	defer func() {
		if !e.finished {
			e.err = errIncomplete
			s.mu.Lock()
			s.land(e, registered)
			s.mu.Unlock()
		}
		if e.reusable {
			*e = flight{}
			flightPool.Put(e)
		}
	}()

	var t *jose.Token
	t, e.err = p.verify(ctx, e, now)
	p.settle(s, e, t, registered, now)
	if e.err != nil {
		return nil, e.err
	}
	return e.out, nil
}

// settle gives f its answer, caches a copy of an accepted result (made
// outside the lock), and ends the flight.
func (p *Pipeline) settle(s *shard, f *flight, t *jose.Token, registered bool, now int64) {
	var c *cached
	if f.err == nil {
		f.out = &f.res
		if !p.cache.disabled && f.expires > now {
			c = p.pack(f, t)
			f.out = &c.res
		}
	}
	s.mu.Lock()
	if c != nil {
		p.cache.insert(s, c, now)
	}
	s.land(f, registered)
	s.mu.Unlock()
}

// land ends f's flight and releases its waiters. Caller holds s.mu.
func (s *shard) land(f *flight, registered bool) {
	if registered {
		delete(s.flights, f.hash)
	}
	f.finished = true
	if f.done != nil {
		close(f.done)
	}
	// Waiters find a flight only in s.flights, and the first makes done
	// there, so with done nil none ever will; and if the caller's answer
	// is not in it (a cached copy, or an error), it can serve again.
	f.reusable = f.done == nil && f.out != &f.res
}

// flightPool keeps flights that ended without waiters: a miss that caches
// its result allocates none.
var flightPool = sync.Pool{New: func() any { return new(flight) }}

var errIncomplete = errors.New("verification did not complete")

// verify runs every check on e.token at time now, fills e and returns the
// parsed token.
func (p *Pipeline) verify(ctx context.Context, e *flight, now int64) (_ *jose.Token, err error) {
	if p.onVerify != nil {
		p.onVerify()
	}
	t, err := p.parser.Parse(e.token)
	if err != nil {
		return nil, err
	}
	if p.observe != nil {
		start := time.Now()
		defer func() { p.observe(ctx, t.Header.Alg, time.Since(start), err == nil) }()
	}
	iss := t.Claims.Issuer
	if iss == "" {
		return nil, errNoIssuer
	}
	pol := p.policies[iss]
	if pol == nil {
		return nil, errUnknownIssuer
	}
	alg, kid := t.Header.Alg, t.Header.KeyID
	if pol.algs&(1<<alg) == 0 {
		return nil, errAlgNotAllowed
	}
	set := pol.keys.Current()
	key, err := resolve(set, kid, alg)
	if errors.Is(err, jose.ErrUnknownKID) {
		if p.traced {
			rctx, span := telemetry.StartChild(ctx, telemetry.SpanKeyRefetch, trace.SpanKindInternal)
			set = pol.keys.Refetch(rctx)
			span.End()
		} else {
			set = pol.keys.Refetch(ctx)
		}
		key, err = resolve(set, kid, alg)
		if errors.Is(err, jose.ErrUnknownKID) && pol.keys.Status().LastError != nil {
			return nil, ErrKeysUnavailable
		}
	}
	if err != nil {
		return nil, err
	}
	if err := key.Verify(t); err != nil {
		return nil, err
	}
	p.parser.Verified(t)
	if pol.typ != "" && !jose.TypeMatches(t.Header.Type, pol.typ) {
		return nil, errType
	}
	c := &t.Claims
	if err := c.Validate(&pol.expected, time.Unix(0, now)); err != nil {
		return nil, err
	}
	for i, sc := range pol.scopes {
		if !c.HasScope(sc) {
			return nil, pol.scopeErr[i]
		}
	}
	var iat time.Time
	if c.IssuedAt.Valid {
		iat = time.Unix(c.IssuedAt.Unix, 0)
	}
	if p.revoke.Revoked(iss, c.ID, c.Subject, iat) {
		return nil, errRevoked
	}
	e.res = Result{
		Issuer:        iss,
		Subject:       c.Subject,
		ID:            c.ID,
		Scope:         c.Scope,
		Headers:       headerValues(c, pol.headers, e.hdrBuf[:], e.valBuf[:]),
		Token:         t,
		KeyID:         key.KeyID(),
		KeyThumbprint: key.Thumbprint(),
	}
	e.pol, e.alg, e.iat = pol, alg, iat
	e.keySet = set.Serial()
	e.expires = now + int64(p.cache.maxTTL)
	if c.Expiry.Valid {
		e.res.Expiry = time.Unix(c.Expiry.Unix, 0)
		if exp := e.res.Expiry.UnixNano(); exp < e.expires {
			e.expires = exp
		}
	}
	return t, nil
}

func resolve(set *jose.KeySet, kid string, alg jose.Alg) (*jose.Key, error) {
	if set == nil {
		return nil, errNoKeys
	}
	return set.ResolveKey(kid, alg)
}

// Stats returns the cache's counters.
func (p *Pipeline) Stats() CacheStats { return p.cache.stats() }

// Evict drops every cached result match accepts and returns how many. Hits
// check revocation anyway; Evict returns the memory at once, for example
// when a revocation event arrives. match runs under a shard lock and must
// not call the Pipeline.
func (p *Pipeline) Evict(match func(*Result) bool) int { return p.cache.evict(match) }

// EvictSubject drops the cached tokens of issuer issued to subject.
func (p *Pipeline) EvictSubject(issuer, subject string) int {
	return p.Evict(func(r *Result) bool { return r.Issuer == issuer && r.Subject == subject })
}

// EvictID drops the cached token of issuer with this jti.
func (p *Pipeline) EvictID(issuer, jti string) int {
	return p.Evict(func(r *Result) bool { return r.Issuer == issuer && r.ID == jti })
}
