package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/codec"
)

// ts is a time as stored: UTC, truncated to the microsecond (what
// timestamptz keeps).
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// nullTS stores a zero time as NULL.
func nullTS(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	v := ts(t)
	return &v
}

func fromNullTS(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// affected turns "no row matched" into store.ErrNotFound.
func affected(ctx context.Context, op string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return wrap(ctx, op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return nil
}

// collect reads every row with scan.
func collect[T any](ctx context.Context, op string, rows pgx.Rows, err error, scan func(pgx.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, wrap(ctx, op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, op, err)
	}
	return out, nil
}

// scanString reads a row of one text column.
func scanString(r pgx.Rows) (string, error) {
	var v string
	err := r.Scan(&v)
	return v, err
}

// Tenants.

// tenantArg checks a tenant argument, for the error of op.
func tenantArg(op, tenant string) error {
	if err := store.ValidTenantName(tenant); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// wrapInTenant is wrap for a write into tenant: a foreign-key violation
// (the tenant does not exist) is store.ErrNotFound naming it.
func wrapInTenant(ctx context.Context, op, tenant string, err error) error {
	if isForeignKey(err) {
		return fmt.Errorf("%s: tenant %q: %w", op, tenant, store.ErrNotFound)
	}
	return wrap(ctx, op, err)
}

func isForeignKey(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503" // foreign_key_violation
}

const selectTenant = `SELECT name, data_key, created_at FROM tenants`

func scanTenant(row pgx.Row) (store.Tenant, error) {
	var t store.Tenant
	if err := row.Scan(&t.Name, &t.DataKey, &t.CreatedAt); err != nil {
		return store.Tenant{}, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return t, nil
}

// nullBytes stores an empty byte slice as NULL.
func nullBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// exists returns nil if query finds a row, else store.ErrNotFound naming
// what: it tells a conditional write that matched nothing because its row
// is missing from one whose condition failed.
func (s *Store) exists(ctx context.Context, op, what, query string, args ...any) error {
	var one int
	if err := s.pool.QueryRow(ctx, query, args...).Scan(&one); err != nil {
		return wrap(ctx, op+": "+what, err)
	}
	return nil
}

// CreateTenant stores a new tenant; an existing name is store.ErrConflict.
func (s *Store) CreateTenant(ctx context.Context, t store.Tenant) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "create tenant"
	if err := tenantArg(op, t.Name); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO tenants (name, data_key, created_at) VALUES ($1, $2, $3)`,
		t.Name, nullBytes(t.DataKey), ts(t.CreatedAt))
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// GetTenant returns the tenant name, or store.ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, name string) (store.Tenant, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "get tenant"
	if err := tenantArg(op, name); err != nil {
		return store.Tenant{}, err
	}
	t, err := scanTenant(s.pool.QueryRow(ctx, selectTenant+` WHERE name = $1`, name))
	if err != nil {
		return store.Tenant{}, wrap(ctx, op, err)
	}
	return t, nil
}

// ListTenants returns every tenant, ordered by name.
func (s *Store) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, selectTenant+` ORDER BY name`)
	return collect(ctx, "list tenants", rows, err, func(r pgx.Rows) (store.Tenant, error) { return scanTenant(r) })
}

// SetTenantDataKey sets the tenant's data key if it has none; one already
// set is store.ErrConflict, an unknown tenant store.ErrNotFound. Of
// concurrent calls, the first to lock the row sets it; the others then
// find it set.
func (s *Store) SetTenantDataKey(ctx context.Context, name string, sealed []byte) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "set tenant data key"
	if err := tenantArg(op, name); err != nil {
		return err
	}
	if len(sealed) == 0 {
		return fmt.Errorf("%s: %w: empty data key", op, store.ErrInvalid)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET data_key = $1 WHERE name = $2 AND data_key IS NULL`, sealed, name)
	if err := affected(ctx, op, tag, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := s.exists(ctx, op, fmt.Sprintf("tenant %q", name), `SELECT 1 FROM tenants WHERE name = $1`, name); err != nil {
		return err
	}
	return fmt.Errorf("%s: %w: tenant %q has a data key already", op, store.ErrConflict, name)
}

// DeleteTenant removes a tenant without clients, users, transit keys or
// secrets (store.ErrNotEmpty otherwise, from the foreign keys that
// reference it; they also hold off one being added meanwhile); its mount
// configuration goes by the foreign key's cascade.
func (s *Store) DeleteTenant(ctx context.Context, name string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "delete tenant"
	if err := store.DeletableTenant(name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	// The tenant's internal transit key rows go with it (their versions by
	// the foreign key's cascade); if anything else is left, the tenant's
	// delete fails and the transaction takes them back.
	var tag pgconn.CommandTag
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM transit_keys WHERE tenant = $1 AND left(name, 1) = $2`,
			name, store.InternalKeyPrefix); err != nil {
			return err
		}
		var err error
		tag, err = tx.Exec(ctx, `DELETE FROM tenants WHERE name = $1`, name)
		return err
	})
	if isForeignKey(err) {
		return fmt.Errorf("%s: tenant %q: %w", op, name, store.ErrNotEmpty)
	}
	return affected(ctx, op, tag, err)
}

// Clients.

const selectClient = `SELECT id, tenant, name, secret_digest, scopes, created_at, updated_at FROM clients`

func scanClient(row pgx.Row) (store.Client, error) {
	var (
		c      store.Client
		scopes []byte
	)
	if err := row.Scan(&c.ID, &c.Tenant, &c.Name, &c.SecretDigest, &scopes, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return store.Client{}, err
	}
	var err error
	if c.Scopes, err = codec.DecodeScopes(scopes); err != nil {
		return store.Client{}, err
	}
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return c, nil
}

// CreateClient stores a new client in c.Tenant (empty: the default
// tenant); an existing ID is store.ErrConflict, a tenant that does not
// exist store.ErrNotFound.
func (s *Store) CreateClient(ctx context.Context, c store.Client) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "create client"
	tenant, err := store.TenantOrDefault(c.Tenant)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	scopes, err := codec.EncodeScopes(c.Scopes)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO clients (id, tenant, name, secret_digest, scopes, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.ID, tenant, c.Name, codec.NonNil(c.SecretDigest), scopes, ts(c.CreatedAt), ts(c.UpdatedAt))
	if err != nil {
		return wrapInTenant(ctx, op, tenant, err)
	}
	return nil
}

// GetClient returns the client with id, or store.ErrNotFound.
func (s *Store) GetClient(ctx context.Context, id string) (store.Client, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c, err := scanClient(s.pool.QueryRow(ctx, selectClient+` WHERE id = $1`, id))
	if err != nil {
		return store.Client{}, wrap(ctx, "get client", err)
	}
	return c, nil
}

// ListClients returns every client of every tenant, ordered by CreatedAt,
// then ID.
func (s *Store) ListClients(ctx context.Context) ([]store.Client, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, selectClient+` ORDER BY created_at, id`)
	return collect(ctx, "list clients", rows, err, func(r pgx.Rows) (store.Client, error) { return scanClient(r) })
}

// ListClientsIn returns the clients of tenant, ordered by CreatedAt, then
// ID.
func (s *Store) ListClientsIn(ctx context.Context, tenant string) ([]store.Client, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "list clients"
	if err := tenantArg(op, tenant); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, selectClient+` WHERE tenant = $1 ORDER BY created_at, id`, tenant)
	return collect(ctx, op, rows, err, func(r pgx.Rows) (store.Client, error) { return scanClient(r) })
}

// UpdateClientSecret replaces the secret digest and sets UpdatedAt to at.
func (s *Store) UpdateClientSecret(ctx context.Context, id string, digest []byte, at time.Time) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE clients SET secret_digest = $1, updated_at = $2 WHERE id = $3`,
		codec.NonNil(digest), ts(at), id)
	return affected(ctx, "update client secret", tag, err)
}

// UpdateClient replaces the Name, Scopes and UpdatedAt of the client with
// c.ID (Tenant is kept), or returns store.ErrNotFound.
func (s *Store) UpdateClient(ctx context.Context, c store.Client) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	scopes, err := codec.EncodeScopes(c.Scopes)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE clients SET name = $1, scopes = $2, updated_at = $3 WHERE id = $4`,
		c.Name, scopes, ts(c.UpdatedAt), c.ID)
	return affected(ctx, "update client", tag, err)
}

// DeleteClient removes a client, or returns store.ErrNotFound.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM clients WHERE id = $1`, id)
	return affected(ctx, "delete client", tag, err)
}

// Users.

const selectUser = `SELECT id, tenant, username, password_hash, scopes, disabled, created_at, updated_at FROM users`

func scanUser(row pgx.Row) (store.User, error) {
	var (
		u      store.User
		scopes []byte
	)
	if err := row.Scan(&u.ID, &u.Tenant, &u.Username, &u.PasswordHash, &scopes, &u.Disabled, &u.CreatedAt, &u.UpdatedAt); err != nil {
		return store.User{}, err
	}
	var err error
	if u.Scopes, err = codec.DecodeScopes(scopes); err != nil {
		return store.User{}, err
	}
	u.CreatedAt, u.UpdatedAt = u.CreatedAt.UTC(), u.UpdatedAt.UTC()
	return u, nil
}

// CreateUser stores a new user in u.Tenant (empty: the default tenant);
// an existing ID, or a Username the tenant has, is store.ErrConflict, a
// tenant that does not exist store.ErrNotFound. Usernames are compared
// byte for byte.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "create user"
	tenant, err := store.TenantOrDefault(u.Tenant)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	scopes, err := codec.EncodeScopes(u.Scopes)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO users (id, tenant, username, password_hash, scopes, disabled, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		u.ID, tenant, u.Username, u.PasswordHash, scopes, u.Disabled, ts(u.CreatedAt), ts(u.UpdatedAt))
	if err != nil {
		return wrapInTenant(ctx, op, tenant, err)
	}
	return nil
}

