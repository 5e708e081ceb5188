package node

import (
	"context"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
)

// TickInterval is how often Run runs the schedule.
const TickInterval = time.Minute

// PurgeInterval is how often the schedule deletes expired refresh tokens
// and revocations.
const PurgeInterval = time.Hour

// RevocationGrace is how long past a revoked token's expiry its revocation
// is kept, in memory, in the store and in Redis: verifiers accept a token
// up to their leeway past exp, and the revocation must outlive that.
const RevocationGrace = config.DefaultLeeway + 4*time.Minute

// schedule is Tick's state.
type schedule struct {
	mu     sync.Mutex // one Tick at a time
	purged time.Time  // the last purge
}

// Run runs the schedule (Tick) every TickInterval until ctx is done, and
// returns when it is.
func (n *Node) Run(ctx context.Context) {
	t := time.NewTicker(TickInterval)
	defer t.Stop()
	done := make(chan struct{})
	go func() { defer close(done); n.runRekey(ctx) }()
	defer func() { <-done }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.Tick(ctx)
		}
	}
}

// Tick runs the schedule once: the signing-key schedule, a sweep of the
// expired revocations from memory (which, with Redis, the fan-out does at
// each resync), on the first tick and then every PurgeInterval the
// deletion of expired refresh tokens and revocations from the store, the
// audit log's aggregate records of refused requests and a look at its
// disk's free space, and then what OnTick registered. Run calls it; Ticks run one at a time.
func (n *Node) Tick(ctx context.Context) {
	n.schedule.mu.Lock()
	defer n.schedule.mu.Unlock()
	if err := n.keys.Tick(ctx); err != nil && ctx.Err() == nil {
		n.log.Error("signing key schedule failed", "err", err)
		if m := n.cfg.Metrics; m != nil {
			m.KeyScheduleFailed()
		}
	}
	now := n.cfg.Now()
	if n.revs.fanout == nil {
		n.revs.mem.Sweep(now.Add(-RevocationGrace))
		n.revs.mem.SweepSubjects(now.Add(-n.subjectRetention()), now.Add(-RevocationGrace))
	}
	if now.Sub(n.schedule.purged) >= PurgeInterval {
		n.schedule.purged = now
		n.purge(ctx, now)
	}
	n.flushAudit(ctx)
	n.AuditDisk() //nolint:errcheck // a look, for the warning a low disk logs; writes report their own errors
	n.hooks.ticked(ctx)
}

// subjectRetention is how long a subject revocation ("everything issued
// before T") is kept past T: the longest a token issued before T can live
// (a refresh token, or an access token if configured longer) plus the
// verifiers' leeway and a margin. Past it every token the entry refuses
// has expired anyway. The same retention applies to the subject
// revocations of the gateway's issuers, whose tokens' lifetimes keygate
// cannot know (admin.ExternalTokenLifetime, also 30 days): a revocation
// made with an until is kept until then if that is later.
func (n *Node) subjectRetention() time.Duration {
	return max(issuer.DefaultRefreshTTL, n.ts.AccessTokenTTL) + RevocationGrace
}

// purge deletes refresh tokens past their expiry, spent or not, jti
// revocations of tokens that have expired anyway, and subject revocations
// past subjectRetention, so that no table grows with every login, refresh
// and revocation. Every node of a fleet runs it; the deletes are
// idempotent.
func (n *Node) purge(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	revocations := func(ctx context.Context, now time.Time) (int, error) {
		return n.store.DeleteExpiredRevocations(ctx, now.Add(-RevocationGrace), now.Add(-n.subjectRetention()))
	}
	for _, p := range []struct {
		what string
		del  func(context.Context, time.Time) (int, error)
	}{{"expired refresh tokens", n.store.DeleteExpiredRefreshTokens}, {"expired revocations", revocations}} {
		count, err := p.del(ctx, now)
		switch {
		case err != nil && ctx.Err() == nil:
			n.log.Warn("deleting "+p.what+" failed; retrying at the next purge", "err", err)
		case count > 0:
			n.log.Info(p.what+" deleted", "count", count)
		}
	}
}
