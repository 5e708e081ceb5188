package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/codec"
)

// Tenants' data-key rotations.

// GetTenantRekey returns the tenant's rotation state, or store.ErrNotFound.
func (s *Store) GetTenantRekey(ctx context.Context, tenant string) (store.TenantRekey, error) {
	const op = "get tenant rekey"
	if err := tenantArg(op, tenant); err != nil {
		return store.TenantRekey{}, err
	}
	var body []byte
	var rev int64
	err := s.r.QueryRowContext(ctx, `SELECT body, revision FROM tenant_rekeys WHERE tenant = ?`, tenant).Scan(&body, &rev)
	if err != nil {
		return store.TenantRekey{}, wrap(ctx, op, err)
	}
	r, err := codec.DecodeTenantRekey(tenant, body, rev)
	if err != nil {
		return store.TenantRekey{}, fmt.Errorf("%s: %w", op, err)
	}
	return r, nil
}

// PutTenantRekey stores r if the stored revision is rev (0: none stored).
func (s *Store) PutTenantRekey(ctx context.Context, r store.TenantRekey, rev int64) error {
	const op = "put tenant rekey"
	if err := tenantArg(op, r.Tenant); err != nil {
		return err
	}
	body, err := codec.EncodeTenantRekey(r)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if rev == 0 {
		if _, err := s.w.ExecContext(ctx, `INSERT INTO tenant_rekeys (tenant, revision, body) VALUES (?, 1, ?)`, r.Tenant, body); err != nil {
			return wrapInTenant(ctx, op, r.Tenant, err) // a stored state is store.ErrConflict
		}
		return nil
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tenant_rekeys SET body = ?, revision = revision + 1 WHERE tenant = ? AND revision = ?`,
		body, r.Tenant, rev)
	if err := affected(ctx, op, res, err); errors.Is(err, store.ErrNotFound) {
		if err := exists(ctx, s.w, op, fmt.Sprintf("tenant %q", r.Tenant), `SELECT 1 FROM tenants WHERE name = ?`, r.Tenant); err != nil {
			return err
		}
		return fmt.Errorf("%s: %w: tenant %q's state is not at revision %d", op, store.ErrConflict, r.Tenant, rev)
	} else if err != nil {
		return err
	}
	return nil
}

// ListTenantRekeys returns every tenant's rotation state.
func (s *Store) ListTenantRekeys(ctx context.Context) ([]store.TenantRekey, error) {
	const op = "list tenant rekeys"
	rows, err := s.r.QueryContext(ctx, `SELECT tenant, body, revision FROM tenant_rekeys ORDER BY tenant`)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	defer rows.Close()
	var out []store.TenantRekey
	for rows.Next() {
		var tenant string
		var body []byte
		var rev int64
		if err := rows.Scan(&tenant, &body, &rev); err != nil {
			return nil, wrap(ctx, op, err)
		}
		r, err := codec.DecodeTenantRekey(tenant, body, rev)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, op, err)
	}
	return out, nil
}

// sealedTables are where each kind of sealed record is: its table, the
// column naming it, and its version (a column, or 0).
var sealedTables = map[store.SealedKind]sealedTable{
	store.SealedTransitVersion: {"transit_key_versions", "name", "version"},
	store.SealedSecretMeta:     {"secrets", "path", "0"},
	store.SealedSecretValue:    {"secret_values", "path", "version"},
}

type sealedTable struct{ table, name, version string }

// order is the table's ORDER BY: by name, then version where there is
// one (a constant is no column to order by).
func (t sealedTable) order() string {
	if t.version[0] == '0' {
		return t.name
	}
	return t.name + ", " + t.version
}

// TenantSealed returns a page of the tenant's sealed records after after.
func (s *Store) TenantSealed(ctx context.Context, tenant string, after store.SealedRef, limit int) ([]store.SealedRecord, error) {
	const op = "list tenant sealed records"
	if err := store.CheckTenantSealed(tenant, after, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if limit == 0 {
		return nil, fmt.Errorf("%s: %w: limit 0", op, store.ErrInvalid)
	}
	var out []store.SealedRecord
	for kind := max(after.Kind, store.SealedTransitVersion); kind <= store.SealedSecretValue && len(out) < limit; kind++ {
		t := sealedTables[kind]
		from, fromVersion := "", 0
		if kind == after.Kind {
			from, fromVersion = after.Name, after.Version
		}
		q := fmt.Sprintf(`SELECT %[2]s, %[3]s, sealed FROM %[1]s WHERE tenant = ? AND (%[2]s, %[3]s) > (?, ?)
			ORDER BY %[4]s LIMIT ?`, t.table, t.name, t.version, t.order())
		rows, err := s.r.QueryContext(ctx, q, tenant, from, fromVersion, limit-len(out))
		if err != nil {
			return nil, wrap(ctx, op, err)
		}
		for rows.Next() {
			rec := store.SealedRecord{SealedRef: store.SealedRef{Kind: kind}}
			if err := rows.Scan(&rec.Name, &rec.Version, &rec.Sealed); err != nil {
				rows.Close()
				return nil, wrap(ctx, op, err)
			}
			out = append(out, rec)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, wrap(ctx, op, err)
		}
	}
	return out, nil
}

// RewrapTenantSealed replaces a sealed record's bytes with next if they
// are old.
func (s *Store) RewrapTenantSealed(ctx context.Context, tenant string, ref store.SealedRef, old, next []byte) error {
	const op = "rewrap tenant sealed record"
	if err := store.CheckTenantSealed(tenant, ref, 0); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if ref.Kind == 0 || len(old) == 0 || len(next) == 0 {
		return fmt.Errorf("%s: %w: no kind, or empty sealed bytes", op, store.ErrInvalid)
	}
	t := sealedTables[ref.Kind]
	where := fmt.Sprintf(`tenant = ? AND %s = ? AND %s = ?`, t.name, t.version)
	res, err := s.w.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET sealed = ? WHERE %s AND sealed = ?`, t.table, where),
		next, tenant, ref.Name, ref.Version, old)
	if err := affected(ctx, op, res, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	what := fmt.Sprintf("tenant %q: %s %q version %d", tenant, ref.Kind, ref.Name, ref.Version)
	if err := exists(ctx, s.w, op, what, fmt.Sprintf(`SELECT 1 FROM %s WHERE %s`, t.table, where), tenant, ref.Name, ref.Version); err != nil {
		return err
	}
	return fmt.Errorf("%s: %w: %s changed", op, store.ErrConflict, what)
}