// GetUser returns the user with id, or store.ErrNotFound.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	u, err := scanUser(s.pool.QueryRow(ctx, selectUser+` WHERE id = $1`, id))
	if err != nil {
		return store.User{}, wrap(ctx, "get user", err)
	}
	return u, nil
}

// GetUserByName returns the user of tenant with username, or
// store.ErrNotFound.
func (s *Store) GetUserByName(ctx context.Context, tenant, username string) (store.User, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "get user"
	if err := tenantArg(op, tenant); err != nil {
		return store.User{}, err
	}
	u, err := scanUser(s.pool.QueryRow(ctx, selectUser+` WHERE tenant = $1 AND username = $2`, tenant, username))
	if err != nil {
		return store.User{}, wrap(ctx, op, err)
	}
	return u, nil
}

// ListUsers returns every user of every tenant, ordered by CreatedAt, then
// ID.
func (s *Store) ListUsers(ctx context.Context) ([]store.User, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, selectUser+` ORDER BY created_at, id`)
	return collect(ctx, "list users", rows, err, func(r pgx.Rows) (store.User, error) { return scanUser(r) })
}

// ListUsersIn returns the users of tenant, ordered by CreatedAt, then ID.
func (s *Store) ListUsersIn(ctx context.Context, tenant string) ([]store.User, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "list users"
	if err := tenantArg(op, tenant); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, selectUser+` WHERE tenant = $1 ORDER BY created_at, id`, tenant)
	return collect(ctx, op, rows, err, func(r pgx.Rows) (store.User, error) { return scanUser(r) })
}

