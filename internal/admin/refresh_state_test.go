package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
)

// twoNodes is a fleet of two token services on one SQLite store, each
// with its own admin API, client cache and in-memory revocation set, and
// nothing between them but the store: a node hears of its own revocations
// at once and of the other's never (what a fleet looks like while Redis is
// down, or before pub/sub has delivered). The clock is the test's.
type twoNodes struct {
	st   *sqlite.Store
	a, b *node
	now  time.Time
}

type node struct {
	adm, pub *httptest.Server
	mem      *revoke.Memory
}

// newTwoNodes starts the two nodes; wrapB, if set, wraps the store node B
// uses.
func newTwoNodes(t *testing.T, wrapB func(store.Store) store.Store) *twoNodes {
	t.Helper()
	st := openStore(t)
	f := &twoNodes{st: st, now: time.Unix(1_800_000_000, 0)}
	clock := func() time.Time { return f.now }
	km := newKeys(t, st, clock)
	mk := func(st store.Store) *node {
		mem := revoke.NewMemory()
		_, _, adm, pub := newService(t, st, issuer.Config{Issuer: testIssuer, Keys: km, Now: clock, Checker: mem,
			Publisher: memoryPublisher{mem}})
		return &node{adm: adm, pub: pub, mem: mem}
	}
	var bst store.Store = st
	if wrapB != nil {
		bst = wrapB(st)
	}
	f.a, f.b = mk(st), mk(bst)
	return f
}

// call makes an admin API request at n.
func (f *twoNodes) call(t *testing.T, n *node, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, n.adm.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	return jsonReply(t)(http.DefaultClient.Do(req))
}

// mustCall is call that fails t unless the answer has status want.
func (f *twoNodes) mustCall(t *testing.T, n *node, want int, method, path string, body any) map[string]any {
	t.Helper()
	code, m := f.call(t, n, method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d %v, want %d", method, path, code, m, want)
	}
	return m
}

