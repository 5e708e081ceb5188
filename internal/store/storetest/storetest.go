// Package storetest is the conformance suite every [store.Store] backend
// passes: [Run] exercises each method, [Durability] kills a writer process
// mid-burst and checks that every acknowledged write survived, and the
// Bench functions measure the calls on the token path.
package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// t0 is the suite's "now"; it has microsecond precision, so it round-trips
// exactly.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)

// Run runs the suite: tenants (the default one, names, data keys and the
// race to set one, deletion, clients and users kept apart), round trips,
// not found, conflicts, updates, deletes, list order, refresh rotation
// (success, reuse, revoked, subject revoked since the family's origin,
// expired, unknown, 20 at once), family revocation, cleanup, revocations,
// transit keys (versions, revisions, trimming, 20 rotations and 20 updates
// at once, tenants kept apart), the audit log (order, ranges, a batch with
// one duplicate writing nothing, 20 appends of one batch at once),
// secrets (round trips, revisions, erasing values, lists by prefix in
// pages, mount configurations, 20 writes of one path at once, tenants
// kept apart),
// cancellation and concurrent writers. open
// must return a new, empty store for each call; Run closes it when the
// subtest ends, before open's own t.Cleanup functions run. Subtests run in
// parallel.
//
// The contract it pins down, beyond the interface's comments: times come
// back in UTC truncated to the microsecond; empty scope lists come back
// nil; lists are ordered by creation time, then id (revocations by
// creation time, issuer, jti, subject; tenants and transit key names by
// name); a client or user created without a tenant reads back as the
// default tenant's; a refresh family is started only by
// CreateRefreshToken and extended only by rotation, which carries its
// OriginAt forward (a zero OriginAt at creation is IssuedAt); a token is
// expired at and after its ExpiresAt, and DeleteExpiredRefreshTokens
// removes those expired at now; a spent token presented again is ErrReused
// even once its family is revoked; PutSigningKey never overwrites;
// AddRevocation is idempotent and keeps the later bound; a transit key
// starts at Revision 1 and every change counts it up by one, and so does
// a secret path; a secret path's CreatedAt is kept from its creation.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		f    func(t *testing.T, s store.Store)
	}{
		{"TenantDefault", testTenantDefault},
		{"TenantRoundTrip", testTenantRoundTrip},
		{"TenantNames", testTenantNames},
		{"TenantDataKey", testTenantDataKey},
		{"TenantDataKeyRace", testTenantDataKeyRace},
		{"TenantDelete", testTenantDelete},
		{"TenantClients", testTenantClients},
		{"TenantUsers", testTenantUsers},
		{"TransitRoundTrip", testTransitRoundTrip},
		{"TransitNotFound", testTransitNotFound},
		{"TransitConflict", testTransitConflict},
		{"TransitInvalid", testTransitInvalid},
		{"TransitUpdate", testTransitUpdate},
		{"TransitRotate", testTransitRotate},
		{"TransitRotateConcurrent", testTransitRotateConcurrent},
		{"TransitUpdateConcurrent", testTransitUpdateConcurrent},
		{"TransitTrim", testTransitTrim},
		{"TransitDelete", testTransitDelete},
		{"TransitTenants", testTransitTenants},
		{"TransitRestore", testTransitRestore},
		{"SecretRoundTrip", testSecretRoundTrip},
		{"SecretNotFound", testSecretNotFound},
		{"SecretConflict", testSecretConflict},
		{"SecretErase", testSecretErase},
		{"SecretInvalid", testSecretInvalid},
		{"SecretList", testSecretList},
		{"SecretConfig", testSecretConfig},
		{"SecretTenants", testSecretTenants},
		{"SecretConcurrent", testSecretConcurrent},
		{"RekeyState", testRekeyState},
		{"RekeyRewrap", testRekeyRewrap},
		{"TenantRekeyState", testTenantRekeyState},
		{"TenantSealed", testTenantSealed},
		{"AuditAppend", testAuditAppend},
		{"AuditOrder", testAuditOrder},
		{"AuditConflict", testAuditConflict},
		{"AuditConcurrent", testAuditConcurrent},
		{"AuditInvalid", testAuditInvalid},
		{"ClientRoundTrip", testClientRoundTrip},
		{"ClientNotFound", testClientNotFound},
		{"ClientConflict", testClientConflict},
		{"ClientUpdateSecret", testClientUpdateSecret},
		{"ClientUpdate", testClientUpdate},
		{"ClientDelete", testClientDelete},
		{"ClientList", testClientList},
		{"UserRoundTrip", testUserRoundTrip},
		{"UserNotFound", testUserNotFound},
		{"UserConflict", testUserConflict},
		{"UserUpdate", testUserUpdate},
		{"UserDelete", testUserDelete},
		{"UserList", testUserList},
		{"SigningKeys", testSigningKeys},
		{"SigningKeyConflict", testSigningKeyConflict},
		{"SigningKeyNotFound", testSigningKeyNotFound},
		{"RefreshRoundTrip", testRefreshRoundTrip},
		{"RefreshConflict", testRefreshConflict},
		{"RotateSuccess", testRotateSuccess},
		{"RotateReuse", testRotateReuse},
		{"RotateRevoked", testRotateRevoked},
		{"RotateSubjectRevoked", testRotateSubjectRevoked},
		{"RotateExpired", testRotateExpired},
		{"RotateUnknown", testRotateUnknown},
		{"RotateNextConflict", testRotateNextConflict},
		{"RotateConcurrent", testRotateConcurrent},
		{"RevokeFamily", testRevokeFamily},
		{"DeleteExpired", testDeleteExpired},
		{"Revocations", testRevocations},
		{"RevocationIdempotent", testRevocationIdempotent},
		{"RevocationInvalid", testRevocationInvalid},
		{"RevocationSubjectUntil", testRevocationSubjectUntil},
		{"TimePrecision", testTimePrecision},
		{"Canceled", testCanceled},
		{"ConcurrentWrites", testConcurrentWrites},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.f(t, s)
		})
	}
}

// Digest is the SHA-256 of s: the suite's refresh-token digests.
func Digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

// client is a client of the default tenant, or of tenant[0].
func client(id string, created time.Time, tenant ...string) store.Client {
	return store.Client{
		ID:           id,
		Tenant:       tenantOr(tenant),
		Name:         "client " + id,
		SecretDigest: Digest("secret " + id),
		Scopes:       []string{"read", "write:" + id},
		CreatedAt:    created,
		UpdatedAt:    created,
	}
}

// user is a user of the default tenant, or of tenant[0].
func user(id, name string, created time.Time, tenant ...string) store.User {
	return store.User{
		ID:           id,
		Tenant:       tenantOr(tenant),
		Username:     name,
		PasswordHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$" + id,
		Scopes:       []string{"profile"},
		CreatedAt:    created,
		UpdatedAt:    created,
	}
}

func tenantOr(tenant []string) string {
	if len(tenant) > 0 {
		return tenant[0]
	}
	return store.DefaultTenant
}

func signingKey(kid string, created time.Time) store.SigningKey {
	return store.SigningKey{
		KID:       kid,
		Alg:       "ES256",
		Sealed:    []byte("sealed:" + kid),
		PublicJWK: []byte(`{"kty":"EC","kid":"` + kid + `"}`),
		PublishAt: created,
		ActiveAt:  created.Add(time.Hour),
		CreatedAt: created,
	}
}

