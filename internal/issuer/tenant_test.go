package issuer

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// tenantFixture is the login fixture with a second tenant, acme: a client
// acme-svc, a client acme-rs with the introspect scope, a user alice of
// acme (another person than the default tenant's alice, with another
// password) and a user carol of acme alone.
type tenantFixture struct {
	*oauthFixture
	us  *userStore
	lim *fixedLimiter
}

const acmePassword = "acme alice's own password"

func newTenantFixture(t *testing.T) *tenantFixture {
	t.Helper()
	f, us := newLoginFixture(t, 1<<30)
	lim := &fixedLimiter{n: 1 << 30, seen: map[string]int{}}
	svc, err := New(Config{Issuer: testIssuer, Audience: []string{"api"}, Store: us, Keys: f.keys,
		Now: func() time.Time { return f.clockNow }, Limiter: lim})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Config.Handler = svc.Handler()
	for id, scopes := range map[string][]string{"acme-svc": {"transit:encrypt:payments", "read"}, "acme-rs": {"introspect"}} {
		secret, err := NewSecret(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		d := SecretDigest(secret)
		f.st.clients[id] = store.Client{ID: id, Tenant: "acme", Name: id, SecretDigest: d[:], Scopes: scopes}
		f.secrets[id] = secret
	}
	for _, u := range []struct{ id, name, pw string }{{"u-acme-alice", "alice", acmePassword}, {"u-acme-carol", "carol", "correct horse battery"}} {
		hash, err := HashPassword(u.pw, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		us.users["acme/"+u.name] = store.User{ID: u.id, Tenant: "acme", Username: u.name, PasswordHash: hash,
			Scopes: []string{"transit:encrypt:payments", "read"}}
	}
	return &tenantFixture{oauthFixture: f, us: us, lim: lim}
}

func (f *tenantFixture) as(client string) [2]string { return [2]string{client, f.secrets[client]} }

func (f *tenantFixture) login(t *testing.T, client, user, pw string) reply {
	t.Helper()
	return f.post(t, "/v1/login", url.Values{"username": {user}, "password": {pw}}, f.as(client), "")
}

// claims decodes an access token's claims (its signature is checked by
// the tests of issuance; here only what it says matters).
func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTokensCarryTenant: every token carries its client's tenant in the
// tenant claim, the default tenant's included; a login's and a refresh's
// too, and introspection returns it.
func TestTokensCarryTenant(t *testing.T) {
	f := newTenantFixture(t)
	for client, tenant := range map[string]string{"svc-a": "default", "acme-svc": "acme"} {
		tok := f.issue(t, client, "")
		if c := claims(t, tok); c["tenant"] != tenant || c["client_id"] != client {
			t.Errorf("%s: claims %v, want tenant %q", client, c, tenant)
		}
		r := f.post(t, "/oauth2/introspect", url.Values{"token": {tok}}, f.as(client), "")
		if r.body["active"] != true || r.body["tenant"] != tenant {
			t.Errorf("%s: introspection %v, want tenant %q", client, r.body, tenant)
		}
	}

	r := f.login(t, "acme-svc", "alice", acmePassword)
	if r.status != 200 {
		t.Fatalf("login: %d %v", r.status, r.body)
	}
	if c := claims(t, r.body["access_token"].(string)); c["tenant"] != "acme" || c["sub"] != "u-acme-alice" {
		t.Errorf("login token claims %v", c)
	}
	rr := f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {r.body["refresh_token"].(string)}}, f.as("acme-svc"), "")
	if rr.status != 200 {
		t.Fatalf("refresh: %d %v", rr.status, rr.body)
	}
	if c := claims(t, rr.body["access_token"].(string)); c["tenant"] != "acme" || c["sub"] != "u-acme-alice" {
		t.Errorf("refreshed token claims %v", c)
	}
	r = f.login(t, "svc-a", "alice", "correct horse battery")
	if c := claims(t, r.body["access_token"].(string)); r.status != 200 || c["tenant"] != "default" || c["sub"] != "u-alice" {
		t.Errorf("default login: %d, claims %v", r.status, c)
	}
}