// refresh presents a refresh token at n for client, asking for scope
// (none if empty).
func (f *twoNodes) refresh(t *testing.T, n *node, client [2]string, token, scope string) (int, map[string]any) {
	t.Helper()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {client[0]}, "client_secret": {client[1]}}
	if scope != "" {
		form.Set("scope", scope)
	}
	return jsonReply(t)(http.Post(n.pub.URL+"/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode())))
}

// session is a user logged in through a client.
type session struct {
	client  [2]string
	userID  string
	refresh string // the family's newest refresh token
}

// session creates a client and a user with these scopes at node A, logs
// the user in at A, and refreshes once at B, so that B has the client in
// its cache and the family has been rotated by the node under test.
func (f *twoNodes) session(t *testing.T, username string, clientScopes, userScopes []string) session {
	t.Helper()
	c := f.mustCall(t, f.a, 201, "POST", "/v1/admin/clients", map[string]any{"name": "app", "scopes": clientScopes})
	u := f.mustCall(t, f.a, 201, "POST", "/v1/admin/users", map[string]any{"username": username, "password": "correct horse battery", "scopes": userScopes})
	s := session{client: [2]string{c["client_id"].(string), c["client_secret"].(string)}, userID: u["id"].(string)}
	form := url.Values{"username": {username}, "password": {"correct horse battery"}, "client_id": {s.client[0]}, "client_secret": {s.client[1]}}
	code, tok := jsonReply(t)(http.Post(f.a.pub.URL+"/v1/login", "application/x-www-form-urlencoded", strings.NewReader(form.Encode())))
	if code != 200 {
		t.Fatalf("login: %d %v", code, tok)
	}
	f.now = f.now.Add(time.Second)
	code, tok = f.refresh(t, f.b, s.client, tok["refresh_token"].(string), "")
	if code != 200 {
		t.Fatalf("refresh at B before any change: %d %v", code, tok)
	}
	s.refresh = tok["refresh_token"].(string)
	return s
}

// familyRevoked reports whether the store holds token's family as revoked.
func (f *twoNodes) familyRevoked(t *testing.T, token string) bool {
	t.Helper()
	d := issuer.SecretDigest(token)
	rt, err := f.st.GetRefreshToken(t.Context(), d[:])
	if err != nil {
		t.Fatalf("GetRefreshToken: %v", err)
	}
	return rt.Revoked
}

// scopeClaim reads the "scope" claim of an access token without verifying it.
func scopeClaim(t *testing.T, token string) string {
	t.Helper()
	scope, _ := claims(t, token)["scope"].(string)
	return scope
}

// TestRefreshChecksCurrentState: a change made at node A that ends a
// user's sessions — disabling or deleting the user, a new password, fewer
// scopes, deleting the client, a subject revocation — refuses the next
// refresh at node B, which never heard of it (no Redis between them, and
// B's client cache still holds the client): B reads the user, the client
// and the subject's revocations from the store. The refusal revokes the
// family for good, so its newest token is refused at both nodes, even
// after the change is undone.
func TestRefreshChecksCurrentState(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, f *twoNodes, s session)
		undo   func(t *testing.T, f *twoNodes, s session) // nil: nothing to undo
	}{
		{"disabled user", func(t *testing.T, f *twoNodes, s session) {
			f.mustCall(t, f.a, 200, "PATCH", "/v1/admin/users/"+s.userID, map[string]any{"disabled": true})
		}, func(t *testing.T, f *twoNodes, s session) {
			f.mustCall(t, f.a, 200, "PATCH", "/v1/admin/users/"+s.userID, map[string]any{"disabled": false})
		}},
		{"deleted user", func(t *testing.T, f *twoNodes, s session) {
			f.mustCall(t, f.a, 204, "DELETE", "/v1/admin/users/"+s.userID, nil)
		}, nil},
		{"new password", func(t *testing.T, f *twoNodes, s session) {
			f.mustCall(t, f.a, 200, "PATCH", "/v1/admin/users/"+s.userID, map[string]any{"password": "a brand new passphrase"})
		}, nil},
		{"user scopes narrowed", func(t *testing.T, f *twoNodes, s session) {
			f.mustCall(t, f.a, 200, "PATCH", "/v1/admin/users/"+s.userID, map[string]any{"scopes": []string{"write"}})
		}, func(t *testing.T, f *twoNodes, s session) {
			f.mustCall(t, f.a, 200, "PATCH", "/v1/admin/users/"+s.userID, map[string]any{"scopes": []string{"read", "write"}})
		}},
		// The admin API stores a subject revocation before it disables or
		// deletes a user; written straight to the store, the change shows
		// that the user's state alone refuses the refresh.
		{"user disabled in the store only", func(t *testing.T, f *twoNodes, s session) {
			u, err := f.st.GetUser(t.Context(), s.userID)
			if err != nil {
				t.Fatal(err)
			}
			u.Disabled = true
			if err := f.st.UpdateUser(t.Context(), u); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"user deleted in the store only", func(t *testing.T, f *twoNodes, s session) {
			if err := f.st.DeleteUser(t.Context(), s.userID); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"deleted client", func(t *testing.T, f *twoNodes, s session) {
			f.mustCall(t, f.a, 204, "DELETE", "/v1/admin/clients/"+s.client[0], nil)
		}, nil},
		{"subject revoked", func(t *testing.T, f *twoNodes, s session) {
			f.mustCall(t, f.a, 201, "POST", "/v1/admin/revocations", map[string]any{"subject": s.userID})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTwoNodes(t, nil)
			s := f.session(t, "alice", []string{"read", "write"}, []string{"read", "write"})
			f.now = f.now.Add(500 * time.Millisecond)
			tc.change(t, f, s)
			if f.b.mem.Revoked(testIssuer, "", s.userID, f.now.Add(-time.Minute)) {
				t.Fatal("B heard of A's revocation: the test no longer models a node that missed it")
			}
			f.now = f.now.Add(500 * time.Millisecond) // within B's client cache (2 s)
			if code, m := f.refresh(t, f.b, s.client, s.refresh, ""); code != 400 || m["error"] != "invalid_grant" {
				t.Fatalf("refresh at B after the change at A: %d %v, want 400 invalid_grant", code, m)
			}
			if !f.familyRevoked(t, s.refresh) {
				t.Error("the refused refresh did not revoke the family")
			}
			if tc.undo != nil {
				f.now = f.now.Add(time.Second)
				tc.undo(t, f, s)
			}
			f.now = f.now.Add(3 * time.Second) // past every client cache
			for name, n := range map[string]*node{"A": f.a, "B": f.b} {
				if code, m := f.refresh(t, n, s.client, s.refresh, ""); code < 400 || code > 401 || m["access_token"] != nil {
					t.Errorf("the family's newest refresh token at %s afterwards: %d %v, want refused", name, code, m)
				}
			}
		})
	}
}

// TestRefreshFamilyOrigin: subject revocations are compared with when the
// family began (the login), not with when the presented token was issued.
// Node B rotated the family just after node A had taken the revocation's
// time but before A's write landed in the store; the token B issued
// postdates the revocation, yet its family does not, so it is refused at
// its first use, at any node, and the family is revoked.
func TestRefreshFamilyOrigin(t *testing.T) {
	f := newTwoNodes(t, nil)
	s := f.session(t, "alice", []string{"read"}, []string{"read"})
	ctx := t.Context()

	f.now = f.now.Add(time.Minute)
	revokedAt := f.now.Add(-30 * time.Second) // A's clock when it decided
	next := "kgr_" + rand.Text()              // any secret will do: the store keeps its digest
	old, nd := issuer.SecretDigest(s.refresh), issuer.SecretDigest(next)
	_, err := f.st.RotateRefreshToken(ctx, testIssuer, old[:], store.RefreshToken{Digest: nd[:], ClientID: s.client[0], Subject: s.userID,
		Scopes: []string{"read"}, IssuedAt: f.now.UTC(), ExpiresAt: f.now.Add(issuer.DefaultRefreshTTL).UTC()}, f.now.UTC())
	if err != nil {
		t.Fatalf("B's rotation: %v", err)
	}
	if err := f.st.AddRevocation(ctx, store.Revocation{Issuer: testIssuer, Subject: s.userID, Before: revokedAt.UTC(), CreatedAt: f.now.UTC()}); err != nil {
		t.Fatalf("A's revocation: %v", err)
	}

	f.now = f.now.Add(time.Second)
	if code, m := f.refresh(t, f.b, s.client, next, ""); code != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("a token rotated after the revocation, of a family begun before it: %d %v, want 400 invalid_grant", code, m)
	}
	if !f.familyRevoked(t, next) {
		t.Error("the family was not revoked")
	}
	if code, m := f.refresh(t, f.a, s.client, next, ""); code != 400 {
		t.Errorf("the same token at A: %d %v, want 400", code, m)
	}

	// A family begun after the revocation is not affected.
	form := url.Values{"username": {"alice"}, "password": {"correct horse battery"}, "client_id": {s.client[0]}, "client_secret": {s.client[1]}}
	code, tok := jsonReply(t)(http.Post(f.b.pub.URL+"/v1/login", "application/x-www-form-urlencoded", strings.NewReader(form.Encode())))
	if code != 200 {
		t.Fatalf("login after the revocation: %d %v", code, tok)
	}
	f.now = f.now.Add(time.Second)
	if code, m := f.refresh(t, f.b, s.client, tok["refresh_token"].(string), ""); code != 200 {
		t.Errorf("refresh of a family begun after the revocation: %d %v", code, m)
	}
}

