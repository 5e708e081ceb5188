package issuer

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/issuer/signingkeys/signingkeystest"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/jose"
)

// memStore keeps clients and revocations in memory; the Store methods it
// does not fake are the embedded nil interface's, which panic.
type memStore struct {
	Store
	mu      sync.Mutex
	clients map[string]store.Client
	revs    []store.Revocation
}

func (s *memStore) GetClient(_ context.Context, id string) (store.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return store.Client{}, store.ErrNotFound
	}
	c.Tenant = cmp.Or(c.Tenant, store.DefaultTenant) // as a store creates it
	return c, nil
}

func (s *memStore) AddRevocation(_ context.Context, r store.Revocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revs = append(s.revs, r)
	return nil
}

func (s *memStore) Revocations(_ context.Context, now time.Time) ([]store.Revocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Revocation
	for _, r := range s.revs {
		if r.JTI == "" || now.Before(r.Until) {
			out = append(out, r)
		}
	}
	return out, nil
}

type oauthFixture struct {
	srv      *httptest.Server
	st       *memStore
	secrets  map[string]string
	revoked  []string
	keys     *signingkeys.Manager
	signing  *signingkeystest.Store // the keys' store
	seal     *signingkeystest.Sealer
	clockNow time.Time
}

const testIssuer = "https://auth.example.com/"

func newOAuthFixture(t testing.TB) *oauthFixture {
	t.Helper()
	f := &oauthFixture{st: &memStore{clients: map[string]store.Client{}}, secrets: map[string]string{},
		clockNow: time.Unix(1_800_000_000, 0)}
	now := func() time.Time { return f.clockNow }
	for id, scopes := range map[string][]string{"svc-a": {"orders:read", "orders:write"}, "svc-b": {"x"}, "rs": {"introspect"}} {
		secret, err := NewSecret(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		d := SecretDigest(secret)
		f.st.clients[id] = store.Client{ID: id, Name: id, SecretDigest: d[:], Scopes: scopes}
		f.secrets[id] = secret
	}
	f.seal = signingkeystest.NewSealer(t)
	f.signing = signingkeystest.NewStore()
	f.keys = signingkeys.New(f.signing, f.seal, signingkeys.Policy{}, now)
	if err := f.keys.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Issuer: testIssuer, Audience: []string{"api"}, Store: f.st, Keys: f.keys, Now: now,
		Publisher: jtiRecorder{&f.revoked}})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(svc.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
}

func (f *oauthFixture) post(t *testing.T, path string, form url.Values, basic [2]string, contentType string) reply {
	t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(form.Encode()))
	if contentType == "" {
		contentType = "application/x-www-form-urlencoded"
	}
	req.Header.Set("Content-Type", contentType)
	if basic[0] != "" {
		req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return reply{resp.StatusCode, resp.Header, m}
}

func (f *oauthFixture) issue(t *testing.T, client string, scope string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	r := f.post(t, "/oauth2/token", form, [2]string{client, f.secrets[client]}, "")
	if r.status != 200 {
		t.Fatalf("token for %s: %d %v", client, r.status, r.body)
	}
	return r.body["access_token"].(string)
}

