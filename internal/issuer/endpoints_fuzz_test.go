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
