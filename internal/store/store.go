// Package store is keygate's durable state, one small interface per
// domain — [Tenants], [Clients], [Users], [SigningKeys], [RefreshTokens],
// [Revocations], [TransitKeys], [Secrets] and the [AuditLog] — and
// [Store], all of them together. Two backends implement Store and pass one shared test
// suite: SQLite (the embedded default, one file in the data directory)
// and PostgreSQL (a fleet).
//
// Secrets never reach the store in the clear: signing keys, transit key
// versions and tenants' data keys arrive already sealed by the keyring,
// secrets' values and metadata sealed by the KV engine, client secrets
// and refresh tokens only as digests, passwords only as Argon2id hashes.
// A transit key's configuration, a tenant's KV mount configuration and an
// audit record are opaque bytes here; the engines and the audit log give
// them meaning.
//
// # Tenants
//
// Clients, users, transit keys and secrets belong to a [Tenant];
// [DefaultTenant] always exists (data stored before tenants is its). A
// user's name is unique within its tenant, and so is a transit key's and
// a secret's path; nothing of one tenant is found under another tenant's
// name. Names follow
// [ValidTenantName] in every backend.
//
// # Transit keys
//
// A [TransitKey] is stored as one row for the key and one row per
// [TransitKeyVersion], never as one record that grows with every rotation.
// Nodes of a fleet change a key with optimistic concurrency:
// [TransitKeys.UpdateTransitKey] compares the Revision it was given, and
// [TransitKeys.AddTransitKeyVersion] adds version n only while n-1 is the
// latest, so of nodes rotating a key at once exactly one wins; the others
// get [ErrConflict], re-read the key and decide again.
//
// # Secrets
//
// A secret path of the KV engine is one row, [SecretMeta], whose metadata
// the engine seals, and one row per version's value, [SecretValue]; the
// store sees paths and version numbers, never a value or the custom
// metadata. [Secrets.PutSecret] changes a path in one transaction,
// compared with the Revision its caller read, as a transit key's update
// is: of nodes writing one path at once, one wins.
//
// # Audit log
//
// Each node numbers the records of its own audit log;
// [AuditLog.AppendAudit] writes a batch of them all or nothing, and never
// a (Node, Seq) twice, so a record acknowledged as stored is stored once,
// where it was numbered.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Errors callers branch on with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
	// ErrReused: a refresh token that was already spent was presented
	// again. The store has revoked its whole family by the time it says so.
	ErrReused = errors.New("refresh token reused")
	// ErrRevoked: the refresh token, or its family, is revoked.
	ErrRevoked = errors.New("refresh token revoked")
	// ErrSubjectRevoked: the refresh token's subject was revoked
	// ("everything issued before T") after its family began. The store has
	// revoked the whole family by the time it says so. It is also
	// ErrRevoked.
	ErrSubjectRevoked = fmt.Errorf("%w: its subject was revoked after its family began", ErrRevoked)
	// ErrExpired: the refresh token is past its expiry.
	ErrExpired = errors.New("refresh token expired")
	// ErrUnavailable: the store could not be reached or did not answer in
	// time; nothing was written, or the write's outcome is unknown to the
	// caller only if the connection broke after it was sent. The
	// operation may be retried later.
	ErrUnavailable = errors.New("store unavailable")
	// ErrNotEmpty: a tenant still has clients, users, transit keys or
	// secrets, so it was not deleted.
	ErrNotEmpty = errors.New("not empty")
	// ErrInvalid: an argument no backend accepts — a tenant name
	// ValidTenantName refuses, an empty data key or key version, a
	// version out of range.
	// Nothing was written. The error's text says what was wrong.
	ErrInvalid = errors.New("invalid argument")
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

// InternalKeyPrefix begins the names of transit key rows that the transit
// layer keeps for itself (a tenant's wrapping key), outside the grammar of
// the key names a request can use: they do not keep their tenant from
// being deleted, and are deleted with it.
const InternalKeyPrefix = "@"

// InternalKey reports whether a transit key row's name is an internal one.
func InternalKey(name string) bool { return strings.HasPrefix(name, InternalKeyPrefix) }

// DeletableTenant checks a DeleteTenant argument: a valid name, and not
// DefaultTenant. Its error wraps ErrInvalid.
func DeletableTenant(name string) error {
	if name == DefaultTenant {
		return fmt.Errorf("%w: the %s tenant cannot be deleted", ErrInvalid, DefaultTenant)
	}
	return ValidTenantName(name)
}