func refresh(name, family string, issued time.Time) store.RefreshToken {
	return store.RefreshToken{
		Digest:    Digest(name),
		FamilyID:  family,
		ClientID:  "client-1",
		Subject:   "user-1",
		Scopes:    []string{"openid", "offline_access"},
		IssuedAt:  issued,
		OriginAt:  issued,
		ExpiresAt: issued.Add(24 * time.Hour),
	}
}

// Normalization: a nil and an empty []byte are the same stored value, and
// so are nil and empty scopes.
func nb(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func ns(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func normalize(v any) any {
	switch x := v.(type) {
	case store.Client:
		x.SecretDigest, x.Scopes = nb(x.SecretDigest), ns(x.Scopes)
		return x
	case store.User:
		x.Scopes = ns(x.Scopes)
		return x
	case store.SigningKey:
		x.Sealed, x.PublicJWK = nb(x.Sealed), nb(x.PublicJWK)
		return x
	case store.RefreshToken:
		x.Digest, x.Scopes = nb(x.Digest), ns(x.Scopes)
		return x
	case []store.Client:
		return normalizeAll(x)
	case []store.User:
		return normalizeAll(x)
	case []store.SigningKey:
		return normalizeAll(x)
	case []store.Revocation:
		return normalizeAll(x)
	case store.TransitKey:
		x.Config = nb(x.Config)
		return x
	case store.TransitKeyVersion:
		x.Sealed = nb(x.Sealed)
		return x
	case []store.TransitKeyVersion:
		return normalizeAll(x)
	case []store.AuditEntry:
		if len(x) == 0 {
			return []store.AuditEntry(nil)
		}
	}
	return v
}

func normalizeAll[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = normalize(x)
	}
	return out
}

// same fails t unless got and want are equal after normalization; times
// must be equal including their location (UTC).
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := normalize(got), normalize(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// Clients.

func testClientRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := client("c1", t0)
	must(t, "CreateClient", s.CreateClient(ctx, c))
	got, err := s.GetClient(ctx, "c1")
	must(t, "GetClient", err)
	same(t, "GetClient", got, c)

	bare := store.Client{ID: "c2", CreatedAt: t0, UpdatedAt: t0}
	must(t, "CreateClient(bare)", s.CreateClient(ctx, bare))
	got, err = s.GetClient(ctx, "c2")
	must(t, "GetClient(bare)", err)
	bare.Tenant = store.DefaultTenant // no tenant is the default one
	same(t, "GetClient(bare)", got, bare)
	if got.Scopes != nil {
		t.Errorf("empty scopes came back as %#v, want nil", got.Scopes)
	}
}

func testClientNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateClient", s.CreateClient(ctx, client("c1", t0)))
	_, err := s.GetClient(ctx, "C1")
	wantErr(t, "GetClient", err, store.ErrNotFound)
	wantErr(t, "UpdateClientSecret", s.UpdateClientSecret(ctx, "nope", Digest("x"), t0), store.ErrNotFound)
	wantErr(t, "DeleteClient", s.DeleteClient(ctx, "nope"), store.ErrNotFound)
}

func testClientConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := client("c1", t0)
	must(t, "CreateClient", s.CreateClient(ctx, c))
	other := client("c1", t0.Add(time.Hour))
	other.Name = "impostor"
	wantErr(t, "CreateClient again", s.CreateClient(ctx, other), store.ErrConflict)
	got, err := s.GetClient(ctx, "c1")
	must(t, "GetClient", err)
	same(t, "GetClient after conflict", got, c)
}

func testClientUpdateSecret(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := client("c1", t0)
	must(t, "CreateClient", s.CreateClient(ctx, c))
	must(t, "CreateClient", s.CreateClient(ctx, client("c2", t0)))
	at := t0.Add(time.Minute)
	must(t, "UpdateClientSecret", s.UpdateClientSecret(ctx, "c1", Digest("new secret"), at))
	want := c
	want.SecretDigest, want.UpdatedAt = Digest("new secret"), at
	got, err := s.GetClient(ctx, "c1")
	must(t, "GetClient", err)
	same(t, "GetClient after update", got, want)
	got, err = s.GetClient(ctx, "c2")
	must(t, "GetClient(c2)", err)
	same(t, "untouched client", got, client("c2", t0))
}

func testClientUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := client("c1", t0)
	must(t, "CreateClient", s.CreateClient(ctx, c))
	must(t, "CreateClient", s.CreateClient(ctx, client("c2", t0)))
	upd := store.Client{ID: "c1", Name: "renamed", Scopes: []string{"b", "a"}, SecretDigest: Digest("ignored"),
		CreatedAt: t0.Add(99 * time.Hour), UpdatedAt: t0.Add(time.Minute)}
	must(t, "UpdateClient", s.UpdateClient(ctx, upd))
	want := c
	want.Name, want.Scopes, want.UpdatedAt = "renamed", []string{"b", "a"}, t0.Add(time.Minute)
	got, err := s.GetClient(ctx, "c1")
	must(t, "GetClient", err)
	same(t, "GetClient after UpdateClient (secret and CreatedAt kept)", got, want)
	upd.Scopes = nil
	must(t, "UpdateClient(no scopes)", s.UpdateClient(ctx, upd))
	got, err = s.GetClient(ctx, "c1")
	must(t, "GetClient", err)
	if got.Scopes != nil {
		t.Errorf("scopes after clearing: %#v, want nil", got.Scopes)
	}
	got, err = s.GetClient(ctx, "c2")
	must(t, "GetClient(c2)", err)
	same(t, "untouched client", got, client("c2", t0))
	wantErr(t, "UpdateClient(nope)", s.UpdateClient(ctx, store.Client{ID: "nope", UpdatedAt: t0}), store.ErrNotFound)
}

func testClientDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateClient", s.CreateClient(ctx, client("c1", t0)))
	must(t, "CreateClient", s.CreateClient(ctx, client("c2", t0)))
	must(t, "DeleteClient", s.DeleteClient(ctx, "c1"))
	_, err := s.GetClient(ctx, "c1")
	wantErr(t, "GetClient after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteClient again", s.DeleteClient(ctx, "c1"), store.ErrNotFound)
	list, err := s.ListClients(ctx)
	must(t, "ListClients", err)
	same(t, "ListClients", list, []store.Client{client("c2", t0)})
	// The id can be used again.
	must(t, "CreateClient after delete", s.CreateClient(ctx, client("c1", t0)))
}

func testClientList(t *testing.T, s store.Store) {
	ctx := t.Context()
	list, err := s.ListClients(ctx)
	must(t, "ListClients(empty)", err)
	if len(list) != 0 {
		t.Fatalf("ListClients on an empty store: %d clients", len(list))
	}
	// Inserted out of order; listed by creation time, then id.
	in := []store.Client{
		client("b", t0.Add(time.Second)),
		client("z", t0),
		client("0", t0.Add(2*time.Second)),
		client("a", t0.Add(time.Second)),
		client("y", t0.Add(time.Microsecond)),
	}
	for _, c := range in {
		must(t, "CreateClient", s.CreateClient(ctx, c))
	}
	list, err = s.ListClients(ctx)
	must(t, "ListClients", err)
	same(t, "ListClients", list, []store.Client{in[1], in[4], in[3], in[0], in[2]})
}

// Users.

func testUserRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := user("u1", "alice", t0)
	u.Disabled = true
	must(t, "CreateUser", s.CreateUser(ctx, u))
	got, err := s.GetUserByName(ctx, store.DefaultTenant, "alice")
	must(t, "GetUserByName", err)
	same(t, "GetUserByName", got, u)
	got, err = s.GetUser(ctx, "u1")
	must(t, "GetUser", err)
	same(t, "GetUser", got, u)

	// Usernames are compared byte for byte.
	must(t, "CreateUser(Alice)", s.CreateUser(ctx, user("u2", "Alice", t0)))
	got, err = s.GetUserByName(ctx, store.DefaultTenant, "Alice")
	must(t, "GetUserByName(Alice)", err)
	same(t, "GetUserByName(Alice)", got, user("u2", "Alice", t0))
}

func testUserNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateUser", s.CreateUser(ctx, user("u1", "alice", t0)))
	_, err := s.GetUserByName(ctx, store.DefaultTenant, "bob")
	wantErr(t, "GetUserByName", err, store.ErrNotFound)
	_, err = s.GetUserByName(ctx, store.DefaultTenant, "u1") // an id is not a name
	wantErr(t, "GetUserByName(id)", err, store.ErrNotFound)
	_, err = s.GetUser(ctx, "alice") // nor a name an id
	wantErr(t, "GetUser(name)", err, store.ErrNotFound)
	_, err = s.GetUser(ctx, "nope")
	wantErr(t, "GetUser", err, store.ErrNotFound)
	wantErr(t, "UpdateUser", s.UpdateUser(ctx, user("nope", "nope", t0)), store.ErrNotFound)
	wantErr(t, "DeleteUser", s.DeleteUser(ctx, "nope"), store.ErrNotFound)
}

func testUserConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := user("u1", "alice", t0)
	must(t, "CreateUser", s.CreateUser(ctx, u))
	wantErr(t, "CreateUser(same id)", s.CreateUser(ctx, user("u1", "bob", t0)), store.ErrConflict)
	wantErr(t, "CreateUser(same name)", s.CreateUser(ctx, user("u2", "alice", t0)), store.ErrConflict)
	_, err := s.GetUserByName(ctx, store.DefaultTenant, "bob")
	wantErr(t, "GetUserByName(bob)", err, store.ErrNotFound)
	list, err := s.ListUsers(ctx)
	must(t, "ListUsers", err)
	same(t, "ListUsers", list, []store.User{u})
}

func testUserUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	u := user("u1", "alice", t0)
	must(t, "CreateUser", s.CreateUser(ctx, u))
	must(t, "CreateUser", s.CreateUser(ctx, user("u2", "bob", t0)))

	upd := store.User{
		ID:           "u1",
		Username:     "alice2",
		PasswordHash: "$argon2id$new",
		Scopes:       []string{"admin", "profile"},
		Disabled:     true,
		CreatedAt:    t0.Add(99 * time.Hour), // ignored
		UpdatedAt:    t0.Add(time.Hour),
	}
	must(t, "UpdateUser", s.UpdateUser(ctx, upd))
	want := upd
	want.Tenant, want.CreatedAt = store.DefaultTenant, t0
	got, err := s.GetUserByName(ctx, store.DefaultTenant, "alice2")
	must(t, "GetUserByName(alice2)", err)
	same(t, "updated user", got, want)
	_, err = s.GetUserByName(ctx, store.DefaultTenant, "alice")
	wantErr(t, "GetUserByName(old name)", err, store.ErrNotFound)

	// Renaming onto a taken name changes nothing.
	taken := want
	taken.Username, taken.PasswordHash = "bob", "$argon2id$other"
	wantErr(t, "UpdateUser(taken name)", s.UpdateUser(ctx, taken), store.ErrConflict)
	got, err = s.GetUserByName(ctx, store.DefaultTenant, "alice2")
	must(t, "GetUserByName(alice2)", err)
	same(t, "user after failed rename", got, want)
	got, err = s.GetUserByName(ctx, store.DefaultTenant, "bob")
	must(t, "GetUserByName(bob)", err)
	same(t, "bob", got, user("u2", "bob", t0))
}

func testUserDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateUser", s.CreateUser(ctx, user("u1", "alice", t0)))
	must(t, "CreateUser", s.CreateUser(ctx, user("u2", "bob", t0)))
	must(t, "DeleteUser", s.DeleteUser(ctx, "u1"))
	_, err := s.GetUserByName(ctx, store.DefaultTenant, "alice")
	wantErr(t, "GetUserByName after delete", err, store.ErrNotFound)
	_, err = s.GetUser(ctx, "u1")
	wantErr(t, "GetUser after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteUser again", s.DeleteUser(ctx, "u1"), store.ErrNotFound)
	list, err := s.ListUsers(ctx)
	must(t, "ListUsers", err)
	same(t, "ListUsers", list, []store.User{user("u2", "bob", t0)})
	// The name is free again.
	must(t, "CreateUser(alice again)", s.CreateUser(ctx, user("u3", "alice", t0)))
}

func testUserList(t *testing.T, s store.Store) {
	ctx := t.Context()
	list, err := s.ListUsers(ctx)
	must(t, "ListUsers(empty)", err)
	if len(list) != 0 {
		t.Fatalf("ListUsers on an empty store: %d users", len(list))
	}
	in := []store.User{
		user("u3", "carol", t0.Add(time.Second)),
		user("u9", "dave", t0),
		user("u1", "alice", t0.Add(time.Second)),
		user("u0", "erin", t0.Add(time.Hour)),
	}
	for _, u := range in {
		must(t, "CreateUser", s.CreateUser(ctx, u))
	}
	list, err = s.ListUsers(ctx)
	must(t, "ListUsers", err)
	same(t, "ListUsers", list, []store.User{in[1], in[2], in[0], in[3]})
}

// Signing keys.

func testSigningKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	list, err := s.ListSigningKeys(ctx)
	must(t, "ListSigningKeys(empty)", err)
	if len(list) != 0 {
		t.Fatalf("ListSigningKeys on an empty store: %d keys", len(list))
	}
	k1 := signingKey("k1", t0.Add(time.Hour))
	k2 := signingKey("k2", t0)
	k2.RetireAt = t0.Add(48 * time.Hour)
	k0 := signingKey("k0", t0.Add(time.Hour))
	for _, k := range []store.SigningKey{k1, k2, k0} {
		must(t, "PutSigningKey", s.PutSigningKey(ctx, k))
	}
	list, err = s.ListSigningKeys(ctx)
	must(t, "ListSigningKeys", err)
	same(t, "ListSigningKeys", list, []store.SigningKey{k2, k0, k1})

	// Retire sets RetireAt; a zero time clears it.
	must(t, "RetireSigningKey(k1)", s.RetireSigningKey(ctx, "k1", t0.Add(72*time.Hour)))
	must(t, "RetireSigningKey(k2, zero)", s.RetireSigningKey(ctx, "k2", time.Time{}))
	k1.RetireAt, k2.RetireAt = t0.Add(72*time.Hour), time.Time{}
	list, err = s.ListSigningKeys(ctx)
	must(t, "ListSigningKeys", err)
	same(t, "ListSigningKeys after retire", list, []store.SigningKey{k2, k0, k1})

	must(t, "DeleteSigningKey", s.DeleteSigningKey(ctx, "k0"))
	list, err = s.ListSigningKeys(ctx)
	must(t, "ListSigningKeys", err)
	same(t, "ListSigningKeys after delete", list, []store.SigningKey{k2, k1})
}

func testSigningKeyConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	k := signingKey("k1", t0)
	must(t, "PutSigningKey", s.PutSigningKey(ctx, k))
	other := signingKey("k1", t0.Add(time.Hour))
	other.Sealed = []byte("other key material")
	wantErr(t, "PutSigningKey(same kid)", s.PutSigningKey(ctx, other), store.ErrConflict)
	list, err := s.ListSigningKeys(ctx)
	must(t, "ListSigningKeys", err)
	same(t, "ListSigningKeys", list, []store.SigningKey{k})
}

func testSigningKeyNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "PutSigningKey", s.PutSigningKey(ctx, signingKey("k1", t0)))
	wantErr(t, "RetireSigningKey", s.RetireSigningKey(ctx, "nope", t0), store.ErrNotFound)
	wantErr(t, "DeleteSigningKey", s.DeleteSigningKey(ctx, "nope"), store.ErrNotFound)
	must(t, "DeleteSigningKey", s.DeleteSigningKey(ctx, "k1"))
	wantErr(t, "DeleteSigningKey again", s.DeleteSigningKey(ctx, "k1"), store.ErrNotFound)
	wantErr(t, "RetireSigningKey deleted", s.RetireSigningKey(ctx, "k1", t0), store.ErrNotFound)
}

// Refresh tokens.

func getRefresh(t *testing.T, s store.Store, name string) store.RefreshToken {
	t.Helper()
	tok, err := s.GetRefreshToken(t.Context(), Digest(name))
	if err != nil {
		t.Fatalf("GetRefreshToken(%s): %v", name, err)
	}
	return tok
}

func absent(t *testing.T, s store.Store, name string) {
	t.Helper()
	if _, err := s.GetRefreshToken(t.Context(), Digest(name)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRefreshToken(%s): error %v, want ErrNotFound", name, err)
	}
}

func testRefreshRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := refresh("a", "fam-1", t0)
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, a))
	same(t, "GetRefreshToken", getRefresh(t, s, "a"), a)

	b := refresh("b", "fam-2", t0)
	b.Scopes, b.ClientID = nil, ""
	must(t, "CreateRefreshToken(bare)", s.CreateRefreshToken(ctx, b))
	same(t, "GetRefreshToken(bare)", getRefresh(t, s, "b"), b)

	// A family begins with its first token: without an OriginAt, at its
	// IssuedAt; with one, at that (stored as given).
	c := refresh("c", "fam-3", t0)
	c.OriginAt = time.Time{}
	must(t, "CreateRefreshToken(no origin)", s.CreateRefreshToken(ctx, c))
	c.OriginAt = c.IssuedAt
	same(t, "GetRefreshToken(no origin)", getRefresh(t, s, "c"), c)
	d := refresh("d", "fam-4", t0)
	d.OriginAt = t0.Add(-time.Hour)
	must(t, "CreateRefreshToken(earlier origin)", s.CreateRefreshToken(ctx, d))
	same(t, "GetRefreshToken(earlier origin)", getRefresh(t, s, "d"), d)
	absent(t, s, "e")
}

func testRefreshConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := refresh("a", "fam-1", t0)
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, a))
	dup := refresh("a", "fam-2", t0.Add(time.Hour))
	wantErr(t, "CreateRefreshToken(same digest)", s.CreateRefreshToken(ctx, dup), store.ErrConflict)
	// A family is started once; it grows only by rotation.
	wantErr(t, "CreateRefreshToken(same family)", s.CreateRefreshToken(ctx, refresh("b", "fam-1", t0)), store.ErrConflict)
	same(t, "GetRefreshToken", getRefresh(t, s, "a"), a)
	absent(t, s, "b")
}

func testRotateSuccess(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := refresh("a", "fam-1", t0)
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, a))
	now := t0.Add(time.Minute)
	b := refresh("b", "ignored", now) // its OriginAt, now, is ignored too
	b.Scopes = []string{"openid"}
	got, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), b, now)
	must(t, "RotateRefreshToken(a→b)", err)
	same(t, "RotateRefreshToken returns old as it was", got, a)

	spent := a
	spent.UsedAt = now
	same(t, "a after rotation", getRefresh(t, s, "a"), spent)
	b.FamilyID, b.OriginAt = "fam-1", t0
	same(t, "b after rotation", getRefresh(t, s, "b"), b)

	later := now.Add(time.Minute)
	c := refresh("c", "", later)
	c.OriginAt = time.Time{}
	got, err = s.RotateRefreshToken(ctx, "iss", Digest("b"), c, later)
	must(t, "RotateRefreshToken(b→c)", err)
	same(t, "RotateRefreshToken(b→c) returns b", got, b)
	c.FamilyID, c.OriginAt = "fam-1", t0
	same(t, "c after rotation", getRefresh(t, s, "c"), c)
	if tok := getRefresh(t, s, "b"); !tok.UsedAt.Equal(later) || tok.Revoked {
		t.Errorf("b after rotation: UsedAt %v Revoked %v, want %v false", tok.UsedAt, tok.Revoked, later)
	}
}

func testRotateReuse(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := refresh("a", "fam-1", t0)
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, a))
	other := refresh("other", "fam-2", t0)
	must(t, "CreateRefreshToken(other)", s.CreateRefreshToken(ctx, other))
	now := t0.Add(time.Minute)
	_, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", now), now)
	must(t, "RotateRefreshToken(a→b)", err)

	// a again: reuse. The family, b included, is revoked.
	replay := now.Add(time.Minute)
	got, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("x", "", replay), replay)
	wantErr(t, "RotateRefreshToken(a again)", err, store.ErrReused)
	spent := a
	spent.UsedAt = now
	same(t, "RotateRefreshToken(a again) returns a", got, spent)
	absent(t, s, "x")
	for _, name := range []string{"a", "b"} {
		if tok := getRefresh(t, s, name); !tok.Revoked {
			t.Errorf("%s not revoked after reuse", name)
		}
	}
	if tok := getRefresh(t, s, "a"); !tok.UsedAt.Equal(now) {
		t.Errorf("a.UsedAt = %v after reuse, want %v", tok.UsedAt, now)
	}
	same(t, "another family", getRefresh(t, s, "other"), other)

	// The thief's or the client's b is now dead too.
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("b"), refresh("y", "", replay), replay)
	wantErr(t, "RotateRefreshToken(b) after reuse", err, store.ErrRevoked)
	absent(t, s, "y")
	// A third try of a is still reuse.
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("z", "", replay), replay)
	wantErr(t, "RotateRefreshToken(a third time)", err, store.ErrReused)
	absent(t, s, "z")
}

func testRotateRevoked(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := refresh("a", "fam-1", t0)
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, a))
	must(t, "RevokeRefreshFamily", s.RevokeRefreshFamily(ctx, Digest("a")))
	now := t0.Add(time.Minute)
	got, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", now), now)
	wantErr(t, "RotateRefreshToken(revoked)", err, store.ErrRevoked)
	a.Revoked = true
	same(t, "RotateRefreshToken(revoked) returns a", got, a)
	same(t, "a after failed rotation", getRefresh(t, s, "a"), a)
	absent(t, s, "b")

	// A token created revoked is refused the same way.
	c := refresh("c", "fam-2", t0)
	c.Revoked = true
	must(t, "CreateRefreshToken(revoked)", s.CreateRefreshToken(ctx, c))
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("c"), refresh("d", "", now), now)
	wantErr(t, "RotateRefreshToken(created revoked)", err, store.ErrRevoked)
	absent(t, s, "d")
}