func TestClientCredentials(t *testing.T) {
	f := newOAuthFixture(t)
	secretA := f.secrets["svc-a"]
	cases := []struct {
		name        string
		form        url.Values
		basic       [2]string
		contentType string
		status      int
		errCode     string
		scope       string
	}{
		{"basic", url.Values{"grant_type": {"client_credentials"}}, [2]string{"svc-a", secretA}, "", 200, "", "orders:read orders:write"},
		{"post", url.Values{"grant_type": {"client_credentials"}, "client_id": {"svc-a"}, "client_secret": {secretA}}, [2]string{}, "", 200, "", "orders:read orders:write"},
		{"narrowed scope", url.Values{"grant_type": {"client_credentials"}, "scope": {"orders:read"}}, [2]string{"svc-a", secretA}, "", 200, "", "orders:read"},
		{"scope not granted", url.Values{"grant_type": {"client_credentials"}, "scope": {"admin"}}, [2]string{"svc-a", secretA}, "", 400, "invalid_scope", ""},
		{"wrong secret", url.Values{"grant_type": {"client_credentials"}}, [2]string{"svc-a", secretA + "x"}, "", 401, "invalid_client", ""},
		{"unknown client", url.Values{"grant_type": {"client_credentials"}}, [2]string{"ghost", secretA}, "", 401, "invalid_client", ""},
		{"no credentials", url.Values{"grant_type": {"client_credentials"}}, [2]string{}, "", 401, "invalid_client", ""},
		{"two auth methods", url.Values{"grant_type": {"client_credentials"}, "client_secret": {secretA}}, [2]string{"svc-a", secretA}, "", 400, "invalid_request", ""},
		{"wrong content type", url.Values{"grant_type": {"client_credentials"}}, [2]string{"svc-a", secretA}, "application/json", 400, "invalid_request", ""},
		{"missing grant type", url.Values{}, [2]string{"svc-a", secretA}, "", 400, "invalid_request", ""},
		{"unsupported grant type", url.Values{"grant_type": {"password"}}, [2]string{"svc-a", secretA}, "", 400, "unsupported_grant_type", ""},
		{"repeated parameter", url.Values{"grant_type": {"client_credentials", "client_credentials"}}, [2]string{"svc-a", secretA}, "", 400, "invalid_request", ""},
		{"oversized body", url.Values{"grant_type": {"client_credentials"}, "pad": {strings.Repeat("a", 20000)}}, [2]string{"svc-a", secretA}, "", 400, "invalid_request", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(t, "/oauth2/token", tc.form, tc.basic, tc.contentType)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %v", r.status, tc.status, r.body)
			}
			if r.header.Get("Cache-Control") != "no-store" {
				t.Error("token response is cacheable")
			}
			if tc.errCode != "" {
				if r.body["error"] != tc.errCode {
					t.Errorf("error %v, want %s", r.body["error"], tc.errCode)
				}
				if tc.status == 401 && tc.basic[0] != "" && r.header.Get("WWW-Authenticate") == "" {
					t.Error("401 to Basic authentication without a challenge")
				}
				return
			}
			if r.body["token_type"] != "Bearer" || r.body["scope"] != tc.scope || r.body["expires_in"] != float64(900) {
				t.Errorf("response %v", r.body)
			}
			// The token verifies against the published JWKS as an RFC 9068 access token.
			set, err := jose.ParseKeySet(f.keys.JWKS())
			if err != nil {
				t.Fatal(err)
			}
			v, _ := jose.NewVerifier(set, []jose.Alg{jose.ES256}, jose.Expected{Issuer: testIssuer, Audience: []string{"api"},
				Type: "at+jwt", Require: []string{"exp", "jti"}}, jose.WithClock(func() time.Time { return f.clockNow }))
			tok, err := v.Verify(r.body["access_token"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if tok.Claims.Subject != "svc-a" || tok.Claims.Scope != tc.scope || clientOf(tok) != "svc-a" {
				t.Errorf("claims %s", tok.Claims.JSON())
			}
		})
	}
}

