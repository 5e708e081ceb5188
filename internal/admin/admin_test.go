package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/revoke"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
)

const (
	adminToken = "admin-token-0123456789abcdef0123456789"
	testIssuer = "https://auth.example.com/"
)

// openStore opens a SQLite store in a directory of t's.
func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "keygate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newKeys returns the signing keys on st, sealed under a keyring of a fresh
// root key, loaded on the clock now.
func newKeys(t testing.TB, st store.Store, now func() time.Time) *signingkeys.Manager {
	t.Helper()
	root, err := rootkey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := rootkey.New(rootkey.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	km := signingkeys.New(st, kr, signingkeys.Policy{}, now)
	if err := km.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return km
}

// newService returns the token service of cfg and its admin API, and
// serves both.
func newService(t testing.TB, st store.Store, cfg issuer.Config) (svc *issuer.Service, admin *API, adm, pub *httptest.Server) {
	t.Helper()
	cfg.Store = st
	svc, err := issuer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if admin, err = New(svc, st, issuer.NewBearer(adminToken)); err != nil {
		t.Fatal(err)
	}
	adm, pub = httptest.NewServer(admin.Handler()), httptest.NewServer(svc.Handler())
	t.Cleanup(adm.Close)
	t.Cleanup(pub.Close)
	return svc, admin, adm, pub
}

// adminFixture is the admin API and the token endpoints of one service on
// the real SQLite store, with a clock the test moves.
type adminFixture struct {
	km       *signingkeys.Manager
	svc      *issuer.Service
	admin    *API
	adm, pub *httptest.Server
	now      time.Time
}

// newAdminFixture starts the fixture; configure, if given, changes the
// token service's configuration first.
func newAdminFixture(t testing.TB, configure ...func(*issuer.Config)) *adminFixture {
	t.Helper()
	st := openStore(t)
	f := &adminFixture{now: time.Unix(1_800_000_000, 0)}
	clock := func() time.Time { return f.now }
	f.km = newKeys(t, st, clock)
	cfg := issuer.Config{Issuer: testIssuer, Keys: f.km, Now: clock}
	for _, c := range configure {
		c(&cfg)
	}
	f.svc, f.admin, f.adm, f.pub = newService(t, st, cfg)
	return f
}

// claims decodes an access token's claims (its signature is checked by
// the token service's tests; here only what it says matters).
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

// call makes an admin API request with a JSON body.
func (f *adminFixture) call(t *testing.T, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.adm.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return jsonReply(t)(http.DefaultClient.Do(req))
}

// jsonReply reads a response's status and JSON object body.
func jsonReply(t *testing.T) func(*http.Response, error) (int, map[string]any) {
	return func(resp *http.Response, err error) (int, map[string]any) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
}

// post makes a form request to the token endpoints, authenticated as a
// client with client_secret_post.
func (f *adminFixture) post(t *testing.T, path string, form url.Values, id, secret string) (int, map[string]any) {
	t.Helper()
	form.Set("client_id", id)
	form.Set("client_secret", secret)
	return jsonReply(t)(http.Post(f.pub.URL+path, "application/x-www-form-urlencoded", strings.NewReader(form.Encode())))
}

// TestAdminAPI drives the admin API and the token endpoints together on the
// real SQLite store.
func TestAdminAPI(t *testing.T) {
	f := newAdminFixture(t)
	km := f.km
	call := func(method, path, token string, body any) (int, map[string]any) {
		t.Helper()
		return f.call(t, method, path, token, body)
	}
	tokenFor := func(id, secret string) int {
		code, _ := f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, id, secret)
		return code
	}

	if code, _ := call("GET", "/v1/admin/clients", "", nil); code != 401 {
		t.Fatalf("no admin token: %d", code)
	}
	if code, _ := call("GET", "/v1/admin/clients", adminToken+"x", nil); code != 401 {
		t.Fatalf("wrong admin token: %d", code)
	}
	code, c := call("POST", "/v1/admin/clients", adminToken, map[string]any{"name": "billing", "scopes": []string{"orders:read"}})
	if code != 201 || c["client_secret"] == nil {
		t.Fatalf("create client: %d %v", code, c)
	}
	id, secret := c["client_id"].(string), c["client_secret"].(string)
	if tokenFor(id, secret) != 200 {
		t.Fatal("new client cannot get a token")
	}
	_, list := call("GET", "/v1/admin/clients", adminToken, nil)
	if b, _ := json.Marshal(list); strings.Contains(string(b), secret) || !strings.Contains(string(b), id) {
		t.Errorf("client list: %s", b)
	}
	_, rot := call("POST", "/v1/admin/clients/"+id+"/secret", adminToken, nil)
	if tokenFor(id, secret) != 401 || tokenFor(id, rot["client_secret"].(string)) != 200 {
		t.Error("secret rotation did not replace the secret")
	}
	if code, _ := call("DELETE", "/v1/admin/clients/"+id, adminToken, nil); code != 204 {
		t.Errorf("delete client: %d", code)
	}
	if tokenFor(id, rot["client_secret"].(string)) != 401 {
		t.Error("deleted client still gets tokens")
	}
	if code, _ := call("DELETE", "/v1/admin/clients/"+id, adminToken, nil); code != 404 {
		t.Errorf("deleting again: %d", code)
	}

	if code, u := call("POST", "/v1/admin/users", adminToken, map[string]any{"username": "alice", "password": "correct horse battery"}); code != 201 || u["id"] == nil {
		t.Fatalf("create user: %d %v", code, u)
	}
	if code, _ := call("POST", "/v1/admin/users", adminToken, map[string]any{"username": "alice", "password": "correct horse battery"}); code != 409 {
		t.Errorf("duplicate username: %d", code)
	}
	if code, _ := call("POST", "/v1/admin/users", adminToken, map[string]any{"username": "bob", "password": "short"}); code != 400 {
		t.Errorf("short password: %d", code)
	}
	if code, _ := call("POST", "/v1/admin/users", adminToken, map[string]any{"username": "bob", "password": "long enough", "role": "x"}); code != 400 {
		t.Errorf("unknown field: %d", code)
	}

	first := km.Signer().KeyID()
	if code, k := call("POST", "/v1/admin/keys/rotate", adminToken, map[string]any{"immediate": true}); code != 200 || k["kid"] == first {
		t.Fatalf("rotate: %d %v", code, k)
	}
	if _, ks := call("GET", "/v1/admin/keys", adminToken, nil); len(ks["keys"].([]any)) != 2 || km.Signer().KeyID() == first {
		t.Errorf("keys after immediate rotation: %v", ks)
	}
	if code, rv := call("POST", "/v1/admin/revocations", adminToken, map[string]any{"subject": "alice"}); code != 201 || rv["subject"] != "alice" ||
		rv["before"] != f.now.UTC().Format(time.RFC3339Nano) || rv["jti"] != nil || rv["until"] != nil {
		t.Errorf("revoke subject: %d %v", code, rv)
	}
	if code, rv := call("POST", "/v1/admin/revocations", adminToken, map[string]any{"jti": "j1", "until": "2030-01-02T03:04:05Z"}); code != 201 || rv["jti"] != "j1" ||
		rv["until"] != "2030-01-02T03:04:05Z" || rv["issuer"] != testIssuer || rv["subject"] != nil || rv["before"] != nil {
		t.Errorf("revoke jti: %d %v", code, rv)
	}
	if code, _ := call("POST", "/v1/admin/revocations", adminToken, map[string]any{"subject": "a", "jti": "b"}); code != 400 {
		t.Errorf("ambiguous revocation: %d", code)
	}
}

