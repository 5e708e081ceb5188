package admin

import (
	"context"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/store"
)

// ids is the sorted values of key in the objects of list[field].
func ids(list map[string]any, field, key string) []string {
	var out []string
	for _, e := range list[field].([]any) {
		out = append(out, e.(map[string]any)[key].(string))
	}
	slices.Sort(out)
	return out
}

// mkClient creates a client through the admin API (in tenant, unless
// empty) and returns its credentials.
func (f *adminFixture) mkClient(t *testing.T, tenant string, scopes ...string) [2]string {
	t.Helper()
	body := map[string]any{"name": "app", "scopes": scopes}
	if tenant != "" {
		body["tenant"] = tenant
	}
	code, c := f.call(t, "POST", "/v1/admin/clients", adminToken, body)
	if code != 201 {
		t.Fatalf("create client in %q: %d %v", tenant, code, c)
	}
	return [2]string{c["client_id"].(string), c["client_secret"].(string)}
}

// mkUser creates a user through the admin API and returns its id.
func (f *adminFixture) mkUser(t *testing.T, tenant, username, password string, scopes ...string) string {
	t.Helper()
	body := map[string]any{"username": username, "password": password, "scopes": scopes}
	if tenant != "" {
		body["tenant"] = tenant
	}
	code, u := f.call(t, "POST", "/v1/admin/users", adminToken, body)
	if code != 201 {
		t.Fatalf("create user %s in %q: %d %v", username, tenant, code, u)
	}
	return u["id"].(string)
}

