package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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

// inTx runs f in one IMMEDIATE transaction and commits it if f returns
// nil. f's error is returned as it is; a failure to begin or commit is
// wrapped for op.
func (s *Store) inTx(ctx context.Context, op string, f func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return wrap(ctx, op, err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// CreateTransitKey stores k and its first version in one transaction (see
// store.NewTransitKey); a name the tenant has is store.ErrConflict, a
// tenant that does not exist store.ErrNotFound.
func (s *Store) CreateTransitKey(ctx context.Context, k store.TransitKey, first store.TransitKeyVersion) error {
	const op = "create transit key"
	k, first, err := store.NewTransitKey(k, first)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.inTx(ctx, op, func(tx *sql.Tx) error {
		if err := insertKey(ctx, tx, op, k); err != nil {
			return err
		}
		return s.insertVersion(ctx, tx, op, first)
	})
}

// insertKey inserts a key's row.
func insertKey(ctx context.Context, tx *sql.Tx, op string, k store.TransitKey) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO transit_keys
		(tenant, name, type, config, latest, min_available, revision, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.Tenant, k.Name, k.Type, codec.NonNil(k.Config), k.Latest, k.MinAvailable, k.Revision,
		micros(k.CreatedAt), micros(k.UpdatedAt)); err != nil {
		return wrapInTenant(ctx, op, k.Tenant, err)
	}
	return nil
}

// RestoreTransitKey stores a key and all its versions in one transaction.
func (s *Store) RestoreTransitKey(ctx context.Context, k store.TransitKey, versions []store.TransitKeyVersion) error {
	const op = "restore transit key"
	k, versions, err := store.NewRestoredTransitKey(k, versions)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.inTx(ctx, op, func(tx *sql.Tx) error {
		if err := insertKey(ctx, tx, op, k); err != nil {
			return err
		}
		for _, v := range versions {
			if err := s.insertVersion(ctx, tx, op, v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) insertVersion(ctx context.Context, tx *sql.Tx, op string, v store.TransitKeyVersion) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO transit_key_versions (tenant, name, version, sealed, created_at)
		VALUES (?, ?, ?, ?, ?)`, v.Tenant, v.Name, v.Version, v.Sealed, micros(v.CreatedAt))
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// GetTransitKey returns the key and its versions from MinAvailable up,
// ascending, read in one transaction; or store.ErrNotFound.
func (s *Store) GetTransitKey(ctx context.Context, tenant, name string) (store.TransitKey, []store.TransitKeyVersion, error) {
	const op = "get transit key"
	if err := transitArgs(op, tenant, name); err != nil {
		return store.TransitKey{}, nil, err
	}
	tx, err := s.r.BeginTx(ctx, nil) // deferred: one snapshot from the first read on
	if err != nil {
		return store.TransitKey{}, nil, wrap(ctx, op, err)
	}
	defer tx.Rollback()
	k := store.TransitKey{Tenant: tenant, Name: name}
	var created, updated int64
	err = tx.QueryRowContext(ctx, `SELECT type, config, latest, min_available, revision, created_at, updated_at
		FROM transit_keys WHERE tenant = ? AND name = ?`, tenant, name).
		Scan(&k.Type, &k.Config, &k.Latest, &k.MinAvailable, &k.Revision, &created, &updated)
	if err != nil {
		return store.TransitKey{}, nil, wrap(ctx, op, err)
	}
	k.CreatedAt, k.UpdatedAt = fromMicros(created), fromMicros(updated)
	rows, err := tx.QueryContext(ctx, `SELECT version, sealed, created_at FROM transit_key_versions
		WHERE tenant = ? AND name = ? AND version >= ? ORDER BY version`, tenant, name, k.MinAvailable)
	vs, err := collect(ctx, op, rows, err, func(row scanner) (store.TransitKeyVersion, error) {
		return scanVersion(row, tenant, name)
	})
	if err != nil {
		return store.TransitKey{}, nil, err
	}
	return k, vs, nil
}

// scanVersion reads a version's columns (version, sealed, created_at).
func scanVersion(row scanner, tenant, name string) (store.TransitKeyVersion, error) {
	v := store.TransitKeyVersion{Tenant: tenant, Name: name}
	var created int64
	err := row.Scan(&v.Version, &v.Sealed, &created)
	v.CreatedAt = fromMicros(created)
	return v, err
}

// GetTransitKeyVersion returns one version of the key, or
// store.ErrNotFound.
func (s *Store) GetTransitKeyVersion(ctx context.Context, tenant, name string, version int) (store.TransitKeyVersion, error) {
	const op = "get transit key version"
	if err := transitArgs(op, tenant, name); err != nil {
		return store.TransitKeyVersion{}, err
	}
	v, err := scanVersion(s.getVersion.QueryRowContext(ctx, tenant, name, version), tenant, name)
	if err != nil {
		return store.TransitKeyVersion{}, wrap(ctx, op, err)
	}
	return v, nil
}

// ListTransitKeys returns the names of the tenant's keys, sorted.
func (s *Store) ListTransitKeys(ctx context.Context, tenant string) ([]string, error) {
	const op = "list transit keys"
	if err := tenantArg(op, tenant); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT name FROM transit_keys WHERE tenant = ? ORDER BY name`, tenant)
	return collect(ctx, op, rows, err, scanString)
}

// keyChanged tells, after a conditional update of the key tenant/name
// matched nothing, store.ErrNotFound (no such key) from store.ErrConflict
// with why (it changed since the caller read it), reading on q.
func keyChanged(ctx context.Context, q querier, op, tenant, name, why string) error {
	if err := exists(ctx, q, op, fmt.Sprintf("transit key %q", name),
		`SELECT 1 FROM transit_keys WHERE tenant = ? AND name = ?`, tenant, name); err != nil {
		return err
	}
	return fmt.Errorf("%s: transit key %q: %w: %s", op, name, store.ErrConflict, why)
}

// UpdateTransitKey replaces Config and UpdatedAt if the stored Revision is
// k.Revision, and increments it; otherwise store.ErrConflict.
func (s *Store) UpdateTransitKey(ctx context.Context, k store.TransitKey) error {
	const op = "update transit key"
	if err := transitArgs(op, k.Tenant, k.Name); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE transit_keys SET config = ?, updated_at = ?, revision = revision + 1
		WHERE tenant = ? AND name = ? AND revision = ?`,
		codec.NonNil(k.Config), micros(k.UpdatedAt), k.Tenant, k.Name, k.Revision)
	if err := affected(ctx, op, res, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return keyChanged(ctx, s.w, op, k.Tenant, k.Name, fmt.Sprintf("revision %d is not the stored one", k.Revision))
}

// AddTransitKeyVersion stores v and makes it the Latest, in one
// transaction, if the Latest is v.Version-1; otherwise store.ErrConflict.
func (s *Store) AddTransitKeyVersion(ctx context.Context, v store.TransitKeyVersion) error {
	const op = "add transit key version"
	if err := v.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.inTx(ctx, op, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE transit_keys SET latest = ?1, updated_at = ?2, revision = revision + 1
			WHERE tenant = ?3 AND name = ?4 AND latest = ?1 - 1`,
			v.Version, micros(v.CreatedAt), v.Tenant, v.Name)
		if err := affected(ctx, op, res, err); errors.Is(err, store.ErrNotFound) {
			return keyChanged(ctx, tx, op, v.Tenant, v.Name, fmt.Sprintf("version %d does not follow the latest", v.Version))
		} else if err != nil {
			return err
		}
		return s.insertVersion(ctx, tx, op, v)
	})
}