// UpdateUser replaces the Username, PasswordHash, Scopes, Disabled and
// UpdatedAt of the user with u.ID (Tenant and CreatedAt are kept). A
// Username taken by another user of its tenant is store.ErrConflict.
func (s *Store) UpdateUser(ctx context.Context, u store.User) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	scopes, err := codec.EncodeScopes(u.Scopes)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE users SET username = $1, password_hash = $2, scopes = $3, disabled = $4, updated_at = $5
		WHERE id = $6`,
		u.Username, u.PasswordHash, scopes, u.Disabled, ts(u.UpdatedAt), u.ID)
	return affected(ctx, "update user", tag, err)
}

// DeleteUser removes a user, or returns store.ErrNotFound.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, id)
	return affected(ctx, "delete user", tag, err)
}

// Signing keys.

// PutSigningKey stores a new key; an existing KID is store.ErrConflict (a
// key is never overwritten).
func (s *Store) PutSigningKey(ctx context.Context, k store.SigningKey) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO signing_keys (kid, alg, sealed, public_jwk, publish_at, active_at, retire_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		k.KID, k.Alg, codec.NonNil(k.Sealed), codec.NonNil(k.PublicJWK), ts(k.PublishAt), ts(k.ActiveAt),
		nullTS(k.RetireAt), ts(k.CreatedAt))
	if err != nil {
		return wrap(ctx, "put signing key", err)
	}
	return nil
}

// ListSigningKeys returns every key, ordered by CreatedAt, then KID.
func (s *Store) ListSigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT kid, alg, sealed, public_jwk, publish_at, active_at, retire_at, created_at
		FROM signing_keys ORDER BY created_at, kid`)
	return collect(ctx, "list signing keys", rows, err, func(r pgx.Rows) (store.SigningKey, error) {
		var (
			k      store.SigningKey
			retire *time.Time
		)
		if err := r.Scan(&k.KID, &k.Alg, &k.Sealed, &k.PublicJWK, &k.PublishAt, &k.ActiveAt, &retire, &k.CreatedAt); err != nil {
			return store.SigningKey{}, err
		}
		k.PublishAt, k.ActiveAt, k.CreatedAt = k.PublishAt.UTC(), k.ActiveAt.UTC(), k.CreatedAt.UTC()
		k.RetireAt = fromNullTS(retire)
		return k, nil
	})
}

