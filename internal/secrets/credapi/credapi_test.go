package credapi_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/secrets/credapi"
	"github.com/keygate/keygate/internal/secrets/totp"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
	"github.com/keygate/keygate/internal/vaultauth/vaultauthtest"
)

var allScopes = []string{"totp:admin", "totp:code:*", "totp:validate:*", "passwords:admin", "passwords:generate:*"}

type env struct {
	t      testing.TB
	url    string
	tokens *vaultauthtest.Service
	eng    *secrets.Engine
}

// start serves the API over the real engine on SQLite, with tenants
// default and other.
func start(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "keygate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	root, _ := rootkey.Generate(rand.Reader)
	ring, err := rootkey.New(rootkey.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTenant(ctx, store.Tenant{Name: "other", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	eng, err := secrets.New(secrets.Options{Store: st, Keys: tenantkey.New(tenantkey.Config{Store: st, Root: ring})})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, tokens: vaultauthtest.New(t), eng: eng}
	h, err := credapi.New(credapi.Options{Records: eng.Internal(), Verifier: e.tokens.Verifier})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	e.url = ts.URL
	return e
}

func (e *env) client(tenant string, scopes ...string) *vault.Client {
	cfg := vault.DefaultConfig()
	cfg.Address = e.url
	cfg.MaxRetries = 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	c.SetToken(e.tokens.Token(e.t, tenant, "kgc_app", scopes...))
	return c
}

func TestTOTP(t *testing.T) {
	e := start(t)
	c := e.client("default", allScopes...)
	s, err := c.Logical().Write("totp/keys/ana", map[string]any{"generate": true, "issuer": "Acme", "account_name": "ana@acme.example"})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := s.Data["url"].(string)
	k, err := totp.ParseURL(url)
	if err != nil {
		t.Fatalf("url %q: %v", url, err)
	}
	png64, _ := s.Data["barcode"].(string)
	raw, _ := base64.StdEncoding.DecodeString(png64)
	if img, err := png.Decode(strings.NewReader(string(raw))); err != nil || img.Bounds().Dx() != 200 {
		t.Errorf("barcode: %v", err)
	}
	r, err := c.Logical().Read("totp/keys/ana")
	if err != nil || r.Data["issuer"] != "Acme" || r.Data["account_name"] != "ana@acme.example" || r.Data["algorithm"] != "SHA1" ||
		fmt.Sprint(r.Data["digits"]) != "6" || fmt.Sprint(r.Data["period"]) != "30" || r.Data["key"] != nil {
		t.Errorf("read: %+v, %v", r, err)
	}
	// As the Vault CLI sends key=value: every value a string.
	if _, err := c.Logical().Write("totp/keys/import", map[string]any{"url": "otpauth://totp/Example:bo?secret=JBSWY3DPEHPK3PXP",
		"digits": "8", "skew": "0", "period": "60"}); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Logical().List("totp/keys"); err != nil || !slices.Equal(strs(l.Data["keys"]), []string{"ana", "import"}) {
		t.Errorf("list: %+v, %v", l, err)
	}
	gen, err := c.Logical().Read("totp/code/ana")
	if err != nil || gen.Data["code"] != k.Code(time.Now()) {
		t.Errorf("code: %+v, %v (the URL's key gives %s)", gen, err, k.Code(time.Now()))
	}
	code := k.Code(time.Now())
	v, err := c.Logical().Write("totp/code/ana", map[string]any{"code": code})
	if err != nil || v.Data["valid"] != true {
		t.Fatalf("validate: %+v, %v", v, err)
	}
	if _, err := c.Logical().Write("totp/code/ana", map[string]any{"code": code}); err == nil ||
		!strings.Contains(err.Error(), "code already used; wait until the next time period") {
		t.Errorf("a replayed code: %v", err)
	}
	if v, err := c.Logical().Write("totp/code/ana", map[string]any{"code": "000000x"}); err != nil || v.Data["valid"] != false {
		t.Errorf("a wrong code: %+v, %v", v, err)
	}
	// Another tenant's key is not there, exactly as a missing one.
	o := e.client("other", allScopes...)
	for _, path := range []string{"totp/keys/ana", "totp/keys/nope"} {
		if r, err := o.Logical().Read(path); err != nil || r != nil {
			t.Errorf("other tenant, %s: %+v, %v", path, r, err)
		}
	}
	_, errOther := o.Logical().Read("totp/code/ana")
	_, errNone := c.Logical().Read("totp/code/nope")
	if errOther == nil || errNone == nil || strings.ReplaceAll(errOther.Error(), "ana", "nope") != errNone.Error() {
		t.Errorf("another tenant's code: %v; a missing key's: %v", errOther, errNone)
	}
	if _, err := c.Logical().Delete("totp/keys/ana"); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Logical().Read("totp/keys/ana"); err != nil || r != nil {
		t.Errorf("a deleted key: %+v, %v", r, err)
	}
	// The records are not secrets a KV user can see.
	if names, err := e.eng.List(context.Background(), "default", ""); err == nil {
		t.Errorf("the KV view lists %v", names)
	}
}

const policy = `length = 24
rule "charset" {
  charset = "abcdefghijklmnopqrstuvwxyz"
  min-chars = 2
}
rule "charset" {
  charset = "0123456789"
  min-chars = 2
}`

func TestPasswordPolicies(t *testing.T) {
	e := start(t)
	c := e.client("default", allScopes...)
	if _, err := c.Logical().Write("sys/policies/password/strong", map[string]any{"policy": policy}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Logical().Read("sys/policies/password/strong"); err != nil || r.Data["policy"] != policy {
		t.Errorf("read: %+v, %v", r, err)
	}
	if l, err := c.Logical().List("sys/policies/password"); err != nil || !slices.Equal(strs(l.Data["keys"]), []string{"strong"}) {
		t.Errorf("list: %+v, %v", l, err)
	}
	g, err := c.Logical().Read("sys/policies/password/strong/generate")
	pw, _ := g.Data["password"].(string)
	if err != nil || len(pw) != 24 || strings.Trim(pw, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		t.Errorf("generate: %q, %v", pw, err)
	}
	if _, err := c.Logical().Write("sys/policies/password/bad", map[string]any{"policy": "length = 2"}); err == nil ||
		!strings.Contains(err.Error(), "length must be 4 to 100") {
		t.Errorf("a bad policy: %v", err)
	}
	if r, err := e.client("other", allScopes...).Logical().Read("sys/policies/password/strong/generate"); err != nil || r != nil {
		t.Errorf("another tenant's policy: %+v, %v", r, err)
	}
	if _, err := c.Logical().Delete("sys/policies/password/strong"); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Logical().Read("sys/policies/password/strong"); err != nil || r != nil {
		t.Errorf("a deleted policy: %+v, %v", r, err)
	}
}

// Each route needs its scope, decided before anything is looked up, and
// no other scope grants it.
func TestScopes(t *testing.T) {
	e := start(t)
	for _, c := range []struct {
		method, path, body, scope string
	}{
		{"LIST", "/v1/totp/keys", "", "totp:admin"},
		{"GET", "/v1/totp/keys/a", "", "totp:admin"},
		{"POST", "/v1/totp/keys/a", `{"key":"JBSWY3DPEHPK3PXP"}`, "totp:admin"},
		{"DELETE", "/v1/totp/keys/a", "", "totp:admin"},
		{"GET", "/v1/totp/code/a", "", "totp:code:a"},
		{"POST", "/v1/totp/code/a", `{"code":"123456"}`, "totp:validate:a"},
		{"LIST", "/v1/sys/policies/password", "", "passwords:admin"},
		{"GET", "/v1/sys/policies/password/p", "", "passwords:admin"},
		{"PUT", "/v1/sys/policies/password/p", `{"policy":"length = 8\nrule \"charset\" { charset = \"ab\" }"}`, "passwords:admin"},
		{"DELETE", "/v1/sys/policies/password/p", "", "passwords:admin"},
		{"GET", "/v1/sys/policies/password/p/generate", "", "passwords:generate:p"},
	} {
		others := slices.DeleteFunc(slices.Clone(append(allScopes, "totp:code:b", "passwords:generate:q*")), func(s string) bool {
			return s == c.scope || strings.HasSuffix(s, ":*") && strings.HasPrefix(c.scope, strings.TrimSuffix(s, "*"))
		})
		send := func(scopes ...string) (int, string) {
			req, _ := http.NewRequest(c.method, e.url+c.path, strings.NewReader(c.body))
			req.Header.Set("X-Vault-Token", e.tokens.Token(t, "default", "kgc_app", scopes...))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b := make([]byte, 512)
			n, _ := resp.Body.Read(b)
			return resp.StatusCode, string(b[:n])
		}
		if st, body := send(others...); st != http.StatusForbidden || !strings.Contains(body, "do not grant "+c.scope) {
			t.Errorf("%s %s without %s: %d %s", c.method, c.path, c.scope, st, body)
		}
		if st, body := send(c.scope); st == http.StatusForbidden {
			t.Errorf("%s %s with %s: %d %s", c.method, c.path, c.scope, st, body)
		}
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/totp/keys/a", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("no token: %v %v", resp, err)
	}
}

func strs(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

// Whatever a request holds, the answer is a status with Vault's envelope,
// never a panic or a 500.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{"POST /v1/totp/keys/a {\"generate\":\"true\",\"issuer\":\"x\",\"account_name\":\"y\",\"qr_size\":\"3000\"}",
		"POST /v1/totp/keys/a {\"url\":\"otpauth://totp/a?secret=JBSWY3DPEHPK3PXP&period=0\"}",
		"POST /v1/totp/code/a {\"code\":[1]}", "PUT /v1/sys/policies/password/p {\"policy\":\"length = 8\"}",
		"GET /v1/sys/policies/password/p/generate", "LIST /v1/totp/keys/", "DELETE /v1/totp/keys/a%2Fb"} {
		f.Add(s)
	}
	e := start(f)
	token := e.tokens.Token(f, "default", "kgc_fuzz", allScopes...)
	f.Fuzz(func(t *testing.T, in string) {
		method, rest, _ := strings.Cut(in, " ")
		path, body, _ := strings.Cut(rest, " ")
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("X-Vault-Token", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if strings.Contains(err.Error(), "connection refused") {
				t.Fatal(err) // the server is gone: nothing after this would be tested
			}
			return
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%q: %d", in, resp.StatusCode)
		}
	})
}

// TestStrictBodies: a body with a key twice, data after the object, or
// text that is not UTF-8 is refused with 400 before anything is stored.
func TestStrictBodies(t *testing.T) {
	e := start(t)
	tok := e.tokens.Token(t, "default", "kgc_app", allScopes...)
	for _, c := range []struct{ name, path, body string }{
		{"a key twice", "/v1/sys/policies/password/p", `{"policy":"length = 20","policy":"length = 4"}`},
		{"a key twice, nested", "/v1/totp/keys/k", `{"generate":true,"issuer":"a","account_name":"b","x":{"a":1,"a":2}}`},
		{"data after the object", "/v1/sys/policies/password/p", `{"policy":"length = 20"} {}`},
		{"not UTF-8", "/v1/sys/policies/password/p", "{\"policy\":\"length = 20\xff\"}"},
		{"an array", "/v1/totp/keys/k", `[1]`},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.url+c.path, strings.NewReader(c.body))
		req.Header.Set("X-Vault-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"errors"`) {
			t.Errorf("%s: %d %s, want 400 in Vault's envelope", c.name, resp.StatusCode, b)
		}
	}
	c := e.client("default", allScopes...)
	for _, path := range []string{"sys/policies/password/p", "totp/keys/k"} {
		if r, err := c.Logical().Read(path); err != nil || r != nil {
			t.Errorf("%s after the refusals: %+v, %v, want nothing stored", path, r, err)
		}
	}
}

// TestWritesReadNoQuery: a write's parameters come from its body only, as
// Vault's: a TOTP key's seed or a code in the query string of a POST
// (which front proxies log with the request line, and which a reader of
// the body does not see) is not taken.
func TestWritesReadNoQuery(t *testing.T) {
	e := start(t)
	tok := e.tokens.Token(t, "default", "kgc_app", allScopes...)
	send := func(method, target, body string) (int, string) { return e.send(t, tok, method, target, body, nil) }
	if st, b := send("POST", "/v1/totp/keys/q?key=JBSWY3DPEHPK3PXPJBSWY3DP&generate=false", ""); st != http.StatusBadRequest {
		t.Errorf("a key from the query string: %d %s, want 400", st, b)
	}
	if st, b := send("POST", "/v1/sys/policies/password/q?policy=length%3D20", ""); st != http.StatusBadRequest {
		t.Errorf("a policy from the query string: %d %s, want 400", st, b)
	}
	if st, b := send("POST", "/v1/totp/keys/k", `{"key":"JBSWY3DPEHPK3PXPJBSWY3DP"}`); st != http.StatusNoContent && st != http.StatusOK {
		t.Fatalf("a key from the body: %d %s", st, b)
	}
	code, err := e.client("default", allScopes...).Logical().Read("totp/code/k")
	if err != nil || code == nil {
		t.Fatalf("code: %v", err)
	}
	if st, b := send("POST", "/v1/totp/code/k?code="+code.Data["code"].(string), `{}`); st == http.StatusOK && strings.Contains(b, `"valid":true`) {
		t.Errorf("a code from the query string was validated: %d %s", st, b)
	}
	if st, b := send("POST", "/v1/totp/code/k", `{"code":"`+code.Data["code"].(string)+`"}`); st != http.StatusOK || !strings.Contains(b, `"valid":true`) {
		t.Errorf("the code from the body: %d %s, want valid (the query's was not used)", st, b)
	}
}

// TestWrappingRefused: a request for a wrapped answer (X-Vault-Wrap-TTL),
// which keygate does not make, is refused rather than answered with a
// key's URL, a code or a password in the clear.
func TestWrappingRefused(t *testing.T) {
	e := start(t)
	c := e.client("default", allScopes...)
	if _, err := c.Logical().Write("totp/keys/k", map[string]any{"key": "JBSWY3DPEHPK3PXPJBSWY3DP"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Logical().Write("sys/policies/password/p", map[string]any{"policy": "length = 20\nrule \"charset\" { charset = \"ab\" }"}); err != nil {
		t.Fatal(err)
	}
	tok := e.tokens.Token(t, "default", "kgc_app", allScopes...)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/totp/keys/g", `{"generate":true,"issuer":"a","account_name":"b"}`},
		{"GET", "/v1/totp/code/k", ""},
		{"GET", "/v1/sys/policies/password/p/generate", ""},
		{"GET", "/v1/sys/policies/password/p", ""},
	} {
		st, b := e.send(t, tok, r.method, r.path, r.body, http.Header{"X-Vault-Wrap-Ttl": {"5m"}})
		if st != http.StatusBadRequest || !strings.Contains(b, "wrapping") {
			t.Errorf("%s %s: %d %s, want 400 naming response wrapping", r.method, r.path, st, b)
		}
	}
	if r, err := c.Logical().Read("totp/keys/g"); err != nil || r != nil {
		t.Errorf("the key asked for wrapped was made: %+v, %v", r, err)
	}
}

// TestEncodedSlash: an encoded slash is no separator: a name spelled with
// %2F is refused, not read as the path it decodes to (a front proxy's
// rule on .../generate would not see p%2Fgenerate as one), as the KV API
// refuses it.
func TestEncodedSlash(t *testing.T) {
	e := start(t)
	c := e.client("default", allScopes...)
	if _, err := c.Logical().Write("sys/policies/password/p", map[string]any{"policy": "length = 20\nrule \"charset\" { charset = \"ab\" }"}); err != nil {
		t.Fatal(err)
	}
	tok := e.tokens.Token(t, "default", "kgc_app", allScopes...)
	for _, target := range []string{"/v1/sys/policies/password/p%2Fgenerate", "/v1/sys/policies/password/p%2fgenerate",
		"/v1/totp/code%2Fk", "/v1/totp/keys/a%2Fb"} {
		if st, b := e.send(t, tok, "GET", target, "", nil); st != http.StatusBadRequest || !strings.Contains(b, "encoded slash") {
			t.Errorf("GET %s: %d %s, want 400 naming the encoded slash", target, st, b)
		}
	}
}

// send makes one request with tok as X-Vault-Token (and header), for the
// cases the Vault client cannot spell, and returns the status and body.
func (e *env) send(t *testing.T, tok, method, target, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("X-Vault-Token", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
