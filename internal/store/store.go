// Package store is keygate's durable state behind one interface: tenants,
// OAuth clients, users, signing keys, refresh tokens and revocations. Two
// backends implement it and pass one shared test suite: SQLite (the
// embedded default, one file in the data directory) and PostgreSQL (a
// fleet).
//
// Secrets never reach the store in the clear: signing keys and tenants'
// data keys arrive already sealed by the keyring, client secrets and
// refresh tokens only as digests, passwords only as Argon2id hashes.
//
// # Tenants
//
// Clients and users belong to a [Tenant]; [DefaultTenant] always exists
// (data stored before tenants is its). A user's name is unique within its
// tenant; nothing of one tenant is found under another tenant's name.
// Names follow [ValidTenantName] in every backend.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors callers branch on with errors.Is.
var (
	ErrNotFound = errors.New("store: not found")
	ErrConflict = errors.New("store: already exists")
	// ErrReused: a refresh token that was already spent was presented
	// again. The store has revoked its whole family by the time it says so.
	ErrReused = errors.New("store: refresh token reused")
	// ErrRevoked: the refresh token, or its family, is revoked.
	ErrRevoked = errors.New("store: refresh token revoked")
	// ErrSubjectRevoked: the refresh token's subject was revoked
	// ("everything issued before T") after its family began. The store has
	// revoked the whole family by the time it says so. It is also
	// ErrRevoked.
	ErrSubjectRevoked = fmt.Errorf("%w: its subject was revoked after its family began", ErrRevoked)
	// ErrExpired: the refresh token is past its expiry.
	ErrExpired = errors.New("store: refresh token expired")
	// ErrUnavailable: the store could not be reached or did not answer in
	// time; nothing was written, or the write's outcome is unknown to the
	// caller only if the connection broke after it was sent. The
	// operation may be retried later.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrNotEmpty: a tenant still has clients or users, so it was not
	// deleted.
	ErrNotEmpty = errors.New("store: not empty")
	// ErrInvalid: an argument no backend accepts — a tenant name
	// ValidTenantName refuses, an empty data key.
	// Nothing was written. The error's text says what was wrong.
	ErrInvalid = errors.New("store: invalid argument")
)

// DefaultTenant is the tenant that always exists and cannot be deleted.
// Clients and users created without a tenant are its, and so is everything
// stored before tenants were.
const DefaultTenant = "default"

// MaxTenantName is the longest tenant name, in bytes.
const MaxTenantName = 64

// ValidTenantName checks that name can name a tenant: 1 to 64 characters of
// a-z, 0-9, '_' and '-', the first a letter or a digit. Its error wraps
// ErrInvalid. Every backend refuses a tenant argument this refuses.
func ValidTenantName(name string) error {
	if len(name) == 0 || len(name) > MaxTenantName {
		return fmt.Errorf("%w: a tenant name is 1 to %d characters, not %d", ErrInvalid, MaxTenantName, len(name))
	}
	for i := range len(name) {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return fmt.Errorf("%w: tenant name %q: only a-z, 0-9, '_' and '-', starting with a letter or a digit", ErrInvalid, name)
		}
	}
	return nil
}

// TenantOrDefault is the tenant a new client or user is created in: tenant,
// or DefaultTenant if it is empty. It fails as ValidTenantName does.
func TenantOrDefault(tenant string) (string, error) {
	if tenant == "" {
		return DefaultTenant, nil
	}
	return tenant, ValidTenantName(tenant)
}

// DeletableTenant checks a DeleteTenant argument: a valid name, and not
// DefaultTenant. Its error wraps ErrInvalid.
func DeletableTenant(name string) error {
	if name == DefaultTenant {
		return fmt.Errorf("%w: the %s tenant cannot be deleted", ErrInvalid, DefaultTenant)
	}
	return ValidTenantName(name)
}

// Tenant is an isolated namespace of clients and users.
type Tenant struct {
	Name string // see ValidTenantName
	// DataKey is the tenant's data key sealed by the keyring; the store
	// never sees it in the clear. Nil until set (SetTenantDataKey).
	DataKey   []byte
	CreatedAt time.Time
}