// TestRefreshNarrowsScopes: every refresh grants the family's scopes only
// as far as the client and the user still hold them, in the access token
// and in the new refresh token, for good (widening again later does not
// give them back); a requested scope must be within that, and a refused
// request spends nothing.
func TestRefreshNarrowsScopes(t *testing.T) {
	narrowClient := func(t *testing.T, f *twoNodes, s session, scopes []string) {
		f.mustCall(t, f.a, 200, "PATCH", "/v1/admin/clients/"+s.client[0], map[string]any{"scopes": scopes})
	}
	// The admin API pairs fewer user scopes with a subject revocation,
	// which ends the family (TestRefreshChecksCurrentState); written
	// straight to the store, the change shows the intersection alone.
	narrowUser := func(t *testing.T, f *twoNodes, s session, scopes []string) {
		u, err := f.st.GetUser(t.Context(), s.userID)
		if err != nil {
			t.Fatal(err)
		}
		u.Scopes = scopes
		if err := f.st.UpdateUser(t.Context(), u); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		change    func(t *testing.T, f *twoNodes, s session, scopes []string)
		requested string
		code      int
		scope     string // granted, when code is 200
	}{
		{"client narrowed at another node", narrowClient, "", 200, "read"},
		{"user narrowed", narrowUser, "", 200, "read"},
		{"client narrowed, lost scope requested", narrowClient, "write", 400, ""},
		{"user narrowed, lost scope requested", narrowUser, "write", 400, ""},
		{"client narrowed, kept scope requested", narrowClient, "read", 200, "read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTwoNodes(t, nil)
			s := f.session(t, "alice", []string{"read", "write"}, []string{"read", "write"})
			f.now = f.now.Add(500 * time.Millisecond)
			tc.change(t, f, s, []string{"read"})
			f.now = f.now.Add(500 * time.Millisecond) // within B's client cache (2 s)
			code, m := f.refresh(t, f.b, s.client, s.refresh, tc.requested)
			if code != tc.code {
				t.Fatalf("refresh at B asking for %q: %d %v, want %d", tc.requested, code, m, tc.code)
			}
			if code != 200 {
				if m["error"] != "invalid_scope" {
					t.Errorf("error %v, want invalid_scope", m["error"])
				}
				if code, m := f.refresh(t, f.b, s.client, s.refresh, ""); code != 200 || m["scope"] != "read" {
					t.Errorf("the token after a refused scope request: %d %v, want 200 with scope read", code, m)
				}
				return
			}
			if m["scope"] != tc.scope || scopeClaim(t, m["access_token"].(string)) != tc.scope {
				t.Fatalf("granted scope %v, access token scope %q; want %q in both", m["scope"], scopeClaim(t, m["access_token"].(string)), tc.scope)
			}
			// The new refresh token holds the narrowed set: widening the
			// client and the user again does not give the scope back.
			f.now = f.now.Add(time.Second)
			tc.change(t, f, s, []string{"read", "write"})
			f.now = f.now.Add(3 * time.Second)
			code, m = f.refresh(t, f.a, s.client, m["refresh_token"].(string), "")
			if code != 200 || m["scope"] != "read" || scopeClaim(t, m["access_token"].(string)) != "read" {
				t.Errorf("the next refresh after widening again: %d %v, want scope read", code, m)
			}
		})
	}
}