// testRotateSubjectRevoked: a subject revocation of the token's subject,
// under the issuer the rotation names, whose Before is after the family's
// origin refuses the rotation — even of a token issued after the
// revocation — and revokes the whole family; one at the origin, of another
// subject, of a jti or of the same subject under another issuer does not,
// and neither does it reach a family begun after it.
func testRotateSubjectRevoked(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, refresh("a", "fam-1", t0)))
	now := t0.Add(time.Hour)
	_, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", now), now)
	must(t, "RotateRefreshToken(a→b)", err)
	for _, r := range []store.Revocation{
		{Issuer: "iss", Subject: "user-2", Before: now, CreatedAt: now},
		{Issuer: "iss", Subject: "user-1", Before: t0, CreatedAt: now}, // tokens issued before the origin: none of the family
		{Issuer: "iss", JTI: "user-1", Until: now.Add(time.Hour), CreatedAt: now},
		// The same subject name under another issuer (an identity
		// provider's user with the same id) is another subject.
		{Issuer: "https://idp.example/", Subject: "user-1", Before: now, CreatedAt: now},
	} {
		must(t, "AddRevocation", s.AddRevocation(ctx, r))
	}
	later := now.Add(time.Minute)
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("b"), refresh("c", "", later), later)
	must(t, "RotateRefreshToken(b→c) past revocations that do not reach the family", err)

	// After the origin by a microsecond, and long before c was issued.
	must(t, "AddRevocation(after the origin)", s.AddRevocation(ctx,
		store.Revocation{Issuer: "iss", Subject: "user-1", Before: t0.Add(time.Microsecond), CreatedAt: later}))
	fresh := refresh("fresh", "fam-2", later) // the same subject, a family begun after the revocation
	must(t, "CreateRefreshToken(fresh)", s.CreateRefreshToken(ctx, fresh))
	c := getRefresh(t, s, "c")
	got, err := s.RotateRefreshToken(ctx, "iss", Digest("c"), refresh("d", "", later), later)
	wantErr(t, "RotateRefreshToken(c) after the subject revocation", err, store.ErrSubjectRevoked)
	wantErr(t, "RotateRefreshToken(c) after the subject revocation", err, store.ErrRevoked)
	same(t, "RotateRefreshToken(c) returns c", got, c)
	absent(t, s, "d")
	for _, name := range []string{"a", "b", "c"} {
		if tok := getRefresh(t, s, name); !tok.Revoked {
			t.Errorf("%s not revoked after the refused rotation", name)
		}
	}
	if tok := getRefresh(t, s, "c"); !tok.UsedAt.IsZero() {
		t.Errorf("c spent by the refused rotation: UsedAt %v", tok.UsedAt)
	}
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("c"), refresh("e", "", later), later)
	wantErr(t, "RotateRefreshToken(c) again", err, store.ErrRevoked)
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("fresh"), refresh("fresh2", "", later), later)
	must(t, "RotateRefreshToken(fresh), a family begun after the revocation", err)
}

func testRotateExpired(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := refresh("a", "fam-1", t0)
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, a))
	for _, now := range []time.Time{a.ExpiresAt, a.ExpiresAt.Add(time.Microsecond), a.ExpiresAt.Add(time.Hour)} {
		got, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", now), now)
		wantErr(t, fmt.Sprintf("RotateRefreshToken at expiry%+v", now.Sub(a.ExpiresAt)), err, store.ErrExpired)
		same(t, "RotateRefreshToken(expired) returns a", got, a)
	}
	same(t, "a after failed rotations", getRefresh(t, s, "a"), a)
	absent(t, s, "b")
	// One microsecond before expiry it still rotates.
	now := a.ExpiresAt.Add(-time.Microsecond)
	_, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", now), now)
	must(t, "RotateRefreshToken just before expiry", err)
}

func testRotateUnknown(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, refresh("a", "fam-1", t0)))
	_, err := s.RotateRefreshToken(ctx, "iss", Digest("nope"), refresh("b", "fam-1", t0), t0)
	wantErr(t, "RotateRefreshToken(unknown)", err, store.ErrNotFound)
	absent(t, s, "b")
}

func testRotateNextConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := refresh("a", "fam-1", t0)
	must(t, "CreateRefreshToken(a)", s.CreateRefreshToken(ctx, a))
	other := refresh("other", "fam-2", t0)
	must(t, "CreateRefreshToken(other)", s.CreateRefreshToken(ctx, other))
	now := t0.Add(time.Minute)
	_, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("other", "", now), now)
	wantErr(t, "RotateRefreshToken onto an existing digest", err, store.ErrConflict)
	// Nothing was spent or changed: a rotates fine afterwards.
	same(t, "a after conflict", getRefresh(t, s, "a"), a)
	same(t, "other after conflict", getRefresh(t, s, "other"), other)
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", now), now)
	must(t, "RotateRefreshToken after conflict", err)
}

func testRotateConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, refresh("a", "fam-1", t0)))
	const n = 20
	now := t0.Add(time.Minute)
	errs := race(n, func(i int) error {
		_, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh(fmt.Sprintf("next-%d", i), "", now), now)
		return err
	})
	winner := oneWinner(t, errs, store.ErrReused)
	// The others were reuse: the family, the winner's token included, is revoked.
	for _, name := range []string{"a", fmt.Sprintf("next-%d", winner)} {
		if tok := getRefresh(t, s, name); !tok.Revoked || tok.FamilyID != "fam-1" {
			t.Errorf("%s: Revoked %v FamilyID %q, want true fam-1", name, tok.Revoked, tok.FamilyID)
		}
	}
	for i := range n {
		if i != winner {
			absent(t, s, fmt.Sprintf("next-%d", i))
		}
	}
}

func testRevokeFamily(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, refresh("a", "fam-1", t0)))
	other := refresh("d", "fam-2", t0)
	must(t, "CreateRefreshToken(d)", s.CreateRefreshToken(ctx, other))
	_, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", t0), t0)
	must(t, "RotateRefreshToken(a→b)", err)
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("b"), refresh("c", "", t0), t0)
	must(t, "RotateRefreshToken(b→c)", err)

	must(t, "RevokeRefreshFamily(b)", s.RevokeRefreshFamily(ctx, Digest("b")))
	for _, name := range []string{"a", "b", "c"} {
		if !getRefresh(t, s, name).Revoked {
			t.Errorf("%s not revoked", name)
		}
	}
	same(t, "another family", getRefresh(t, s, "d"), other)
	must(t, "RevokeRefreshFamily again", s.RevokeRefreshFamily(ctx, Digest("c")))
	wantErr(t, "RevokeRefreshFamily(unknown)", s.RevokeRefreshFamily(ctx, Digest("nope")), store.ErrNotFound)
}

func testDeleteExpired(t *testing.T, s store.Store) {
	ctx := t.Context()
	mk := func(name, family string, expires time.Time) store.RefreshToken {
		tok := refresh(name, family, expires.Add(-24*time.Hour))
		tok.ExpiresAt = expires
		must(t, "CreateRefreshToken("+name+")", s.CreateRefreshToken(ctx, tok))
		return tok
	}
	mk("past", "fam-1", t0.Add(-time.Hour))
	mk("now", "fam-2", t0)
	live := mk("live", "fam-3", t0.Add(time.Microsecond))
	later := mk("later", "fam-4", t0.Add(time.Hour))

	n, err := s.DeleteExpiredRefreshTokens(ctx, t0)
	must(t, "DeleteExpiredRefreshTokens", err)
	if n != 2 {
		t.Errorf("DeleteExpiredRefreshTokens = %d, want 2", n)
	}
	absent(t, s, "past")
	absent(t, s, "now")
	same(t, "live", getRefresh(t, s, "live"), live)
	same(t, "later", getRefresh(t, s, "later"), later)
	n, err = s.DeleteExpiredRefreshTokens(ctx, t0)
	must(t, "DeleteExpiredRefreshTokens again", err)
	if n != 0 {
		t.Errorf("DeleteExpiredRefreshTokens again = %d, want 0", n)
	}
	// A family whose older tokens were deleted still rotates.
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("later"), refresh("later2", "", t0), t0)
	must(t, "RotateRefreshToken after cleanup", err)
}