func TestIntrospectAndRevoke(t *testing.T) {
	f := newOAuthFixture(t)
	tokA := f.issue(t, "svc-a", "")
	auth := func(c string) [2]string { return [2]string{c, f.secrets[c]} }
	active := func(caller, token string) bool {
		r := f.post(t, "/oauth2/introspect", url.Values{"token": {token}}, auth(caller), "")
		if r.status != 200 {
			t.Fatalf("introspect: %d %v", r.status, r.body)
		}
		return r.body["active"] == true
	}
	if !active("svc-a", tokA) {
		t.Fatal("own token inactive")
	}
	r := f.post(t, "/oauth2/introspect", url.Values{"token": {tokA}}, auth("svc-a"), "")
	if r.body["sub"] != "svc-a" || r.body["client_id"] != "svc-a" || r.body["scope"] != "orders:read orders:write" {
		t.Errorf("introspection %v", r.body)
	}
	if active("svc-b", tokA) {
		t.Error("another client may introspect svc-a's token without the introspect scope")
	}
	if !active("rs", tokA) {
		t.Error("a resource server with the introspect scope cannot introspect")
	}
	if active("svc-a", "garbage") || active("svc-a", tokA[:len(tokA)-3]+"AAA") {
		t.Error("a forged token is active")
	}
	if r := f.post(t, "/oauth2/introspect", url.Values{"token": {tokA}}, [2]string{"svc-a", "nope"}, ""); r.status != 401 {
		t.Errorf("unauthenticated introspection: %d", r.status)
	}

	// Another client cannot revoke it (but is answered 200 all the same).
	if r := f.post(t, "/oauth2/revoke", url.Values{"token": {tokA}}, auth("svc-b"), ""); r.status != 200 || !active("svc-a", tokA) {
		t.Fatalf("revocation by another client: %d, still active %v", r.status, active("svc-a", tokA))
	}
	if r := f.post(t, "/oauth2/revoke", url.Values{"token": {tokA}}, auth("svc-a"), ""); r.status != 200 {
		t.Fatalf("revoke: %d %v", r.status, r.body)
	}
	if active("svc-a", tokA) || active("rs", tokA) {
		t.Error("revoked token still active")
	}
	if len(f.revoked) != 1 {
		t.Errorf("local revocation callback calls: %v", f.revoked)
	}
	if r := f.post(t, "/oauth2/revoke", url.Values{"token": {"junk"}}, auth("svc-a"), ""); r.status != 200 {
		t.Errorf("revoking junk must answer 200 (RFC 7009 §2.2): %d", r.status)
	}
	if r := f.post(t, "/oauth2/revoke", url.Values{}, auth("svc-a"), ""); r.status != 400 {
		t.Errorf("revoke without token: %d", r.status)
	}
	// After expiry the token is inactive even unrevoked, although the
	// introspection cache holds it.
	tokB := f.issue(t, "svc-b", "")
	if !active("svc-b", tokB) {
		t.Fatal("fresh token inactive")
	}
	f.clockNow = f.clockNow.Add(16 * time.Minute)
	if active("svc-b", tokB) {
		t.Error("expired token active")
	}
}

// TestIntrospectCache: a token introspection verified once is answered from
// the cache, but only while its signing key is published; and a token
// altered in any byte is not a hit.
func TestIntrospectCache(t *testing.T) {
	f := newOAuthFixture(t)
	tok := f.issue(t, "svc-a", "")
	active := func(token string) any {
		return f.post(t, "/oauth2/introspect", url.Values{"token": {token}}, [2]string{"svc-a", f.secrets["svc-a"]}, "").body["active"]
	}
	if active(tok) != true {
		t.Fatal("fresh token inactive")
	}
	if active(tok+" ") != false || active(tok[:len(tok)-1]) != false {
		t.Error("a token differing from a cached one by a byte is active")
	}
	kid := f.keys.Signer().KeyID()
	if err := f.signing.DeleteSigningKey(context.Background(), kid); err != nil {
		t.Fatal(err)
	}
	if err := f.keys.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.keys.Signer().KeyID() == kid {
		t.Fatal("the deleted key still signs")
	}
	if active(tok) != false {
		t.Error("a cached token whose key is no longer published is active")
	}
}