// racingStore runs before ahead of every rotation: what another node
// commits between a refresh's reads and its rotation.
type racingStore struct {
	store.Store
	before func(ctx context.Context)
}

func (s *racingStore) RotateRefreshToken(ctx context.Context, issuer string, old []byte, next store.RefreshToken, now time.Time) (store.RefreshToken, error) {
	s.before(ctx)
	return s.Store.RotateRefreshToken(ctx, issuer, old, next, now)
}

// TestRefreshRacingDisable: node A disables the user (the subject
// revocation, then the user) after node B's refresh has read the user and
// the client but before it rotates. The rotation checks the subject's
// revocations in its own transaction: it refuses, revokes the family, and
// the access token B had signed is never sent.
func TestRefreshRacingDisable(t *testing.T) {
	var race func(ctx context.Context)
	f := newTwoNodes(t, func(st store.Store) store.Store {
		return &racingStore{Store: st, before: func(ctx context.Context) {
			if race != nil {
				race(ctx)
			}
		}}
	})
	s := f.session(t, "alice", []string{"read"}, []string{"read"})
	f.now = f.now.Add(time.Second)
	race = func(ctx context.Context) {
		race = nil
		at := f.now.UTC()
		if err := f.st.AddRevocation(ctx, store.Revocation{Issuer: testIssuer, Subject: s.userID, Before: at, CreatedAt: at}); err != nil {
			t.Errorf("A's revocation: %v", err)
		}
		u, err := f.st.GetUser(ctx, s.userID)
		if err != nil {
			t.Errorf("GetUser: %v", err)
			return
		}
		u.Disabled = true
		if err := f.st.UpdateUser(ctx, u); err != nil {
			t.Errorf("A's UpdateUser: %v", err)
		}
	}
	code, m := f.refresh(t, f.b, s.client, s.refresh, "")
	if code != 400 || m["error"] != "invalid_grant" || m["access_token"] != nil {
		t.Fatalf("refresh at B racing the disable at A: %d %v, want 400 invalid_grant", code, m)
	}
	if race != nil {
		t.Fatal("the race did not run: B did not try to rotate")
	}
	if !f.familyRevoked(t, s.refresh) {
		t.Error("the refused rotation did not revoke the family")
	}
}