// Revocations.

func testRevocations(t *testing.T, s store.Store) {
	ctx := t.Context()
	rs, err := s.Revocations(ctx, t0)
	must(t, "Revocations(empty)", err)
	if len(rs) != 0 {
		t.Fatalf("Revocations on an empty store: %d", len(rs))
	}
	in := []store.Revocation{
		{Issuer: "iss2", JTI: "j1", Until: t0.Add(time.Hour), CreatedAt: t0},                                  // 0 in force
		{Issuer: "iss1", JTI: "j1", Until: t0.Add(time.Hour), CreatedAt: t0},                                  // 1 in force
		{Issuer: "iss1", JTI: "j2", Until: t0.Add(-time.Second), CreatedAt: t0.Add(-2 * time.Hour)},           // 2 lapsed
		{Issuer: "iss1", JTI: "j3", Until: t0, CreatedAt: t0.Add(-time.Hour)},                                 // 3 lapses at t0
		{Issuer: "iss1", Subject: "user-1", Before: t0, CreatedAt: t0.Add(-time.Minute)},                      // 4 in force
		{Issuer: "iss1", Subject: "user-2", Before: t0.Add(-48 * time.Hour), CreatedAt: t0.Add(-time.Minute)}, // 5 in force
		{Issuer: "iss1", JTI: "j4", Until: t0.Add(time.Microsecond), CreatedAt: t0.Add(time.Second)},          // 6 in force
	}
	for _, r := range in {
		must(t, "AddRevocation", s.AddRevocation(ctx, r))
	}
	rs, err = s.Revocations(ctx, t0)
	must(t, "Revocations", err)
	same(t, "Revocations(t0)", rs, []store.Revocation{in[4], in[5], in[1], in[0], in[6]})

	rs, err = s.Revocations(ctx, t0.Add(-90*time.Minute))
	must(t, "Revocations(earlier)", err)
	same(t, "Revocations(t0-90m)", rs, []store.Revocation{in[2], in[3], in[4], in[5], in[1], in[0], in[6]})

	// Deleting the lapsed ones (Until at or before t0) keeps the rest, and
	// with no subject cutoff every subject revocation, even one whose
	// Before is long past.
	n, err := s.DeleteExpiredRevocations(ctx, t0, time.Time{})
	must(t, "DeleteExpiredRevocations", err)
	if n != 2 {
		t.Errorf("DeleteExpiredRevocations(t0) = %d, want 2", n)
	}
	rs, err = s.Revocations(ctx, t0.Add(-90*time.Minute))
	must(t, "Revocations(earlier) after the delete", err)
	same(t, "Revocations(t0-90m) after the delete", rs, []store.Revocation{in[4], in[5], in[1], in[0], in[6]})
	n, err = s.DeleteExpiredRevocations(ctx, t0, time.Time{})
	must(t, "DeleteExpiredRevocations again", err)
	if n != 0 {
		t.Errorf("DeleteExpiredRevocations again = %d, want 0", n)
	}
	// A subject cutoff drops the subject revocations before it, only.
	n, err = s.DeleteExpiredRevocations(ctx, t0, t0.Add(-time.Hour))
	must(t, "DeleteExpiredRevocations(subject cutoff)", err)
	if n != 1 {
		t.Errorf("DeleteExpiredRevocations(t0, t0-1h) = %d, want 1 (user-2)", n)
	}
	rs, err = s.Revocations(ctx, t0.Add(-90*time.Minute))
	must(t, "Revocations after the subject cutoff", err)
	same(t, "Revocations after the subject cutoff", rs, []store.Revocation{in[4], in[1], in[0], in[6]})
}

func testRevocationIdempotent(t *testing.T, s store.Store) {
	ctx := t.Context()
	j := store.Revocation{Issuer: "iss", JTI: "j1", Until: t0.Add(time.Hour), CreatedAt: t0}
	sub := store.Revocation{Issuer: "iss", Subject: "user-1", Before: t0, CreatedAt: t0}
	must(t, "AddRevocation(jti)", s.AddRevocation(ctx, j))
	must(t, "AddRevocation(subject)", s.AddRevocation(ctx, sub))
	// Again, later: one record each, the later bound, the first CreatedAt.
	must(t, "AddRevocation(jti, later)", s.AddRevocation(ctx, store.Revocation{Issuer: "iss", JTI: "j1", Until: t0.Add(2 * time.Hour), CreatedAt: t0.Add(time.Minute)}))
	must(t, "AddRevocation(subject, later)", s.AddRevocation(ctx, store.Revocation{Issuer: "iss", Subject: "user-1", Before: t0.Add(time.Hour), CreatedAt: t0.Add(time.Minute)}))
	// An earlier bound does not shorten a revocation.
	must(t, "AddRevocation(jti, earlier)", s.AddRevocation(ctx, store.Revocation{Issuer: "iss", JTI: "j1", Until: t0.Add(time.Minute), CreatedAt: t0.Add(2 * time.Minute)}))
	must(t, "AddRevocation(subject, earlier)", s.AddRevocation(ctx, store.Revocation{Issuer: "iss", Subject: "user-1", Before: t0.Add(-time.Hour), CreatedAt: t0.Add(2 * time.Minute)}))
	rs, err := s.Revocations(ctx, t0)
	must(t, "Revocations", err)
	j.Until, sub.Before = t0.Add(2*time.Hour), t0.Add(time.Hour)
	same(t, "Revocations (same time and issuer: by jti, then subject)", rs, []store.Revocation{sub, j})
}

// testRevocationSubjectUntil: a subject revocation may carry an Until, a
// time to keep it at least until (tokens of an issuer that live longer
// than the subject retention). Adding it again keeps the later Until, a
// revocation without one does not clear it, and the subject cutoff of
// DeleteExpiredRevocations spares it until its Until has passed.
func testRevocationSubjectUntil(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := t0.Add(-48 * time.Hour)
	kept := store.Revocation{Issuer: "https://idp.example/", Subject: "u1", Before: old, CreatedAt: old}
	plain := store.Revocation{Issuer: "https://idp.example/", Subject: "u2", Before: old, CreatedAt: old}
	must(t, "AddRevocation(without Until)", s.AddRevocation(ctx, kept))
	must(t, "AddRevocation(plain)", s.AddRevocation(ctx, plain))
	later := kept
	later.Until, later.CreatedAt = t0.Add(90*24*time.Hour), t0
	must(t, "AddRevocation(with Until)", s.AddRevocation(ctx, later))
	must(t, "AddRevocation(earlier Until)", s.AddRevocation(ctx, store.Revocation{Issuer: kept.Issuer, Subject: "u1",
		Before: old, Until: t0, CreatedAt: t0}))
	must(t, "AddRevocation(no Until again)", s.AddRevocation(ctx, store.Revocation{Issuer: kept.Issuer, Subject: "u1",
		Before: old, CreatedAt: t0}))
	kept.Until = later.Until
	rs, err := s.Revocations(ctx, t0)
	must(t, "Revocations", err)
	same(t, "Revocations", rs, []store.Revocation{kept, plain})

	// The subject cutoff is past both: only the one without Until goes.
	n, err := s.DeleteExpiredRevocations(ctx, t0, t0.Add(-time.Hour))
	must(t, "DeleteExpiredRevocations(t0)", err)
	if n != 1 {
		t.Errorf("DeleteExpiredRevocations(t0, t0-1h) = %d, want 1 (u2)", n)
	}
	rs, err = s.Revocations(ctx, t0)
	must(t, "Revocations after the cutoff", err)
	same(t, "Revocations after the cutoff", rs, []store.Revocation{kept})
	// Once its Until has passed, it goes too.
	n, err = s.DeleteExpiredRevocations(ctx, kept.Until.Add(-time.Microsecond), kept.Until)
	must(t, "DeleteExpiredRevocations(before Until)", err)
	if n != 0 {
		t.Errorf("DeleteExpiredRevocations just before Until = %d, want 0", n)
	}
	n, err = s.DeleteExpiredRevocations(ctx, kept.Until, kept.Until)
	must(t, "DeleteExpiredRevocations(at Until)", err)
	if n != 1 {
		t.Errorf("DeleteExpiredRevocations at Until = %d, want 1", n)
	}
}

func testRevocationInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, r := range []store.Revocation{
		{Issuer: "iss", CreatedAt: t0},
		{Issuer: "iss", JTI: "j", Subject: "u", Until: t0.Add(time.Hour), Before: t0, CreatedAt: t0},
		{Issuer: "iss", JTI: "j", CreatedAt: t0},
		{Issuer: "iss", Subject: "u", CreatedAt: t0},
	} {
		err := s.AddRevocation(ctx, r)
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			t.Errorf("AddRevocation(%+v): error %v, want a validation error", r, err)
		}
	}
	rs, err := s.Revocations(ctx, t0.Add(-time.Hour))
	must(t, "Revocations", err)
	if len(rs) != 0 {
		t.Errorf("invalid revocations were stored: %+v", rs)
	}
}

// Times.

func testTimePrecision(t *testing.T, s store.Store) {
	ctx := t.Context()
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	at := time.Date(2026, 7, 1, 9, 30, 0, 123456789, zone) // nanoseconds, not UTC
	want := at.UTC().Truncate(time.Microsecond)
	check := func(what string, got time.Time) {
		t.Helper()
		if got != want { // same instant, same location (UTC)
			t.Errorf("%s = %v (%v), want %v", what, got, got.Location(), want)
		}
	}
	c := client("c1", at)
	must(t, "CreateClient", s.CreateClient(ctx, c))
	got, err := s.GetClient(ctx, "c1")
	must(t, "GetClient", err)
	check("Client.CreatedAt", got.CreatedAt)
	check("Client.UpdatedAt", got.UpdatedAt)

	tok := refresh("a", "fam-1", at)
	tok.ExpiresAt = at.Add(time.Hour)
	must(t, "CreateRefreshToken", s.CreateRefreshToken(ctx, tok))
	_, err = s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", at), at)
	must(t, "RotateRefreshToken", err)
	a := getRefresh(t, s, "a")
	check("RefreshToken.IssuedAt", a.IssuedAt)
	check("RefreshToken.OriginAt", a.OriginAt)
	check("RefreshToken.UsedAt", a.UsedAt)
	check("RefreshToken.OriginAt after rotation", getRefresh(t, s, "b").OriginAt)
	if want := want.Add(time.Hour); a.ExpiresAt != want {
		t.Errorf("RefreshToken.ExpiresAt = %v, want %v", a.ExpiresAt, want)
	}

	k := signingKey("k1", at)
	k.RetireAt = at
	must(t, "PutSigningKey", s.PutSigningKey(ctx, k))
	keys, err := s.ListSigningKeys(ctx)
	must(t, "ListSigningKeys", err)
	check("SigningKey.PublishAt", keys[0].PublishAt)
	check("SigningKey.RetireAt", keys[0].RetireAt)

	must(t, "AddRevocation", s.AddRevocation(ctx, store.Revocation{Issuer: "i", Subject: "u", Before: at, CreatedAt: at}))
	rs, err := s.Revocations(ctx, at)
	must(t, "Revocations", err)
	check("Revocation.Before", rs[0].Before)
	check("Revocation.CreatedAt", rs[0].CreatedAt)

	tk, first := transitKey(store.DefaultTenant, "k", at)
	must(t, "CreateTransitKey", s.CreateTransitKey(ctx, tk, first))
	must(t, "AddTransitKeyVersion", s.AddTransitKeyVersion(ctx, keyVersion(store.DefaultTenant, "k", 2, at)))
	gk, gvs := getKey(t, s, store.DefaultTenant, "k")
	check("TransitKey.CreatedAt", gk.CreatedAt)
	check("TransitKey.UpdatedAt", gk.UpdatedAt)
	check("TransitKeyVersion.CreatedAt", gvs[0].CreatedAt)
	v2, err := s.GetTransitKeyVersion(ctx, store.DefaultTenant, "k", 2)
	must(t, "GetTransitKeyVersion", err)
	check("TransitKeyVersion.CreatedAt (one version)", v2.CreatedAt)
	must(t, "CreateTenant", s.CreateTenant(ctx, tenant("acme", at)))
	check("Tenant.CreatedAt", getTenant(t, s, "acme").CreatedAt)

	// A zero time round-trips as the zero time.
	if u := getRefresh(t, s, "b").UsedAt; u != (time.Time{}) {
		t.Errorf("unset UsedAt = %v, want the zero time", u)
	}
}

// Cancellation.

