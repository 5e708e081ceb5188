package store

import (
	"context"
	"fmt"
	"time"
)

// SecretMeta is a secret path of the KV engine (package secrets): one row
// per path, holding the path's metadata sealed by the engine, and the
// version numbers the store needs to see.
type SecretMeta struct {
	Tenant string
	Path   string // not empty; unique within its tenant
	// Sealed is the engine's metadata of the path and its versions,
	// sealed; opaque here. Not empty.
	Sealed []byte
	// CurrentVersion is the newest version (0: none yet), OldestVersion
	// the oldest kept (0: none).
	CurrentVersion int
	OldestVersion  int
	// Revision counts the path's writes: 1 when created, one more with
	// each PutSecret.
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SecretValue is one version's value of a secret path, sealed by the
// engine.
type SecretValue struct {
	Tenant    string
	Path      string
	Version   int    // 1, 2, ...
	Sealed    []byte // not empty
	CreatedAt time.Time
}

// MaxSecretList is the most paths one ListSecrets call returns.
const MaxSecretList = 10_000

// CheckSecretPath checks a secret's tenant and path arguments: a valid
// tenant and a path that is not empty. Its error wraps ErrInvalid.
func CheckSecretPath(tenant, path string) error {
	if err := ValidTenantName(tenant); err != nil {
		return err
	}
	if path == "" {
		return fmt.Errorf("%w: a secret needs a path", ErrInvalid)
	}
	return nil
}

// CheckPutSecret checks PutSecret's arguments, the same in every backend,
// and returns add and the versions to erase as they are to be stored: add
// in m's tenant and path. It fails, wrapping ErrInvalid, on a bad tenant
// or path, empty Sealed metadata, a negative Revision or version number,
// an add without a version of 1 or more or without Sealed, or a version
// to erase below 1.
func CheckPutSecret(m SecretMeta, add *SecretValue, erase []int) (*SecretValue, error) {
	if err := CheckSecretPath(m.Tenant, m.Path); err != nil {
		return nil, err
	}
	switch {
	case len(m.Sealed) == 0:
		return nil, fmt.Errorf("%w: secret %q: no metadata", ErrInvalid, m.Path)
	case m.Revision < 0 || m.CurrentVersion < 0 || m.OldestVersion < 0:
		return nil, fmt.Errorf("%w: secret %q: negative revision or version", ErrInvalid, m.Path)
	}
	for _, v := range erase {
		if v < 1 {
			return nil, fmt.Errorf("%w: secret %q: version %d to erase, want 1 or more", ErrInvalid, m.Path, v)
		}
	}
	if add == nil {
		return nil, nil
	}
	a := *add
	a.Tenant, a.Path = m.Tenant, m.Path
	switch {
	case a.Version < 1:
		return nil, fmt.Errorf("%w: secret %q: version %d, want 1 or more", ErrInvalid, m.Path, a.Version)
	case len(a.Sealed) == 0:
		return nil, fmt.Errorf("%w: secret %q version %d: no value", ErrInvalid, m.Path, a.Version)
	}
	return &a, nil
}

// CheckSecretList checks ListSecrets' arguments: a valid tenant, a start
// not before prefix (so within or after its range) and a limit of 1 to
// MaxSecretList. Its error wraps ErrInvalid.
func CheckSecretList(tenant, prefix, start string, limit int) error {
	if err := ValidTenantName(tenant); err != nil {
		return err
	}
	switch {
	case start < prefix:
		return fmt.Errorf("%w: secret list: start %q is before prefix %q", ErrInvalid, start, prefix)
	case limit < 1 || limit > MaxSecretList:
		return fmt.Errorf("%w: secret list: limit %d, want 1 to %d", ErrInvalid, limit, MaxSecretList)
	}
	return nil
}

// Secrets stores the KV engine's secret paths, each in one tenant, and
// their versions' sealed values, and each tenant's mount configuration.
// Every write of a path is checked against its Revision, so that of
// nodes writing a path at once one wins and the others re-read it.
type Secrets interface {
	// GetSecret returns the path's row, or ErrNotFound.
	GetSecret(ctx context.Context, tenant, path string) (SecretMeta, error)
	// GetSecretValue returns one version's value; a version never
	// written, erased or of a path that does not exist is ErrNotFound.
	GetSecretValue(ctx context.Context, tenant, path string, version int) (SecretValue, error)
	// PutSecret, in one transaction, stores m as the path's row if the
	// stored Revision is m.Revision (0: the path must not exist), with
	// Revision m.Revision+1, which it returns; adds the version add (if
	// not nil; in m's tenant and path); and erases the values of the
	// versions in erase (those not stored are skipped). Another Revision
	// (or the path deleted meanwhile) is ErrConflict and nothing is
	// written; a tenant that does not exist ErrNotFound. See
	// CheckPutSecret for what is ErrInvalid.
	PutSecret(ctx context.Context, m SecretMeta, add *SecretValue, erase []int) (int64, error)
	// DeleteSecret deletes the path's row and every value of it; a path
	// that does not exist is no error.
	DeleteSecret(ctx context.Context, tenant, path string) error
	// ListSecrets returns up to limit (1 to MaxSecretList) of the
	// tenant's paths that begin with prefix and are not before start
	// (start >= prefix; prefix itself to begin), sorted byte by byte.
	// The next page starts after the last path returned: at that path
	// followed by "\x01" (no path holds a NUL).
	ListSecrets(ctx context.Context, tenant, prefix, start string, limit int) ([]string, error)
	// GetSecretConfig returns the tenant's mount configuration, opaque
	// bytes; ErrNotFound when none was set.
	GetSecretConfig(ctx context.Context, tenant string) ([]byte, error)
	// SetSecretConfig replaces it (empty config is ErrInvalid); a tenant
	// that does not exist is ErrNotFound. It is deleted with its tenant.
	SetSecretConfig(ctx context.Context, tenant string, config []byte) error
}
