package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/codec"
)

// Times are stored as microseconds since the Unix epoch.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

type scanner interface{ Scan(dest ...any) error }

// collect scans every row of a query into a slice.
func collect[T any](ctx context.Context, op string, rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
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
func scanString(row scanner) (string, error) {
	var v string
	err := row.Scan(&v)
	return v, err
}

// affected turns "no row matched" into store.ErrNotFound.
func affected(ctx context.Context, op string, res sql.Result, err error) error {
	if err != nil {
		return wrap(ctx, op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrap(ctx, op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return nil
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
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

const selectTenant = `SELECT name, data_key, created_at FROM tenants`

func scanTenant(row scanner) (store.Tenant, error) {
	var (
		t       store.Tenant
		created int64
	)
	err := row.Scan(&t.Name, &t.DataKey, &created)
	t.CreatedAt = fromMicros(created)
	return t, err
}

// nullBytes stores an empty byte slice as NULL.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// CreateTenant stores a new tenant; an existing name is store.ErrConflict.
func (s *Store) CreateTenant(ctx context.Context, t store.Tenant) error {
	const op = "create tenant"
	if err := tenantArg(op, t.Name); err != nil {
		return err
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO tenants (name, data_key, created_at) VALUES (?, ?, ?)`,
		t.Name, nullBytes(t.DataKey), micros(t.CreatedAt))
	if err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// GetTenant returns the tenant name, or store.ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, name string) (store.Tenant, error) {
	const op = "get tenant"
	if err := tenantArg(op, name); err != nil {
		return store.Tenant{}, err
	}
	t, err := scanTenant(s.r.QueryRowContext(ctx, selectTenant+` WHERE name = ?`, name))
	if err != nil {
		return store.Tenant{}, wrap(ctx, op, err)
	}
	return t, nil
}

// ListTenants returns every tenant, ordered by name.
func (s *Store) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	rows, err := s.r.QueryContext(ctx, selectTenant+` ORDER BY name`)
	return collect(ctx, "list tenants", rows, err, scanTenant)
}

// SetTenantDataKey sets the tenant's data key if it has none; one already
// set is store.ErrConflict, an unknown tenant store.ErrNotFound.
func (s *Store) SetTenantDataKey(ctx context.Context, name string, sealed []byte) error {
	const op = "set tenant data key"
	if err := tenantArg(op, name); err != nil {
		return err
	}
	if len(sealed) == 0 {
		return fmt.Errorf("%s: %w: empty data key", op, store.ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE tenants SET data_key = ? WHERE name = ? AND data_key IS NULL`, sealed, name)
	if err := affected(ctx, op, res, err); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := exists(ctx, s.w, op, fmt.Sprintf("tenant %q", name), `SELECT 1 FROM tenants WHERE name = ?`, name); err != nil {
		return err
	}
	return fmt.Errorf("%s: %w: tenant %q has a data key already", op, store.ErrConflict, name)
}

// querier is the writer or a transaction on it.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// exists returns nil if query, on q, finds a row, else store.ErrNotFound
// naming what: it tells a conditional write that matched nothing because
// its row is missing from one whose condition failed.
func exists(ctx context.Context, q querier, op, what, query string, args ...any) error {
	var one int
	if err := q.QueryRowContext(ctx, query, args...).Scan(&one); err != nil {
		return wrap(ctx, op+": "+what, err)
	}
	return nil
}

// DeleteTenant removes a tenant without clients, users, transit keys or
// secrets (store.ErrNotEmpty otherwise, from the foreign keys that
// reference it); its mount configuration goes by the foreign key's cascade.
func (s *Store) DeleteTenant(ctx context.Context, name string) error {
	const op = "delete tenant"
	if err := store.DeletableTenant(name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return s.inTx(ctx, op, func(tx *sql.Tx) error {
		// The tenant's internal transit key rows go with it (their
		// versions by the foreign key's cascade); if anything else is
		// left, the delete below fails and the transaction takes them back.
		if _, err := tx.ExecContext(ctx, `DELETE FROM transit_keys WHERE tenant = ? AND substr(name, 1, 1) = ?`,
			name, store.InternalKeyPrefix); err != nil {
			return wrap(ctx, op, err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM tenants WHERE name = ?`, name)
		if isForeignKey(err) {
			return fmt.Errorf("%s: tenant %q: %w", op, name, store.ErrNotEmpty)
		}
		return affected(ctx, op, res, err)
	})
}

// Clients.

const selectClient = `SELECT id, tenant, name, secret_digest, scopes, created_at, updated_at FROM clients`

func scanClient(row scanner) (store.Client, error) {
	var (
		c              store.Client
		scopes         string
		created, updat int64
	)
	if err := row.Scan(&c.ID, &c.Tenant, &c.Name, &c.SecretDigest, &scopes, &created, &updat); err != nil {
		return store.Client{}, err
	}
	var err error
	if c.Scopes, err = codec.DecodeScopes([]byte(scopes)); err != nil {
		return store.Client{}, err
	}
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updat)
	return c, nil
}

// CreateClient stores a new client in c.Tenant (empty: the default
// tenant); an existing ID is store.ErrConflict, a tenant that does not
// exist store.ErrNotFound.
func (s *Store) CreateClient(ctx context.Context, c store.Client) error {
	const op = "create client"
	tenant, err := store.TenantOrDefault(c.Tenant)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	scopes, err := codec.EncodeScopes(c.Scopes)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO clients (id, tenant, name, secret_digest, scopes, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.ID, tenant, c.Name, codec.NonNil(c.SecretDigest), scopes, micros(c.CreatedAt), micros(c.UpdatedAt))
	if err != nil {
		return wrapInTenant(ctx, op, tenant, err)
	}
	return nil
}

// GetClient returns the client with id, or store.ErrNotFound.
func (s *Store) GetClient(ctx context.Context, id string) (store.Client, error) {
	c, err := scanClient(s.getClient.QueryRowContext(ctx, id))
	if err != nil {
		return store.Client{}, wrap(ctx, "get client", err)
	}
	return c, nil
}

// ListClients returns every client of every tenant, ordered by CreatedAt,
// then ID.
func (s *Store) ListClients(ctx context.Context) ([]store.Client, error) {
	rows, err := s.r.QueryContext(ctx, selectClient+` ORDER BY created_at, id`)
	return collect(ctx, "list clients", rows, err, scanClient)
}

// ListClientsIn returns the clients of tenant, ordered by CreatedAt, then
// ID.
func (s *Store) ListClientsIn(ctx context.Context, tenant string) ([]store.Client, error) {
	const op = "list clients"
	if err := tenantArg(op, tenant); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, selectClient+` WHERE tenant = ? ORDER BY created_at, id`, tenant)
	return collect(ctx, op, rows, err, scanClient)
}

// UpdateClientSecret replaces the secret digest and sets UpdatedAt to at.
func (s *Store) UpdateClientSecret(ctx context.Context, id string, digest []byte, at time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE clients SET secret_digest = ?, updated_at = ? WHERE id = ?`,
		codec.NonNil(digest), micros(at), id)
	return affected(ctx, "update client secret", res, err)
}

// UpdateClient replaces the Name, Scopes and UpdatedAt of the client with
// c.ID (Tenant is kept), or returns store.ErrNotFound.
func (s *Store) UpdateClient(ctx context.Context, c store.Client) error {
	scopes, err := codec.EncodeScopes(c.Scopes)
	if err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE clients SET name = ?, scopes = ?, updated_at = ? WHERE id = ?`,
		c.Name, scopes, micros(c.UpdatedAt), c.ID)
	return affected(ctx, "update client", res, err)
}

// DeleteClient removes a client, or returns store.ErrNotFound.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM clients WHERE id = ?`, id)
	return affected(ctx, "delete client", res, err)
}

// Users.

const selectUser = `SELECT id, tenant, username, password_hash, scopes, disabled, created_at, updated_at FROM users`

func scanUser(row scanner) (store.User, error) {
	var (
		u              store.User
		scopes         string
		disabled       int
		created, updat int64
	)
	if err := row.Scan(&u.ID, &u.Tenant, &u.Username, &u.PasswordHash, &scopes, &disabled, &created, &updat); err != nil {
		return store.User{}, err
	}
	var err error
	if u.Scopes, err = codec.DecodeScopes([]byte(scopes)); err != nil {
		return store.User{}, err
	}
	u.Disabled = disabled != 0
	u.CreatedAt, u.UpdatedAt = fromMicros(created), fromMicros(updat)
	return u, nil
}

// CreateUser stores a new user in u.Tenant (empty: the default tenant);
// an existing ID, or a Username the tenant has, is store.ErrConflict, a
// tenant that does not exist store.ErrNotFound. Usernames are compared
// byte for byte.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	const op = "create user"
	tenant, err := store.TenantOrDefault(u.Tenant)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	scopes, err := codec.EncodeScopes(u.Scopes)
	if err != nil {
		return err
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO users (id, tenant, username, password_hash, scopes, disabled, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		u.ID, tenant, u.Username, u.PasswordHash, scopes, boolInt(u.Disabled), micros(u.CreatedAt), micros(u.UpdatedAt))
	if err != nil {
		return wrapInTenant(ctx, op, tenant, err)
	}
	return nil
}

// GetUser returns the user with id, or store.ErrNotFound.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, selectUser+` WHERE id = ?`, id))
	if err != nil {
		return store.User{}, wrap(ctx, "get user", err)
	}
	return u, nil
}

// GetUserByName returns the user of tenant with username, or
// store.ErrNotFound.
func (s *Store) GetUserByName(ctx context.Context, tenant, username string) (store.User, error) {
	const op = "get user"
	if err := tenantArg(op, tenant); err != nil {
		return store.User{}, err
	}
	u, err := scanUser(s.getUser.QueryRowContext(ctx, tenant, username))
	if err != nil {
		return store.User{}, wrap(ctx, op, err)
	}
	return u, nil
}

// ListUsers returns every user of every tenant, ordered by CreatedAt, then
// ID.
func (s *Store) ListUsers(ctx context.Context) ([]store.User, error) {
	rows, err := s.r.QueryContext(ctx, selectUser+` ORDER BY created_at, id`)
	return collect(ctx, "list users", rows, err, scanUser)
}

// ListUsersIn returns the users of tenant, ordered by CreatedAt, then ID.
func (s *Store) ListUsersIn(ctx context.Context, tenant string) ([]store.User, error) {
	const op = "list users"
	if err := tenantArg(op, tenant); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, selectUser+` WHERE tenant = ? ORDER BY created_at, id`, tenant)
	return collect(ctx, op, rows, err, scanUser)
}

// UpdateUser replaces the Username, PasswordHash, Scopes, Disabled and
// UpdatedAt of the user with u.ID (Tenant and CreatedAt are kept). A
// Username taken by another user of its tenant is store.ErrConflict.
func (s *Store) UpdateUser(ctx context.Context, u store.User) error {
	scopes, err := codec.EncodeScopes(u.Scopes)
	if err != nil {
		return err
	}
	res, err := s.w.ExecContext(ctx, `UPDATE users SET username = ?, password_hash = ?, scopes = ?, disabled = ?, updated_at = ?
		WHERE id = ?`,
		u.Username, u.PasswordHash, scopes, boolInt(u.Disabled), micros(u.UpdatedAt), u.ID)
	return affected(ctx, "update user", res, err)
}

// DeleteUser removes a user, or returns store.ErrNotFound.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, id)
	return affected(ctx, "delete user", res, err)
}

// Signing keys.

// PutSigningKey stores a new key; an existing KID is store.ErrConflict (a
// key is never overwritten).
func (s *Store) PutSigningKey(ctx context.Context, k store.SigningKey) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO signing_keys (kid, alg, sealed, public_jwk, publish_at, active_at, retire_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		k.KID, k.Alg, codec.NonNil(k.Sealed), codec.NonNil(k.PublicJWK), micros(k.PublishAt), micros(k.ActiveAt),
		nullMicros(k.RetireAt), micros(k.CreatedAt))
	if err != nil {
		return wrap(ctx, "put signing key", err)
	}
	return nil
}

// ListSigningKeys returns every key, ordered by CreatedAt, then KID.
func (s *Store) ListSigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT kid, alg, sealed, public_jwk, publish_at, active_at, retire_at, created_at
		FROM signing_keys ORDER BY created_at, kid`)
	return collect(ctx, "list signing keys", rows, err, func(row scanner) (store.SigningKey, error) {
		var (
			k                         store.SigningKey
			publish, active, creation int64
			retire                    sql.NullInt64
		)
		err := row.Scan(&k.KID, &k.Alg, &k.Sealed, &k.PublicJWK, &publish, &active, &retire, &creation)
		k.PublishAt, k.ActiveAt, k.CreatedAt = fromMicros(publish), fromMicros(active), fromMicros(creation)
		k.RetireAt = fromNullMicros(retire)
		return k, err
	})
}

// RetireSigningKey sets RetireAt of the key kid; a zero at clears it.
func (s *Store) RetireSigningKey(ctx context.Context, kid string, at time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE signing_keys SET retire_at = ? WHERE kid = ?`, nullMicros(at), kid)
	return affected(ctx, "retire signing key", res, err)
}

// DeleteSigningKey removes a key, or returns store.ErrNotFound.
func (s *Store) DeleteSigningKey(ctx context.Context, kid string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM signing_keys WHERE kid = ?`, kid)
	return affected(ctx, "delete signing key", res, err)
}

// Refresh tokens.

// refreshColumns are a refresh token's columns, in the order scanRefresh
// reads and insertRefreshArgs writes them.
const refreshColumns = `digest, family_id, generation, client_id, subject, scopes, issued_at, origin_at, expires_at, used_at, revoked`

const selectRefresh = `SELECT ` + refreshColumns + ` FROM refresh_tokens`

// selectRotated is selectRefresh with, last, the Before of the subject
// revocation of the token's subject under the issuer ?2 (NULL if none; the
// primary key (issuer, jti, subject) allows one at most).
const selectRotated = `SELECT ` + refreshColumns + `,
		(SELECT r.before_at FROM revocations AS r WHERE r.issuer = ?2 AND r.jti = '' AND r.subject = refresh_tokens.subject)
	FROM refresh_tokens WHERE digest = ?1`

func scanRefresh(row scanner, more ...any) (store.RefreshToken, int64, error) {
	var (
		t                       store.RefreshToken
		gen                     int64
		scopes                  string
		issued, origin, expires int64
		used                    sql.NullInt64
		revoked                 int
	)
	dest := append([]any{&t.Digest, &t.FamilyID, &gen, &t.ClientID, &t.Subject, &scopes, &issued, &origin, &expires, &used, &revoked}, more...)
	if err := row.Scan(dest...); err != nil {
		return store.RefreshToken{}, 0, err
	}
	var err error
	if t.Scopes, err = codec.DecodeScopes([]byte(scopes)); err != nil {
		return store.RefreshToken{}, 0, err
	}
	t.IssuedAt, t.OriginAt, t.ExpiresAt, t.UsedAt = fromMicros(issued), fromMicros(origin), fromMicros(expires), fromNullMicros(used)
	t.Revoked = revoked != 0
	return t, gen, nil
}

const insertRefresh = `INSERT INTO refresh_tokens (` + refreshColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func insertRefreshArgs(t store.RefreshToken, gen int64) ([]any, error) {
	scopes, err := codec.EncodeScopes(t.Scopes)
	if err != nil {
		return nil, err
	}
	return []any{codec.NonNil(t.Digest), t.FamilyID, gen, t.ClientID, t.Subject, scopes,
		micros(t.IssuedAt), micros(t.OriginAt), micros(t.ExpiresAt), nullMicros(t.UsedAt), boolInt(t.Revoked)}, nil
}

// CreateRefreshToken stores the first token of a new family; a zero
// OriginAt is stored as IssuedAt. An existing Digest, or a FamilyID
// already in use, is store.ErrConflict.
func (s *Store) CreateRefreshToken(ctx context.Context, t store.RefreshToken) error {
	if t.OriginAt.IsZero() {
		t.OriginAt = t.IssuedAt
	}
	args, err := insertRefreshArgs(t, 0)
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, insertRefresh, args...); err != nil {
		return wrap(ctx, "create refresh token", err)
	}
	return nil
}

// RotateRefreshToken implements [store.RefreshTokens.RotateRefreshToken]: in one
// transaction it marks old used at now and stores next in old's family
// (next.FamilyID and next.OriginAt are old's). It returns old as it was
// before, also with ErrReused, ErrRevoked, ErrSubjectRevoked and
// ErrExpired; a spent old is checked first, so a replay is always reported
// and always revokes the family. old is expired when now is at or past its
// ExpiresAt. If next's Digest exists it returns store.ErrConflict and
// spends nothing. The transaction is IMMEDIATE, holding the write lock
// from its start, so no revocation commits between the check and the
// rotation.
func (s *Store) RotateRefreshToken(ctx context.Context, issuer string, old []byte, next store.RefreshToken, now time.Time) (store.RefreshToken, error) {
	const op = "rotate refresh token"
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	defer tx.Rollback()
	var revokedBefore sql.NullInt64
	cur, gen, err := scanRefresh(tx.QueryRowContext(ctx, selectRotated, old, issuer), &revokedBefore)
	if err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	if err := store.CheckRotation(cur, fromNullMicros(revokedBefore), now); err != nil {
		if errors.Is(err, store.ErrReused) || errors.Is(err, store.ErrSubjectRevoked) {
			if _, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET revoked = 1 WHERE family_id = ?`, cur.FamilyID); err != nil {
				return store.RefreshToken{}, wrap(ctx, op, err)
			}
			if err := tx.Commit(); err != nil {
				return store.RefreshToken{}, wrap(ctx, op, err)
			}
		}
		return cur, fmt.Errorf("%s: %w", op, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE refresh_tokens SET used_at = ? WHERE digest = ?`, micros(now), old); err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	next.FamilyID, next.OriginAt = cur.FamilyID, cur.OriginAt
	args, err := insertRefreshArgs(next, gen+1)
	if err != nil {
		return store.RefreshToken{}, err
	}
	if _, err := tx.ExecContext(ctx, insertRefresh, args...); err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return store.RefreshToken{}, wrap(ctx, op, err)
	}
	return cur, nil
}

// GetRefreshToken returns the token with digest, or store.ErrNotFound.
func (s *Store) GetRefreshToken(ctx context.Context, digest []byte) (store.RefreshToken, error) {
	t, _, err := scanRefresh(s.getRefresh.QueryRowContext(ctx, digest))
	if err != nil {
		return store.RefreshToken{}, wrap(ctx, "get refresh token", err)
	}
	return t, nil
}

// RevokeRefreshFamily revokes every token of digest's family, or returns
// store.ErrNotFound.
func (s *Store) RevokeRefreshFamily(ctx context.Context, digest []byte) error {
	res, err := s.w.ExecContext(ctx, `UPDATE refresh_tokens SET revoked = 1
		WHERE family_id = (SELECT family_id FROM refresh_tokens WHERE digest = ?)`, digest)
	return affected(ctx, "revoke refresh family", res, err)
}

// DeleteExpiredRefreshTokens removes the tokens whose ExpiresAt is at or
// before now and returns how many.
func (s *Store) DeleteExpiredRefreshTokens(ctx context.Context, now time.Time) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM refresh_tokens WHERE expires_at <= ?`, micros(now))
	if err != nil {
		return 0, wrap(ctx, "delete expired refresh tokens", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrap(ctx, "delete expired refresh tokens", err)
	}
	return int(n), nil
}

// Revocations.

// DeleteExpiredRevocations removes the jti revocations whose Until is at or
// before now and the subject revocations whose Before is before
// subjectsBefore (zero: none) and whose Until, if any, is at or before now,
// and returns how many.
func (s *Store) DeleteExpiredRevocations(ctx context.Context, now, subjectsBefore time.Time) (int, error) {
	cutoff := int64(math.MinInt64)
	if !subjectsBefore.IsZero() {
		cutoff = micros(subjectsBefore)
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM revocations WHERE (jti <> '' AND until_at <= ?1)
		OR (subject <> '' AND before_at < ?2 AND (until_at IS NULL OR until_at <= ?1))`,
		micros(now), cutoff)
	if err != nil {
		return 0, wrap(ctx, "delete expired revocations", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrap(ctx, "delete expired revocations", err)
	}
	return int(n), nil
}

// AddRevocation records r, which names exactly one of JTI (with Until) and
// Subject (with Before, and optionally Until). It is idempotent: adding the
// same issuer and jti or subject again keeps one record, with the later
// Until and Before (a NULL counting as earliest) and the first CreatedAt.
func (s *Store) AddRevocation(ctx context.Context, r store.Revocation) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("add revocation: %w", err)
	}
	// SQLite's max() of a NULL is NULL: coalesce keeps whichever is set.
	_, err := s.w.ExecContext(ctx, `INSERT INTO revocations (issuer, jti, subject, until_at, before_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (issuer, jti, subject) DO UPDATE SET
			until_at = max(coalesce(until_at, excluded.until_at), coalesce(excluded.until_at, until_at)),
			before_at = max(coalesce(before_at, excluded.before_at), coalesce(excluded.before_at, before_at))`,
		r.Issuer, r.JTI, r.Subject, nullMicros(r.Until), nullMicros(r.Before), micros(r.CreatedAt))
	if err != nil {
		return wrap(ctx, "add revocation", err)
	}
	return nil
}

// Revocations returns the revocations in force at now: jti revocations
// whose Until is after now, and every subject revocation; ordered by
// CreatedAt, then Issuer, JTI and Subject.
func (s *Store) Revocations(ctx context.Context, now time.Time) ([]store.Revocation, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT issuer, jti, subject, until_at, before_at, created_at FROM revocations
		WHERE subject <> '' OR until_at > ?
		ORDER BY created_at, issuer, jti, subject`, micros(now))
	return collect(ctx, "revocations", rows, err, func(row scanner) (store.Revocation, error) {
		var (
			r             store.Revocation
			until, before sql.NullInt64
			created       int64
		)
		err := row.Scan(&r.Issuer, &r.JTI, &r.Subject, &until, &before, &created)
		r.Until, r.Before, r.CreatedAt = fromNullMicros(until), fromNullMicros(before), fromMicros(created)
		return r, err
	})
}
