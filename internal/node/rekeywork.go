package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

// The rewrapping half of a rotation (see rekey.go): Run's loop reads the
// state every RekeyPoll or on a notice, follows it, and, holding the
// lease, rewraps.

// runRekey follows rotations until ctx is done.
func (n *Node) runRekey(ctx context.Context) {
	t := time.NewTicker(RekeyPoll)
	defer t.Stop()
	var quietSince time.Time                                // when a pass first found nothing to rewrap
	quiet := map[string]time.Time{}                         // the same, per tenant whose data key rotates
	n.Subscribe(ctx, TenantKeysChannel, n.tenantKeysNotice) //nolint:errcheck // the states are read every RekeyPoll anyway
	for {
		select {
		case <-ctx.Done():
			n.releaseRekey()
			n.releaseTenantRekeys()
			return
		case <-t.C:
		case <-n.rekey.wake:
		}
		quietSince = n.rootRekeyTurn(ctx, quietSince)
		n.tenantRekeyTurn(ctx, quiet)
	}
}

// rootRekeyTurn follows the root-key rotation and, if one is under way,
// takes its turn at rewrapping; it returns the new quietSince.
func (n *Node) rootRekeyTurn(ctx context.Context, quietSince time.Time) time.Time {
	r, err := n.syncRekey(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("root key rotation: reading its state failed", "err", err)
		}
		return quietSince
	}
	if r.State != store.RekeyRewrapping {
		return time.Time{}
	}
	return n.rewrapTurn(ctx, r, quietSince)
}

// releaseRekey gives up the rewrapping lease if this node holds it, so
// that a node stopping cleanly leaves the rotation to the next at once (a
// killed one leaves it when the lease runs out).
func (n *Node) releaseRekey() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := n.store.GetRekey(ctx)
	if err != nil || r.State != store.RekeyRewrapping || r.Worker != n.rekey.self {
		return
	}
	r.Worker, r.LeaseUntil = "", time.Time{}
	n.store.PutRekey(ctx, r, r.Revision) //nolint:errcheck // the lease runs out anyway
}

// rewrapTurn takes the lease if it is free or this node's, runs one pass,
// and finishes the rotation when two passes RekeyGrace apart found nothing
// to rewrap. It returns the new quietSince.
func (n *Node) rewrapTurn(ctx context.Context, r store.Rekey, quietSince time.Time) time.Time {
	now := time.Now() // leases and the grace are real time, whatever the node's clock
	if cur, err := n.keyring.Current(); err != nil || cur.String() != r.NewKeyID {
		return time.Time{} // sealed, or not following (logged by followRekey)
	}
	if r.Worker != n.rekey.self && now.Before(r.LeaseUntil) {
		return time.Time{}
	}
	if r.Worker != n.rekey.self {
		n.log.Info("root key rotation: rewrapping", "rekey", r.ID, "done", r.Done, "total", r.Total)
	}
	p := &pass{n: n, r: r}
	if !p.save(ctx) {
		return time.Time{}
	}
	stale, err := p.run(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Error("root key rotation: a pass failed; it is retried", "rekey", r.ID, "err", err)
			p.r.Failed = err.Error()
			p.save(ctx)
		}
		return time.Time{}
	}
	switch {
	case stale > 0:
		return time.Time{}
	case quietSince.IsZero():
		n.rekey.poke() // look again soon, then wait out the grace
		return time.Now()
	case time.Since(quietSince) < RekeyGrace:
		return quietSince
	}
	p.r.State, p.r.NewByOld, p.r.OldByNew, p.r.Header = store.RekeyDone, nil, nil, nil
	p.r.Worker, p.r.LeaseUntil, p.r.FinishedAt, p.r.Failed = "", time.Time{}, n.cfg.Now().UTC(), ""
	if p.save(ctx) {
		n.log.Warn("root key rotation finished: every record is sealed under the new root key", "rekey", r.ID,
			"new", r.NewKeyID, "records", p.r.Total)
		n.followRekey(p.r)
		n.Publish(ctx, RekeyChannel, r.ID) //nolint:errcheck // the others also read the state every RekeyPoll
	}
	return time.Time{}
}

