package issuer

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/store"
)

// userStore adds users and refresh tokens, with the store contract's
// rotation semantics, to memStore.
type userStore struct {
	*memStore
	users   map[string]store.User
	refresh map[string]store.RefreshToken
}

// GetUserByName finds the user of tenant with name, whatever its key in
// s.users; a user without a tenant is the default tenant's, as a store
// creates it.
func (s *userStore) GetUserByName(_ context.Context, tenant, name string) (store.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.users {
		if u.Tenant = cmp.Or(u.Tenant, store.DefaultTenant); u.Tenant == tenant && u.Username == name {
			return u, nil
		}
	}
	return store.User{}, store.ErrNotFound
}

func (s *userStore) GetUser(_ context.Context, id string) (store.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.users {
		if u.ID == id {
			u.Tenant = cmp.Or(u.Tenant, store.DefaultTenant)
			return u, nil
		}
	}
	return store.User{}, store.ErrNotFound
}

func (s *userStore) CreateRefreshToken(_ context.Context, t store.RefreshToken) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.OriginAt.IsZero() {
		t.OriginAt = t.IssuedAt
	}
	s.refresh[string(t.Digest)] = t
	return nil
}

func (s *userStore) GetRefreshToken(_ context.Context, d []byte) (store.RefreshToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refresh[string(d)]
	if !ok {
		return t, store.ErrNotFound
	}
	return t, nil
}

func (s *userStore) RotateRefreshToken(_ context.Context, issuer string, old []byte, next store.RefreshToken, now time.Time) (store.RefreshToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refresh[string(old)]
	if !ok {
		return t, store.ErrNotFound
	}
	var revokedBefore time.Time
	for _, r := range s.revs {
		if r.Issuer == issuer && r.Subject == t.Subject && r.Before.After(revokedBefore) {
			revokedBefore = r.Before
		}
	}
	if err := store.CheckRotation(t, revokedBefore, now); err != nil {
		if errors.Is(err, store.ErrReused) || errors.Is(err, store.ErrSubjectRevoked) {
			s.revokeFamily(t.FamilyID)
		}
		return t, err
	}
	spent := t
	spent.UsedAt = now
	s.refresh[string(old)] = spent
	next.FamilyID, next.OriginAt = t.FamilyID, t.OriginAt
	s.refresh[string(next.Digest)] = next
	return t, nil
}

func (s *userStore) RevokeRefreshFamily(_ context.Context, d []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.refresh[string(d)]
	if !ok {
		return store.ErrNotFound
	}
	s.revokeFamily(t.FamilyID)
	return nil
}

func (s *userStore) revokeFamily(f string) {
	for k, t := range s.refresh {
		if t.FamilyID == f {
			t.Revoked = true
			s.refresh[k] = t
		}
	}
}

// fixedLimiter allows n attempts per key.
type fixedLimiter struct {
	n    int
	seen map[string]int
}

func (l *fixedLimiter) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	l.seen[key]++
	return l.seen[key] <= l.n, time.Minute, nil
}