// TestAdminTenants drives the tenants' admin API on the real SQLite store:
// create, list, read, delete, and the tenant of clients and users.
func TestAdminTenants(t *testing.T) {
	f := newAdminFixture(t)
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		return f.call(t, method, path, adminToken, body)
	}
	expect := func(what string, code int, m map[string]any, wantCode int, wantDesc string) {
		t.Helper()
		if desc, _ := m["error_description"].(string); code != wantCode || !strings.Contains(desc, wantDesc) {
			t.Errorf("%s: %d %v, want %d with %q", what, code, m, wantCode, wantDesc)
		}
	}
	if code, _ := f.call(t, "GET", "/v1/admin/tenants", "", nil); code != 401 {
		t.Errorf("tenants without the admin token: %d", code)
	}
	if code, m := f.call(t, "POST", "/v1/admin/tenants", "", map[string]any{"name": "acme"}); code != 401 {
		t.Errorf("create tenant without the admin token: %d %v", code, m)
	}
	code, m := call("POST", "/v1/admin/tenants", map[string]any{"name": "acme"})
	if code != 201 || m["name"] != "acme" || m["created_at"] != f.now.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("create tenant: %d %v", code, m)
	}
	code, m = call("POST", "/v1/admin/tenants", map[string]any{"name": "acme"})
	expect("create it again", code, m, 409, `tenant "acme" already exists`)
	code, m = call("POST", "/v1/admin/tenants", map[string]any{"name": "default"})
	expect("create default", code, m, 409, `tenant "default" already exists`)
	for _, bad := range []string{"", "Acme", "-acme", "acme/eu", "a b", strings.Repeat("a", 65)} {
		code, m = call("POST", "/v1/admin/tenants", map[string]any{"name": bad})
		expect("create "+bad, code, m, 400, "tenant name")
	}
	code, m = call("POST", "/v1/admin/tenants", map[string]any{"name": "x", "data_key": "AAAA"})
	expect("unknown field", code, m, 400, `unknown field "data_key"`)
	call("POST", "/v1/admin/tenants", map[string]any{"name": "bravo"})
	if code, m := call("GET", "/v1/admin/tenants", nil); code != 200 || !slices.Equal(ids(m, "tenants", "name"), []string{"acme", "bravo", "default"}) {
		t.Errorf("list tenants: %d %v", code, m)
	}
	if code, m := call("GET", "/v1/admin/tenants/acme", nil); code != 200 || m["name"] != "acme" || len(m) != 2 {
		t.Errorf("get tenant: %d %v", code, m)
	}
	code, m = call("GET", "/v1/admin/tenants/nope", nil)
	expect("get unknown tenant", code, m, 404, `tenant "nope" does not exist`)
	code, m = call("GET", "/v1/admin/tenants/NOPE", nil)
	expect("get an invalid name", code, m, 400, "tenant name")

	// Clients and users: the tenant named, or the default.
	code, c := call("POST", "/v1/admin/clients", map[string]any{"name": "pay", "scopes": []string{"transit:encrypt:payments"}, "tenant": "acme"})
	if code != 201 || c["tenant"] != "acme" {
		t.Fatalf("client in acme: %d %v", code, c)
	}
	acmeClient := c["client_id"].(string)
	if code, c := call("POST", "/v1/admin/clients", map[string]any{"name": "legacy"}); code != 201 || c["tenant"] != "default" {
		t.Errorf("client without a tenant: %d %v", code, c)
	}
	code, m = call("POST", "/v1/admin/clients", map[string]any{"name": "x", "tenant": "nope"})
	expect("client in an unknown tenant", code, m, 404, `tenant "nope" does not exist`)
	code, m = call("POST", "/v1/admin/clients", map[string]any{"name": "x", "tenant": "No Such"})
	expect("client in an invalid tenant", code, m, 400, "tenant name")
	code, u := call("POST", "/v1/admin/users", map[string]any{"username": "alice", "password": "correct horse battery", "tenant": "acme"})
	if code != 201 || u["tenant"] != "acme" {
		t.Fatalf("user in acme: %d %v", code, u)
	}
	acmeUser := u["id"].(string)
	if code, u := call("POST", "/v1/admin/users", map[string]any{"username": "alice", "password": "correct horse battery"}); code != 201 || u["tenant"] != "default" {
		t.Errorf("alice of the default tenant besides acme's: %d %v", code, u)
	}
	code, m = call("POST", "/v1/admin/users", map[string]any{"username": "alice", "password": "correct horse battery", "tenant": "acme"})
	expect("alice twice in acme", code, m, 409, "already exists")
	code, m = call("POST", "/v1/admin/users", map[string]any{"username": "bob", "password": "correct horse battery", "tenant": "nope"})
	expect("user in an unknown tenant", code, m, 404, `tenant "nope" does not exist`)

	// Lists: every tenant's, each with its tenant, or exactly one tenant's.
	if code, m := call("GET", "/v1/admin/clients", nil); code != 200 || len(ids(m, "clients", "tenant")) != 2 || !slices.Equal(ids(m, "clients", "tenant"), []string{"acme", "default"}) {
		t.Errorf("all clients: %d %v", code, m)
	}
	if code, m := call("GET", "/v1/admin/clients?tenant=acme", nil); code != 200 || !slices.Equal(ids(m, "clients", "client_id"), []string{acmeClient}) {
		t.Errorf("acme's clients: %d %v", code, m)
	}
	if code, m := call("GET", "/v1/admin/users?tenant=acme", nil); code != 200 || !slices.Equal(ids(m, "users", "id"), []string{acmeUser}) {
		t.Errorf("acme's users: %d %v", code, m)
	}
	if code, m := call("GET", "/v1/admin/users?tenant=bravo", nil); code != 200 || len(m["users"].([]any)) != 0 {
		t.Errorf("bravo's users: %d %v", code, m)
	}
	for _, q := range []string{"tenant=nope", "tenant=", "tenant=acme&tenant=bravo", "tenant=ACME"} {
		for _, path := range []string{"/v1/admin/clients?", "/v1/admin/users?"} {
			code, m := call("GET", path+q, nil)
			if want := map[bool]int{true: 404, false: 400}[q == "tenant=nope"]; code != want || m["error_description"] == nil {
				t.Errorf("%s%s: %d %v, want %d", path, q, code, m, want)
			}
		}
	}

	// The tenant of a client or user never changes.
	for _, body := range []map[string]any{{"tenant": "default"}, {"tenant": "acme"}, {"tenant": nil}, {"name": "x", "tenant": 5}} {
		code, m = call("PATCH", "/v1/admin/clients/"+acmeClient, body)
		expect("patch a client's tenant", code, m, 400, "tenant cannot be changed")
		delete(body, "name")
		code, m = call("PATCH", "/v1/admin/users/"+acmeUser, body)
		expect("patch a user's tenant", code, m, 400, "tenant cannot be changed")
	}
	if code, c := call("PATCH", "/v1/admin/clients/"+acmeClient, map[string]any{"name": "payments"}); code != 200 || c["tenant"] != "acme" {
		t.Errorf("rename acme's client: %d %v", code, c)
	}
	if code, u := call("PATCH", "/v1/admin/users/"+acmeUser, map[string]any{"disabled": true}); code != 200 || u["tenant"] != "acme" {
		t.Errorf("disable acme's user: %d %v", code, u)
	}

	// Delete: only an empty tenant, never the default.
	code, m = call("DELETE", "/v1/admin/tenants/acme", nil)
	expect("delete acme while it holds a client and a user", code, m, 409, `tenant "acme" still holds 1 client, 1 user, 0 transit keys and 0 secrets`)
	code, m = call("DELETE", "/v1/admin/tenants/default", nil)
	expect("delete default", code, m, 400, "cannot be deleted")
	code, m = call("DELETE", "/v1/admin/tenants/nope", nil)
	expect("delete an unknown tenant", code, m, 404, `tenant "nope" does not exist`)
	code, m = call("DELETE", "/v1/admin/tenants/No", nil)
	expect("delete an invalid name", code, m, 400, "tenant name")
	call("DELETE", "/v1/admin/clients/"+acmeClient, nil)
	call("DELETE", "/v1/admin/users/"+acmeUser, nil)
	// A secret keeps the tenant too.
	st := f.admin.store.(store.Store)
	sm := store.SecretMeta{Tenant: "acme", Path: "db", Sealed: []byte("sealed"), CreatedAt: f.now, UpdatedAt: f.now}
	if _, err := st.PutSecret(context.Background(), sm, nil, nil); err != nil {
		t.Fatal(err)
	}
	code, m = call("DELETE", "/v1/admin/tenants/acme", nil)
	expect("delete acme while it holds a secret", code, m, 409, `tenant "acme" still holds 0 clients, 0 users, 0 transit keys and 1 secret:`)
	if err := st.DeleteSecret(context.Background(), "acme", "db"); err != nil {
		t.Fatal(err)
	}
	if code, m := call("DELETE", "/v1/admin/tenants/acme", nil); code != 204 {
		t.Fatalf("delete empty acme: %d %v", code, m)
	}
	code, m = call("GET", "/v1/admin/tenants/acme", nil)
	expect("acme after its deletion", code, m, 404, `tenant "acme" does not exist`)
	code, m = call("POST", "/v1/admin/clients", map[string]any{"name": "x", "tenant": "acme"})
	expect("a client in deleted acme", code, m, 404, `tenant "acme" does not exist`)
}

