package httpaudit

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/httperr"
)

// Refusals before authentication. A request whose caller never
// authenticated costs nothing to send, and without a limit each one would
// cost a record: a flood of them fills the audit directory's disk, after
// which every audited request fails (the log is fail-closed). So such
// refusals are limited per client address, and all addresses together
// (RefusalConfig.Total): the first ones within both limits are recorded
// one by one, as any request; past either the answer is 429 slow_down
// with Retry-After, and the request is tallied rather than recorded.
// Flush writes the tallies as aggregate records (audit.Record.Count): one
// per address past its own limit, operation and reason for each period
// between Flushes (at most MaxTallies), and one per operation for the
// rest, so a flood writes records in proportion to the addresses that
// spent their own limit, not to its requests. A request is a refusal before
// authentication when it was answered 4xx or 5xx with no principal noted
// and no pending record written (a request that wrote one is recorded
// whole, its outcome too): an authenticated caller's refusals, and every
// success, are recorded one by one whatever the address has sent.

// Limiter decides whether one more request under key may proceed now;
// ratelimit's limiters implement it.
type Limiter interface {
	Allow(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
}

// RefusalConfig limits the records of refusals before authentication.
type RefusalConfig struct {
	// Limiter bounds such refusals per address; nil turns the limit off
	// (every refusal is recorded on its own).
	Limiter Limiter
	// Key is the address's key in Limiter, such as the /64 an IPv6
	// address is in; nil: the address itself.
	Key func(netip.Addr) string
	// Total, if set, bounds the refusals recorded one by one from every
	// address together (its key is "total"), charged once the address's
	// own limit lets one through: whoever holds many addresses (a /48
	// holds 65,536 /64s, free from a tunnel broker) gets no more records
	// than that, and past it refusals are answered and tallied as past an
	// address's limit. Attempts (Note.Attempt) are not charged to it, so
	// that a flood from elsewhere never keeps an operator from trying.
	Total Limiter
	// MaxTallies bounds the tallies (one per address, operation and
	// reason) kept between two Flushes (default 1,000, about 100 KB, and at most as many aggregate records a minute). Past
	// it, a new one's refusals are tallied per operation without an
	// address, so that memory stays bounded whatever number of addresses
	// a flood comes from (the operations are the routes', a fixed set).
	MaxTallies int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnTally, if set, is told of every refusal tallied rather than
	// recorded on its own.
	OnTally func()
}

// defaultMaxTallies is RefusalConfig.MaxTallies's default.
const defaultMaxTallies = 1_000

// refusals is an Auditor's tally of the refusals past their address's
// limit since the last Flush.
type refusals struct {
	cfg   RefusalConfig
	mu    sync.Mutex
	tally map[tallyKey]*tally
	addrs int // tallies with an address
}

// tallyKey is what an aggregate record stands for: an address (its
// limiter key; "" for the addresses past MaxTallies), an operation and a
// reason.
type tallyKey struct {
	addr   string
	op     audit.Operation
	reason audit.Reason
}

type tally struct {
	remote      netip.Addr // the first address seen under the key
	count       uint64
	first, last time.Time
}

func newRefusals(cfg RefusalConfig) *refusals {
	if cfg.MaxTallies <= 0 {
		cfg.MaxTallies = defaultMaxTallies
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Key == nil {
		cfg.Key = netip.Addr.String
	}
	return &refusals{cfg: cfg, tally: make(map[tallyKey]*tally)}
}

// errThrottled is the answer to a refusal past its address's limit.
func errThrottled(wait time.Duration) *httperr.Error {
	return &httperr.Error{Status: http.StatusTooManyRequests, Code: "slow_down",
		Description: "too many refused requests from this address; retry later", RetryAfter: max(wait, time.Second)}
}

// unauthenticated reports whether r, a request's record, is a refusal
// before its caller authenticated.
func unauthenticated(r *audit.Record, intent bool) bool {
	return r.Result != audit.ResultOK && r.Principal.Kind == audit.PrincipalNone && !intent
}

// The budgets an address is charged to: one for refusals before
// authentication, and one of its own for attempts (Note.Attempt), so that
// other requests refused from an address (a sealed node's clients, which
// it cannot authenticate, retrying from behind the operator's proxy or
// NAT) never spend the operator's unseal.
const (
	budgetRefusals = ""
	budgetAttempts = "attempts:"
)

// allow charges addr's budget for a refusal or an attempt; past its limit
// it returns how long until the address may be refused (or try) on the
// record again. A limiter that cannot decide lets the request be
// recorded: a record too many is better than none.
func (rf *refusals) allow(ctx context.Context, budget string, addr netip.Addr) (time.Duration, bool) {
	ok, wait, err := rf.cfg.Limiter.Allow(ctx, budget+rf.cfg.Key(addr))
	if err != nil || ok {
		return 0, true
	}
	return wait, false
}

// allowTotal charges the budget of every address together (Total) for a
// refusal the address's own limit let through; past it, it returns how
// long until refusals are recorded again.
func (rf *refusals) allowTotal(ctx context.Context) (time.Duration, bool) {
	if rf.cfg.Total == nil {
		return 0, true
	}
	ok, wait, err := rf.cfg.Total.Allow(ctx, "total")
	if err != nil || ok {
		return 0, true
	}
	return wait, false
}

// add tallies a refusal of r's operation and reason from remote: r's
// address, or none for a refusal past the limit of every address together
// but not its own, so that the aggregates of a flood from many addresses
// are as few as its records one by one (one per operation), not one per
// address.
func (rf *refusals) add(r *audit.Record, remote netip.Addr) {
	now := rf.cfg.Now()
	rf.mu.Lock()
	rf.merge(remote, r.Operation, r.Reason, 1, now, now)
	rf.mu.Unlock()
	if rf.cfg.OnTally != nil {
		rf.cfg.OnTally()
	}
}

// merge adds count refusals, from first to last, to the tally of remote's
// key, op and reason; past MaxTallies, a new address's go to op's tally
// without an address. The caller holds mu.
func (rf *refusals) merge(remote netip.Addr, op audit.Operation, reason audit.Reason, count uint64, first, last time.Time) {
	k := tallyKey{op: op}
	if remote.IsValid() {
		k = tallyKey{addr: rf.cfg.Key(remote), op: op, reason: reason}
	}
	t, ok := rf.tally[k]
	if !ok && k.addr != "" && rf.addrs >= rf.cfg.MaxTallies {
		k = tallyKey{op: op}
		t, ok = rf.tally[k]
	}
	if !ok {
		t = &tally{first: first, last: last}
		if k.addr != "" {
			t.remote = remote
			rf.addrs++
		}
		rf.tally[k] = t
	}
	t.count += count
	if first.Before(t.first) {
		t.first = first
	}
	if last.After(t.last) {
		t.last = last
	}
}

// take empties the tally and returns its aggregate records, oldest first.
func (rf *refusals) take() []audit.Record {
	rf.mu.Lock()
	taken := rf.tally
	rf.tally, rf.addrs = make(map[tallyKey]*tally, len(taken)), 0
	rf.mu.Unlock()
	out := make([]audit.Record, 0, len(taken))
	for k, t := range taken {
		out = append(out, audit.Record{Time: t.last, Since: t.first, Count: t.count, Operation: k.op,
			Result: audit.ResultRefused, Reason: k.reason, Status: http.StatusTooManyRequests, Remote: t.remote})
	}
	slices.SortFunc(out, func(a, b audit.Record) int { return cmp.Or(a.Since.Compare(b.Since), a.Time.Compare(b.Time)) })
	return out
}

// putBack returns aggregate records that could not be written to the
// tally, for the next Flush.
func (rf *refusals) putBack(recs []audit.Record) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	for _, r := range recs {
		rf.merge(r.Remote, r.Operation, r.Reason, r.Count, r.Since, r.Time)
	}
}

// Flush writes an aggregate record (audit.Record.Count) for each address,
// operation and reason whose refusals were tallied since the last Flush,
// instead of a record each; the node calls it on its schedule and before
// closing the log. Records that cannot be written are kept for the next
// Flush, and the error says how many requests they stand for.
func (a *Auditor) Flush(ctx context.Context) error {
	if a.refusals == nil {
		return nil
	}
	recs := a.refusals.take()
	for i := range recs {
		if err := a.write(ctx, recs[i]); err != nil {
			rest := recs[i:]
			a.refusals.putBack(rest)
			var n uint64
			for _, r := range rest {
				n += r.Count
			}
			return fmt.Errorf("%d aggregate records (%d refused requests) not written, kept for the next flush: %w", len(rest), n, err)
		}
	}
	return nil
}