func newLoginFixture(t testing.TB, limit int) (*oauthFixture, *userStore) {
	t.Helper()
	f := newOAuthFixture(t)
	us := &userStore{memStore: f.st, users: map[string]store.User{}, refresh: map[string]store.RefreshToken{}}
	hash, err := HashPassword("correct horse battery", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	us.users["alice"] = store.User{ID: "u-alice", Username: "alice", PasswordHash: hash, Scopes: []string{"orders:read", "admin"}}
	us.users["mallory"] = store.User{ID: "u-m", Username: "mallory", PasswordHash: hash, Disabled: true}
	svc, err := New(Config{Issuer: testIssuer, Store: us, Keys: f.keys, Now: func() time.Time { return f.clockNow },
		Limiter: &fixedLimiter{n: limit, seen: map[string]int{}}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	return f, us
}

func TestLoginAndRefreshRotation(t *testing.T) {
	f, us := newLoginFixture(t, 100)
	cl := [2]string{"svc-a", f.secrets["svc-a"]}
	login := func(user, pw string) reply {
		return f.post(t, "/v1/login", url.Values{"username": {user}, "password": {pw}}, cl, "")
	}
	for name, tc := range map[string]struct {
		user, pw string
		status   int
	}{
		"wrong password": {"alice", "wrong password!", 401},
		"unknown user":   {"nobody", "correct horse battery", 401},
		"disabled user":  {"mallory", "correct horse battery", 401},
		"empty password": {"alice", "", 400},
	} {
		if r := login(tc.user, tc.pw); r.status != tc.status || (tc.status == 401 && r.body["error"] != "invalid_grant") {
			t.Errorf("%s: %d %v", name, r.status, r.body)
		}
	}
	r := login("alice", "correct horse battery")
	if r.status != 200 || r.body["scope"] != "orders:read" || !strings.HasPrefix(r.body["refresh_token"].(string), "kgr_") {
		t.Fatalf("login: %d %v", r.status, r.body)
	}
	for _, rt := range us.refresh {
		if bytes.Contains(rt.Digest, []byte("kgr_")) {
			t.Fatal("refresh token stored in the clear")
		}
	}
	refresh := func(tok string, client [2]string) reply {
		return f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}, client, "")
	}
	first := r.body["refresh_token"].(string)
	r2 := refresh(first, cl)
	if r2.status != 200 || r2.body["refresh_token"] == first {
		t.Fatalf("rotation: %d %v", r2.status, r2.body)
	}
	second := r2.body["refresh_token"].(string)
	if r := refresh(second, [2]string{"svc-b", f.secrets["svc-b"]}); r.status != 400 {
		t.Errorf("another client used the refresh token: %d", r.status)
	}
	// Replaying the spent token revokes the family: the second one dies too.
	if r := refresh(first, cl); r.status != 400 || r.body["error"] != "invalid_grant" {
		t.Fatalf("replay: %d %v", r.status, r.body)
	}
	if r := refresh(second, cl); r.status != 400 {
		t.Errorf("family not revoked after replay: %d %v", r.status, r.body)
	}
	// A fresh login, then RFC 7009 revocation of its refresh token.
	third := login("alice", "correct horse battery").body["refresh_token"].(string)
	if r := f.post(t, "/oauth2/revoke", url.Values{"token": {third}, "token_type_hint": {"refresh_token"}}, cl, ""); r.status != 200 {
		t.Fatal(r.status)
	}
	if r := refresh(third, cl); r.status != 400 {
		t.Errorf("revoked refresh token still works: %d", r.status)
	}
	// Expiry.
	fourth := login("alice", "correct horse battery").body["refresh_token"].(string)
	f.clockNow = f.clockNow.Add(DefaultRefreshTTL)
	if r := refresh(fourth, cl); r.status != 400 {
		t.Errorf("expired refresh token works: %d", r.status)
	}
}

// TestSealedService: while sealed, every endpoint that signs answers 503
// temporarily_unavailable and writes nothing (a refresh token presented
// then is not spent); the others keep working; unsealed, issuance resumes.
func TestSealedService(t *testing.T) {
	f, us := newLoginFixture(t, 100)
	cl := [2]string{"svc-a", f.secrets["svc-a"]}
	r := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, cl, "")
	if r.status != 200 {
		t.Fatalf("login: %d %v", r.status, r.body)
	}
	refresh, access := r.body["refresh_token"].(string), r.body["access_token"].(string)

	f.seal.SetSealed(true)
	f.keys.DropSigner()
	stored := len(us.refresh)
	for name, form := range map[string]url.Values{
		"client_credentials": {"grant_type": {"client_credentials"}},
		"refresh_token":      {"grant_type": {"refresh_token"}, "refresh_token": {refresh}},
		"login":              {"username": {"alice"}, "password": {"correct horse battery"}},
	} {
		path := "/oauth2/token"
		if name == "login" {
			path = "/v1/login"
		}
		r := f.post(t, path, form, cl, "")
		if r.status != 503 || r.body["error"] != "temporarily_unavailable" || !strings.Contains(r.body["error_description"].(string), "sealed") {
			t.Errorf("%s while sealed: %d %v, want 503 temporarily_unavailable", name, r.status, r.body)
		}
	}
	if len(us.refresh) != stored {
		t.Errorf("sealed requests stored %d refresh tokens", len(us.refresh)-stored)
	}
	rs := [2]string{"rs", f.secrets["rs"]}
	if r := f.post(t, "/oauth2/introspect", url.Values{"token": {access}}, rs, ""); r.status != 200 || r.body["active"] != true {
		t.Errorf("introspection while sealed: %d %v, want active", r.status, r.body)
	}

	f.seal.SetSealed(false)
	if err := f.keys.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	r = f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}, cl, "")
	if r.status != 200 {
		t.Fatalf("the refresh token presented while sealed was spent: %d %v", r.status, r.body)
	}
}

