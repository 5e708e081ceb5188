package store

import (
	"context"
	"fmt"
	"time"
)

// TenantRekeys stores the state of each tenant's data-key rotation and
// reads and rewraps the records sealed under a tenant's data key: its
// transit keys' versions, its secrets' metadata and its secrets' values.
// A rotation's state is one row per tenant, deleted with the tenant, so
// that a rotation started at one node is carried on by any node after a
// crash.
type TenantRekeys interface {
	// GetTenantRekey returns the tenant's rotation state; ErrNotFound
	// when it never had one.
	GetTenantRekey(ctx context.Context, tenant string) (TenantRekey, error)
	// PutTenantRekey stores r if the stored state's revision is rev (0:
	// none is stored), with its Revision set to rev+1; otherwise
	// ErrConflict. A tenant that does not exist is ErrNotFound.
	PutTenantRekey(ctx context.Context, r TenantRekey, rev int64) error
	// ListTenantRekeys returns every tenant's rotation state, ordered by
	// tenant.
	ListTenantRekeys(ctx context.Context) ([]TenantRekey, error)
	// TenantSealed returns up to limit (1 to MaxSealedPage) of the
	// tenant's sealed records after the one named by after (the zero
	// SealedRef: from the first), ordered by Kind, then Name, then
	// Version.
	TenantSealed(ctx context.Context, tenant string, after SealedRef, limit int) ([]SealedRecord, error)
	// RewrapTenantSealed replaces the record's sealed bytes with next if
	// they are still old: ErrConflict if they are something else,
	// ErrNotFound if the record is gone. Nothing else of it changes (a
	// secret's Revision neither: what it holds is the same).
	RewrapTenantSealed(ctx context.Context, tenant string, ref SealedRef, old, next []byte) error
}

// SealedKind is a kind of record sealed under a tenant's data key.
type SealedKind int

// The kinds of sealed record, in the order TenantSealed returns them.
const (
	SealedTransitVersion SealedKind = 1 + iota // a transit key's version: Name and Version
	SealedSecretMeta                           // a secret path's metadata: Name is the path, Version 0
	SealedSecretValue                          // a secret's version: Name is the path, and Version
)

func (k SealedKind) String() string {
	switch k {
	case SealedTransitVersion:
		return "transit key version"
	case SealedSecretMeta:
		return "secret metadata"
	case SealedSecretValue:
		return "secret version"
	}
	return fmt.Sprintf("SealedKind(%d)", int(k))
}

// SealedRef names one sealed record of a tenant.
type SealedRef struct {
	Kind    SealedKind
	Name    string
	Version int
}

// SealedRecord is a sealed record and what it holds.
type SealedRecord struct {
	SealedRef
	Sealed []byte
}

// MaxSealedPage is the most records one TenantSealed call returns.
const MaxSealedPage = 1000

// CheckTenantSealed checks TenantSealed's and RewrapTenantSealed's
// arguments: a valid tenant, a known kind (or, for after, the zero ref)
// and limit within 1 to MaxSealedPage (0 stands for a rewrap's, which has
// none). Its error wraps ErrInvalid.
func CheckTenantSealed(tenant string, ref SealedRef, limit int) error {
	if err := ValidTenantName(tenant); err != nil {
		return err
	}
	switch {
	case ref.Kind < 0 || ref.Kind > SealedSecretValue:
		return fmt.Errorf("%w: sealed record kind %d", ErrInvalid, ref.Kind)
	case limit < 0 || limit > MaxSealedPage:
		return fmt.Errorf("%w: sealed records: limit %d, want 1 to %d", ErrInvalid, limit, MaxSealedPage)
	}
	return nil
}

// States of a tenant's data-key rotation.
const (
	// TenantRekeyRewrapping: the new version is current; the records
	// under older ones are being rewrapped.
	TenantRekeyRewrapping = "rewrapping"
	// TenantRekeyDone: every record is under the new version and the
	// older ones are retired.
	TenantRekeyDone = "done"
)

// TenantRekey is the state of a tenant's data-key rotation.
type TenantRekey struct {
	Tenant  string
	ID      string // random, names this rotation in logs
	State   string // TenantRekeyRewrapping or TenantRekeyDone
	Version int    // the data key version rotated to
	Rate    int    // records rewrapped per second at most; 0: no bound

	Done, Total int64  // records under Version, and in all, as last counted
	Failed      string // why the last pass could not finish ("" if none)
	Worker      string // the node rewrapping, and until when it holds the task
	LeaseUntil  time.Time

	StartedAt, UpdatedAt, FinishedAt time.Time
	Revision                         int64 // counts writes, for PutTenantRekey
}