// Client is an OAuth 2.0 client (RFC 6749 §2).
type Client struct {
	ID           string // unique across tenants
	Tenant       string // empty on create: DefaultTenant; fixed once created
	Name         string
	SecretDigest []byte   // SHA-256 of a high-entropy secret; compared in constant time
	Scopes       []string // scopes it may be granted
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// User is an account that logs in with a password.
type User struct {
	ID           string // unique across tenants
	Tenant       string // empty on create: DefaultTenant; fixed once created
	Username     string // unique within its tenant
	PasswordHash string // PHC-format Argon2id hash
	Scopes       []string
	Disabled     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// SigningKey is a token-signing key. Sealed is the private key encrypted by
// the keyring; the store never sees it in the clear. A key is published in
// the JWKS from PublishAt, signs from ActiveAt, and is dropped from the JWKS
// after RetireAt (when every token it signed has expired).
type SigningKey struct {
	KID       string
	Alg       string
	Sealed    []byte
	PublicJWK []byte // the public JWK, for the JWKS without unsealing
	PublishAt time.Time
	ActiveAt  time.Time
	RetireAt  time.Time // zero: not scheduled for retirement
	CreatedAt time.Time
}

// RefreshToken is the stored form of an opaque refresh token: only its
// digest is kept. Tokens rotated from one another share a FamilyID and an
// OriginAt.
type RefreshToken struct {
	Digest   []byte // SHA-256 of the token
	FamilyID string
	ClientID string
	Subject  string
	Scopes   []string
	IssuedAt time.Time
	// OriginAt is when the family began: the IssuedAt of its first token
	// (the login). A subject revocation is compared with it, not with
	// IssuedAt, so that a token rotated after a revocation cannot carry
	// a session that began before it past the revocation.
	OriginAt  time.Time
	ExpiresAt time.Time
	UsedAt    time.Time // zero until rotated
	Revoked   bool
}

// Revocation revokes one access token by jti (Subject empty, Until = its
// exp), or everything issued to Subject before Before (JTI empty).
//
// Until is when the revocation may be forgotten because every token it
// refuses has expired anyway: for a jti, the token's expiry (required);
// for a subject, optional, a time to keep it at least until, past the
// retention every subject revocation gets (see DeleteExpiredRevocations) —
// for tokens of an issuer that may live longer than that.
type Revocation struct {
	Issuer    string
	JTI       string
	Subject   string
	Until     time.Time // jti: when the token expires anyway; subject: keep at least until (zero: the default retention)
	Before    time.Time // subject revocations: tokens issued before this are revoked
	CreatedAt time.Time
}

// CheckRotation states whether a refresh token may be spent at now, the
// same in every backend, given revokedBefore, the latest Before of the
// subject revocations of cur.Subject (zero if none): ErrReused if it was
// spent already (the backend then revokes its family), else ErrRevoked,
// else ErrSubjectRevoked if its family began before revokedBefore (the
// backend then revokes its family), else ErrExpired at or after its
// expiry, compared at the stores' microsecond precision; nil if it may.
func CheckRotation(cur RefreshToken, revokedBefore, now time.Time) error {
	switch {
	case !cur.UsedAt.IsZero():
		return ErrReused
	case cur.Revoked:
		return ErrRevoked
	case cur.OriginAt.Before(revokedBefore):
		return ErrSubjectRevoked
	case !now.Truncate(time.Microsecond).Before(cur.ExpiresAt):
		return ErrExpired
	}
	return nil
}

// Validate checks that r is one kind of revocation with its time: a jti
// with Until, or a subject with Before. Backends refuse anything else.
func (r Revocation) Validate() error {
	switch {
	case (r.JTI == "") == (r.Subject == ""):
		return errors.New("store: a revocation needs exactly one of JTI and Subject")
	case r.JTI != "" && r.Until.IsZero():
		return errors.New("store: a jti revocation needs Until")
	case r.Subject != "" && r.Before.IsZero():
		return errors.New("store: a subject revocation needs Before")
	}
	return nil
}

// Store is the durable state. Every method is safe for concurrent use and
// either completes or leaves nothing half-written; a write that returned nil
// is durable (it survives kill -9).
//
// A method that takes a tenant name refuses one ValidTenantName refuses
// with ErrInvalid.
type Store interface {
	// CreateTenant stores a new tenant (its DataKey may be nil); an
	// existing name is ErrConflict.
	CreateTenant(ctx context.Context, t Tenant) error
	GetTenant(ctx context.Context, name string) (Tenant, error)
	// ListTenants returns every tenant, DefaultTenant included, ordered
	// by name.
	ListTenants(ctx context.Context) ([]Tenant, error)
	// SetTenantDataKey sets the tenant's sealed data key while it has
	// none; once set it is ErrConflict, so of nodes racing to set one,
	// one wins and the others re-read it. Empty sealed is ErrInvalid.
	SetTenantDataKey(ctx context.Context, name string, sealed []byte) error
	// DeleteTenant removes a tenant that has no clients or users
	// (ErrNotEmpty otherwise). DefaultTenant is never deleted
	// (ErrInvalid).
	DeleteTenant(ctx context.Context, name string) error

	// CreateClient stores a new client in c.Tenant (empty: DefaultTenant);
	// a tenant that does not exist is ErrNotFound.
	CreateClient(ctx context.Context, c Client) error
	GetClient(ctx context.Context, id string) (Client, error)
	// ListClients returns the clients of every tenant.
	ListClients(ctx context.Context) ([]Client, error)
	// ListClientsIn returns the clients of one tenant (none for a tenant
	// that does not exist).
	ListClientsIn(ctx context.Context, tenant string) ([]Client, error)
	// UpdateClientSecret replaces the secret digest (rotation).
	UpdateClientSecret(ctx context.Context, id string, digest []byte, at time.Time) error
	// UpdateClient replaces the Name, Scopes and UpdatedAt of the client
	// with c.ID (its secret, Tenant and CreatedAt are kept).
	UpdateClient(ctx context.Context, c Client) error
	DeleteClient(ctx context.Context, id string) error

	// CreateUser stores a new user in u.Tenant (empty: DefaultTenant); a
	// tenant that does not exist is ErrNotFound, a Username taken in the
	// tenant ErrConflict.
	CreateUser(ctx context.Context, u User) error
	GetUser(ctx context.Context, id string) (User, error)
	// GetUserByName returns the user of tenant with username.
	GetUserByName(ctx context.Context, tenant, username string) (User, error)
	// ListUsers returns the users of every tenant.
	ListUsers(ctx context.Context) ([]User, error)
	// ListUsersIn returns the users of one tenant (none for a tenant that
	// does not exist).
	ListUsersIn(ctx context.Context, tenant string) ([]User, error)
	// UpdateUser replaces the user's Username, PasswordHash, Scopes,
	// Disabled and UpdatedAt; its Tenant and CreatedAt are kept.
	UpdateUser(ctx context.Context, u User) error
	DeleteUser(ctx context.Context, id string) error

	PutSigningKey(ctx context.Context, k SigningKey) error
	ListSigningKeys(ctx context.Context) ([]SigningKey, error)
	// RetireSigningKey sets RetireAt on a key.
	RetireSigningKey(ctx context.Context, kid string, at time.Time) error
	// DeleteSigningKey removes a key (after retirement has passed).
	DeleteSigningKey(ctx context.Context, kid string) error

	// CreateRefreshToken stores the first token of a new family; a zero
	// OriginAt is taken to be its IssuedAt.
	CreateRefreshToken(ctx context.Context, t RefreshToken) error
	// RotateRefreshToken spends the token with digest old and stores next
	// in the same family, atomically, at time now; next's FamilyID and
	// OriginAt are old's, whatever next says. If old was already spent,
	// it revokes the whole family and returns ErrReused; a revoked or
	// expired old gives ErrRevoked or ErrExpired; an unknown one
	// ErrNotFound. If a subject revocation of old's Subject under issuer
	// (the token service's own, which issued the family) has a Before
	// after the family's OriginAt, it revokes the whole family and returns
	// ErrSubjectRevoked. That check is made in the rotation's transaction;
	// a revocation that commits after it refuses next at its first use,
	// since next carries the family's OriginAt. Revocations of the same
	// subject name under another issuer (an external identity provider's
	// user who happens to share the id) do not touch the family. It
	// returns old's record as it was before spending.
	RotateRefreshToken(ctx context.Context, issuer string, old []byte, next RefreshToken, now time.Time) (RefreshToken, error)
	GetRefreshToken(ctx context.Context, digest []byte) (RefreshToken, error)
	// RevokeRefreshFamily revokes every token of the family of digest.
	RevokeRefreshFamily(ctx context.Context, digest []byte) error
	// DeleteExpiredRefreshTokens removes tokens expired before now and
	// returns how many.
	DeleteExpiredRefreshTokens(ctx context.Context, now time.Time) (int, error)

	AddRevocation(ctx context.Context, r Revocation) error
	// Revocations lists revocations still in force at now (jti revocations
	// whose Until has not passed, and every subject revocation).
	Revocations(ctx context.Context, now time.Time) ([]Revocation, error)
	// DeleteExpiredRevocations removes the jti revocations whose Until is
	// at or before now (the tokens have expired anyway) and the subject
	// revocations whose Before is before subjectsBefore (zero keeps them
	// all) and whose Until, if set, is at or before now; it returns how
	// many. Adding a revocation again keeps the later Until and Before.
	DeleteExpiredRevocations(ctx context.Context, now, subjectsBefore time.Time) (int, error)

	Close() error
}
