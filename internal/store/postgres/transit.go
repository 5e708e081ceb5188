package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/codec"
)

// Transit keys.

// transitArgs checks a transit key's tenant and name, for the error of op.
func transitArgs(op, tenant, name string) error {
	if err := store.CheckTransitKeyName(tenant, name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// CreateTransitKey stores k and its first version in one statement (see
// store.NewTransitKey); a name the tenant has is store.ErrConflict, a
// tenant that does not exist store.ErrNotFound.
func (s *Store) CreateTransitKey(ctx context.Context, k store.TransitKey, first store.TransitKeyVersion) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "create transit key"
	k, first, err := store.NewTransitKey(k, first)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	_, err = s.pool.Exec(ctx, `WITH k AS (
			INSERT INTO transit_keys (tenant, name, type, config, latest, min_available, revision, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING tenant, name)
		INSERT INTO transit_key_versions (tenant, name, version, sealed, created_at)
		SELECT tenant, name, $5, $10, $11 FROM k`,
		k.Tenant, k.Name, k.Type, codec.NonNil(k.Config), k.Latest, k.MinAvailable, k.Revision,
		ts(k.CreatedAt), ts(k.UpdatedAt), first.Sealed, ts(first.CreatedAt))
	if err != nil {
		return wrapInTenant(ctx, op, k.Tenant, err)
	}
	return nil
}

// RestoreTransitKey stores a key and all its versions in one transaction.
func (s *Store) RestoreTransitKey(ctx context.Context, k store.TransitKey, versions []store.TransitKeyVersion) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "restore transit key"
	k, versions, err := store.NewRestoredTransitKey(k, versions)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO transit_keys (tenant, name, type, config, latest, min_available, revision, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			k.Tenant, k.Name, k.Type, codec.NonNil(k.Config), k.Latest, k.MinAvailable, k.Revision,
			ts(k.CreatedAt), ts(k.UpdatedAt)); err != nil {
			return err
		}
		for _, v := range versions {
			if _, err := tx.Exec(ctx, `INSERT INTO transit_key_versions (tenant, name, version, sealed, created_at)
				VALUES ($1, $2, $3, $4, $5)`, v.Tenant, v.Name, v.Version, v.Sealed, ts(v.CreatedAt)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return wrapInTenant(ctx, op, k.Tenant, err)
	}
	return nil
}

// GetTransitKey returns the key and its versions from MinAvailable up,
// ascending, in one statement (so as of one moment); or
// store.ErrNotFound.
func (s *Store) GetTransitKey(ctx context.Context, tenant, name string) (store.TransitKey, []store.TransitKeyVersion, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "get transit key"
	if err := transitArgs(op, tenant, name); err != nil {
		return store.TransitKey{}, nil, err
	}
	k := store.TransitKey{Tenant: tenant, Name: name}
	var (
		versions []int
		sealed   [][]byte
		created  []time.Time
	)
	// The latest version is never trimmed, so a key has a version row.
	err := s.pool.QueryRow(ctx, `SELECT k.type, k.config, k.latest, k.min_available, k.revision, k.created_at, k.updated_at,
			array_agg(v.version ORDER BY v.version), array_agg(v.sealed ORDER BY v.version), array_agg(v.created_at ORDER BY v.version)
		FROM transit_keys AS k JOIN transit_key_versions AS v
			ON v.tenant = k.tenant AND v.name = k.name AND v.version >= k.min_available
		WHERE k.tenant = $1 AND k.name = $2
		GROUP BY k.tenant, k.name`, tenant, name).
		Scan(&k.Type, &k.Config, &k.Latest, &k.MinAvailable, &k.Revision, &k.CreatedAt, &k.UpdatedAt, &versions, &sealed, &created)
	if err != nil {
		return store.TransitKey{}, nil, wrap(ctx, op, err)
	}
	k.CreatedAt, k.UpdatedAt = k.CreatedAt.UTC(), k.UpdatedAt.UTC()
	vs := make([]store.TransitKeyVersion, len(versions))
	for i := range vs {
		vs[i] = store.TransitKeyVersion{Tenant: tenant, Name: name, Version: versions[i], Sealed: sealed[i], CreatedAt: created[i].UTC()}
	}
	return k, vs, nil
}

// GetTransitKeyVersion returns one version of the key, or
// store.ErrNotFound.
func (s *Store) GetTransitKeyVersion(ctx context.Context, tenant, name string, version int) (store.TransitKeyVersion, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "get transit key version"
	if err := transitArgs(op, tenant, name); err != nil {
		return store.TransitKeyVersion{}, err
	}
	v := store.TransitKeyVersion{Tenant: tenant, Name: name, Version: version}
	err := s.pool.QueryRow(ctx, `SELECT sealed, created_at FROM transit_key_versions WHERE tenant = $1 AND name = $2 AND version = $3`,
		tenant, name, version).Scan(&v.Sealed, &v.CreatedAt)
	if err != nil {
		return store.TransitKeyVersion{}, wrap(ctx, op, err)
	}
	v.CreatedAt = v.CreatedAt.UTC()
	return v, nil
}

// ListTransitKeys returns the names of the tenant's keys, sorted.
func (s *Store) ListTransitKeys(ctx context.Context, tenant string) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "list transit keys"
	if err := tenantArg(op, tenant); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT name FROM transit_keys WHERE tenant = $1 ORDER BY name`, tenant)
	return collect(ctx, op, rows, err, scanString)
}

// keyChanged tells, after a conditional update of the key tenant/name
// matched nothing, store.ErrNotFound (no such key) from store.ErrConflict
// with why (it changed since the caller read it).
func (s *Store) keyChanged(ctx context.Context, op, tenant, name, why string) error {
	if err := s.exists(ctx, op, fmt.Sprintf("transit key %q", name),
		`SELECT 1 FROM transit_keys WHERE tenant = $1 AND name = $2`, tenant, name); err != nil {
		return err
	}
	return fmt.Errorf("%s: transit key %q: %w: %s", op, name, store.ErrConflict, why)
}

// UpdateTransitKey replaces Config and UpdatedAt if the stored Revision is
// k.Revision, and increments it; otherwise store.ErrConflict. Of
// concurrent updates from one revision, the first to lock the row wins;
// the others then find the revision changed.
func (s *Store) UpdateTransitKey(ctx context.Context, k store.TransitKey) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "update transit key"
	if err := transitArgs(op, k.Tenant, k.Name); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE transit_keys SET config = $1, updated_at = $2, revision = revision + 1
		WHERE tenant = $3 AND name = $4 AND revision = $5`,
		codec.NonNil(k.Config), ts(k.UpdatedAt), k.Tenant, k.Name, k.Revision)
	if err := affected(ctx, op, tag, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.keyChanged(ctx, op, k.Tenant, k.Name, fmt.Sprintf("revision %d is not the stored one", k.Revision))
}

