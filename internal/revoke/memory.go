package revoke

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is a Checker holding revocations in memory. Readers answer from an
// immutable snapshot loaded with one atomic read, so Revoked takes no lock
// and allocates nothing; writers copy the map they change and swap the
// snapshot (copy-on-write), serialised by a mutex readers never touch.
//
// The zero value is an empty checker ready for use. A Memory must not be
// copied after first use.
type Memory struct {
	mu   sync.Mutex // serialises writers
	snap atomic.Pointer[snapshot]
}

var _ Checker = (*Memory)(nil)

// snapshot is never written after it is published.
type snapshot struct {
	ids      map[name]time.Time  // (issuer, jti) → the token's expiry
	subjects map[name]subjectRev // (issuer, sub) → tokens issued before .before are revoked
}

// subjectRev is a subject revocation: tokens issued before before are
// revoked, and the entry is kept at least until keep (zero: only as long
// as SweepSubjects's cutoff allows).
type subjectRev struct{ before, keep time.Time }

// name is an identifier scoped to its issuer, so that two tenants' jti or
// sub values never collide.
type name struct{ issuer, id string }

var emptySnapshot = &snapshot{}

// NewMemory returns an empty in-memory checker.
func NewMemory() *Memory { return new(Memory) }

func (m *Memory) load() *snapshot {
	if s := m.snap.Load(); s != nil {
		return s
	}
	return emptySnapshot
}

// Revoked reports whether the token with this jti was revoked, or whether
// its subject was revoked at a time after the token was issued. A token
// whose subject is revoked and whose issued-at time is unknown (zero) is
// reported revoked: without iat there is no proof it came after the
// revocation.
func (m *Memory) Revoked(issuer, jti, subject string, issuedAt time.Time) bool {
	s := m.load()
	if jti != "" && len(s.ids) > 0 {
		if _, ok := s.ids[name{issuer, jti}]; ok {
			return true
		}
	}
	if subject != "" && len(s.subjects) > 0 {
		if r, ok := s.subjects[name{issuer, subject}]; ok {
			return issuedAt.IsZero() || issuedAt.Before(r.before)
		}
	}
	return false
}

// RevokeID revokes the token of issuer with this jti. until is the token's
// expiry: after it the token is refused anyway, and Sweep drops the entry.
// Revoking an ID again keeps the later until.
func (m *Memory) RevokeID(issuer, jti string, until time.Time) {
	m.Update(func(b *Batch) { b.RevokeID(issuer, jti, until) })
}

// RevokeSubject revokes every token of issuer issued to subject before the
// given time; tokens issued at or after it stay valid. Revoking a subject
// again keeps the later time.
func (m *Memory) RevokeSubject(issuer, subject string, before time.Time) {
	m.Update(func(b *Batch) { b.RevokeSubject(issuer, subject, before) })
}

// RevokeSubjectUntil is RevokeSubject for tokens that may live longer than
// SweepSubjects's retention: SweepSubjects keeps the entry at least until
// until. Of two revocations of one subject, the later before and the later
// until are kept.
func (m *Memory) RevokeSubjectUntil(issuer, subject string, before, until time.Time) {
	m.Update(func(b *Batch) { b.RevokeSubjectUntil(issuer, subject, before, until) })
}

// Update applies a batch of revocations with one copy of each map it
// changes and publishes them together, so that loading many revocations
// (a resync) costs O(n) rather than a copy per revocation. fn must not
// retain b or call m's methods.
func (m *Memory) Update(fn func(b *Batch)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := Batch{old: m.load()}
	b.ids, b.subjects = b.old.ids, b.old.subjects
	fn(&b)
	if b.idsCopied || b.subjectsCopied {
		m.snap.Store(&snapshot{ids: b.ids, subjects: b.subjects})
	}
}

// Batch collects revocations for Update. Its methods behave as Memory's.
type Batch struct {
	old                       *snapshot
	ids                       map[name]time.Time
	subjects                  map[name]subjectRev
	idsCopied, subjectsCopied bool
}

// RevokeID is Memory.RevokeID within a batch.
func (b *Batch) RevokeID(issuer, jti string, until time.Time) {
	k := name{issuer, jti}
	if prev, ok := b.ids[k]; ok && !until.After(prev) {
		return
	}
	if !b.idsCopied {
		b.ids = maps.Clone(b.ids)
		if b.ids == nil {
			b.ids = make(map[name]time.Time)
		}
		b.idsCopied = true
	}
	b.ids[k] = until
}

// RevokeSubject is Memory.RevokeSubject within a batch.
func (b *Batch) RevokeSubject(issuer, subject string, before time.Time) {
	b.RevokeSubjectUntil(issuer, subject, before, time.Time{})
}

// RevokeSubjectUntil is Memory.RevokeSubjectUntil within a batch.
func (b *Batch) RevokeSubjectUntil(issuer, subject string, before, until time.Time) {
	k := name{issuer, subject}
	r := subjectRev{before: before, keep: until}
	if prev, ok := b.subjects[k]; ok {
		if !before.After(prev.before) && !until.After(prev.keep) {
			return
		}
		r.before, r.keep = laterOf(before, prev.before), laterOf(until, prev.keep)
	}
	if !b.subjectsCopied {
		b.subjects = maps.Clone(b.subjects)
		if b.subjects == nil {
			b.subjects = make(map[name]subjectRev)
		}
		b.subjectsCopied = true
	}
	b.subjects[k] = r
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Sweep drops the ID revocations whose token has expired by now, and
// returns how many it dropped. Run it from whatever periodic work owns the
// Memory; nothing inside Memory runs on its own.
func (m *Memory) Sweep(now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.load()
	ids, dropped := sweep(old.ids, func(until time.Time) bool { return until.After(now) })
	if dropped > 0 {
		m.snap.Store(&snapshot{ids: ids, subjects: old.subjects})
	}
	return dropped
}

// SweepSubjects drops the subject revocations whose time is before cutoff
// and that were not asked (RevokeSubjectUntil) to be kept past now, and
// returns how many it dropped. With cutoff = now − the longest lifetime a
// token can have unless its revocation says otherwise, every token such an
// entry refuses has expired anyway.
func (m *Memory) SweepSubjects(cutoff, now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.load()
	subjects, dropped := sweep(old.subjects, func(r subjectRev) bool { return !r.before.Before(cutoff) || r.keep.After(now) })
	if dropped > 0 {
		m.snap.Store(&snapshot{ids: old.ids, subjects: subjects})
	}
	return dropped
}

// sweep returns a copy of m with only the entries keep accepts, and how many
// it left out. When it leaves none out it returns m itself without copying:
// the periodic resync sweeps a set that is usually unchanged.
func sweep[V any](m map[name]V, keep func(V) bool) (map[name]V, int) {
	dropped := 0
	for _, t := range m {
		if !keep(t) {
			dropped++
		}
	}
	if dropped == 0 {
		return m, 0
	}
	out := make(map[name]V, len(m)-dropped)
	for k, t := range m {
		if keep(t) {
			out[k] = t
		}
	}
	return out, dropped
}

// Len returns the number of ID and subject revocations held.
func (m *Memory) Len() (ids, subjects int) {
	s := m.load()
	return len(s.ids), len(s.subjects)
}