// userSession creates a client and a user through the admin API and logs
// the user in; it returns the client's credentials, the user's id and the
// login's access and refresh tokens.
func (f *adminFixture) userSession(t *testing.T, username string) (client [2]string, userID, access, refresh string) {
	t.Helper()
	code, c := f.call(t, "POST", "/v1/admin/clients", adminToken, map[string]any{"name": "app", "scopes": []string{"read"}})
	if code != 201 {
		t.Fatalf("create client: %d %v", code, c)
	}
	client = [2]string{c["client_id"].(string), c["client_secret"].(string)}
	code, u := f.call(t, "POST", "/v1/admin/users", adminToken, map[string]any{"username": username, "password": "correct horse battery", "scopes": []string{"read"}})
	if code != 201 {
		t.Fatalf("create user: %d %v", code, u)
	}
	code, tok := f.post(t, "/v1/login", url.Values{"username": {username}, "password": {"correct horse battery"}}, client[0], client[1])
	if code != 200 {
		t.Fatalf("login: %d %v", code, tok)
	}
	return client, u["id"].(string), tok["access_token"].(string), tok["refresh_token"].(string)
}

func (f *adminFixture) refresh(t *testing.T, client [2]string, token string) (int, map[string]any) {
	t.Helper()
	return f.post(t, "/oauth2/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}}, client[0], client[1])
}

func (f *adminFixture) active(t *testing.T, client [2]string, token string) bool {
	t.Helper()
	code, m := f.post(t, "/oauth2/introspect", url.Values{"token": {token}}, client[0], client[1])
	if code != 200 {
		t.Fatalf("introspect: %d %v", code, m)
	}
	return m["active"] == true
}

// TestSubjectRevocationEndsRefresh: revoking everything issued to a user
// before T also ends the refresh tokens issued before T, which would
// otherwise mint access tokens dated after T; a login after T works.
func TestSubjectRevocationEndsRefresh(t *testing.T) {
	f := newAdminFixture(t)
	client, uid, access, refresh := f.userSession(t, "alice")
	f.now = f.now.Add(time.Minute)
	code, rotated := f.refresh(t, client, refresh) // rotation before the revocation
	if code != 200 {
		t.Fatalf("refresh before the revocation: %d %v", code, rotated)
	}
	f.now = f.now.Add(time.Minute)
	if code, m := f.call(t, "POST", "/v1/admin/revocations", adminToken, map[string]any{"subject": uid}); code != 201 {
		t.Fatalf("revoke subject: %d %v", code, m)
	}
	f.now = f.now.Add(time.Second)
	if code, m := f.refresh(t, client, rotated["refresh_token"].(string)); code != 400 || m["error"] != "invalid_grant" {
		t.Errorf("refresh token issued before the revocation: %d %v, want 400 invalid_grant", code, m)
	}
	if f.active(t, client, access) || f.active(t, client, rotated["access_token"].(string)) {
		t.Error("an access token issued before the revocation is active")
	}
	code, tok := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, client[0], client[1])
	if code != 200 {
		t.Fatalf("login after the revocation: %d %v", code, tok)
	}
	f.now = f.now.Add(time.Second)
	if code, m := f.refresh(t, client, tok["refresh_token"].(string)); code != 200 {
		t.Errorf("refresh token issued after the revocation: %d %v", code, m)
	}
	if !f.active(t, client, tok["access_token"].(string)) {
		t.Error("an access token issued after the revocation is not active")
	}
}