// TestTenantScopesThroughAdmin: the documented scope grammar
// (transit:encrypt:payments, transit:admin, secrets:read:billing/*) is
// accepted for clients and users, and survives issuance, login and
// introspection unchanged.
func TestTenantScopesThroughAdmin(t *testing.T) {
	f := newAdminFixture(t)
	scopes := []string{"transit:encrypt:payments", "transit:admin", "secrets:read:billing/*"}
	f.call(t, "POST", "/v1/admin/tenants", adminToken, map[string]any{"name": "acme"})
	code, c := f.call(t, "POST", "/v1/admin/clients", adminToken, map[string]any{"name": "app", "scopes": scopes, "tenant": "acme"})
	if code != 201 {
		t.Fatalf("create client: %d %v", code, c)
	}
	if got := c["scopes"].([]any); len(got) != 3 || got[0] != scopes[0] || got[1] != scopes[1] || got[2] != scopes[2] {
		t.Errorf("client scopes %v", got)
	}
	client := [2]string{c["client_id"].(string), c["client_secret"].(string)}
	f.mkUser(t, "acme", "alice", "correct horse battery", scopes...)
	for _, ask := range []string{"", "secrets:read:billing/*", "transit:admin transit:encrypt:payments"} {
		code, tok := f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "scope": {ask}}, client[0], client[1])
		want := ask
		if ask == "" {
			want = strings.Join(scopes, " ")
		}
		if code != 200 || tok["scope"] != want {
			t.Fatalf("token for %q: %d %v", ask, code, tok)
		}
		cl := claims(t, tok["access_token"].(string))
		_, in := f.post(t, "/oauth2/introspect", url.Values{"token": {tok["access_token"].(string)}}, client[0], client[1])
		if cl["scope"] != want || cl["tenant"] != "acme" || in["scope"] != want || in["tenant"] != "acme" || in["active"] != true {
			t.Errorf("scope %q: claims %v, introspection %v", want, cl, in)
		}
	}
	code, tok := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}}, client[0], client[1])
	if cl := claims(t, tok["access_token"].(string)); code != 200 || cl["scope"] != strings.Join(scopes, " ") || cl["tenant"] != "acme" {
		t.Errorf("login: %d %v", code, cl)
	}
	if code, m := f.refresh(t, client, tok["refresh_token"].(string)); code != 200 || m["scope"] != strings.Join(scopes, " ") {
		t.Errorf("refresh: %d %v", code, m)
	}
}

