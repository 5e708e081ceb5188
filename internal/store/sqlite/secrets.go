package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/keygate/keygate/internal/store"
)

// Secrets.

// secretArgs checks a secret's tenant and path, for the error of op.
func secretArgs(op, tenant, path string) error {
	if err := store.CheckSecretPath(tenant, path); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

const (
	selectSecret      = `SELECT sealed, current_version, oldest_version, revision, created_at, updated_at FROM secrets WHERE tenant = ? AND path = ?`
	selectSecretValue = `SELECT sealed, created_at FROM secret_values WHERE tenant = ? AND path = ? AND version = ?`
	insertSecret      = `INSERT INTO secrets (tenant, path, sealed, current_version, oldest_version, revision, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, 1, ?, ?)`
	updateSecret = `UPDATE secrets SET sealed = ?, current_version = ?, oldest_version = ?, revision = revision + 1, updated_at = ?
		WHERE tenant = ? AND path = ? AND revision = ?`
	eraseSecretValue  = `DELETE FROM secret_values WHERE tenant = ? AND path = ? AND version = ?`
	insertSecretValue = `INSERT INTO secret_values (tenant, path, version, sealed, created_at) VALUES (?, ?, ?, ?, ?)`
)

// GetSecret returns the path's row, or store.ErrNotFound.
func (s *Store) GetSecret(ctx context.Context, tenant, path string) (store.SecretMeta, error) {
	const op = "get secret"
	if err := secretArgs(op, tenant, path); err != nil {
		return store.SecretMeta{}, err
	}
	m := store.SecretMeta{Tenant: tenant, Path: path}
	var created, updated int64
	err := s.getSecret.QueryRowContext(ctx, tenant, path).
		Scan(&m.Sealed, &m.CurrentVersion, &m.OldestVersion, &m.Revision, &created, &updated)
	if err != nil {
		return store.SecretMeta{}, wrap(ctx, op, err)
	}
	m.CreatedAt, m.UpdatedAt = fromMicros(created), fromMicros(updated)
	return m, nil
}

// GetSecretValue returns one version's value, or store.ErrNotFound.
func (s *Store) GetSecretValue(ctx context.Context, tenant, path string, version int) (store.SecretValue, error) {
	const op = "get secret value"
	if err := secretArgs(op, tenant, path); err != nil {
		return store.SecretValue{}, err
	}
	v := store.SecretValue{Tenant: tenant, Path: path, Version: version}
	var created int64
	if err := s.getSecretValue.QueryRowContext(ctx, tenant, path, version).Scan(&v.Sealed, &created); err != nil {
		return store.SecretValue{}, wrap(ctx, op, err)
	}
	v.CreatedAt = fromMicros(created)
	return v, nil
}

// PutSecret stores m if the stored revision is m.Revision (0: none), then
// erases the values of erase and adds add, in one transaction.
func (s *Store) PutSecret(ctx context.Context, m store.SecretMeta, add *store.SecretValue, erase []int) (int64, error) {
	const op = "put secret"
	add, err := store.CheckPutSecret(m, add, erase)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, op, func(tx *sql.Tx) error {
		if err := s.putSecretRow(ctx, tx, op, m); err != nil {
			return err
		}
		for _, v := range erase {
			if _, err := tx.StmtContext(ctx, s.eraseSecretValue).ExecContext(ctx, m.Tenant, m.Path, v); err != nil {
				return wrap(ctx, op, err)
			}
		}
		if add == nil {
			return nil
		}
		_, err := tx.StmtContext(ctx, s.insertSecretValue).ExecContext(ctx,
			add.Tenant, add.Path, add.Version, add.Sealed, micros(add.CreatedAt))
		if err != nil {
			return wrap(ctx, fmt.Sprintf("%s: secret %q version %d", op, m.Path, add.Version), err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return m.Revision + 1, nil
}

// putSecretRow inserts m (Revision 0) or updates the row whose revision is
// m.Revision; a row that exists, or not with that revision, is
// store.ErrConflict.
func (s *Store) putSecretRow(ctx context.Context, tx *sql.Tx, op string, m store.SecretMeta) error {
	if m.Revision == 0 {
		_, err := tx.StmtContext(ctx, s.insertSecret).ExecContext(ctx,
			m.Tenant, m.Path, m.Sealed, m.CurrentVersion, m.OldestVersion, micros(m.CreatedAt), micros(m.UpdatedAt))
		if err != nil {
			return wrapInTenant(ctx, fmt.Sprintf("%s: secret %q", op, m.Path), m.Tenant, err)
		}
		return nil
	}
	res, err := tx.StmtContext(ctx, s.updateSecret).ExecContext(ctx,
		m.Sealed, m.CurrentVersion, m.OldestVersion, micros(m.UpdatedAt), m.Tenant, m.Path, m.Revision)
	if err := affected(ctx, op, res, err); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s: secret %q: %w: revision %d is not the stored one", op, m.Path, store.ErrConflict, m.Revision)
	} else if err != nil {
		return err
	}
	return nil
}

// DeleteSecret deletes the path's row and, by the foreign key's cascade,
// its values.
func (s *Store) DeleteSecret(ctx context.Context, tenant, path string) error {
	const op = "delete secret"
	if err := secretArgs(op, tenant, path); err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM secrets WHERE tenant = ? AND path = ?`, tenant, path); err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// ListSecrets returns up to limit paths beginning with prefix from start
// on, sorted. substr and length count characters alike, so the prefix
// test is exact for UTF-8 paths; start bounds the primary key's range.
func (s *Store) ListSecrets(ctx context.Context, tenant, prefix, start string, limit int) ([]string, error) {
	const op = "list secrets"
	if err := store.CheckSecretList(tenant, prefix, start, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT path FROM secrets
		WHERE tenant = ?1 AND path >= ?2 AND substr(path, 1, length(?3)) = ?3
		ORDER BY path LIMIT ?4`, tenant, start, prefix, limit)
	return collect(ctx, op, rows, err, scanString)
}

// GetSecretConfig returns the tenant's mount configuration, or
// store.ErrNotFound.
func (s *Store) GetSecretConfig(ctx context.Context, tenant string) ([]byte, error) {
	const op = "get secret config"
	if err := tenantArg(op, tenant); err != nil {
		return nil, err
	}
	var c []byte
	if err := s.r.QueryRowContext(ctx, `SELECT config FROM secret_configs WHERE tenant = ?`, tenant).Scan(&c); err != nil {
		return nil, wrap(ctx, op, err)
	}
	return c, nil
}

// SetSecretConfig replaces the tenant's mount configuration.
func (s *Store) SetSecretConfig(ctx context.Context, tenant string, config []byte) error {
	const op = "set secret config"
	if err := tenantArg(op, tenant); err != nil {
		return err
	}
	if len(config) == 0 {
		return fmt.Errorf("%s: %w: empty configuration", op, store.ErrInvalid)
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO secret_configs (tenant, config) VALUES (?, ?)
		ON CONFLICT (tenant) DO UPDATE SET config = excluded.config`, tenant, config)
	if err != nil {
		return wrapInTenant(ctx, op, tenant, err)
	}
	return nil
}