func TestLoginAttemptLimit(t *testing.T) {
	f, _ := newLoginFixture(t, 3)
	cl := [2]string{"svc-a", f.secrets["svc-a"]}
	for i := range 3 {
		if r := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"guess-" + string(rune('a'+i)) + "xxxxxx"}}, cl, ""); r.status != 401 {
			t.Fatalf("attempt %d: %d", i, r.status)
		}
	}
	r := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, cl, "")
	if r.status != 429 || r.header.Get("Retry-After") != "60" {
		t.Fatalf("fourth attempt: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
}

// failedLoginFrom makes a login with a wrong password for user through
// client svc-a, forwarded for the address from, and returns the status.
func (f *oauthFixture) failedLoginFrom(t *testing.T, user, from string) int {
	t.Helper()
	form := url.Values{"username": {user}, "password": {"wrong password!"}, "client_id": {"svc-a"}, "client_secret": {f.secrets["svc-a"]}}
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", from)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestLoginLimitPerAddressBehindProxy: behind a trusted proxy the
// per-address limit counts each client's X-Forwarded-For address, not the
// proxy's; from an untrusted peer the header is ignored, so a client cannot
// escape the limit by inventing addresses.
func TestLoginLimitPerAddressBehindProxy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		// whether the fourth attempt, from another forwarded address, is
		// refused because every attempt counted against one address
		shared bool
	}{
		{"trusted proxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, false},
		{"no trusted proxy", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, us := newLoginFixture(t, 3)
			lim := &fixedLimiter{n: 3, seen: map[string]int{}}
			svc, err := New(Config{Issuer: testIssuer, Store: us, Keys: f.keys, Now: func() time.Time { return f.clockNow },
				Limiter: lim, TrustedProxies: tc.trusted})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Config.Handler = svc.Handler()
			attempt := func(user, from string) int { return f.failedLoginFrom(t, user, from) }
			// Three users from one address use up that address.
			for i, u := range []string{"u1", "u2", "u3"} {
				if st := attempt(u, "198.51.100.1"); st != 401 {
					t.Fatalf("attempt %d: %d", i, st)
				}
			}
			if st := attempt("u4", "198.51.100.1"); st != 429 {
				t.Errorf("fourth attempt from the same address: %d, want 429", st)
			}
			want := 401
			if tc.shared {
				want = 429
			}
			if st := attempt("u5", "198.51.100.2"); st != want {
				t.Errorf("attempt from another forwarded address: %d, want %d", st, want)
			}
			digest := sha256.Sum256([]byte("u1"))
			if lim.seen["login:user:u1"] != 0 || lim.seen["login:user:"+base64.RawURLEncoding.EncodeToString(digest[:])] != 1 {
				t.Errorf("the account key is not the username's digest: %v", lim.seen)
			}
		})
	}
}

func TestPasswordHash(t *testing.T) {
	h, err := HashPassword("correct horse battery", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %s", h)
	}
	for pw, want := range map[string]bool{"correct horse battery": true, "correct horse batterY": false, "": false} {
		if ok, err := CheckPassword(h, pw); err != nil || ok != want {
			t.Errorf("%q: %v %v", pw, ok, err)
		}
	}
	if _, err := HashPassword("short", rand.Reader); err == nil {
		t.Error("short password accepted")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=1,t=1,p=1$AAAA$AAAA", "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHQ$" + strings.Repeat("A", 43), dummyHash[:20]} {
		if _, err := CheckPassword(bad, "x"); err == nil {
			t.Errorf("malformed hash %q accepted", bad)
		}
	}
}

