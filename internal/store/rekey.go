package store

import (
	"context"
	"time"
)

// Rekeys stores the state of a root-key rotation (keygate operator rekey)
// and rewraps the two kinds of record sealed under the root key: signing
// keys and tenants' data keys. There is one state, shared by every node
// of a fleet, so that a rotation started on one node is carried on by any
// node after a crash.
type Rekeys interface {
	// GetRekey returns the rotation's state; ErrNotFound when the store
	// has never had one.
	GetRekey(ctx context.Context) (Rekey, error)
	// PutRekey stores r if the stored state's revision is rev (0: none is
	// stored), with its Revision set to rev+1; otherwise ErrConflict.
	PutRekey(ctx context.Context, r Rekey, rev int64) error
	// RewrapSigningKey replaces the sealed private key of kid with next if
	// it is still old: ErrConflict if it is something else, ErrNotFound if
	// the key is gone. Nothing else of the key changes.
	RewrapSigningKey(ctx context.Context, kid string, old, next []byte) error
	// RewrapTenantDataKey replaces the tenant's sealed data key with next
	// if it is still old, as RewrapSigningKey does.
	RewrapTenantDataKey(ctx context.Context, name string, old, next []byte) error
}

// States of a root-key rotation.
const (
	// RekeyRewrapping: the new root key is current on every node that has
	// heard of it; records under the old one are being rewrapped. Both
	// keys open everything, and each is sealed under the other in the
	// state, so a node holding either can get the other.
	RekeyRewrapping = "rewrapping"
	// RekeyDone: every record is under the new key; the old key opens
	// nothing and the state holds neither key.
	RekeyDone = "done"
)

// Rekey is a root-key rotation's state. The two keys it holds are each
// sealed under the other root key; both are cleared when it is done.
type Rekey struct {
	ID       string // random, names this rotation in logs and notices
	State    string // RekeyRewrapping or RekeyDone
	OldKeyID string // the root key IDs, as rootkey prints them
	NewKeyID string
	NewByOld []byte // the new root key sealed under the old
	OldByNew []byte // the old root key sealed under the new
	// Header is the new passphrase header (keyring.json) when the new
	// root key comes from a passphrase: each node with a keyring.json
	// replaces its own with it. Nil for a key.
	Header []byte
	Rate   int // records rewrapped per second at most; 0: no bound

	Done, Total int64  // records rewrapped, and to rewrap in all, as last counted
	Failed      string // why the last pass could not finish ("" if none)
	Worker      string // the node rewrapping, and until when it holds the task
	LeaseUntil  time.Time

	StartedAt, UpdatedAt, FinishedAt time.Time
	Revision                         int64 // counts writes, for PutRekey
}