// RetireSigningKey sets RetireAt of the key kid; a zero at clears it.
func (s *Store) RetireSigningKey(ctx context.Context, kid string, at time.Time) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE signing_keys SET retire_at = $1 WHERE kid = $2`, nullTS(at), kid)
	return affected(ctx, "retire signing key", tag, err)
}

// DeleteSigningKey removes a key, or returns store.ErrNotFound.
func (s *Store) DeleteSigningKey(ctx context.Context, kid string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM signing_keys WHERE kid = $1`, kid)
	return affected(ctx, "delete signing key", tag, err)
}

// Refresh tokens.

// refreshColumns are a refresh token's columns, in the order scanRefresh
// reads and insertRefreshArgs writes them.
const refreshColumns = `digest, family_id, generation, client_id, subject, scopes, issued_at, origin_at, expires_at, used_at, revoked`

const selectRefresh = `SELECT ` + refreshColumns + ` FROM refresh_tokens`

// selectRotated is selectRefresh with, last, the Before of the subject
// revocation of the token's subject under the issuer $2 (NULL if none; the
// primary key (issuer, jti, subject) allows one at most), and the token's
// row lock.
const selectRotated = `SELECT ` + refreshColumns + `,
		(SELECT r.before_at FROM revocations AS r WHERE r.issuer = $2 AND r.jti = '' AND r.subject = refresh_tokens.subject)
	FROM refresh_tokens WHERE digest = $1 FOR UPDATE OF refresh_tokens`

func scanRefresh(row pgx.Row, more ...any) (store.RefreshToken, int32, error) {
	var (
		t      store.RefreshToken
		gen    int32
		scopes []byte
		used   *time.Time
	)
	dest := append([]any{&t.Digest, &t.FamilyID, &gen, &t.ClientID, &t.Subject, &scopes, &t.IssuedAt, &t.OriginAt, &t.ExpiresAt, &used, &t.Revoked}, more...)
	if err := row.Scan(dest...); err != nil {
		return store.RefreshToken{}, 0, err
	}
	var err error
	if t.Scopes, err = codec.DecodeScopes(scopes); err != nil {
		return store.RefreshToken{}, 0, err
	}
	t.IssuedAt, t.OriginAt, t.ExpiresAt, t.UsedAt = t.IssuedAt.UTC(), t.OriginAt.UTC(), t.ExpiresAt.UTC(), fromNullTS(used)
	return t, gen, nil
}

