package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/codec"
)

// Root-key rotation.

// GetRekey returns the rotation's state, or store.ErrNotFound.
func (s *Store) GetRekey(ctx context.Context) (store.Rekey, error) {
	const op = "get rekey"
	var body []byte
	var rev int64
	if err := s.r.QueryRowContext(ctx, `SELECT body, revision FROM rekey WHERE id = 1`).Scan(&body, &rev); err != nil {
		return store.Rekey{}, wrap(ctx, op, err)
	}
	r, err := codec.DecodeRekey(body, rev)
	if err != nil {
		return store.Rekey{}, fmt.Errorf("%s: %w", op, err)
	}
	return r, nil
}

// PutRekey stores r if the stored revision is rev (0: none stored).
func (s *Store) PutRekey(ctx context.Context, r store.Rekey, rev int64) error {
	const op = "put rekey"
	body, err := codec.EncodeRekey(r)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if rev == 0 {
		if _, err := s.w.ExecContext(ctx, `INSERT INTO rekey (id, revision, body) VALUES (1, 1, ?)`, body); err != nil {
			return wrap(ctx, op, err) // a stored state is store.ErrConflict
		}
		return nil
	}
	res, err := s.w.ExecContext(ctx, `UPDATE rekey SET body = ?, revision = revision + 1 WHERE id = 1 AND revision = ?`, body, rev)
	if err := affected(ctx, op, res, err); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s: %w: the stored state is not at revision %d", op, store.ErrConflict, rev)
	} else if err != nil {
		return err
	}
	return nil
}

// RewrapSigningKey replaces kid's sealed key with next if it is old.
func (s *Store) RewrapSigningKey(ctx context.Context, kid string, old, next []byte) error {
	const op = "rewrap signing key"
	if len(next) == 0 || len(old) == 0 {
		return fmt.Errorf("%s: %w: empty sealed key", op, store.ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE signing_keys SET sealed = ? WHERE kid = ? AND sealed = ?`, next, kid, old)
	if err := affected(ctx, op, res, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := exists(ctx, s.w, op, fmt.Sprintf("signing key %q", kid), `SELECT 1 FROM signing_keys WHERE kid = ?`, kid); err != nil {
		return err
	}
	return fmt.Errorf("%s: %w: signing key %q changed", op, store.ErrConflict, kid)
}

// RewrapTenantDataKey replaces the tenant's sealed data key with next if
// it is old.
func (s *Store) RewrapTenantDataKey(ctx context.Context, name string, old, next []byte) error {
	const op = "rewrap tenant data key"
	if err := tenantArg(op, name); err != nil {
		return err
	}
	if len(next) == 0 || len(old) == 0 {
		return fmt.Errorf("%s: %w: empty data key", op, store.ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tenants SET data_key = ? WHERE name = ? AND data_key = ?`, next, name, old)
	if err := affected(ctx, op, res, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := exists(ctx, s.w, op, fmt.Sprintf("tenant %q", name), `SELECT 1 FROM tenants WHERE name = ?`, name); err != nil {
		return err
	}
	return fmt.Errorf("%s: %w: tenant %q's data key changed", op, store.ErrConflict, name)
}