// TestLoginWithinClientTenant: a client logs in users of its own tenant
// only. A user of another tenant is refused exactly as a name no tenant
// has, even with the right password, so the answer does not tell whether
// the other tenant has the name.
func TestLoginWithinClientTenant(t *testing.T) {
	f := newTenantFixture(t)
	unknown := f.login(t, "acme-svc", "nobody", "correct horse battery")
	if unknown.status != 401 || unknown.body["error"] != "invalid_grant" {
		t.Fatalf("unknown user: %d %v", unknown.status, unknown.body)
	}
	for name, tc := range map[string]struct{ client, user, pw string }{
		"acme client, default alice's password": {"acme-svc", "alice", "correct horse battery"},
		"default client, acme alice's password": {"svc-a", "alice", acmePassword},
		"default client, acme-only carol":       {"svc-a", "carol", "correct horse battery"},
		"default client, disabled mallory":      {"svc-a", "mallory", "correct horse battery"},
	} {
		r := f.login(t, tc.client, tc.user, tc.pw)
		if r.status != unknown.status || r.body["error"] != unknown.body["error"] || r.body["error_description"] != unknown.body["error_description"] || len(r.body) != len(unknown.body) {
			t.Errorf("%s: %d %v, want the unknown user's %d %v", name, r.status, r.body, unknown.status, unknown.body)
		}
	}
	if r := f.login(t, "acme-svc", "carol", "correct horse battery"); r.status != 200 {
		t.Errorf("acme carol through acme's client: %d %v", r.status, r.body)
	}
	// A refresh token of acme's family is no use to a default client.
	r := f.login(t, "acme-svc", "alice", acmePassword)
	if rr := f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {r.body["refresh_token"].(string)}}, f.as("svc-a"), ""); rr.status != 400 || rr.body["error"] != "invalid_grant" {
		t.Errorf("acme's refresh token through a default client: %d %v", rr.status, rr.body)
	}
}

// TestLoginLimitPerTenantAccount: the per-account login limit counts a
// username within its tenant; the default tenant's keys are those of the
// accounts before tenants.
func TestLoginLimitPerTenantAccount(t *testing.T) {
	f := newTenantFixture(t)
	f.login(t, "svc-a", "alice", "wrong password!")
	f.login(t, "acme-svc", "alice", "wrong password!")
	f.login(t, "acme-svc", "alice", "wrong password!")
	d := sha256.Sum256([]byte("alice"))
	user := base64.RawURLEncoding.EncodeToString(d[:])
	if f.lim.seen["login:user:"+user] != 1 || f.lim.seen["login:user:acme:"+user] != 2 {
		t.Errorf("account buckets: %v", f.lim.seen)
	}
	if got := accountKey("default", "alice"); got != "login:user:"+user {
		t.Errorf("default tenant's key %q", got)
	}
}

// TestIntrospectWithinTenant: the introspect scope lets a client learn
// about the tokens of its own tenant only; another tenant's token is
// inactive to it, as a forged one is.
func TestIntrospectWithinTenant(t *testing.T) {
	f := newTenantFixture(t)
	def, acme := f.issue(t, "svc-a", ""), f.issue(t, "acme-svc", "")
	for _, tc := range []struct {
		caller, token string
		active        bool
	}{
		{"rs", def, true}, {"rs", acme, false},
		{"acme-rs", acme, true}, {"acme-rs", def, false},
		{"acme-svc", acme, true}, {"acme-svc", def, false},
	} {
		r := f.post(t, "/oauth2/introspect", url.Values{"token": {tc.token}}, f.as(tc.caller), "")
		if r.status != 200 || r.body["active"] != tc.active || (!tc.active && len(r.body) != 1) {
			t.Errorf("%s introspects %s's token: %d %v, want active %v", tc.caller, claims(t, tc.token)["tenant"], r.status, r.body, tc.active)
		}
	}
}

// TestTenantScopeGrammar: the scopes of the tenant grammar are RFC 6749
// scope-tokens, asked for and granted unchanged, and introspected as
// issued.
func TestTenantScopeGrammar(t *testing.T) {
	f := newTenantFixture(t)
	want := "transit:encrypt:payments"
	tok := f.issue(t, "acme-svc", want)
	if c := claims(t, tok); c["scope"] != want {
		t.Errorf("claims %v", c)
	}
	if r := f.post(t, "/oauth2/introspect", url.Values{"token": {tok}}, f.as("acme-svc"), ""); r.body["scope"] != want {
		t.Errorf("introspection %v", r.body)
	}
	r := f.login(t, "acme-svc", "carol", "correct horse battery")
	if c := claims(t, r.body["access_token"].(string)); r.status != 200 || c["scope"] != "transit:encrypt:payments read" {
		t.Errorf("login: %d, claims %v", r.status, c)
	}
}