// Tenant is an isolated namespace of clients, users and transit keys.
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
		return errors.New("a revocation needs exactly one of JTI and Subject")
	case r.JTI != "" && r.Until.IsZero():
		return errors.New("a jti revocation needs Until")
	case r.Subject != "" && r.Before.IsZero():
		return errors.New("a subject revocation needs Before")
	}
	return nil
}

// TransitKey is a named, versioned key of the transit engine, without its
// versions' key material (TransitKeyVersion).
type TransitKey struct {
	Tenant string
	Name   string // unique within its tenant; not empty
	Type   string // the key type, as the transit engine names it; not empty
	// Config is the transit engine's settings for the key, as JSON; the
	// store keeps it as opaque bytes.
	Config []byte
	// Latest is the newest version; MinAvailable the oldest one kept (the
	// versions below it were trimmed). 1 <= MinAvailable <= Latest.
	Latest       int
	MinAvailable int
	// Revision counts the key's changes: 1 when created, one more with
	// each UpdateTransitKey, AddTransitKeyVersion and TrimTransitKey.
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TransitKeyVersion is one version of a transit key.
type TransitKeyVersion struct {
	Tenant  string
	Name    string
	Version int    // 1, 2, ...
	Sealed  []byte // the key material, sealed by the caller; not empty
	// CreatedAt is when the version was made (by rotation, or import).
	CreatedAt time.Time
}

// CheckTransitKeyName checks a transit key's tenant and name arguments:
// a valid tenant and a name that is not empty. Its error wraps ErrInvalid.
func CheckTransitKeyName(tenant, name string) error {
	if err := ValidTenantName(tenant); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%w: a transit key needs a name", ErrInvalid)
	}
	return nil
}

// Validate checks a version before it is stored: its key, a Version of 1
// or more and Sealed key material. Its error wraps ErrInvalid.
func (v TransitKeyVersion) Validate() error {
	if err := CheckTransitKeyName(v.Tenant, v.Name); err != nil {
		return err
	}
	switch {
	case v.Version < 1:
		return fmt.Errorf("%w: transit key %q: version %d, want 1 or more", ErrInvalid, v.Name, v.Version)
	case len(v.Sealed) == 0:
		return fmt.Errorf("%w: transit key %q version %d: no key material", ErrInvalid, v.Name, v.Version)
	}
	return nil
}

// NewTransitKey is what CreateTransitKey stores of its arguments, the same
// in every backend: k with Latest first.Version, MinAvailable 1 if unset,
// and Revision 1; first in k's tenant and name. It fails, wrapping
// ErrInvalid, if k has no name or type, if first is not a valid version,
// or if MinAvailable is above first.Version.
func NewTransitKey(k TransitKey, first TransitKeyVersion) (TransitKey, TransitKeyVersion, error) {
	first.Tenant, first.Name = k.Tenant, k.Name
	if err := first.Validate(); err != nil {
		return TransitKey{}, TransitKeyVersion{}, err
	}
	if k.Type == "" {
		return TransitKey{}, TransitKeyVersion{}, fmt.Errorf("%w: transit key %q needs a type", ErrInvalid, k.Name)
	}
	k.Latest, k.Revision = first.Version, 1
	if k.MinAvailable == 0 {
		k.MinAvailable = 1
	}
	if k.MinAvailable < 1 || k.MinAvailable > k.Latest {
		return TransitKey{}, TransitKeyVersion{}, fmt.Errorf("%w: transit key %q: minimum available version %d, want 1 to %d",
			ErrInvalid, k.Name, k.MinAvailable, k.Latest)
	}
	return k, first, nil
}