func TestDiscoveryAndJWKS(t *testing.T) {
	f := newOAuthFixture(t)
	for _, p := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
		resp, err := http.Get(f.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if doc["issuer"] != testIssuer || doc["jwks_uri"] != "https://auth.example.com/.well-known/jwks.json" ||
			doc["token_endpoint"] != "https://auth.example.com/oauth2/token" {
			t.Errorf("%s: %v", p, doc)
		}
		for _, m := range []string{"token_endpoint_auth_methods_supported", "revocation_endpoint_auth_methods_supported",
			"introspection_endpoint_auth_methods_supported"} {
			if got := fmt.Sprint(doc[m]); got != "[client_secret_basic client_secret_post]" {
				t.Errorf("%s: %s = %s", p, m, got)
			}
		}
		// Only what keygate serves: no authorization endpoint, no ID token.
		for _, m := range []string{"authorization_endpoint", "id_token_signing_alg_values_supported", "response_types_supported",
			"subject_types_supported", "userinfo_endpoint"} {
			if v, ok := doc[m]; ok {
				t.Errorf("%s advertises %s = %v, which keygate does not serve", p, m, v)
			}
		}
	}
	resp, err := http.Get(f.srv.URL + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Cache-Control") != "public, max-age=300" {
		t.Errorf("JWKS Cache-Control %q", resp.Header.Get("Cache-Control"))
	}
	if set, err := jose.ParseKeySet(b); err != nil || set.Len() != 1 {
		t.Errorf("JWKS %s: %v", b, err)
	}
}

type jtiChecker map[string]bool

func (c jtiChecker) Revoked(_, jti, _ string, _ time.Time) bool { return c[jti] }

// TestIntrospectChecker: with a Checker, introspection asks it (the node's
// in-memory revocation set) rather than the store.
func TestIntrospectChecker(t *testing.T) {
	f := newOAuthFixture(t)
	tok := f.issue(t, "svc-a", "")
	parsed, err := jose.Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	checker := jtiChecker{}
	svc, err := New(Config{Issuer: testIssuer, Audience: []string{"api"}, Store: f.st, Keys: f.keys,
		Now: func() time.Time { return f.clockNow }, Checker: checker})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	active := func() any {
		return f.post(t, "/oauth2/introspect", url.Values{"token": {tok}}, [2]string{"svc-a", f.secrets["svc-a"]}, "").body["active"]
	}
	if active() != true {
		t.Fatal("active token reported inactive")
	}
	checker[parsed.Claims.ID] = true
	if active() != false {
		t.Fatal("a token the checker revoked is active")
	}
}

// TestIntrospectAfterAlgorithmChange: when the configured signing algorithm
// changes, tokens of the keys still published under the old one stay
// active at introspection.
func TestIntrospectAfterAlgorithmChange(t *testing.T) {
	f := newOAuthFixture(t)
	seal := signingkeystest.NewSealer(t)
	now := func() time.Time { return f.clockNow }
	keys := signingkeystest.NewStore()
	old := signingkeys.New(keys, seal, signingkeys.Policy{Alg: jose.EdDSA}, now)
	if err := old.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, _ := New(Config{Issuer: testIssuer, Store: f.st, Keys: old, Now: now})
	f.srv.Config.Handler = svc.Handler()
	tok := f.issue(t, "svc-a", "")

	changed := signingkeys.New(keys, seal, signingkeys.Policy{Alg: jose.ES256}, now)
	if err := changed.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, _ = New(Config{Issuer: testIssuer, Store: f.st, Keys: changed, Now: now})
	f.srv.Config.Handler = svc.Handler()
	r := f.post(t, "/oauth2/introspect", url.Values{"token": {tok}}, [2]string{"svc-a", f.secrets["svc-a"]}, "")
	if r.body["active"] != true {
		t.Fatalf("EdDSA token inactive after the policy moved to ES256: %v", r.body)
	}
}

// jtiRecorder is a Publisher that records the jtis revoked.
type jtiRecorder struct{ jtis *[]string }

func (r jtiRecorder) RevokeID(_ context.Context, _, jti string, _ time.Time) {
	*r.jtis = append(*r.jtis, jti)
}
func (jtiRecorder) RevokeSubject(context.Context, string, string, time.Time, time.Time) {}
func (jtiRecorder) Rotated(context.Context, string)                                     {}
func (jtiRecorder) TenantDeleted(context.Context, string)                               {}