// TestDeleteUserRevokes: deleting a user ends their access and refresh
// tokens; deleting an unknown user is 404 and revokes nothing.
func TestDeleteUserRevokes(t *testing.T) {
	f := newAdminFixture(t)
	client, uid, access, refresh := f.userSession(t, "alice")
	if code, _ := f.call(t, "DELETE", "/v1/admin/users/nobody", adminToken, nil); code != 404 {
		t.Errorf("delete unknown user: %d, want 404", code)
	}
	if !f.active(t, client, access) {
		t.Fatal("deleting an unknown user revoked alice's token")
	}
	f.now = f.now.Add(time.Second)
	if code, m := f.call(t, "DELETE", "/v1/admin/users/"+uid, adminToken, nil); code != 204 {
		t.Fatalf("delete user: %d %v", code, m)
	}
	if f.active(t, client, access) {
		t.Error("a deleted user's access token is active")
	}
	if code, m := f.refresh(t, client, refresh); code != 400 || m["error"] != "invalid_grant" {
		t.Errorf("a deleted user's refresh token: %d %v, want 400 invalid_grant", code, m)
	}
	if code, _ := f.call(t, "GET", "/v1/admin/users", adminToken, nil); code != 200 {
		t.Errorf("list users: %d", code)
	}
	if code, _ := f.call(t, "DELETE", "/v1/admin/users/"+uid, adminToken, nil); code != 404 {
		t.Errorf("delete again: %d, want 404", code)
	}
}