// TestTenantIsolation: a table over the token service's and the admin
// API's routes that take a tenant. Tenants acme and bravo each have a
// client, a resource server with the introspect scope and a user alice
// (two people with two passwords); bravo also has bob. Whatever acme's
// clients send, they get nothing of bravo's — not its users, tokens or
// refresh tokens — and are answered as if bravo's did not exist; the admin
// API's per-tenant lists hold exactly that tenant's.
func TestTenantIsolation(t *testing.T) {
	f := newAdminFixture(t)
	type tenantSet struct {
		client, rs      [2]string
		alice, password string // alice's id and password
		access, refresh string // alice's login
	}
	set := map[string]*tenantSet{}
	for _, name := range []string{"acme", "bravo"} {
		if code, m := f.call(t, "POST", "/v1/admin/tenants", adminToken, map[string]any{"name": name}); code != 201 {
			t.Fatalf("create tenant %s: %d %v", name, code, m)
		}
		s := &tenantSet{client: f.mkClient(t, name, "read"), rs: f.mkClient(t, name, "introspect"), password: name + " alice's password"}
		s.alice = f.mkUser(t, name, "alice", s.password, "read")
		code, tok := f.post(t, "/v1/login", url.Values{"username": {"alice"}, "password": {s.password}}, s.client[0], s.client[1])
		if code != 200 {
			t.Fatalf("%s alice's login: %d %v", name, code, tok)
		}
		s.access, s.refresh = tok["access_token"].(string), tok["refresh_token"].(string)
		set[name] = s
	}
	bob := f.mkUser(t, "bravo", "bob", "bob's own password", "read")
	defClient := f.mkClient(t, "", "read")
	defAlice := f.mkUser(t, "", "alice", "default alice's password", "read")
	acme, bravo := set["acme"], set["bravo"]

	type answer struct {
		code int
		body map[string]any
	}
	login := func(c [2]string, user, pw string) answer {
		code, m := f.post(t, "/v1/login", url.Values{"username": {user}, "password": {pw}}, c[0], c[1])
		return answer{code, m}
	}
	refresh := func(c [2]string, tok string) answer {
		code, m := f.refresh(t, c, tok)
		return answer{code, m}
	}
	introspect := func(c [2]string, tok string) answer {
		code, m := f.post(t, "/oauth2/introspect", url.Values{"token": {tok}}, c[0], c[1])
		return answer{code, m}
	}
	list := func(path string) []string {
		code, m := f.call(t, "GET", path, adminToken, nil)
		if code != 200 {
			t.Fatalf("%s: %d %v", path, code, m)
		}
		field, key := "clients", "client_id"
		if strings.Contains(path, "/users") {
			field, key = "users", "id"
		}
		return ids(m, field, key)
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	same := func(t *testing.T, got, want answer) {
		t.Helper()
		if got.code != want.code || !reflect.DeepEqual(got.body, want.body) {
			t.Errorf("got %d %v, want what a name no tenant has gets: %d %v", got.code, got.body, want.code, want.body)
		}
	}
	unknownUser := login(acme.client, "nobody", "nobody's password")
	unknownRefresh := refresh(acme.client, "kgr_"+strings.Repeat("A", 43))
	inactive := introspect(acme.rs, "not.a.token")
	if unknownUser.code != 401 || unknownRefresh.code != 400 || inactive.code != 200 || inactive.body["active"] != false {
		t.Fatalf("the answers to unknown names: %v %v %v", unknownUser, unknownRefresh, inactive)
	}

	for _, tc := range []struct {
		route, name string
		check       func(t *testing.T)
	}{
		{"POST /oauth2/token", "client_credentials: the client's tenant", func(t *testing.T) {
			code, m := f.post(t, "/oauth2/token", url.Values{"grant_type": {"client_credentials"}, "tenant": {"bravo"}}, acme.client[0], acme.client[1])
			if c := claims(t, m["access_token"].(string)); code != 200 || c["tenant"] != "acme" {
				t.Errorf("%d %v", code, c)
			}
		}},
		{"POST /v1/login", "own tenant's alice", func(t *testing.T) {
			a := login(acme.client, "alice", acme.password)
			if c := claims(t, a.body["access_token"].(string)); a.code != 200 || c["sub"] != acme.alice || c["tenant"] != "acme" {
				t.Errorf("%d %v", a.code, c)
			}
		}},
		{"POST /v1/login", "another tenant's alice, her password", func(t *testing.T) { same(t, login(acme.client, "alice", bravo.password), unknownUser) }},
		{"POST /v1/login", "a user of another tenant alone", func(t *testing.T) { same(t, login(acme.client, "bob", "bob's own password"), unknownUser) }},
		{"POST /v1/login", "a default client, acme's alice", func(t *testing.T) { same(t, login(defClient, "alice", acme.password), unknownUser) }},
		{"POST /v1/login", "acme's client, default alice", func(t *testing.T) { same(t, login(acme.client, "alice", "default alice's password"), unknownUser) }},
		{"POST /oauth2/token", "refresh: another tenant's refresh token", func(t *testing.T) { same(t, refresh(acme.client, bravo.refresh), unknownRefresh) }},
		{"POST /oauth2/introspect", "another tenant's token, with the introspect scope", func(t *testing.T) { same(t, introspect(acme.rs, bravo.access), inactive) }},
		{"POST /oauth2/introspect", "another tenant's token, as a client", func(t *testing.T) { same(t, introspect(acme.client, bravo.access), inactive) }},
		{"POST /oauth2/introspect", "own tenant's token, with the introspect scope", func(t *testing.T) {
			if a := introspect(acme.rs, acme.access); a.body["active"] != true || a.body["tenant"] != "acme" || a.body["sub"] != acme.alice {
				t.Errorf("%v", a)
			}
		}},
		{"POST /oauth2/revoke", "another tenant's tokens stay", func(t *testing.T) {
			for _, tok := range []string{bravo.access, bravo.refresh} {
				if code, m := f.post(t, "/oauth2/revoke", url.Values{"token": {tok}}, acme.client[0], acme.client[1]); code != 200 {
					t.Errorf("revoke: %d %v", code, m)
				}
			}
			if a := introspect(bravo.rs, bravo.access); a.body["active"] != true {
				t.Errorf("bravo's token after acme revoked it: %v", a)
			}
			if a := refresh(bravo.client, bravo.refresh); a.code != 200 {
				t.Errorf("bravo's refresh token after acme revoked it: %v", a)
			}
		}},
		{"GET /v1/admin/clients", "?tenant= lists exactly that tenant's", func(t *testing.T) {
			for tenant, want := range map[string][]string{"acme": sorted(acme.client[0], acme.rs[0]), "bravo": sorted(bravo.client[0], bravo.rs[0]), "default": {defClient[0]}} {
				if got := list("/v1/admin/clients?tenant=" + tenant); !slices.Equal(got, want) {
					t.Errorf("%s: %v, want %v", tenant, got, want)
				}
			}
		}},
		{"GET /v1/admin/users", "?tenant= lists exactly that tenant's", func(t *testing.T) {
			for tenant, want := range map[string][]string{"acme": {acme.alice}, "bravo": sorted(bravo.alice, bob), "default": {defAlice}} {
				if got := list("/v1/admin/users?tenant=" + tenant); !slices.Equal(got, want) {
					t.Errorf("%s: %v, want %v", tenant, got, want)
				}
			}
		}},
	} {
		t.Run(tc.route+": "+tc.name, tc.check)
	}
}

// tenantRecorder is a Publisher that records the tenants deleted.
type tenantRecorder struct {
	memoryPublisher
	deleted *[]string
}

func (r tenantRecorder) TenantDeleted(_ context.Context, tenant string) {
	*r.deleted = append(*r.deleted, tenant)
}

// TestAdminTenantDeletedPublished: a tenant the admin API deletes is told
// to the Publisher (which makes every node forget the tenant's data key),
// and a deletion refused is not.
func TestAdminTenantDeletedPublished(t *testing.T) {
	var deleted []string
	f := newAdminFixture(t, func(cfg *issuer.Config) { cfg.Publisher = tenantRecorder{deleted: &deleted} })
	f.call(t, "POST", "/v1/admin/tenants", adminToken, map[string]any{"name": "acme"})
	f.call(t, "POST", "/v1/admin/tenants", adminToken, map[string]any{"name": "busy"})
	f.mkClient(t, "busy")
	for path, want := range map[string]int{"acme": 204, "busy": 409, "nope": 404, "default": 400} {
		if code, m := f.call(t, "DELETE", "/v1/admin/tenants/"+path, adminToken, nil); code != want {
			t.Errorf("delete %s: %d %v, want %d", path, code, m, want)
		}
	}
	if !slices.Equal(deleted, []string{"acme"}) {
		t.Errorf("deletions published: %q, want [acme]", deleted)
	}
}