// NewRestoredTransitKey is what RestoreTransitKey stores: versions must be
// consecutive and ascending, each valid; they become the key's (MinAvailable
// the first, Latest the last), and Revision is 1. Its error wraps
// ErrInvalid.
func NewRestoredTransitKey(k TransitKey, versions []TransitKeyVersion) (TransitKey, []TransitKeyVersion, error) {
	if len(versions) == 0 {
		return TransitKey{}, nil, fmt.Errorf("%w: transit key %q: no version to restore", ErrInvalid, k.Name)
	}
	out := make([]TransitKeyVersion, len(versions))
	for i, v := range versions {
		v.Tenant, v.Name = k.Tenant, k.Name
		if err := v.Validate(); err != nil {
			return TransitKey{}, nil, err
		}
		if i > 0 && v.Version != out[i-1].Version+1 {
			return TransitKey{}, nil, fmt.Errorf("%w: transit key %q: version %d after %d", ErrInvalid, k.Name, v.Version, out[i-1].Version)
		}
		out[i] = v
	}
	k.MinAvailable = out[0].Version
	k, _, err := NewTransitKey(k, out[len(out)-1])
	if err != nil {
		return TransitKey{}, nil, err
	}
	return k, out, nil
}

// CheckTrim states whether k, as stored, may be trimmed to minAvailable:
// not above its Latest (that version is always kept) nor below its
// MinAvailable (those versions are gone). Its error wraps ErrInvalid.
func (k TransitKey) CheckTrim(minAvailable int) error {
	if minAvailable > k.Latest || minAvailable < k.MinAvailable {
		return fmt.Errorf("%w: transit key %q: cannot keep versions from %d: it has versions %d to %d",
			ErrInvalid, k.Name, minAvailable, k.MinAvailable, k.Latest)
	}
	return nil
}

// AuditEntry is one record of a node's audit log.
type AuditEntry struct {
	Node string // the node that wrote it; not empty
	Seq  uint64 // its number in the node's log; at most math.MaxInt64
	Line []byte // one JSON record, opaque here; not empty
}

// Validate checks an entry before it is stored: a Node, a Seq a backend
// can keep (an int64) and a Line. Its error wraps ErrInvalid.
func (e AuditEntry) Validate() error {
	switch {
	case e.Node == "":
		return fmt.Errorf("%w: an audit entry needs a node", ErrInvalid)
	case e.Seq > math.MaxInt64:
		return fmt.Errorf("%w: audit entry %d of node %q: seq above %d", ErrInvalid, e.Seq, e.Node, int64(math.MaxInt64))
	case len(e.Line) == 0:
		return fmt.Errorf("%w: audit entry %d of node %q is empty", ErrInvalid, e.Seq, e.Node)
	}
	return nil
}

// CheckAuditRead checks the arguments of AuditEntries: a node and a limit
// of 1 or more. Its error wraps ErrInvalid. ok is false when fromSeq is
// above every Seq a store keeps, so that nothing is to be read.
func CheckAuditRead(node string, fromSeq uint64, limit int) (ok bool, err error) {
	switch {
	case node == "":
		return false, fmt.Errorf("%w: audit entries of no node", ErrInvalid)
	case limit < 1:
		return false, fmt.Errorf("%w: audit entries: limit %d, want 1 or more", ErrInvalid, limit)
	}
	return fromSeq <= math.MaxInt64, nil
}

// Store is the durable state: every domain's interface and the store's
// lifecycle. The backends implement all of it and storetest checks all
// of it; the node that opens a store owns it whole. Any other consumer
// takes only the domain interface it needs (or a smaller one of its own),
// so a change to one domain touches that domain's users only.
//
// Every method of every domain is safe for concurrent use and either
// completes or leaves nothing half-written; a write that returned nil is
// durable (it survives kill -9). A method that takes a tenant name refuses
// one ValidTenantName refuses with ErrInvalid.
type Store interface {
	Tenants
	Clients
	Users
	SigningKeys
	RefreshTokens
	Revocations
	TransitKeys
	Secrets
	AuditLog
	Rekeys
	TenantRekeys

	// Close releases the store's connections or file; no method may be
	// called after it.
	Close() error
}

// Tenants stores the tenants themselves and each one's sealed data key.
// What a tenant holds is stored by Clients, Users, TransitKeys and
// Secrets.
type Tenants interface {
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
	// DeleteTenant removes a tenant that has no clients, users, transit
	// keys or secrets (ErrNotEmpty otherwise), and with it, in the same
	// transaction, its internal transit key rows (InternalKeyPrefix) and
	// its KV mount configuration, which do not keep it from being
	// deleted. DefaultTenant is never deleted
	// (ErrInvalid).
	DeleteTenant(ctx context.Context, name string) error
}

// Clients stores OAuth clients, each in one tenant, found by an id unique
// across tenants.
type Clients interface {
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
}