// TestAdminScopes: client and user scopes must be RFC 6749 scope-tokens.
func TestAdminScopes(t *testing.T) {
	f := newAdminFixture(t)
	tests := []struct {
		name   string
		scopes []string
		code   int
	}{
		{"plain", []string{"read", "orders:write", "https://api.example.com/x"}, 201},
		{"tenant grammar", []string{"transit:encrypt:payments", "transit:admin", "secrets:read:billing/*"}, 201},
		{"none", nil, 201},
		{"space", []string{"admin read"}, 400},
		{"tab", []string{"admin\tread"}, 400},
		{"newline", []string{"admin\nread"}, 400},
		{"quote", []string{`a"b`}, 400},
		{"backslash", []string{`a\b`}, 400},
		{"empty", []string{""}, 400},
		{"non-ASCII", []string{"lecture-é"}, 400},
		{"DEL", []string{"a\x7f"}, 400},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, m := f.call(t, "POST", "/v1/admin/clients", adminToken, map[string]any{"name": "c", "scopes": tt.scopes}); code != tt.code {
				t.Errorf("client: %d %v, want %d", code, m, tt.code)
			}
			user := map[string]any{"username": fmt.Sprintf("u%d", i), "password": "correct horse battery", "scopes": tt.scopes}
			if code, m := f.call(t, "POST", "/v1/admin/users", adminToken, user); code != tt.code {
				t.Errorf("user: %d %v, want %d", code, m, tt.code)
			}
		})
	}
}

// TestDeleteClientRevokes: deleting a client revokes the client_credentials
// tokens issued to it, as a resource server with the introspect scope sees;
// another client's tokens stay active.
func TestDeleteClientRevokes(t *testing.T) {
	f := newAdminFixture(t)
	mk := func(name string, scopes ...string) [2]string {
		code, c := f.call(t, "POST", "/v1/admin/clients", adminToken, map[string]any{"name": name, "scopes": scopes})
		if code != 201 {
			t.Fatalf("create client %s: %d %v", name, code, c)
		}
		return [2]string{c["client_id"].(string), c["client_secret"].(string)}
	}
	doomed, other, rs := mk("doomed", "read"), mk("other", "read"), mk("rs", "introspect")
	token := func(c [2]string) string {
		code, m := f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, c[0], c[1])
		if code != 200 {
			t.Fatalf("token: %d %v", code, m)
		}
		return m["access_token"].(string)
	}
	dt, ot := token(doomed), token(other)
	if !f.active(t, rs, dt) || !f.active(t, rs, ot) {
		t.Fatal("fresh tokens are not active")
	}
	f.now = f.now.Add(time.Second)
	if code, m := f.call(t, "DELETE", "/v1/admin/clients/"+doomed[0], adminToken, nil); code != 204 {
		t.Fatalf("delete client: %d %v", code, m)
	}
	if f.active(t, rs, dt) {
		t.Error("a deleted client's token is active")
	}
	if !f.active(t, rs, ot) {
		t.Error("another client's token was revoked")
	}
	if code, _ := f.call(t, "DELETE", "/v1/admin/clients/nope", adminToken, nil); code != 404 {
		t.Errorf("delete unknown client: %d, want 404", code)
	}
}