func testCanceled(t *testing.T, s store.Store) {
	live := t.Context()
	a := refresh("a", "fam-1", t0)
	must(t, "CreateRefreshToken", s.CreateRefreshToken(live, a))
	must(t, "CreateClient", s.CreateClient(live, client("c1", t0)))
	must(t, "CreateUser", s.CreateUser(live, user("u1", "alice", t0)))
	must(t, "PutSigningKey", s.PutSigningKey(live, signingKey("k1", t0)))
	empty := tenant("empty", t0)
	must(t, "CreateTenant", s.CreateTenant(live, empty))

	ctx, cancel := context.WithCancel(live)
	cancel()
	at := t0.Add(time.Hour)
	calls := []call{
		{"CreateClient", func() error { return s.CreateClient(ctx, client("c2", t0)) }},
		{"UpdateClientSecret", func() error { return s.UpdateClientSecret(ctx, "c1", Digest("new"), at) }},
		{"DeleteClient", func() error { return s.DeleteClient(ctx, "c1") }},
		{"CreateUser", func() error { return s.CreateUser(ctx, user("u2", "bob", t0)) }},
		{"UpdateUser", func() error { return s.UpdateUser(ctx, user("u1", "alice2", at)) }},
		{"DeleteUser", func() error { return s.DeleteUser(ctx, "u1") }},
		{"PutSigningKey", func() error { return s.PutSigningKey(ctx, signingKey("k2", t0)) }},
		{"RetireSigningKey", func() error { return s.RetireSigningKey(ctx, "k1", at) }},
		{"DeleteSigningKey", func() error { return s.DeleteSigningKey(ctx, "k1") }},
		{"CreateRefreshToken", func() error { return s.CreateRefreshToken(ctx, refresh("c", "fam-2", t0)) }},
		{"RotateRefreshToken", func() error {
			_, err := s.RotateRefreshToken(ctx, "iss", Digest("a"), refresh("b", "", t0), t0)
			return err
		}},
		{"RevokeRefreshFamily", func() error { return s.RevokeRefreshFamily(ctx, Digest("a")) }},
		{"DeleteExpiredRefreshTokens", func() error {
			_, err := s.DeleteExpiredRefreshTokens(ctx, t0.Add(100*time.Hour))
			return err
		}},
		{"AddRevocation", func() error {
			return s.AddRevocation(ctx, store.Revocation{Issuer: "i", JTI: "j", Until: at, CreatedAt: t0})
		}},
		{"CreateTenant", func() error { return s.CreateTenant(ctx, tenant("acme", t0)) }},
		{"SetTenantDataKey", func() error { return s.SetTenantDataKey(ctx, "empty", []byte("k")) }},
		{"DeleteTenant", func() error { return s.DeleteTenant(ctx, "empty") }},
		{"GetTenant", func() error { _, err := s.GetTenant(ctx, "empty"); return err }},
		{"ListTenants", func() error { _, err := s.ListTenants(ctx); return err }},
		{"ListClientsIn", func() error { _, err := s.ListClientsIn(ctx, store.DefaultTenant); return err }},
		{"ListUsersIn", func() error { _, err := s.ListUsersIn(ctx, store.DefaultTenant); return err }},
		{"GetClient", func() error { _, err := s.GetClient(ctx, "c1"); return err }},
		{"UpdateClient", func() error { return s.UpdateClient(ctx, store.Client{ID: "c1", UpdatedAt: t0}) }},
		{"ListClients", func() error { _, err := s.ListClients(ctx); return err }},
		{"GetUserByName", func() error { _, err := s.GetUserByName(ctx, store.DefaultTenant, "alice"); return err }},
		{"GetUser", func() error { _, err := s.GetUser(ctx, "u1"); return err }},
		{"ListUsers", func() error { _, err := s.ListUsers(ctx); return err }},
		{"ListSigningKeys", func() error { _, err := s.ListSigningKeys(ctx); return err }},
		{"GetRefreshToken", func() error { _, err := s.GetRefreshToken(ctx, Digest("a")); return err }},
		{"Revocations", func() error { _, err := s.Revocations(ctx, t0); return err }},
		{"DeleteExpiredRevocations", func() error { _, err := s.DeleteExpiredRevocations(ctx, t0, t0); return err }},
	}
	calls = append(calls, transitCalls(ctx, s, store.DefaultTenant)...)
	calls = append(calls, secretCalls(ctx, s, store.DefaultTenant)...)
	for _, c := range append(calls, auditCalls(ctx, s)...) {
		wantErr(t, c.name+" with a canceled context", c.f(), context.Canceled)
	}

	// Nothing changed.
	tenants, err := s.ListTenants(live)
	must(t, "ListTenants", err)
	same(t, "tenants", tenants, []store.Tenant{getTenant(t, s, store.DefaultTenant), empty})
	clients, err := s.ListClients(live)
	must(t, "ListClients", err)
	same(t, "clients", clients, []store.Client{client("c1", t0)})
	users, err := s.ListUsers(live)
	must(t, "ListUsers", err)
	same(t, "users", users, []store.User{user("u1", "alice", t0)})
	keys, err := s.ListSigningKeys(live)
	must(t, "ListSigningKeys", err)
	same(t, "signing keys", keys, []store.SigningKey{signingKey("k1", t0)})
	same(t, "refresh token a", getRefresh(t, s, "a"), a)
	absent(t, s, "b")
	absent(t, s, "c")
	rs, err := s.Revocations(live, t0)
	must(t, "Revocations", err)
	if len(rs) != 0 {
		t.Errorf("revocations written under a canceled context: %+v", rs)
	}
	names, err := s.ListTransitKeys(live, store.DefaultTenant)
	must(t, "ListTransitKeys", err)
	if len(names) != 0 {
		t.Errorf("transit keys written under a canceled context: %v", names)
	}
	if nodes, err := s.AuditNodes(live); err != nil || len(nodes) != 0 {
		t.Errorf("audit entries written under a canceled context: nodes %v, %v", nodes, err)
	}
}

// Concurrency.

func testConcurrentWrites(t *testing.T, s store.Store) {
	ctx := t.Context()
	const workers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*each*4)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				at := t0.Add(time.Duration(i) * time.Second)
				if err := s.CreateClient(ctx, client(id, at)); err != nil {
					errs <- fmt.Errorf("CreateClient(%s): %w", id, err)
				}
				if err := s.AddRevocation(ctx, store.Revocation{Issuer: "iss", JTI: id, Until: t0.Add(time.Hour), CreatedAt: at}); err != nil {
					errs <- fmt.Errorf("AddRevocation(%s): %w", id, err)
				}
				if err := s.CreateRefreshToken(ctx, refresh(id, "fam-"+id, at)); err != nil {
					errs <- fmt.Errorf("CreateRefreshToken(%s): %w", id, err)
				}
				if _, err := s.RotateRefreshToken(ctx, "iss", Digest(id), refresh(id+"-next", "", at), at); err != nil {
					errs <- fmt.Errorf("RotateRefreshToken(%s): %w", id, err)
				}
			}
		})
	}
	// Readers alongside.
	for range 2 {
		wg.Go(func() {
			for range each {
				if _, err := s.ListClients(ctx); err != nil {
					errs <- fmt.Errorf("ListClients: %w", err)
				}
				if _, err := s.GetRefreshToken(ctx, Digest("w0-0")); err != nil && !errors.Is(err, store.ErrNotFound) {
					errs <- fmt.Errorf("GetRefreshToken: %w", err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	clients, err := s.ListClients(ctx)
	must(t, "ListClients", err)
	rs, err := s.Revocations(ctx, t0)
	must(t, "Revocations", err)
	if len(clients) != workers*each || len(rs) != workers*each {
		t.Errorf("%d clients and %d revocations, want %d each", len(clients), len(rs), workers*each)
	}
}

// LegacyRefresh is a refresh token as a schema-1 store held it: no
// OriginAt, and its generation in its family.
type LegacyRefresh struct {
	Token      store.RefreshToken
	Generation int
}

// LegacyRefreshTokens are the rows a backend's migration test writes into
// a schema-1 database before opening it; CheckLegacyOrigins then checks
// what the migration made of them. fam-1 has its login and the token
// rotated from it; fam-2 only its login; fam-3 only a rotated token, its
// login's row having been purged.
func LegacyRefreshTokens() []LegacyRefresh {
	login := refresh("legacy-a", "fam-1", t0)
	login.UsedAt = t0.Add(time.Hour)
	return []LegacyRefresh{
		{login, 0},
		{refresh("legacy-b", "fam-1", t0.Add(time.Hour)), 1},
		{refresh("legacy-c", "fam-2", t0.Add(2*time.Hour)), 0},
		{refresh("legacy-d", "fam-3", t0.Add(3*time.Hour)), 4},
	}
}

// CheckLegacyOrigins checks that the migration gave each token of
// LegacyRefreshTokens the earliest IssuedAt its family still had — the
// login's where its row was kept — and that the families rotate on, with
// that origin.
func CheckLegacyOrigins(t *testing.T, s store.Store) {
	t.Helper()
	for name, want := range map[string]time.Time{
		"legacy-a": t0, "legacy-b": t0, "legacy-c": t0.Add(2 * time.Hour), "legacy-d": t0.Add(3 * time.Hour),
	} {
		if got := getRefresh(t, s, name).OriginAt; got != want {
			t.Errorf("%s: OriginAt %v after the migration, want %v", name, got, want)
		}
	}
	now := t0.Add(4 * time.Hour)
	if _, err := s.RotateRefreshToken(t.Context(), "iss", Digest("legacy-b"), refresh("legacy-b2", "", now), now); err != nil {
		t.Fatalf("RotateRefreshToken(legacy-b): %v", err)
	}
	if got := getRefresh(t, s, "legacy-b2").OriginAt; got != t0 {
		t.Errorf("legacy-b2: OriginAt %v, want fam-1's origin %v", got, t0)
	}
}
