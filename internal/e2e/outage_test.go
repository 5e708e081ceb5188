package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/testnet"
)

// TestPostgresOutage cuts the node's PostgreSQL connections (a TCP proxy
// in front of the machine's server goes down): /auth keeps answering from
// memory, operations that need the store fail promptly with an error and
// leave nothing half-done — a refresh token presented then is not spent, a
// revocation that could not be stored is not applied — and once PostgreSQL
// is back the node serves again without a restart.
// outage is a node whose PostgreSQL connections run through a proxy, with
// a user logged in: an access token and a refresh token.
type outage struct {
	live            *live
	proxy           *testnet.Proxy
	adminHeader     http.Header
	access, refresh string
	basic           http.Header
}

func newOutage(t *testing.T, storeTimeout time.Duration) *outage {
	t.Helper()
	dbURL := newSchema(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testnet.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	dir := t.TempDir()
	rootKey := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	adminToken := strings.Repeat("o", 40)
	l := startLive(t, server.Config{AdminToken: adminToken,
		Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience,
			TokenService: config.TokenService{DatabaseURL: u.String(), StoreTimeout: storeTimeout, RootKeyFile: rootKey}}})
	secret := addClient(t, l, "svc")
	jh := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + adminToken}}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/users", `{"username":"alice","password":"a long password","scopes":["demo"]}`, jh); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create user: %d %s", resp.StatusCode, body)
	}
	h := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth("svc", secret)
	h.Set("Authorization", req.Header.Get("Authorization"))
	resp, body := do(t, http.MethodPost, l.base+"/v1/login", "username=alice&password=a+long+password", h)
	var tr struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tr) != nil || tr.Refresh == "" {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	return &outage{live: l, proxy: proxy, adminHeader: jh, access: tr.Access, refresh: tr.Refresh, basic: h}
}

// tokenStatus asks for a client_credentials token.
func (o *outage) tokenStatus(t *testing.T) (int, []byte) {
	t.Helper()
	resp, body := do(t, http.MethodPost, o.live.base+"/oauth2/token", "grant_type=client_credentials", o.basic)
	return resp.StatusCode, body
}

// refresh presents the refresh token; it is not replaced by the answer.
func (o *outage) refreshStatus(t *testing.T) (int, []byte) {
	t.Helper()
	resp, body := do(t, http.MethodPost, o.live.base+"/oauth2/token", "grant_type=refresh_token&refresh_token="+url.QueryEscape(o.refresh), o.basic)
	return resp.StatusCode, body
}

func TestPostgresOutage(t *testing.T) {
	o := newOutage(t, 0)
	l, proxy, jh := o.live, o.proxy, o.adminHeader
	jti := claim(t, o.access, "jti")

	proxy.Down()
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(o.access)); resp.StatusCode != http.StatusOK {
		t.Errorf("/auth during the outage: %d", resp.StatusCode)
	}
	start := time.Now()
	if code, body := o.refreshStatus(t); code != http.StatusServiceUnavailable || !strings.Contains(string(body), "temporarily_unavailable") {
		t.Errorf("refresh during the outage: %d %s, want 503 temporarily_unavailable", code, body)
	}
	time.Sleep(2100 * time.Millisecond) // past the client cache: the next token request must read the store
	if code, body := o.tokenStatus(t); code != http.StatusServiceUnavailable {
		t.Errorf("client_credentials during the outage, client not cached: %d %s, want 503", code, body)
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/revocations", `{"jti":"`+jti+`"}`, jh); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("revocation during the outage: %d %s, want 503", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("store failures took %v to answer", took)
	}
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(o.access)); resp.StatusCode != http.StatusOK {
		t.Errorf("a revocation that was not stored was applied: /auth %d", resp.StatusCode)
	}

	proxy.Up()
	if code, body := o.refreshStatus(t); code != http.StatusOK {
		t.Fatalf("the refresh token presented during the outage was spent or the node did not recover: %d %s", code, body)
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/admin/revocations", `{"jti":"`+jti+`"}`, jh); resp.StatusCode != http.StatusCreated {
		t.Fatalf("revocation after the outage: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(o.access)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/auth after the revocation: %d", resp.StatusCode)
	}
}

// TestPostgresBlackhole: PostgreSQL stops answering without closing
// anything (the proxy drops every byte). Store operations fail after the
// store timeout instead of holding the request; /auth is unaffected; when
// PostgreSQL answers again the node serves without a restart, and the
// refresh token presented meanwhile still works.
func TestPostgresBlackhole(t *testing.T) {
	const timeout = 500 * time.Millisecond
	o := newOutage(t, timeout)
	o.proxy.Blackhole()
	start := time.Now()
	if code, body := o.refreshStatus(t); code != http.StatusServiceUnavailable {
		t.Errorf("refresh while PostgreSQL does not answer: %d %s, want 503", code, body)
	}
	if took := time.Since(start); took < timeout || took > 10*timeout { // bounded by the timeout, not by pgx's 15 s or forever
		t.Errorf("the refresh failed after %v; the store timeout is %v", took, timeout)
	}
	if resp, _ := do(t, http.MethodGet, o.live.base+"/auth", "", bearer(o.access)); resp.StatusCode != http.StatusOK {
		t.Errorf("/auth while PostgreSQL does not answer: %d", resp.StatusCode)
	}
	o.proxy.Up()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := o.refreshStatus(t)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery within 10 s after PostgreSQL answered again: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// claim reads one string claim of a JWT without verifying it.
func claim(t *testing.T, token, name string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	s, _ := c[name].(string)
	return s
}
