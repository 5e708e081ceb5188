package admin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/audittest"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/issuer"
)

// auditedHandlers wraps the token endpoints and the admin API the way
// package server does.
func auditedHandlers(t testing.TB, a *httpaudit.Auditor, svc *issuer.Service, admin *API) (tokens, adm http.Handler) {
	t.Helper()
	mux := http.NewServeMux()
	for path, op := range tokenOps {
		mux.Handle("POST "+path, a.Handler(op, httperr.Writer{}, svc.Handler()))
	}
	return mux, a.Handler("admin.request", httperr.Writer{}, admin.Handler())
}

// tokenOps are the server's operations for the token endpoints (package
// server wraps each route with its own).
var tokenOps = map[string]audit.Operation{"/oauth2/token": "oauth2.token", "/oauth2/revoke": "oauth2.revoke",
	"/oauth2/introspect": "oauth2.introspect", "/v1/login": "login.password"}

// TestAuditRecords: the token endpoints and the admin API tell each
// request's record who made it, what it did, with which key, and the
// values an auditor must match (HMAC'd), with a pending record before every
// change; no record holds a secret, a password or a token.
func TestAuditRecords(t *testing.T) {
	sink := &audittest.MemSink{}
	log, mac := audittest.NewLog(t, sink)
	a, err := httpaudit.New(httpaudit.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	f := newAdminFixture(t)
	f.adm.Close()
	f.pub.Close()
	tokens, adm := auditedHandlers(t, a, f.svc, f.admin)
	f.adm, f.pub = httptest.NewServer(adm), httptest.NewServer(tokens)
	t.Cleanup(f.adm.Close)
	t.Cleanup(f.pub.Close)
	kid := f.km.Signer().Key().Thumbprint()

	check := func(step string, ws ...audittest.Want) {
		t.Helper()
		audittest.Check(t, mac, step, sink.Take(t), ws...)
	}

	adminW := func(op audit.Operation, r audit.Result, hashed map[string]string) audittest.Want {
		return audittest.Want{Op: op, Result: r, Principal: audit.PrincipalAdmin, Hashed: hashed}
	}
	code, c := f.call(t, "POST", "/v1/admin/clients", adminToken, map[string]any{"name": "app", "scopes": []string{"read"}})
	if code != 201 {
		t.Fatalf("create client: %d %v", code, c)
	}
	client := [2]string{c["client_id"].(string), c["client_secret"].(string)}
	check("create client", adminW("admin.clients.create", audit.ResultPending, nil),
		adminW("admin.clients.create", audit.ResultOK, map[string]string{"id": client[0]}))

	code, u := f.call(t, "POST", "/v1/admin/users", adminToken, map[string]any{"username": "alice", "password": "correct horse battery", "scopes": []string{"read"}})
	if code != 201 {
		t.Fatalf("create user: %d %v", code, u)
	}
	userID := u["id"].(string)
	check("create user", adminW("admin.users.create", audit.ResultPending, nil),
		adminW("admin.users.create", audit.ResultOK, map[string]string{"id": userID}))

	code, tok := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, client[0], client[1])
	if code != 200 {
		t.Fatalf("login: %d %v", code, tok)
	}
	access, refresh := tok["access_token"].(string), tok["refresh_token"].(string)
	check("login",
		audittest.Want{Op: "login.password", Result: audit.ResultPending, Principal: audit.PrincipalUser, ID: userID,
			Hashed: map[string]string{"username": "alice", "family": audittest.Any}},
		audittest.Want{Op: "login.password", Result: audit.ResultOK, Principal: audit.PrincipalUser, ID: userID, Key: kid,
			Hashed: map[string]string{"username": "alice", "family": audittest.Any, "jti": jtiOf(t, access)}})

	cc := f.tokenFor(t, client)
	check("client_credentials", audittest.Want{Op: "oauth2.token.client_credentials", Result: audit.ResultOK, Principal: audit.PrincipalClient,
		ID: client[0], Key: kid, Hashed: map[string]string{"jti": jtiOf(t, cc)}})

	if code, _ := f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, client[0], "wrong-secret"); code != 401 {
		t.Fatalf("wrong secret: %d", code)
	}
	check("wrong secret", audittest.Want{Op: "oauth2.token", Result: audit.ResultRefused, Reason: "invalid_client",
		Hashed: map[string]string{"client_id": client[0]}})

	code, tok = f.refresh(t, client, refresh)
	if code != 200 {
		t.Fatalf("refresh: %d %v", code, tok)
	}
	access2 := tok["access_token"].(string)
	check("refresh",
		audittest.Want{Op: "oauth2.token.refresh_token", Result: audit.ResultPending, Principal: audit.PrincipalClient, ID: client[0]},
		audittest.Want{Op: "oauth2.token.refresh_token", Result: audit.ResultOK, Principal: audit.PrincipalUser, ID: userID, Key: kid,
			Hashed: map[string]string{"family": audittest.Any, "jti": jtiOf(t, access2)}})

	if code, _ := f.post(t, "/oauth2/revoke", url.Values{"token": {cc}}, client[0], client[1]); code != 200 {
		t.Fatalf("revoke: %d", code)
	}
	check("revoke",
		audittest.Want{Op: "oauth2.revoke", Result: audit.ResultPending, Principal: audit.PrincipalClient, ID: client[0]},
		audittest.Want{Op: "oauth2.revoke", Result: audit.ResultOK, Principal: audit.PrincipalClient, ID: client[0],
			Hashed: map[string]string{"jti": jtiOf(t, cc)}})

	if !f.active(t, client, access2) {
		t.Fatal("the refreshed access token is not active")
	}
	check("introspect", audittest.Want{Op: "oauth2.introspect", Result: audit.ResultOK, Principal: audit.PrincipalClient, ID: client[0],
		Hashed: map[string]string{"jti": jtiOf(t, access2)}})

	if code, _ := f.call(t, "GET", "/v1/admin/clients", adminToken, nil); code != 200 {
		t.Fatal("list clients")
	}
	check("list clients", adminW("admin.clients.list", audit.ResultOK, nil))
	if code, _ := f.call(t, "POST", "/v1/admin/clients", "not-the-admin-token-at-all-0123456789", map[string]any{"name": "x"}); code != 401 {
		t.Fatal("a wrong admin token was accepted")
	}
	check("wrong admin token", audittest.Want{Op: "admin.request", Result: audit.ResultRefused, Reason: "unauthorized"})

	if code, _ := f.call(t, "POST", "/v1/admin/revocations", adminToken, map[string]any{"subject": userID}); code != 201 {
		t.Fatal("revoke subject")
	}
	check("revoke subject", adminW("admin.revocations.create", audit.ResultPending, nil),
		adminW("admin.revocations.create", audit.ResultOK, map[string]string{"subject": userID}))
	if code, _ := f.call(t, "DELETE", "/v1/admin/users/"+userID, adminToken, nil); code != 204 {
		t.Fatal("delete user")
	}
	check("delete user", adminW("admin.users.delete", audit.ResultPending, map[string]string{"id": userID}),
		adminW("admin.users.delete", audit.ResultOK, map[string]string{"id": userID}))
	if code, _ := f.call(t, "POST", "/v1/admin/keys/rotate", adminToken, nil); code != 200 {
		t.Fatal("rotate")
	}
	got := sink.Take(t)
	if len(got) != 2 || got[1].Key.Name == "" || got[1].Key.Name == kid || got[1].Operation != "admin.keys.rotate" {
		t.Errorf("rotate: %+v, want the new kid as the key", got)
	}

	for name, secret := range map[string]string{"client secret": client[1], "password": "correct horse battery",
		"access token": access, "refresh token": refresh, "client_credentials token": cc, "admin token": adminToken,
		"username": "alice"} {
		if bytes.Contains(sink.All(), []byte(secret)) {
			t.Errorf("the %s is in the audit log", name)
		}
	}
}