// readRacingStore runs before after the user a login reads is read: what
// another node commits between a login's read and its grant.
type readRacingStore struct {
	store.Store
	after func(ctx context.Context)
}

func (s *readRacingStore) GetUserByName(ctx context.Context, tenant, name string) (store.User, error) {
	u, err := s.Store.GetUserByName(ctx, tenant, name)
	if s.after != nil {
		s.after(ctx)
	}
	return u, err
}

// TestLoginRacingPasswordChange: node A changes the user's password (and
// so revokes the subject) a second after node B's login has read the user
// with the old one. The session B grants began before that read, so the
// revocation covers both its refresh token (refused at first use) and its
// access token (revoked at introspection).
func TestLoginRacingPasswordChange(t *testing.T) {
	var race func(ctx context.Context)
	f := newTwoNodes(t, func(st store.Store) store.Store {
		return &readRacingStore{Store: st, after: func(ctx context.Context) {
			if race != nil {
				race(ctx)
			}
		}}
	})
	c := f.mustCall(t, f.a, 201, "POST", "/v1/admin/clients", map[string]any{"name": "app", "scopes": []string{"read", "introspect"}})
	u := f.mustCall(t, f.a, 201, "POST", "/v1/admin/users", map[string]any{"username": "alice", "password": "correct horse battery", "scopes": []string{"read"}})
	client := [2]string{c["client_id"].(string), c["client_secret"].(string)}
	race = func(ctx context.Context) {
		race = nil
		f.now = f.now.Add(time.Second) // A's change lands a second after B read the user
		f.mustCall(t, f.a, 200, "PATCH", "/v1/admin/users/"+u["id"].(string), map[string]any{"password": "a brand new passphrase"})
	}
	form := url.Values{"username": {"alice"}, "password": {"correct horse battery"}, "client_id": {client[0]}, "client_secret": {client[1]}}
	code, tok := jsonReply(t)(http.Post(f.b.pub.URL+"/v1/login", "application/x-www-form-urlencoded", strings.NewReader(form.Encode())))
	if code != 200 || race != nil {
		t.Fatalf("login at B with the password it read: %d %v (race ran: %v)", code, tok, race == nil)
	}
	f.now = f.now.Add(time.Second)
	if code, m := f.refresh(t, f.b, client, tok["refresh_token"].(string), ""); code != 400 || m["error"] != "invalid_grant" {
		t.Errorf("refresh of the session begun before the password change: %d %v, want 400 invalid_grant", code, m)
	}
	in := url.Values{"token": {tok["access_token"].(string)}, "client_id": {client[0]}, "client_secret": {client[1]}}
	code, m := jsonReply(t)(http.Post(f.a.pub.URL+"/oauth2/introspect", "application/x-www-form-urlencoded", strings.NewReader(in.Encode())))
	if code != 200 || m["active"] != false {
		t.Errorf("introspection of the access token granted before the password change: %d %v, want inactive", code, m)
	}
}