// TestTokenRateLimit: the token endpoint's per-client limit refuses with
// 429 slow_down and Retry-After past the budget, counts only requests whose
// client authenticated (a wrong secret spends nothing), and keeps one
// client's budget apart from another's.
func TestTokenRateLimit(t *testing.T) {
	f := newOAuthFixture(t)
	lim := &fixedLimiter{n: 2, seen: map[string]int{}}
	svc, err := New(Config{Issuer: testIssuer, Store: f.st, Keys: f.keys, Now: func() time.Time { return f.clockNow }, TokenLimiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	grant := url.Values{"grant_type": {"client_credentials"}}
	for range 5 {
		if r := f.post(t, "/oauth2/token", grant, [2]string{"svc-a", "wrong secret"}, ""); r.status != 401 {
			t.Fatalf("wrong secret: %d", r.status)
		}
	}
	for i := range 2 {
		if r := f.post(t, "/oauth2/token", grant, [2]string{"svc-a", f.secrets["svc-a"]}, ""); r.status != 200 {
			t.Fatalf("request %d within the budget: %d %v (did failed authentications spend it?)", i+1, r.status, r.body)
		}
	}
	r := f.post(t, "/oauth2/token", grant, [2]string{"svc-a", f.secrets["svc-a"]}, "")
	if r.status != 429 || r.body["error"] != "slow_down" || r.header.Get("Retry-After") == "" {
		t.Fatalf("past the budget: %d %v %v", r.status, r.header, r.body)
	}
	if r := f.post(t, "/oauth2/token", grant, [2]string{"svc-b", f.secrets["svc-b"]}, ""); r.status != 200 {
		t.Errorf("another client was refused: %d", r.status)
	}
	if lim.seen["token:client:svc-a"] != 3 {
		t.Errorf("limiter asked %d times for svc-a, want 3: %v", lim.seen["token:client:svc-a"], lim.seen)
	}
}

// TestObserver: every token-endpoint request is reported once, with its
// endpoint, grant and outcome.
func TestObserver(t *testing.T) {
	f, us := newLoginFixture(t, 100)
	type event struct{ endpoint, grant, result string }
	var (
		mu  sync.Mutex // the handler runs on the server's goroutine
		got []event
	)
	svc, err := New(Config{Issuer: testIssuer, Store: us, Keys: f.keys, Now: func() time.Time { return f.clockNow },
		Observe: func(_ context.Context, endpoint, grant, result string, elapsed time.Duration) {
			if elapsed <= 0 {
				t.Errorf("%s: elapsed %v", endpoint, elapsed)
			}
			mu.Lock()
			got = append(got, event{endpoint, grant, result})
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	cl := [2]string{"svc-a", f.secrets["svc-a"]}
	login := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, cl, "")
	refresh, _ := login.body["refresh_token"].(string)
	tests := []struct {
		name string
		path string
		form url.Values
		auth [2]string
		want event
	}{
		{"client_credentials", "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, cl, event{"token", "client_credentials", "ok"}},
		{"wrong secret", "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, [2]string{"svc-a", "nope"}, event{"token", "", "invalid_client"}},
		{"scope not allowed", "/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"admin"}}, cl, event{"token", "client_credentials", "invalid_scope"}},
		{"unknown grant", "/oauth2/token", url.Values{"grant_type": {"urn:made:up"}}, cl, event{"token", "", "unsupported_grant_type"}},
		{"refresh", "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}, cl, event{"token", "refresh_token", "ok"}},
		{"refresh replayed", "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}, cl, event{"token", "refresh_token", "invalid_grant"}},
		{"bad password", "/v1/login", url.Values{"username": {"alice"}, "password": {"wrong password!"}}, cl, event{"login", "password", "invalid_grant"}},
		{"introspect garbage", "/oauth2/introspect", url.Values{"token": {"abc"}}, cl, event{"introspect", "", "inactive"}},
		{"introspect without token", "/oauth2/introspect", url.Values{}, cl, event{"introspect", "", "invalid_request"}},
		{"revoke", "/oauth2/revoke", url.Values{"token": {"abc"}}, cl, event{"revoke", "", "ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			f.post(t, tt.path, tt.form, tt.auth, "")
			mu.Lock() // Observe runs before the handler returns, so before the answer is sent
			defer mu.Unlock()
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("observed %v, want [%v]", got, tt.want)
			}
		})
	}
}

// staleChecker is a revocation set failing closed, as the Redis fan-out
// does past its maximum staleness: every token is revoked, and it says so
// (FailingClosed) as the fan-out does.
type staleChecker struct{}

func (staleChecker) Revoked(_, _, _ string, _ time.Time) bool { return true }
func (staleChecker) FailingClosed() bool                      { return true }

// TestRefreshWhileRevocationsStale: a refresh is decided on the store, not
// on the node's revocation set, so while the set fails closed a refresh
// goes on: one whose subject is not revoked in the store succeeds, and one
// whose subject is is refused and its family revoked for good.
func TestRefreshWhileRevocationsStale(t *testing.T) {
	f, us := newLoginFixture(t, 100)
	svc, err := New(Config{Issuer: testIssuer, Store: us, Keys: f.keys, Now: func() time.Time { return f.clockNow }, Checker: staleChecker{}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	cl := [2]string{"svc-a", f.secrets["svc-a"]}
	login := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, cl, "")
	refresh := func(tok string) reply {
		return f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}, cl, "")
	}
	first := login.body["refresh_token"].(string)

	r := refresh(first)
	if r.status != 200 {
		t.Fatalf("refresh of a subject not revoked in the store, while the set fails closed: %d %v", r.status, r.body)
	}
	second := r.body["refresh_token"].(string)

	// A subject revocation in the store: refused, and the family revoked
	// for good.
	f.clockNow = f.clockNow.Add(time.Second)
	if err := us.AddRevocation(t.Context(), store.Revocation{Issuer: testIssuer, Subject: "u-alice", Before: f.clockNow, CreatedAt: f.clockNow}); err != nil {
		t.Fatal(err)
	}
	if r := refresh(second); r.status != 400 || r.body["error"] != "invalid_grant" {
		t.Fatalf("refresh of a subject revoked in the store, while the set fails closed: %d %v", r.status, r.body)
	}
	d := SecretDigest(second)
	if rt, err := us.GetRefreshToken(t.Context(), d[:]); err != nil || !rt.Revoked {
		t.Errorf("the family of a revoked subject's token was not revoked: %+v %v", rt, err)
	}
}

// TestLoginChargesAddressFirst: an attempt its address may not make never
// reaches the account's bucket, so one address cannot flood the limiter
// with one-off accounts (to push a victim's bucket out of it).
func TestLoginChargesAddressFirst(t *testing.T) {
	f, us := newLoginFixture(t, 100)
	lim := &fixedLimiter{n: 2, seen: map[string]int{}}
	svc, err := New(Config{Issuer: testIssuer, Store: us, Keys: f.keys, Now: func() time.Time { return f.clockNow }, Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	for i := range 5 {
		form := url.Values{"username": {fmt.Sprint("one-off-", i)}, "password": {"wrong password!"}}
		want := 401
		if i >= 2 {
			want = 429
		}
		if r := f.post(t, "/v1/login", form, [2]string{"svc-a", f.secrets["svc-a"]}, ""); r.status != want {
			t.Fatalf("attempt %d: %d, want %d", i, r.status, want)
		}
	}
	accounts := 0
	for k := range lim.seen {
		if strings.HasPrefix(k, "login:user:") {
			accounts++
		}
	}
	if accounts != 2 {
		t.Errorf("%d account buckets charged, want 2 (only the attempts the address could make): %v", accounts, lim.seen)
	}
}

// countingStore counts client reads.
type countingStore struct {
	*memStore
	reads atomic.Int64
}

func (s *countingStore) GetClient(ctx context.Context, id string) (store.Client, error) {
	s.reads.Add(1)
	return s.memStore.GetClient(ctx, id)
}

// TestPreAuthLimit: requests naming client_ids the node has not read
// lately cost a store read each, bounded per address before any other
// limit; a client read recently is served from memory whatever its
// address has spent.
func TestPreAuthLimit(t *testing.T) {
	f := newOAuthFixture(t)
	st := &countingStore{memStore: f.st}
	lim := &fixedLimiter{n: 3, seen: map[string]int{}}
	svc, err := New(Config{Issuer: testIssuer, Store: st, Keys: f.keys, Now: func() time.Time { return f.clockNow }, PreAuthLimiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	form := url.Values{"grant_type": {"client_credentials"}}
	if r := f.post(t, "/oauth2/token", form, [2]string{"svc-a", f.secrets["svc-a"]}, ""); r.status != 200 {
		t.Fatalf("known client: %d %v", r.status, r.body)
	}
	for i := range 10 {
		want := 401
		if i >= 2 {
			want = 429
		}
		r := f.post(t, "/oauth2/token", form, [2]string{fmt.Sprint("kgc_random", i), "x"}, "")
		if r.status != want {
			t.Fatalf("unknown client %d: %d, want %d", i, r.status, want)
		}
		if want == 429 && (r.header.Get("Retry-After") == "" || r.body["error"] != "slow_down") {
			t.Errorf("unknown client %d: %v %v", i, r.header, r.body)
		}
	}
	if n := st.reads.Load(); n != 3 {
		t.Errorf("%d client reads, want 3 (the known client once, then two unknown ones)", n)
	}
	if r := f.post(t, "/oauth2/token", form, [2]string{"svc-a", f.secrets["svc-a"]}, ""); r.status != 200 {
		t.Errorf("the cached client after the address's budget is spent: %d %v", r.status, r.body)
	}
}

// countingUsers counts client reads on a userStore.
type countingUsers struct {
	*userStore
	reads atomic.Int64
}

func (s *countingUsers) GetClient(ctx context.Context, id string) (store.Client, error) {
	s.reads.Add(1)
	return s.userStore.GetClient(ctx, id)
}

// TestRefreshReadsClientOnce: a refresh is decided on its client as read
// from the store during the request, in one read: when authentication
// answered from the client cache the refresh reads the client (and caches
// it anew), when authentication has just read it the refresh uses that.
// A client the refresh finds deleted is cached as unknown.
func TestRefreshReadsClientOnce(t *testing.T) {
	f, us := newLoginFixture(t, 100)
	st := &countingUsers{userStore: us}
	svc, err := New(Config{Issuer: testIssuer, Store: st, Keys: f.keys, Now: func() time.Time { return f.clockNow }})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	cl := [2]string{"svc-a", f.secrets["svc-a"]}
	reads := func(what string, want int64, do func() reply, status int) reply {
		t.Helper()
		before := st.reads.Load()
		r := do()
		if r.status != status {
			t.Fatalf("%s: %d %v, want %d", what, r.status, r.body, status)
		}
		if n := st.reads.Load() - before; n != want {
			t.Errorf("%s: %d client reads, want %d", what, n, want)
		}
		return r
	}
	login := func() reply {
		return f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, cl, "")
	}
	tok := reads("login, client not cached", 1, login, 200).body["refresh_token"].(string)
	refresh := func() reply {
		return f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}, cl, "")
	}
	f.clockNow = f.clockNow.Add(clientCacheTTL * 3 / 4)
	tok = reads("refresh, client cached", 1, refresh, 200).body["refresh_token"].(string)
	// Past the login's read, within the refresh's: the refresh cached the
	// client anew.
	f.clockNow = f.clockNow.Add(clientCacheTTL / 2)
	credentials := func() reply {
		return f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, cl, "")
	}
	reads("client_credentials after the refresh's read", 0, credentials, 200)
	f.clockNow = f.clockNow.Add(clientCacheTTL)
	tok = reads("refresh, cache expired", 1, refresh, 200).body["refresh_token"].(string)

	// Deleted in the store (at another node): the refresh from the cache
	// finds it so, and the cache then answers that it is unknown.
	us.mu.Lock()
	delete(us.clients, "svc-a")
	us.mu.Unlock()
	if r := reads("refresh, client deleted", 1, refresh, 400); r.body["error"] != "invalid_grant" {
		t.Errorf("refresh, client deleted: %v, want invalid_grant", r.body)
	}
	reads("client_credentials after the refresh found the client deleted", 0, credentials, 401)
}

// TestLoginIPv6Prefix: the per-address login limit counts an IPv6 client
// by Config.IPv6Prefix: by default two addresses of one /64 share a budget
// and two /64s of one /56 do not; with 56 they do; 128 counts each
// address. A length outside 32..128 is refused.
func TestLoginIPv6Prefix(t *testing.T) {
	for _, tc := range []struct {
		bits                 int
		sameSlash64, sibling bool // whether the fourth attempt is refused
	}{
		{0, true, false},
		{56, true, true},
		{128, false, false},
	} {
		t.Run(fmt.Sprint(tc.bits), func(t *testing.T) {
			f, us := newLoginFixture(t, 3)
			svc, err := New(Config{Issuer: testIssuer, Store: us, Keys: f.keys, Now: func() time.Time { return f.clockNow },
				Limiter: &fixedLimiter{n: 3, seen: map[string]int{}}, IPv6Prefix: tc.bits,
				TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Config.Handler = svc.Handler()
			attempt := func(user, from string) int { return f.failedLoginFrom(t, user, from) }
			for i, u := range []string{"u1", "u2", "u3"} {
				if st := attempt(u, "2001:db8:0:1::1"); st != 401 {
					t.Fatalf("attempt %d: %d", i, st)
				}
			}
			for _, c := range []struct {
				from    string
				refused bool
			}{{"2001:db8:0:1::2", tc.sameSlash64}, {"2001:db8:0:2::1", tc.sibling}} {
				want := 401
				if c.refused {
					want = 429
				}
				if st := attempt("u4-"+c.from, c.from); st != want {
					t.Errorf("an attempt from %s after three from 2001:db8:0:1::1: %d, want %d", c.from, st, want)
				}
			}
		})
	}
	for _, bits := range []int{-1, 31, 129} {
		if _, err := New(Config{Issuer: testIssuer, Store: &memStore{}, Keys: &signingkeys.Manager{}, IPv6Prefix: bits}); err == nil {
			t.Errorf("New accepted IPv6Prefix %d", bits)
		}
	}
}

// A login grants the scopes it asks for, or every scope the user holds and
// the client allows; one that would grant nothing, or asks for more, is
// invalid_scope naming the three lists, and only once the password is
// right.
func TestLoginScopes(t *testing.T) {
	f, us := newLoginFixture(t, 100)
	hash := us.users["alice"].PasswordHash
	us.users["bob"] = store.User{ID: "u-bob", Username: "bob", PasswordHash: hash, Scopes: []string{"reports"}}
	cl := [2]string{"svc-a", f.secrets["svc-a"]} // allows orders:read orders:write
	for _, c := range []struct {
		name, user, pw, scope string
		status                int
		granted, desc         string
	}{
		{"everything both have", "alice", "correct horse battery", "", 200, "orders:read", ""},
		{"narrowed", "alice", "correct horse battery", "orders:read", 200, "orders:read", ""},
		{"a scope the client does not allow", "alice", "correct horse battery", "admin", 400, "",
			"requested: admin; held by the user: orders:read admin; allowed to the client: orders:read orders:write"},
		{"a scope the user does not hold", "alice", "correct horse battery", "orders:write", 400, "",
			"requested: orders:write; held by the user: orders:read admin"},
		{"nothing in common", "bob", "correct horse battery", "", 400, "",
			"the login would grant no scope; held by the user: reports; allowed to the client: orders:read orders:write"},
		{"wrong password names nothing", "bob", "wrong password!", "orders:read", 401, "", ""},
	} {
		v := url.Values{"username": {c.user}, "password": {c.pw}}
		if c.scope != "" {
			v.Set("scope", c.scope)
		}
		r := f.post(t, "/v1/login", v, cl, "")
		if r.status != c.status {
			t.Errorf("%s: %d %v, want %d", c.name, r.status, r.body, c.status)
			continue
		}
		switch {
		case c.status == 200 && r.body["scope"] != c.granted:
			t.Errorf("%s: granted %q, want %q", c.name, r.body["scope"], c.granted)
		case c.status == 400 && (r.body["error"] != "invalid_scope" || !strings.Contains(r.body["error_description"].(string), c.desc)):
			t.Errorf("%s: %v, want invalid_scope with %q", c.name, r.body, c.desc)
		case c.status == 401 && strings.Contains(fmt.Sprint(r.body), "reports"):
			t.Errorf("%s: a refused password learned the user's scopes: %v", c.name, r.body)
		}
	}
}
