package admin

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// FuzzAdminAPI sends any JSON-ish body to the admin API's write endpoints
// on the real SQLite store (key rotation left out: every call would add a
// key), tenants' among them. The answer is a success or a 4xx with a JSON error, never a 5xx
// or a panic.
func FuzzAdminAPI(f *testing.F) {
	fx := newAdminFixture(f)
	h := fx.adm.Config.Handler
	for _, seed := range []struct {
		route uint8
		body  string
	}{
		{0, `{"name":"billing","scopes":["orders:read"]}`},
		{0, `{"name":"","scopes":["a b"]}`},
		{1, `{"username":"alice","password":"correct horse battery","scopes":["read"]}`},
		{1, `{"username":"bob","password":"short"}`},
		{2, `{"jti":"j1","until":"2030-01-02T03:04:05Z"}`},
		{2, `{"subject":"alice","before":"9999-12-31T23:59:59Z"}`},
		{2, `{"jti":"j","subject":"s"}`},
		{3, ``},
		{4, ``},
		{5, `{"name":"x"} {"name":"y"}`},
		{6, `{"disabled":true,"scopes":["a"]}`},
		{8, `{"name":"acme"}`},
		{8, `{"name":"Acme/EU"}`},
		{8, `{"name":"default"}`},
		{0, `{"name":"billing","scopes":["transit:encrypt:payments","secrets:read:billing/*"],"tenant":"acme"}`},
		{0, `{"name":"billing","tenant":"nope"}`},
		{1, `{"username":"alice","password":"correct horse battery","tenant":"acme"}`},
		{1, `{"username":"alice","password":"correct horse battery","tenant":7}`},
		{6, `{"tenant":"acme"}`},
		{7, `{"tenant":null}`},
		{9, ``},
		{10, ``},
	} {
		f.Add(seed.route, []byte(seed.body))
	}
	routes := []struct{ method, path string }{
		{"POST", "/v1/admin/clients"}, {"POST", "/v1/admin/users"}, {"POST", "/v1/admin/revocations"},
		{"DELETE", "/v1/admin/users/nope"}, {"POST", "/v1/admin/clients/nope/secret"}, {"POST", "/v1/admin/clients"},
		{"PATCH", "/v1/admin/users/nope"}, {"PATCH", "/v1/admin/clients/nope"},
		{"POST", "/v1/admin/tenants"}, {"DELETE", "/v1/admin/tenants/acme"}, {"DELETE", "/v1/admin/tenants/default"},
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := routes[int(route)%len(routes)]
		req := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s: %d: %s", rt.method, rt.path, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || m["error"] == nil {
				t.Fatalf("%s %s: %d without a JSON error: %q", rt.method, rt.path, w.Code, w.Body)
			}
		}
	})
}
