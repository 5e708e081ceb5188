package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
)

// The rewrapping half of tenants' data-key rotations (see tenantrekey.go),
// run from the root-key rotation's loop (runRekey): at each turn the node
// reads the tenants' rotation states and, for each one rewrapping whose
// lease is free or its own, runs a pass.

// tenantPage is how many sealed records a pass reads at once.
const tenantPage = 200

// errRotatedAgain: the tenant's data key was rotated again during a pass;
// the next pass rewraps to the newer version.
var errRotatedAgain = errors.New("the data key was rotated again during the pass")

// tenantRekeyTurn runs a pass for every tenant rotation this node may
// carry on; quiet holds, per tenant, when a pass first found nothing to
// rewrap.
func (n *Node) tenantRekeyTurn(ctx context.Context, quiet map[string]time.Time) {
	if n.keyring.Sealed() {
		return
	}
	list, err := n.store.ListTenantRekeys(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("tenant data key rotation: reading the states failed", "err", err)
		}
		return
	}
	for _, r := range list {
		if r.State != store.TenantRekeyRewrapping || (r.Worker != n.rekey.self && time.Now().Before(r.LeaseUntil)) {
			delete(quiet, r.Tenant)
			continue
		}
		if q := n.tenantRewrapTurn(ctx, r, quiet[r.Tenant]); q.IsZero() {
			delete(quiet, r.Tenant)
		} else {
			quiet[r.Tenant] = q
		}
	}
}

// tenantRewrapTurn takes the tenant's lease, runs one pass, and finishes
// the rotation when two passes RekeyGrace apart found nothing to rewrap.
// It returns the new quietSince.
func (n *Node) tenantRewrapTurn(ctx context.Context, r store.TenantRekey, quietSince time.Time) time.Time {
	if r.Worker != n.rekey.self {
		n.log.Info("tenant data key rotation: rewrapping", "tenant", r.Tenant, "rotation", r.ID, "done", r.Done, "total", r.Total)
	}
	p := &tenantPass{n: n, r: r}
	if !p.save(ctx) {
		return time.Time{}
	}
	stale, version, err := p.run(ctx)
	switch {
	case errors.Is(err, errRotatedAgain):
		n.rekey.poke()
		return time.Time{}
	case err != nil:
		if ctx.Err() == nil {
			n.log.Error("tenant data key rotation: a pass failed; it is retried", "tenant", r.Tenant, "rotation", r.ID, "err", err)
			p.r.Failed = err.Error()
			p.save(ctx)
		}
		return time.Time{}
	case stale > 0:
		n.rekey.poke() // the records written meanwhile: look again soon
		return time.Time{}
	case quietSince.IsZero():
		n.rekey.poke()
		return time.Now()
	case time.Since(quietSince) < RekeyGrace:
		return quietSince
	}
	if _, err := n.tenants.Retire(ctx, r.Tenant, version); err != nil {
		n.log.Error("tenant data key rotation: retiring the older versions failed; it is retried", "tenant", r.Tenant, "err", err)
		return time.Time{}
	}
	p.r.State, p.r.Worker, p.r.LeaseUntil, p.r.Failed = store.TenantRekeyDone, "", time.Time{}, ""
	p.r.FinishedAt = n.cfg.Now().UTC()
	if p.save(ctx) {
		n.log.Warn("tenant data key rotation finished: every record is under the new version and the older ones are retired",
			"tenant", r.Tenant, "rotation", r.ID, "version", version, "records", p.r.Total)
	}
	n.Publish(ctx, TenantKeysChannel, r.Tenant) //nolint:errcheck // the others read the ring again when they next change it
	return time.Time{}
}

// tenantPass is one walk over a tenant's sealed records.
type tenantPass struct {
	n     *Node
	r     store.TenantRekey
	saved time.Time
}