// Users stores the accounts that log in with a password, each in one
// tenant, found by an id unique across tenants or by a username unique
// within the tenant.
type Users interface {
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
}

// SigningKeys stores the token service's sealed signing keys through
// their life: published, signing, retired, deleted.
type SigningKeys interface {
	PutSigningKey(ctx context.Context, k SigningKey) error
	ListSigningKeys(ctx context.Context) ([]SigningKey, error)
	// RetireSigningKey sets RetireAt on a key.
	RetireSigningKey(ctx context.Context, kid string, at time.Time) error
	// DeleteSigningKey removes a key (after retirement has passed).
	DeleteSigningKey(ctx context.Context, kid string) error
}

// RefreshTokens stores refresh tokens by digest, in families that rotate
// one token into the next and are revoked whole when one is reused.
type RefreshTokens interface {
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
}

// Revocations stores the revocations of access tokens, by jti or by
// subject, until they may be forgotten.
type Revocations interface {
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
}

// TransitKeys stores the transit engine's keys, each in one tenant, and
// their sealed versions; every change is checked against the key's
// Revision or Latest, so that of nodes changing a key at once one wins.
type TransitKeys interface {
	// CreateTransitKey stores a new key and its first version at once
	// (see NewTransitKey): version 1, or for an imported key the version
	// given. A name the tenant has is ErrConflict, a tenant that does not
	// exist ErrNotFound.
	CreateTransitKey(ctx context.Context, k TransitKey, first TransitKeyVersion) error
	// RestoreTransitKey stores a key with every version it has (see
	// NewRestoredTransitKey) in one transaction: all or nothing. A name the
	// tenant has is ErrConflict, a tenant that does not exist ErrNotFound.
	RestoreTransitKey(ctx context.Context, k TransitKey, versions []TransitKeyVersion) error
	// GetTransitKey returns the key and its versions from MinAvailable
	// to Latest, ascending, as of one moment.
	GetTransitKey(ctx context.Context, tenant, name string) (TransitKey, []TransitKeyVersion, error)
	// GetTransitKeyVersion returns one version of a key; a version
	// trimmed or not made yet is ErrNotFound.
	GetTransitKeyVersion(ctx context.Context, tenant, name string, version int) (TransitKeyVersion, error)
	// ListTransitKeys returns the names of the tenant's keys, sorted.
	ListTransitKeys(ctx context.Context, tenant string) ([]string, error)
	// UpdateTransitKey replaces the Config and UpdatedAt of the key if
	// its stored Revision is k.Revision, and makes that k.Revision+1;
	// another Revision is ErrConflict (the key changed since it was read).
	UpdateTransitKey(ctx context.Context, k TransitKey) error
	// AddTransitKeyVersion stores version v.Version of the key and makes
	// it the Latest (UpdatedAt becomes v.CreatedAt, Revision one more) if
	// the Latest is v.Version-1; otherwise it is ErrConflict (another
	// node rotated first) and nothing is written.
	AddTransitKeyVersion(ctx context.Context, v TransitKeyVersion) error
	// TrimTransitKey deletes the versions below minAvailable and sets
	// MinAvailable (Revision one more); minAvailable above Latest or
	// below MinAvailable is ErrInvalid (see TransitKey.CheckTrim).
	TrimTransitKey(ctx context.Context, tenant, name string, minAvailable int) error
	// DeleteTransitKey deletes the key and every version of it if its
	// stored Revision is revision; another is ErrConflict (the key changed
	// since it was read, and what the deletion was decided on may have
	// too: deletion_allowed) and nothing is deleted.
	DeleteTransitKey(ctx context.Context, tenant, name string, revision int64) error
}

// AuditLog stores the audit logs of the nodes, each a sequence of records
// its node numbers.
type AuditLog interface {
	// AppendAudit stores entries all or nothing (see
	// AuditEntry.Validate); an entry whose Node and Seq are stored
	// already, or twice among entries, is ErrConflict and nothing of the
	// batch is written. No entries is nothing to do.
	AppendAudit(ctx context.Context, entries []AuditEntry) error
	// AuditEntries returns up to limit of node's entries from fromSeq
	// on, ascending by Seq.
	AuditEntries(ctx context.Context, node string, fromSeq uint64, limit int) ([]AuditEntry, error)
	// AuditNodes returns the nodes that have audit entries, sorted.
	AuditNodes(ctx context.Context) ([]string, error)
}