// TestUpdateUser: PATCH /v1/admin/users/{id} changes the password, scopes
// or disabled flag; disabling, a new password or narrower scopes end the
// user's sessions, enabling or wider scopes do not.
func TestUpdateUser(t *testing.T) {
	f := newAdminFixture(t)
	client, uid, access, refresh := f.userSession(t, "alice")
	patch := func(body any) (int, map[string]any) {
		return f.call(t, "PATCH", "/v1/admin/users/"+uid, adminToken, body)
	}
	login := func(password string) (int, map[string]any) {
		return f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {password}}, client[0], client[1])
	}
	for name, tc := range map[string]struct {
		body any
		code int
	}{
		"nothing":       {map[string]any{}, 400},
		"short":         {map[string]any{"password": "short"}, 400},
		"bad scope":     {map[string]any{"scopes": []string{"a b"}}, 400},
		"unknown field": {map[string]any{"username": "mallory"}, 400},
	} {
		if code, m := patch(tc.body); code != tc.code {
			t.Errorf("%s: %d %v, want %d", name, code, m, tc.code)
		}
	}
	if code, _ := f.call(t, "PATCH", "/v1/admin/users/nope", adminToken, map[string]any{"disabled": true}); code != 404 {
		t.Errorf("unknown user: %d, want 404", code)
	}
	if !f.active(t, client, access) {
		t.Fatal("a refused change revoked the session")
	}

	f.now = f.now.Add(time.Second)
	if code, m := patch(map[string]any{"scopes": []string{"read", "write"}}); code != 200 || fmt.Sprint(m["scopes"]) != "[read write]" {
		t.Fatalf("widen scopes: %d %v", code, m)
	}
	if !f.active(t, client, access) {
		t.Error("widening scopes ended the session")
	}

	f.now = f.now.Add(time.Second)
	if code, m := patch(map[string]any{"disabled": true}); code != 200 || m["disabled"] != true {
		t.Fatalf("disable: %d %v", code, m)
	}
	if f.active(t, client, access) {
		t.Error("a disabled user's access token is active")
	}
	if code, m := f.refresh(t, client, refresh); code != 400 {
		t.Errorf("a disabled user's refresh token: %d %v", code, m)
	}
	if code, m := login("correct horse battery"); code != 401 {
		t.Errorf("a disabled user logged in: %d %v", code, m)
	}

	f.now = f.now.Add(time.Second)
	if code, m := patch(map[string]any{"disabled": false}); code != 200 || m["disabled"] != false {
		t.Fatalf("enable: %d %v", code, m)
	}
	code, tok := login("correct horse battery")
	if code != 200 {
		t.Fatalf("login after enabling: %d %v", code, tok)
	}

	f.now = f.now.Add(time.Second)
	if code, m := patch(map[string]any{"password": "a brand new passphrase"}); code != 200 {
		t.Fatalf("new password: %d %v", code, m)
	}
	if f.active(t, client, tok["access_token"].(string)) {
		t.Error("a session from before the password change is active")
	}
	if code, _ := login("correct horse battery"); code != 401 {
		t.Errorf("the old password still works: %d", code)
	}
	f.now = f.now.Add(time.Second)
	code, tok = login("a brand new passphrase")
	if code != 200 || !f.active(t, client, tok["access_token"].(string)) {
		t.Fatalf("the new password: %d %v", code, tok)
	}

	f.now = f.now.Add(time.Second)
	if code, m := patch(map[string]any{"scopes": []string{"write"}}); code != 200 {
		t.Fatalf("narrow scopes: %d %v", code, m)
	}
	if f.active(t, client, tok["access_token"].(string)) {
		t.Error("a session holding a scope the user lost is active")
	}
}