// TestClientCredentialsFromStaleCache: node B still holds a client in its
// cache when node A deletes it. B may go on answering for up to
// clientCacheTTL, but the token it issues is dated when B read the client,
// before the deletion, so A's revocation of the client covers it.
func TestClientCredentialsFromStaleCache(t *testing.T) {
	f := newTwoNodes(t, nil)
	c := f.mustCall(t, f.a, 201, "POST", "/v1/admin/clients", map[string]any{"name": "svc", "scopes": []string{"read"}})
	rs := f.mustCall(t, f.a, 201, "POST", "/v1/admin/clients", map[string]any{"name": "rs", "scopes": []string{"introspect"}})
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {c["client_id"].(string)}, "client_secret": {c["client_secret"].(string)}}
	token := func() (int, map[string]any) {
		return jsonReply(t)(http.Post(f.b.pub.URL+"/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode())))
	}
	if code, m := token(); code != 200 {
		t.Fatalf("token at B: %d %v", code, m) // B now caches the client
	}
	f.now = f.now.Add(time.Second)
	f.mustCall(t, f.a, 204, "DELETE", "/v1/admin/clients/"+c["client_id"].(string), nil)
	f.now = f.now.Add(500 * time.Millisecond) // within B's cache TTL
	code, m := token()
	if code != 200 {
		t.Skipf("B no longer answers from its cache (%d); nothing to check", code)
	}
	in := url.Values{"token": {m["access_token"].(string)}, "client_id": {rs["client_id"].(string)}, "client_secret": {rs["client_secret"].(string)}}
	code, got := jsonReply(t)(http.Post(f.a.pub.URL+"/oauth2/introspect", "application/x-www-form-urlencoded", strings.NewReader(in.Encode())))
	if code != 200 || got["active"] != false {
		t.Errorf("a token B issued from its cache after A deleted the client: %d %v, want inactive", code, got)
	}
}

// TestRefreshOtherIssuersSubject: a subject revocation under another issuer
// (an identity provider keygate's gateway trusts) whose subject is the id of
// a local user is not a revocation of that user: revocations are per
// issuer, so the user's refresh family goes on, at the node that holds the
// revocation in memory and at the one that only has the store.
func TestRefreshOtherIssuersSubject(t *testing.T) {
	f := newTwoNodes(t, nil)
	s := f.session(t, "alice", []string{"read"}, []string{"read"})
	f.now = f.now.Add(time.Minute)
	const other = "https://idp.example/"
	rv := store.Revocation{Issuer: other, Subject: s.userID, Before: f.now.UTC(), CreatedAt: f.now.UTC()}
	if err := f.st.AddRevocation(t.Context(), rv); err != nil {
		t.Fatal(err)
	}
	f.a.mem.RevokeSubject(other, s.userID, f.now)
	f.now = f.now.Add(time.Second)
	tok := s.refresh
	for _, n := range []*node{f.a, f.b} {
		code, m := f.refresh(t, n, s.client, tok, "")
		if code != 200 {
			t.Fatalf("refresh after a revocation of %s under %s: %d %v", s.userID, other, code, m)
		}
		tok = m["refresh_token"].(string)
	}
	if f.familyRevoked(t, tok) {
		t.Error("the family was revoked")
	}
}

// TestRefreshChecksCurrentSecret: a client secret rotated at node A is
// refused for a refresh at node B at once, although B's client cache (2 s)
// still holds the old digest: a refresh authenticates against the client
// as read from the store for it. The token is not spent, and the new
// secret refreshes it.
func TestRefreshChecksCurrentSecret(t *testing.T) {
	f := newTwoNodes(t, nil)
	s := f.session(t, "alice", []string{"read"}, []string{"read"})
	f.now = f.now.Add(500 * time.Millisecond)
	rotated := f.mustCall(t, f.a, 200, "POST", "/v1/admin/clients/"+s.client[0]+"/secret", nil)
	f.now = f.now.Add(500 * time.Millisecond) // within B's client cache (2 s)
	if code, m := f.refresh(t, f.b, s.client, s.refresh, ""); code != 401 || m["error"] != "invalid_client" {
		t.Fatalf("refresh at B with the old secret after A rotated it: %d %v, want 401 invalid_client", code, m)
	}
	if f.familyRevoked(t, s.refresh) {
		t.Error("a refresh refused for the client's secret revoked the family")
	}
	fresh := [2]string{s.client[0], rotated["client_secret"].(string)}
	if code, m := f.refresh(t, f.b, fresh, s.refresh, ""); code != 200 {
		t.Errorf("refresh at B with the new secret: %d %v, want 200", code, m)
	}
}