// pass is one walk over the records sealed under the root key.
type pass struct {
	n     *Node
	r     store.Rekey
	saved time.Time
}

// save writes the state with this node's lease renewed; false if another
// node changed it meanwhile (it is read again at the next turn).
func (p *pass) save(ctx context.Context) bool {
	now := time.Now()
	next := p.r
	next.UpdatedAt = p.n.cfg.Now().UTC()
	if next.State == store.RekeyRewrapping {
		next.Worker, next.LeaseUntil = p.n.rekey.self, now.Add(rekeyLease).UTC()
	}
	if err := p.n.store.PutRekey(ctx, next, p.r.Revision); err != nil {
		if !errors.Is(err, store.ErrConflict) && ctx.Err() == nil {
			p.n.log.Warn("root key rotation: saving its progress failed", "err", err)
		}
		return false
	}
	next.Revision = p.r.Revision + 1
	p.r, p.saved = next, now
	return true
}

// run rewraps every record not under the current root key and returns how
// many it found.
func (p *pass) run(ctx context.Context) (int64, error) {
	keys, err := p.n.store.ListSigningKeys(ctx)
	if err != nil {
		return 0, err
	}
	tenants, err := p.n.store.ListTenants(ctx)
	if err != nil {
		return 0, err
	}
	cur, err := p.n.keyring.Current()
	if err != nil {
		return 0, err
	}
	type record struct {
		what   string
		sealed []byte
		write  func(next []byte) error
	}
	var stale []record
	var total int64
	for _, k := range keys {
		total++
		if id, err := rootkey.CiphertextKeyID(k.Sealed); err != nil || id != cur {
			stale = append(stale, record{"signing key " + k.KID, k.Sealed, func(next []byte) error {
				return p.n.store.RewrapSigningKey(ctx, k.KID, k.Sealed, next)
			}})
		}
	}
	for _, t := range tenants {
		if t.DataKey == nil {
			continue
		}
		total++
		if id, err := rootkey.CiphertextKeyID(t.DataKey); err != nil || id != cur {
			stale = append(stale, record{"tenant " + t.Name + "'s data key", t.DataKey, func(next []byte) error {
				return p.n.store.RewrapTenantDataKey(ctx, t.Name, t.DataKey, next)
			}})
		}
	}
	p.r.Total, p.r.Done, p.r.Failed = total, total-int64(len(stale)), ""
	var every time.Duration
	if p.r.Rate > 0 {
		every = time.Second / time.Duration(p.r.Rate)
	}
	for _, rec := range stale {
		next, err := p.n.keyring.Rewrap(rec.sealed)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", rec.what, err)
		}
		switch err := rec.write(next); {
		case err == nil:
			p.r.Done++
		case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
			// changed or gone meanwhile: the next pass looks at it again
		default:
			return 0, fmt.Errorf("%s: %w", rec.what, err)
		}
		if time.Since(p.saved) >= time.Second && !p.save(ctx) {
			return 0, errors.New("another node took over the rotation")
		}
		if every > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(every):
			}
		}
	}
	if !p.save(ctx) {
		return 0, errors.New("another node took over the rotation")
	}
	return int64(len(stale)), nil
}

// sealer is the node's root key as the signing keys and the tenants' data
// keys use it: a record that does not open because a rotation this node
// has not heard of yet rewrapped it makes the node read the rotation's
// state and try once more.
type sealer struct{ n *Node }

func (s sealer) Sealed() bool { return s.n.keyring.Sealed() }

func (s sealer) Encrypt(plaintext, aad []byte) ([]byte, error) {
	return s.n.keyring.Encrypt(plaintext, aad)
}

func (s sealer) Decrypt(ciphertext, aad []byte) ([]byte, error) {
	pt, err := s.n.keyring.Decrypt(ciphertext, aad)
	if !errors.Is(err, rootkey.ErrUnknownKey) {
		return pt, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, serr := s.n.syncRekey(ctx); serr != nil {
		return nil, err
	}
	return s.n.keyring.Decrypt(ciphertext, aad)
}