// TestUpdateClient: PATCH /v1/admin/clients/{id} renames a client and
// replaces its scopes, at once on this node; fewer scopes revoke its
// client_credentials tokens, more do not; the secret keeps working.
func TestUpdateClient(t *testing.T) {
	f := newAdminFixture(t)
	mk := func(name string, scopes ...string) [2]string {
		code, c := f.call(t, "POST", "/v1/admin/clients", adminToken, map[string]any{"name": name, "scopes": scopes})
		if code != 201 {
			t.Fatalf("create client %s: %d %v", name, code, c)
		}
		return [2]string{c["client_id"].(string), c["client_secret"].(string)}
	}
	app, rs := mk("app", "read"), mk("rs", "introspect")
	token := func(scope string) (int, map[string]any) {
		form := url.Values{"grant_type": {"client_credentials"}}
		if scope != "" {
			form.Set("scope", scope)
		}
		return f.post(t, "/oauth2/token", form, app[0], app[1])
	}
	patch := func(body any) (int, map[string]any) {
		return f.call(t, "PATCH", "/v1/admin/clients/"+app[0], adminToken, body)
	}
	for name, tc := range map[string]struct {
		body any
		code int
	}{
		"nothing":       {map[string]any{}, 400},
		"empty name":    {map[string]any{"name": ""}, 400},
		"bad scope":     {map[string]any{"scopes": []string{"a b"}}, 400},
		"secret":        {map[string]any{"client_secret": "mine"}, 400},
		"unknown field": {map[string]any{"owner": "x"}, 400},
	} {
		if code, m := patch(tc.body); code != tc.code {
			t.Errorf("%s: %d %v, want %d", name, code, m, tc.code)
		}
	}
	if code, _ := f.call(t, "PATCH", "/v1/admin/clients/nope", adminToken, map[string]any{"name": "x"}); code != 404 {
		t.Errorf("unknown client: %d, want 404", code)
	}
	if code, _ := token("write"); code != 400 {
		t.Fatalf("a scope the client does not have was granted: %d", code)
	}
	_, first := token("")
	f.now = f.now.Add(time.Second)
	if code, m := patch(map[string]any{"name": "app v2", "scopes": []string{"read", "write"}}); code != 200 || m["name"] != "app v2" ||
		fmt.Sprint(m["scopes"]) != "[read write]" || m["client_secret"] != nil {
		t.Fatalf("widen: %d %v", code, m)
	}
	if code, m := token("write"); code != 200 {
		t.Errorf("the new scope right after the change: %d %v", code, m)
	}
	if !f.active(t, rs, first["access_token"].(string)) {
		t.Error("widening the scopes revoked a token")
	}
	f.now = f.now.Add(time.Second)
	if code, m := patch(map[string]any{"scopes": []string{"write"}}); code != 200 {
		t.Fatalf("narrow: %d %v", code, m)
	}
	if f.active(t, rs, first["access_token"].(string)) {
		t.Error("a token carrying a scope the client lost is active")
	}
	if code, _ := token("read"); code != 400 {
		t.Errorf("the removed scope is still granted: %d", code)
	}
	f.now = f.now.Add(time.Second)
	if code, m := token(""); code != 200 || m["scope"] != "write" {
		t.Errorf("a token after the change, with the same secret: %d %v", code, m)
	}
}