const insertRefresh = `INSERT INTO refresh_tokens (` + refreshColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

func insertRefreshArgs(t store.RefreshToken, gen int32) ([]any, error) {
	scopes, err := codec.EncodeScopes(t.Scopes)
	if err != nil {
		return nil, err
	}
	return []any{codec.NonNil(t.Digest), t.FamilyID, gen, t.ClientID, t.Subject, scopes,
		ts(t.IssuedAt), ts(t.OriginAt), ts(t.ExpiresAt), nullTS(t.UsedAt), t.Revoked}, nil
}

// CreateRefreshToken stores the first token of a new family; a zero
// OriginAt is stored as IssuedAt. An existing Digest, or a FamilyID
// already in use, is store.ErrConflict.
func (s *Store) CreateRefreshToken(ctx context.Context, t store.RefreshToken) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if t.OriginAt.IsZero() {
		t.OriginAt = t.IssuedAt
	}
	args, err := insertRefreshArgs(t, 0)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, insertRefresh, args...); err != nil {
		return wrap(ctx, "create refresh token", err)
	}
	return nil
}

// lockFamilyOf takes the transaction-scoped lock on the family of digest
// and returns the family; rotation and family revocation take it first, so
// a revocation sees every token a rotation added.
const lockFamilyOf = `SELECT family_id, pg_advisory_xact_lock($2, hashtext(family_id))
	FROM refresh_tokens WHERE digest = $1`

