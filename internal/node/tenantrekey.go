package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
)

// Rotating a tenant's data key (keygate tenant rotate-key). What a tenant
// keeps secret — its transit keys' versions and its secrets — is sealed
// under its data key; a rotation replaces that key while the fleet serves:
//
//  1. StartTenantRekey adds a new version to the tenant's data key and
//     makes it current (tenantkey.Keys.Rotate), then stores the rotation's
//     state. Every node seals what it writes under the new version from
//     then on (writers read the tenant's row), and opens what is under an
//     older one with the older one, which the ring keeps.
//  2. One node at a time (a lease in the state, as for the root key) walks
//     the tenant's sealed records and rewraps each one under the new
//     version — open, seal, written only if the record is still what was
//     read — at most Rate a second, counting its progress in the state. A
//     node killed midway leaves the lease to run out; any node carries on.
//  3. When a pass finds no record under an older version, and another does
//     RekeyGrace later, the older versions are retired from the ring and
//     the state is marked done; from then on they open nothing, anywhere.
//
// A record that opens under no version the tenant holds (altered in the
// store) stops the rotation before the retirement, with the record named
// in the state: the operator decides what becomes of it.

// TenantKeysChannel carries data-key rotation notices (the tenant's name):
// every node drops the tenant's key it holds and reads the ring again.
const TenantKeysChannel = "tenantkeys"

// Errors of StartTenantRekey.
var (
	ErrTenantRekeyRunning = errors.New("a rotation of this tenant's data key is under way; wait for it to finish")
	ErrTenantUnknown      = errors.New("no such tenant")
)

// TenantRekeyStatus is a tenant's data-key rotation as a node reports it.
type TenantRekeyStatus struct {
	Tenant  string
	ID      string // "" when the tenant never had a rotation
	State   string // store.TenantRekeyRewrapping or store.TenantRekeyDone
	Version int    // the version rotated to
	// Versions are the versions the tenant's data key holds now,
	// ascending; Current the one sealing new records.
	Versions []uint32
	Current  uint32

	Done, Total, Rate int64
	Worker, Failed    string

	StartedAt, UpdatedAt, FinishedAt time.Time
}

// StartTenantRekey rotates the tenant's data key and starts rewrapping
// what is sealed under the older versions; the rewrapping runs in Run's
// loop. rate bounds the records rewrapped a second (0: no bound).
func (n *Node) StartTenantRekey(ctx context.Context, tenant string, rate int) (TenantRekeyStatus, error) {
	if n.keyring.Sealed() {
		return TenantRekeyStatus{}, ErrRekeySealed
	}
	prev, err := n.store.GetTenantRekey(ctx, tenant)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return TenantRekeyStatus{}, fmt.Errorf("%w: %w", ErrStore, err)
	case prev.State == store.TenantRekeyRewrapping:
		return TenantRekeyStatus{}, ErrTenantRekeyRunning
	}
	k, err := n.tenants.Rotate(ctx, tenant)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return TenantRekeyStatus{}, ErrTenantUnknown
	case errors.Is(err, rootkey.ErrSealed):
		return TenantRekeyStatus{}, ErrRekeySealed
	case errors.Is(err, tenantkey.ErrTooManyVersions):
		return TenantRekeyStatus{}, &RefusedError{Reason: err.Error(), Op: "data key rotation"}
	case err != nil:
		return TenantRekeyStatus{}, fmt.Errorf("%w: %w", ErrStore, err)
	}
	id := make([]byte, 8)
	rand.Read(id)
	now := n.cfg.Now().UTC()
	r := store.TenantRekey{Tenant: tenant, ID: hex.EncodeToString(id), State: store.TenantRekeyRewrapping,
		Version: int(k.Version()), Rate: max(rate, 0), StartedAt: now, UpdatedAt: now}
	if err := n.store.PutTenantRekey(ctx, r, prev.Revision); errors.Is(err, store.ErrConflict) {
		// Another start won the race; its rotation rewraps to the newest
		// version, which is this one's or later.
		return TenantRekeyStatus{}, ErrTenantRekeyRunning
	} else if err != nil {
		return TenantRekeyStatus{}, fmt.Errorf("%w: %w", ErrStore, err)
	}
	r.Revision = prev.Revision + 1
	n.log.Warn("tenant data key rotation started", "tenant", tenant, "rotation", r.ID, "version", r.Version)
	n.Publish(ctx, TenantKeysChannel, tenant) //nolint:errcheck // the others read the ring again on the first value they cannot open
	n.rekey.poke()
	return n.tenantRekeyStatus(ctx, r), nil
}

// TenantRekeyStatus reports the tenant's last data-key rotation (an empty
// ID if it never had one) and the versions its data key holds.
func (n *Node) TenantRekeyStatus(ctx context.Context, tenant string) (TenantRekeyStatus, error) {
	if _, err := n.store.GetTenant(ctx, tenant); errors.Is(err, store.ErrNotFound) {
		return TenantRekeyStatus{}, ErrTenantUnknown
	} else if err != nil {
		return TenantRekeyStatus{}, fmt.Errorf("%w: %w", ErrStore, err)
	}
	r, err := n.store.GetTenantRekey(ctx, tenant)
	if errors.Is(err, store.ErrNotFound) {
		r = store.TenantRekey{Tenant: tenant}
	} else if err != nil {
		return TenantRekeyStatus{}, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return n.tenantRekeyStatus(ctx, r), nil
}

func (n *Node) tenantRekeyStatus(ctx context.Context, r store.TenantRekey) TenantRekeyStatus {
	st := TenantRekeyStatus{Tenant: r.Tenant, ID: r.ID, State: r.State, Version: r.Version, Done: r.Done, Total: r.Total,
		Rate: int64(r.Rate), Worker: r.Worker, Failed: r.Failed, StartedAt: r.StartedAt, UpdatedAt: r.UpdatedAt,
		FinishedAt: r.FinishedAt}
	// A tenant that never sealed anything has no data key yet; reading
	// the status must not make one.
	if t, err := n.store.GetTenant(ctx, r.Tenant); err == nil && t.DataKey != nil {
		if k, err := n.tenants.Fresh(ctx, r.Tenant); err == nil { // sealed: the versions are not known
			st.Versions, st.Current = k.Versions(), k.Version()
		}
	}
	return st
}

// tenantKeysNotice drops the tenant's data key a rotation changed.
func (n *Node) tenantKeysNotice(_ context.Context, tenant string) {
	if store.ValidTenantName(tenant) != nil {
		n.log.Warn("malformed tenant key notice ignored")
		return
	}
	n.tenants.Drop(tenant)
	n.rekey.poke()
}