// save writes the state with this node's lease renewed; false if another
// node changed it meanwhile.
func (p *tenantPass) save(ctx context.Context) bool {
	now := time.Now()
	next := p.r
	next.UpdatedAt = p.n.cfg.Now().UTC()
	if next.State == store.TenantRekeyRewrapping {
		next.Worker, next.LeaseUntil = p.n.rekey.self, now.Add(rekeyLease).UTC()
	}
	if err := p.n.store.PutTenantRekey(ctx, next, p.r.Revision); err != nil {
		if !errors.Is(err, store.ErrConflict) && ctx.Err() == nil {
			p.n.log.Warn("tenant data key rotation: saving its progress failed", "tenant", p.r.Tenant, "err", err)
		}
		return false
	}
	next.Revision = p.r.Revision + 1
	p.r, p.saved = next, now
	return true
}

// run rewraps every record of the tenant not under the current version and
// returns how many it found, and the version.
func (p *tenantPass) run(ctx context.Context) (int64, uint32, error) {
	tenant := p.r.Tenant
	k, err := p.n.tenants.Fresh(ctx, tenant)
	if err != nil {
		return 0, 0, err
	}
	cur := k.Version()
	p.r.Version, p.r.Failed = max(p.r.Version, int(cur)), ""
	var every time.Duration
	if p.r.Rate > 0 {
		every = time.Second / time.Duration(p.r.Rate)
	}
	var seen, stale, done int64
	var after store.SealedRef
	for {
		recs, err := p.n.store.TenantSealed(ctx, tenant, after, tenantPage)
		if err != nil {
			return 0, 0, err
		}
		for _, rec := range recs {
			seen++
			if v, ok := tenantkey.SealedVersion(rec.Sealed); ok && v == cur {
				done++
				continue
			}
			stale++
			ok, err := p.rewrap(ctx, k, rec)
			if err != nil {
				return 0, 0, err
			}
			if ok {
				done++
			}
			if time.Since(p.saved) >= time.Second {
				p.r.Done, p.r.Total = done, max(p.r.Total, seen)
				if !p.save(ctx) {
					return 0, 0, errors.New("another node took over the rotation")
				}
			}
			if every > 0 {
				select {
				case <-ctx.Done():
					return 0, 0, ctx.Err()
				case <-time.After(every):
				}
			}
		}
		if len(recs) < tenantPage {
			break
		}
		after = recs[len(recs)-1].SealedRef
	}
	p.r.Done, p.r.Total = done, seen
	if !p.save(ctx) {
		return 0, 0, errors.New("another node took over the rotation")
	}
	return stale, cur, nil
}

// rewrap seals one record again under k's current version and writes it
// if it is still what was read: false when it changed or went meanwhile
// (the next pass looks at it again).
func (p *tenantPass) rewrap(ctx context.Context, k *tenantkey.Key, rec store.SealedRecord) (bool, error) {
	tenant := p.r.Tenant
	next, err := k.Rewrap(rec.Sealed, tenantkey.RecordAD(tenant, rec.SealedRef))
	if errors.Is(err, tenantkey.ErrOpen) {
		if again, ferr := p.n.tenants.Fresh(ctx, tenant); ferr == nil && again.Version() != k.Version() {
			return false, errRotatedAgain
		}
		return false, fmt.Errorf("%s %q (version %d) opens under no version of the tenant's data key: it was altered in the store",
			rec.Kind, rec.Name, rec.Version)
	} else if err != nil {
		return false, err
	}
	if next == nil {
		return true, nil
	}
	switch err := p.n.store.RewrapTenantSealed(ctx, tenant, rec.SealedRef, rec.Sealed, next); {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}

// releaseTenantRekeys gives up the leases this node holds, so that a node
// stopping cleanly leaves the rotations to the next at once.
func (n *Node) releaseTenantRekeys() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	list, err := n.store.ListTenantRekeys(ctx)
	if err != nil {
		return
	}
	for _, r := range list {
		if r.State == store.TenantRekeyRewrapping && r.Worker == n.rekey.self {
			r.Worker, r.LeaseUntil = "", time.Time{}
			n.store.PutTenantRekey(ctx, r, r.Revision) //nolint:errcheck // the lease runs out anyway
		}
	}
}