// AddTransitKeyVersion stores v and makes it the Latest, in one statement,
// if the Latest is v.Version-1; otherwise store.ErrConflict. Of concurrent
// rotations, the first to lock the key's row wins; the others then find
// the Latest moved on and write nothing.
func (s *Store) AddTransitKeyVersion(ctx context.Context, v store.TransitKeyVersion) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "add transit key version"
	if err := v.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	tag, err := s.pool.Exec(ctx, `WITH k AS (
			UPDATE transit_keys SET latest = $3, updated_at = $5, revision = revision + 1
			WHERE tenant = $1 AND name = $2 AND latest = $3::bigint - 1
			RETURNING tenant, name)
		INSERT INTO transit_key_versions (tenant, name, version, sealed, created_at)
		SELECT tenant, name, $3, $4, $5 FROM k`,
		v.Tenant, v.Name, v.Version, v.Sealed, ts(v.CreatedAt))
	if err := affected(ctx, op, tag, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.keyChanged(ctx, op, v.Tenant, v.Name, fmt.Sprintf("version %d does not follow the latest", v.Version))
}

// TrimTransitKey deletes the versions below minAvailable and sets
// MinAvailable, in one transaction holding the key's row lock, if the key
// allows it (see store.TransitKey.CheckTrim).
func (s *Store) TrimTransitKey(ctx context.Context, tenant, name string, minAvailable int) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "trim transit key"
	if err := transitArgs(op, tenant, name); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		k := store.TransitKey{Tenant: tenant, Name: name}
		if err := tx.QueryRow(ctx, `SELECT latest, min_available FROM transit_keys WHERE tenant = $1 AND name = $2 FOR UPDATE`,
			tenant, name).Scan(&k.Latest, &k.MinAvailable); err != nil {
			return err
		}
		if err := k.CheckTrim(minAvailable); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH trimmed AS (
				DELETE FROM transit_key_versions WHERE tenant = $1 AND name = $2 AND version < $3)
			UPDATE transit_keys SET min_available = $3, revision = revision + 1 WHERE tenant = $1 AND name = $2`,
			tenant, name, minAvailable)
		return err
	})
	if err != nil {
		return wrap(ctx, fmt.Sprintf("%s: transit key %q", op, name), err)
	}
	return nil
}

// DeleteTransitKey deletes the key and, by the foreign key's cascade, its
// versions, if its stored Revision is revision; otherwise
// store.ErrConflict, or store.ErrNotFound.
func (s *Store) DeleteTransitKey(ctx context.Context, tenant, name string, revision int64) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "delete transit key"
	if err := transitArgs(op, tenant, name); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM transit_keys WHERE tenant = $1 AND name = $2 AND revision = $3`, tenant, name, revision)
	if err := affected(ctx, op, tag, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.keyChanged(ctx, op, tenant, name, fmt.Sprintf("revision %d is not the stored one", revision))
}
