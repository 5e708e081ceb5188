package issuer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzOAuthEndpoints sends any body, content type and Authorization header
// to the token, revoke, introspect and login endpoints. Whatever arrives,
// the answer is a 200 or an RFC 6749 client error (400, 401 or 429) with a
// JSON body, never a 5xx or a panic; an error body names an error code.
func FuzzOAuthEndpoints(f *testing.F) {
	fx, _ := newLoginFixture(f, 1<<30)
	h := fx.srv.Config.Handler
	basic := "Basic " + b64("svc-a:"+fx.secrets["svc-a"])
	for _, seed := range []struct {
		path     uint8
		ct, auth string
		body     string
	}{
		{0, "application/x-www-form-urlencoded", basic, "grant_type=client_credentials"},
		{0, "application/x-www-form-urlencoded", basic, "grant_type=refresh_token&refresh_token=kgr_x"},
		{0, "application/x-www-form-urlencoded", "", "grant_type=client_credentials&client_id=svc-a&client_secret=" + fx.secrets["svc-a"]},
		{0, "application/x-www-form-urlencoded; charset=utf-8", "Basic %%%", "grant_type=%zz"},
		{1, "application/x-www-form-urlencoded", basic, "token=abc&token_type_hint=refresh_token"},
		{2, "application/x-www-form-urlencoded", basic, "token=eyJhbGciOiJFUzI1NiJ9.e30.sig"},
		{3, "application/x-www-form-urlencoded", basic, "username=alice&password=correct+horse+battery"},
		{3, "application/json", basic, `{"username":"alice"}`},
		{0, "", "Bearer x", "\x00\xff"},
		// Tenants: a tenant is the client's, never the request's; the
		// tenant scope grammar.
		{0, "application/x-www-form-urlencoded", basic, "grant_type=client_credentials&tenant=acme"},
		{0, "application/x-www-form-urlencoded", basic, "grant_type=client_credentials&scope=transit:encrypt:payments+secrets:read:billing/*"},
		{3, "application/x-www-form-urlencoded", basic, "username=alice&password=correct+horse+battery&tenant=acme"},
		{3, "application/x-www-form-urlencoded", basic, "username=acme%2Falice&password=correct+horse+battery"},
	} {
		f.Add(seed.path, seed.ct, seed.auth, []byte(seed.body))
	}
	paths := []string{"/oauth2/token", "/oauth2/revoke", "/oauth2/introspect", "/v1/login"}
	f.Fuzz(func(t *testing.T, path uint8, ct, auth string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, paths[int(path)%len(paths)], bytes.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusTooManyRequests:
		default:
			t.Fatalf("%s: status %d: %s", req.URL.Path, w.Code, w.Body)
		}
		if w.Body.Len() == 0 {
			return // RFC 7009: a revocation's 200 may be empty
		}
		var m map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s: %d with a body that is not a JSON object: %q", req.URL.Path, w.Code, w.Body)
		}
		if w.Code != http.StatusOK {
			if code, _ := m["error"].(string); code == "" {
				t.Fatalf("%s: %d without an error code: %s", req.URL.Path, w.Code, w.Body)
			}
		}
	})
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

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