// RotateRefreshToken implements [store.RefreshTokens.RotateRefreshToken]: in one
// transaction, holding the family's lock and the token's row lock, it
// marks old used at now and stores next in old's family (next.FamilyID and
// next.OriginAt are old's). It returns old as it was before, also with
// ErrReused, ErrRevoked, ErrSubjectRevoked and ErrExpired; a spent old is
// checked first, so a replay is always reported and always revokes the
// family. old is expired when now is at or past its ExpiresAt. If next's
// Digest exists it returns store.ErrConflict and spends nothing.
//
// The subject's revocations are read by the statement that locks the
// token (READ COMMITTED: every revocation committed before it); one that
// commits between that read and the commit does not stop this rotation,
// and refuses next at its first use instead.
func (s *Store) RotateRefreshToken(ctx context.Context, issuer string, old []byte, next store.RefreshToken, now time.Time) (store.RefreshToken, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "rotate refresh token"
	args, err := insertRefreshArgs(next, 0)
	if err != nil {
		return store.RefreshToken{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	defer tx.Rollback(context.Background())
	// One round trip: the family lock, then (a new statement, so a fresh
	// look at the row) the row lock.
	var b pgx.Batch
	b.Queue(lockFamilyOf, old, lockFamily)
	b.Queue(selectRotated, old, issuer)
	br := tx.SendBatch(ctx, &b)
	_, err = br.Exec()
	var (
		cur           store.RefreshToken
		gen           int32
		revokedBefore *time.Time
	)
	if err == nil {
		cur, gen, err = scanRefresh(br.QueryRow(), &revokedBefore)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	if err := store.CheckRotation(cur, fromNullTS(revokedBefore), now); err != nil {
		if errors.Is(err, store.ErrReused) || errors.Is(err, store.ErrSubjectRevoked) {
			if _, err := tx.Exec(ctx, `UPDATE refresh_tokens SET revoked = true WHERE family_id = $1`, cur.FamilyID); err != nil {
				return store.RefreshToken{}, wrap(ctx, op, err)
			}
			if err := tx.Commit(ctx); err != nil {
				return store.RefreshToken{}, wrap(ctx, op, err)
			}
		}
		return cur, fmt.Errorf("%s: %w", op, err)
	}
	// Spend old and store next in one statement.
	args[1], args[2], args[7] = cur.FamilyID, gen+1, cur.OriginAt
	args = append(args, ts(now), old)
	if _, err := tx.Exec(ctx, `WITH spent AS (UPDATE refresh_tokens SET used_at = $12 WHERE digest = $13) `+insertRefresh, args...); err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	return cur, nil
}

// GetRefreshToken returns the token with digest, or store.ErrNotFound.
func (s *Store) GetRefreshToken(ctx context.Context, digest []byte) (store.RefreshToken, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	t, _, err := scanRefresh(s.pool.QueryRow(ctx, selectRefresh+` WHERE digest = $1`, digest))
	if err != nil {
		return store.RefreshToken{}, wrap(ctx, "get refresh token", err)
	}
	return t, nil
}

// RevokeRefreshFamily revokes every token of digest's family, or returns
// store.ErrNotFound.
func (s *Store) RevokeRefreshFamily(ctx context.Context, digest []byte) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const op = "revoke refresh family"
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var family string
		if err := tx.QueryRow(ctx, lockFamilyOf, digest, lockFamily).Scan(&family, nil); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE refresh_tokens SET revoked = true WHERE family_id = $1`, family)
		return err
	})
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// DeleteExpiredRefreshTokens removes the tokens whose ExpiresAt is at or
// before now and returns how many.
func (s *Store) DeleteExpiredRefreshTokens(ctx context.Context, now time.Time) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM refresh_tokens WHERE expires_at <= $1`, ts(now))
	if err != nil {
		return 0, wrap(ctx, "delete expired refresh tokens", err)
	}
	return int(tag.RowsAffected()), nil
}

// Revocations.

// DeleteExpiredRevocations removes the jti revocations whose Until is at or
// before now and the subject revocations whose Before is before
// subjectsBefore (zero: none) and whose Until, if any, is at or before now,
// and returns how many.
func (s *Store) DeleteExpiredRevocations(ctx context.Context, now, subjectsBefore time.Time) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var cutoff any // NULL: no subject revocation matches
	if !subjectsBefore.IsZero() {
		cutoff = ts(subjectsBefore)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM revocations WHERE (jti <> '' AND until_at <= $1)
		OR (subject <> '' AND before_at < $2 AND (until_at IS NULL OR until_at <= $1))`,
		ts(now), cutoff)
	if err != nil {
		return 0, wrap(ctx, "delete expired revocations", err)
	}
	return int(tag.RowsAffected()), nil
}

// AddRevocation records r, which names exactly one of JTI (with Until) and
// Subject (with Before, and optionally Until). It is idempotent: adding the
// same issuer and jti or subject again keeps one record, with the later
// Until and Before (greatest ignores a NULL) and the first CreatedAt.
func (s *Store) AddRevocation(ctx context.Context, r store.Revocation) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := r.Validate(); err != nil {
		return fmt.Errorf("add revocation: %w", err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO revocations (issuer, jti, subject, until_at, before_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (issuer, jti, subject) DO UPDATE SET
			until_at = greatest(revocations.until_at, excluded.until_at),
			before_at = greatest(revocations.before_at, excluded.before_at)`,
		r.Issuer, r.JTI, r.Subject, nullTS(r.Until), nullTS(r.Before), ts(r.CreatedAt))
	if err != nil {
		return wrap(ctx, "add revocation", err)
	}
	return nil
}

// Revocations returns the revocations in force at now: jti revocations
// whose Until is after now, and every subject revocation; ordered by
// CreatedAt, then Issuer, JTI and Subject.
func (s *Store) Revocations(ctx context.Context, now time.Time) ([]store.Revocation, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT issuer, jti, subject, until_at, before_at, created_at FROM revocations
		WHERE subject <> '' OR until_at > $1
		ORDER BY created_at, issuer, jti, subject`, ts(now))
	return collect(ctx, "revocations", rows, err, func(row pgx.Rows) (store.Revocation, error) {
		var (
			r             store.Revocation
			until, before *time.Time
		)
		if err := row.Scan(&r.Issuer, &r.JTI, &r.Subject, &until, &before, &r.CreatedAt); err != nil {
			return store.Revocation{}, err
		}
		r.Until, r.Before, r.CreatedAt = fromNullTS(until), fromNullTS(before), r.CreatedAt.UTC()
		return r, nil
	})
}
