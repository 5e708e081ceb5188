package postgres

import (
	"context"
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

// GetSecret returns the path's row, or store.ErrNotFound.
func (s *Store) GetSecret(ctx context.Context, tenant, path string) (store.SecretMeta, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "get secret"
	if err := secretArgs(op, tenant, path); err != nil {
		return store.SecretMeta{}, err
	}
	m := store.SecretMeta{Tenant: tenant, Path: path}
	err := s.pool.QueryRow(ctx, `SELECT sealed, current_version, oldest_version, revision, created_at, updated_at
		FROM secrets WHERE tenant = $1 AND path = $2`, tenant, path).
		Scan(&m.Sealed, &m.CurrentVersion, &m.OldestVersion, &m.Revision, &m.CreatedAt, &m.UpdatedAt)
	if err != nil {
		return store.SecretMeta{}, wrap(ctx, op, err)
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return m, nil
}

// GetSecretValue returns one version's value, or store.ErrNotFound.
func (s *Store) GetSecretValue(ctx context.Context, tenant, path string, version int) (store.SecretValue, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "get secret value"
	if err := secretArgs(op, tenant, path); err != nil {
		return store.SecretValue{}, err
	}
	v := store.SecretValue{Tenant: tenant, Path: path, Version: version}
	err := s.pool.QueryRow(ctx, `SELECT sealed, created_at FROM secret_values WHERE tenant = $1 AND path = $2 AND version = $3`,
		tenant, path, version).Scan(&v.Sealed, &v.CreatedAt)
	if err != nil {
		return store.SecretValue{}, wrap(ctx, op, err)
	}
	v.CreatedAt = v.CreatedAt.UTC()
	return v, nil
}

// PutSecret stores m if the stored revision is m.Revision (0: none), then
// erases the values of erase and adds add, in one transaction. Of
// concurrent writes from one revision the first to lock the row wins; the
// others then find the revision changed.
func (s *Store) PutSecret(ctx context.Context, m store.SecretMeta, add *store.SecretValue, erase []int) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "put secret"
	add, err := store.CheckPutSecret(m, add, erase)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	// One statement, so one round trip and its own transaction: the
	// path's row written (inserted, or updated at the revision read), and
	// only if it was, the versions in erase deleted and add inserted. A
	// data-modifying CTE's rows count once the statement ends, so the
	// value's foreign key finds a path inserted by the same statement.
	vs := make([]int64, len(erase))
	for i, v := range erase {
		vs[i] = int64(v)
	}
	var addVersion int64
	var addSealed []byte
	var addCreated any
	if add != nil {
		addVersion, addSealed, addCreated = int64(add.Version), add.Sealed, ts(add.CreatedAt)
	}
	q := putSecretUpdate
	args := []any{m.Tenant, m.Path, m.Sealed, m.CurrentVersion, m.OldestVersion, ts(m.UpdatedAt), vs,
		add != nil, addVersion, addSealed, addCreated, m.Revision}
	if m.Revision == 0 {
		q, args[len(args)-1] = putSecretInsert, ts(m.CreatedAt)
	}
	var written int
	err = s.pool.QueryRow(ctx, q, args...).Scan(&written)
	switch {
	case err == nil && written == 0:
		return 0, fmt.Errorf("%s: secret %q: %w: revision %d is not the stored one", op, m.Path, store.ErrConflict, m.Revision)
	case isForeignKey(err):
		return 0, wrapInTenant(ctx, op, m.Tenant, err)
	case err != nil:
		return 0, wrap(ctx, fmt.Sprintf("%s: secret %q", op, m.Path), err)
	}
	return m.Revision + 1, nil
}

// The statements of PutSecret: $1 tenant, $2 path, $3 sealed metadata, $4
// current and $5 oldest version, $6 updated at, $7 the versions to erase,
// $8 whether a version is added, $9 its number, $10 its sealed value, $11
// its creation time; $12 the revision read (an update) or the creation
// time (an insert). Each returns how many path rows it wrote (0 or 1).
const (
	putSecretTail = `,
	erased AS (DELETE FROM secret_values v USING w WHERE v.tenant = w.tenant AND v.path = w.path AND v.version = ANY($7::bigint[])),
	added AS (INSERT INTO secret_values (tenant, path, version, sealed, created_at)
		SELECT w.tenant, w.path, $9, $10, $11 FROM w WHERE $8::boolean)
	SELECT count(*)::int FROM w`
	putSecretUpdate = `WITH w AS (UPDATE secrets SET sealed = $3, current_version = $4, oldest_version = $5,
		revision = revision + 1, updated_at = $6 WHERE tenant = $1 AND path = $2 AND revision = $12
		RETURNING tenant, path)` + putSecretTail
	putSecretInsert = `WITH w AS (INSERT INTO secrets (tenant, path, sealed, current_version, oldest_version, revision, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, 1, $12, $6) RETURNING tenant, path)` + putSecretTail
)

// DeleteSecret deletes the path's row and, by the foreign key's cascade,
// its values.
func (s *Store) DeleteSecret(ctx context.Context, tenant, path string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "delete secret"
	if err := secretArgs(op, tenant, path); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM secrets WHERE tenant = $1 AND path = $2`, tenant, path); err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// ListSecrets returns up to limit paths beginning with prefix from start
// on, sorted byte by byte (the column's collation is "C").
func (s *Store) ListSecrets(ctx context.Context, tenant, prefix, start string, limit int) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "list secrets"
	if err := store.CheckSecretList(tenant, prefix, start, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT path FROM secrets
		WHERE tenant = $1 AND path >= $2 AND starts_with(path, $3)
		ORDER BY path LIMIT $4`, tenant, start, prefix, limit)
	return collect(ctx, op, rows, err, scanString)
}

// GetSecretConfig returns the tenant's mount configuration, or
// store.ErrNotFound.
func (s *Store) GetSecretConfig(ctx context.Context, tenant string) ([]byte, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "get secret config"
	if err := tenantArg(op, tenant); err != nil {
		return nil, err
	}
	var c []byte
	if err := s.pool.QueryRow(ctx, `SELECT config FROM secret_configs WHERE tenant = $1`, tenant).Scan(&c); err != nil {
		return nil, wrap(ctx, op, err)
	}
	return c, nil
}

// SetSecretConfig replaces the tenant's mount configuration.
func (s *Store) SetSecretConfig(ctx context.Context, tenant string, config []byte) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "set secret config"
	if err := tenantArg(op, tenant); err != nil {
		return err
	}
	if len(config) == 0 {
		return fmt.Errorf("%s: %w: empty configuration", op, store.ErrInvalid)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO secret_configs (tenant, config) VALUES ($1, $2)
		ON CONFLICT (tenant) DO UPDATE SET config = excluded.config`, tenant, config)
	if err != nil {
		return wrapInTenant(ctx, op, tenant, err)
	}
	return nil
}
