package issuer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store/sqlite"
)

const adminToken = "admin-token-0123456789abcdef0123456789"

// TestAdminAPI drives the admin API and the token endpoints together on the
// real SQLite store.
func TestAdminAPI(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "keygate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	km := NewKeyManager(st, newSealer(t), KeyPolicy{}, clock)
	if err := km.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Issuer: testIssuer, Store: st, Keys: km, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := NewAdmin(svc, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(admin.Handler())
	defer adm.Close()
	pub := httptest.NewServer(svc.Handler())
	defer pub.Close()

	call := func(method, path, token string, body any) (int, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, adm.URL+path, rd)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	tokenFor := func(id, secret string) int {
		form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}
		resp, err := http.Post(pub.URL+"/oauth2/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
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
	if code, rv := call("POST", "/v1/admin/revocations", adminToken, map[string]any{"subject": "alice"}); code != 201 || rv["Subject"] != "alice" {
		t.Errorf("revoke subject: %d %v", code, rv)
	}
	if code, _ := call("POST", "/v1/admin/revocations", adminToken, map[string]any{"subject": "a", "jti": "b"}); code != 400 {
		t.Errorf("ambiguous revocation: %d", code)
	}
}