// TestAdminRevokeOtherIssuers: POST /v1/admin/revocations names the issuer
// whose token or subject it revokes: the token service's own by default, or
// one the gateway trusts as Config.Trusts reports it at the time of the
// request (a reload can change it). The revocation is stored and applied
// under that issuer, by jti and by subject, with until kept for both; an
// issuer keygate does not trust is a 400 naming it, with nothing recorded.
func TestAdminRevokeOtherIssuers(t *testing.T) {
	st := openStore(t)
	now := time.Unix(1_800_000_000, 0).UTC()
	clock := func() time.Time { return now }
	const idp, later = "https://idp.example/", "https://later.example/"
	var trusted atomic.Pointer[[]string]
	trusted.Store(&[]string{idp})
	mem := revoke.NewMemory()
	_, _, srv, _ := newService(t, st, issuer.Config{Issuer: testIssuer, Keys: newKeys(t, st, clock), Now: clock, Checker: mem,
		Publisher: memoryPublisher{mem},
		Trusts:    func(iss string) bool { return slices.Contains(*trusted.Load(), iss) }})
	call := func(body map[string]any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/admin/revocations", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		return jsonReply(t)(http.DefaultClient.Do(req))
	}
	iat := now.Add(-time.Minute)

	// By jti: until defaults to ExternalTokenLifetime for another issuer.
	if code, rv := call(map[string]any{"issuer": idp, "jti": "j1"}); code != 201 || rv["issuer"] != idp ||
		rv["until"] != now.Add(ExternalTokenLifetime).Format(time.RFC3339Nano) {
		t.Fatalf("revoke an idp jti: %d %v", code, rv)
	}
	if !mem.Revoked(idp, "j1", "", iat) || mem.Revoked(testIssuer, "j1", "", iat) {
		t.Error("the jti revocation is not under the idp's issuer alone")
	}
	// By subject, kept until a time past the retention.
	keep := now.Add(90 * 24 * time.Hour)
	if code, rv := call(map[string]any{"issuer": idp, "subject": "kgu_alice", "until": keep}); code != 201 || rv["issuer"] != idp ||
		rv["until"] != keep.Format(time.RFC3339Nano) || rv["before"] != now.Format(time.RFC3339Nano) {
		t.Fatalf("revoke an idp subject: %d %v", code, rv)
	}
	if !mem.Revoked(idp, "", "kgu_alice", iat) {
		t.Error("the idp's subject is not revoked")
	}
	if mem.Revoked(testIssuer, "", "kgu_alice", iat) {
		t.Error("the idp's subject revocation reached the token service's own subject of the same id")
	}
	if n := mem.SweepSubjects(now.Add(60*24*time.Hour), now.Add(60*24*time.Hour)); n != 0 {
		t.Errorf("the subject revocation kept until %v was swept 60 days on", keep)
	}
	// The default is still the token service's own issuer.
	if code, rv := call(map[string]any{"jti": "j2"}); code != 201 || rv["issuer"] != testIssuer ||
		rv["until"] != now.Add(15*time.Minute).Format(time.RFC3339Nano) {
		t.Errorf("revoke without issuer: %d %v", code, rv)
	}
	// An issuer not trusted: 400 naming it, nothing stored. It is trusted
	// once the configuration says so, without a restart.
	code, m := call(map[string]any{"issuer": later, "subject": "bob"})
	if desc, _ := m["error_description"].(string); code != 400 || m["error"] != "invalid_request" || !strings.Contains(desc, later) {
		t.Errorf("untrusted issuer: %d %v, want 400 naming it", code, m)
	}
	trusted.Store(&[]string{idp, later})
	if code, m := call(map[string]any{"issuer": later, "subject": "bob"}); code != 201 {
		t.Errorf("an issuer trusted after a reload: %d %v", code, m)
	}
	revs, err := st.Revocations(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Revocation{
		{Issuer: testIssuer, JTI: "j2", Until: now.Add(15 * time.Minute), CreatedAt: now},
		{Issuer: idp, Subject: "kgu_alice", Before: now, Until: keep, CreatedAt: now},
		{Issuer: idp, JTI: "j1", Until: now.Add(ExternalTokenLifetime), CreatedAt: now},
		{Issuer: later, Subject: "bob", Before: now, CreatedAt: now},
	}
	if !reflect.DeepEqual(revs, want) {
		t.Errorf("stored revocations:\n got %+v\nwant %+v", revs, want)
	}
}

// memoryPublisher publishes revocations to a node's memory alone, as a
// node without a fleet does.
type memoryPublisher struct{ *revoke.Memory }

func (m memoryPublisher) RevokeID(_ context.Context, iss, jti string, until time.Time) {
	m.Memory.RevokeID(iss, jti, until)
}

func (m memoryPublisher) RevokeSubject(_ context.Context, iss, sub string, before, until time.Time) {
	m.RevokeSubjectUntil(iss, sub, before, until)
}

func (memoryPublisher) Rotated(context.Context, string)       {}
func (memoryPublisher) TenantDeleted(context.Context, string) {}

var _ issuer.Publisher = memoryPublisher{}

// A refused admin request body names what is wrong with it: the unknown
// field, or the field of the wrong type and what it wants.
func TestAdminBodyErrorsNameTheField(t *testing.T) {
	f := newAdminFixture(t)
	for _, c := range []struct {
		name string
		body any
		want string
	}{
		{"unknown field", map[string]any{"nam": "x", "scopes": []string{"a"}}, `unknown field "nam"`},
		{"a field in another case", map[string]any{"name": "x", "Scopes": []string{"admin"}}, `unknown field "Scopes"`},
		{"a field twice in two cases", json.RawMessage(`{"name":"x","scopes":["a"],"SCOPES":["admin"]}`), `unknown field "SCOPES"`},
		{"a string for a list", map[string]any{"name": "x", "scopes": "a"}, `field "scopes": want a list, got a JSON string`},
		{"a number for a string", map[string]any{"name": 5}, `field "name": want a string, got a JSON number`},
		{"not JSON", json.RawMessage(`name=x`), "must be one JSON object"},
	} {
		code, m := f.call(t, "POST", "/v1/admin/clients", adminToken, c.body)
		if desc, _ := m["error_description"].(string); code != 400 || !strings.Contains(desc, c.want) {
			t.Errorf("%s: %d %v, want 400 with %q", c.name, code, m, c.want)
		}
	}
	code, m := f.call(t, "POST", "/v1/admin/users", adminToken, map[string]any{"username": "bob", "password": "correct horse battery", "scopes": true})
	if desc, _ := m["error_description"].(string); code != 400 || !strings.Contains(desc, `field "scopes": want a list, got a JSON bool`) {
		t.Errorf("users: %d %v", code, m)
	}
}

// TestCreatedClientNotCachedUnknown: a client created through this node's
// admin API authenticates at once, though a request named its id (cached
// as unknown) just before.
func TestCreatedClientNotCachedUnknown(t *testing.T) {
	st := openStore(t)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	// A random source the test can predict: the next client id is
	// "kgc_" and the base64url of sixteen zero bytes.
	_, _, adm, pub := newService(t, st, issuer.Config{Issuer: testIssuer, Keys: newKeys(t, st, clock), Now: clock,
		Rand: io.MultiReader(bytes.NewReader(make([]byte, 16)), zeros{})})
	next := "kgc_" + base64.RawURLEncoding.EncodeToString(make([]byte, 16))
	token := func(id, secret string) int {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}
		code, _ := jsonReply(t)(http.Post(pub.URL+"/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode())))
		return code
	}
	if code := token(next, "kgs_guess"); code != 401 {
		t.Fatalf("an id not created yet: %d", code)
	}
	req, _ := http.NewRequest("POST", adm.URL+"/v1/admin/clients", strings.NewReader(`{"name":"app"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	code, c := jsonReply(t)(http.DefaultClient.Do(req))
	if code != 201 || c["client_id"] != next {
		t.Fatalf("create client: %d %v, want id %s", code, c, next)
	}
	if code := token(next, c["client_secret"].(string)); code != 200 {
		t.Errorf("the client just created, named before as unknown: %d, want 200", code)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// failingStore fails every list of clients with err; the other Store
// methods are the embedded nil interface's, which panic.
type failingStore struct {
	Store
	err error
}

func (s failingStore) ListClients(context.Context) ([]store.Client, error) { return nil, s.err }

// TestAdminStoreFailures: a store that does not answer is 503 with
// Retry-After, as at the token endpoints; any other store failure is a 500
// that reveals nothing of it. A fake store fails at will, with no
// database behind it.
func TestAdminStoreFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		code  int
		error string
		retry string
	}{
		{"unavailable", fmt.Errorf("list clients: %w", store.ErrUnavailable), 503, "temporarily_unavailable", "1"},
		{"other", errors.New("list clients: disk on fire"), 500, "server_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := issuer.New(issuer.Config{Issuer: testIssuer, Store: struct{ issuer.Store }{}, Keys: &signingkeys.Manager{}})
			if err != nil {
				t.Fatal(err)
			}
			api, err := New(svc, failingStore{err: tc.err}, issuer.NewBearer(adminToken))
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/v1/admin/clients", nil)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			w := httptest.NewRecorder()
			api.Handler().ServeHTTP(w, req)
			var m map[string]any
			json.Unmarshal(w.Body.Bytes(), &m) //nolint:errcheck // checked through m
			if w.Code != tc.code || m["error"] != tc.error || w.Header().Get("Retry-After") != tc.retry {
				t.Errorf("list clients: %d %v, Retry-After %q; want %d %s, Retry-After %q",
					w.Code, m, w.Header().Get("Retry-After"), tc.code, tc.error, tc.retry)
			}
			if strings.Contains(w.Body.String(), "disk") || strings.Contains(w.Body.String(), "postgres") {
				t.Errorf("the answer reveals the store's failure: %s", w.Body)
			}
		})
	}
}