// TrimTransitKey deletes the versions below minAvailable and sets
// MinAvailable, in one transaction, if the key allows it (see
// store.TransitKey.CheckTrim).
func (s *Store) TrimTransitKey(ctx context.Context, tenant, name string, minAvailable int) error {
	const op = "trim transit key"
	if err := transitArgs(op, tenant, name); err != nil {
		return err
	}
	return s.inTx(ctx, op, func(tx *sql.Tx) error {
		k := store.TransitKey{Tenant: tenant, Name: name}
		if err := tx.QueryRowContext(ctx, `SELECT latest, min_available FROM transit_keys WHERE tenant = ? AND name = ?`,
			tenant, name).Scan(&k.Latest, &k.MinAvailable); err != nil {
			return wrap(ctx, op+fmt.Sprintf(": transit key %q", name), err)
		}
		if err := k.CheckTrim(minAvailable); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM transit_key_versions WHERE tenant = ? AND name = ? AND version < ?`,
			tenant, name, minAvailable); err != nil {
			return wrap(ctx, op, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE transit_keys SET min_available = ?, revision = revision + 1
			WHERE tenant = ? AND name = ?`, minAvailable, tenant, name); err != nil {
			return wrap(ctx, op, err)
		}
		return nil
	})
}

// DeleteTransitKey deletes the key and, by the foreign key's cascade, its
// versions, if its stored Revision is revision; otherwise
// store.ErrConflict, or store.ErrNotFound.
func (s *Store) DeleteTransitKey(ctx context.Context, tenant, name string, revision int64) error {
	const op = "delete transit key"
	if err := transitArgs(op, tenant, name); err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM transit_keys WHERE tenant = ? AND name = ? AND revision = ?`, tenant, name, revision)
	if err := affected(ctx, op, res, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return keyChanged(ctx, s.w, op, tenant, name, fmt.Sprintf("revision %d is not the stored one", revision))
}