// jtiOf returns the jti of a token the service issued.
func jtiOf(t *testing.T, token string) string {
	t.Helper()
	jti, _ := claims(t, token)["jti"].(string)
	if jti == "" {
		t.Fatalf("a token without a jti: %v", claims(t, token))
	}
	return jti
}

// tokenFor issues a client_credentials token.
func (f *adminFixture) tokenFor(t *testing.T, client [2]string) string {
	t.Helper()
	code, m := f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}}, client[0], client[1])
	if code != 200 {
		t.Fatalf("token: %d %v", code, m)
	}
	return m["access_token"].(string)
}

func TestAdminOp(t *testing.T) {
	for pattern, want := range map[string]audit.Operation{
		"POST /v1/admin/clients":               "admin.clients.create",
		"POST /v1/admin/tenants":               "admin.tenants.create",
		"PUT /v1/admin/tenants":                "admin.tenants.put",
		"DELETE /v1/admin/tenants/{name}":      "admin.tenants.delete",
		"POST /v1/admin/audit-keys/{id}/renew": "admin.audit_keys.renew.post",
		"":                                     "admin.request",
		"GET /v1/admin/Ünïcode":                "admin.request",
	} {
		if got := adminOp(pattern); got != want {
			t.Errorf("adminOp(%q) = %q, want %q", pattern, got, want)
		}
	}
}

// TestAdminOpsNameEveryRoute: every admin route has its operation named in
// adminOps, so that a new route cannot reach the records under a name made
// up from its pattern.
func TestAdminOpsNameEveryRoute(t *testing.T) {
	for pattern := range (&API{}).routes() {
		if _, ok := adminOps[pattern]; !ok {
			t.Errorf("admin route %q has no operation in adminOps", pattern)
		}
	}
}
