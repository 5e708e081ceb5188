package vaultsys_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/internal/vaultauth/vaultauthtest"
	"github.com/keygate/keygate/internal/vaultsys"
)

// env serves the three handlers as the server will mount them.
type env struct {
	url    string
	tokens *vaultauthtest.Service
	sealed atomic.Bool
	uninit atomic.Bool
}

func start(t *testing.T) *env {
	t.Helper()
	e := &env{tokens: vaultauthtest.New(t)}
	mux := http.NewServeMux()
	mux.Handle(vaultsys.HealthPath, vaultsys.NewHealth(vaultsys.HealthOptions{Sealed: e.sealed.Load,
		Initialized: func() bool { return !e.uninit.Load() }, Version: "1.2.3", ClusterName: "kg", ClusterID: "c-1"}))
	mounts, err := vaultsys.NewMounts(vaultsys.MountsOptions{Verifier: e.tokens.Verifier,
		Mounts: []vaultsys.Mount{vaultsys.KVv2Mount, vaultsys.TransitMount}, Sealed: e.sealed.Load})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle(vaultsys.MountsPath, mounts)
	mux.Handle(vaultsys.UIMountsPrefix, mounts)
	lookup, err := vaultsys.NewLookupSelf(vaultsys.LookupSelfOptions{Verifier: e.tokens.Verifier, Sealed: e.sealed.Load})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle(vaultsys.LookupSelfPath, lookup)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	e.url = ts.URL
	return e
}

func (e *env) client(t *testing.T, tok string) *vault.Client {
	t.Helper()
	cfg := vault.DefaultConfig()
	cfg.Address, cfg.MaxRetries = e.url, 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(tok)
	return c
}

func (e *env) get(t *testing.T, method, path, tok string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, nil)
	if tok != "" {
		req.Header.Set("X-Vault-Token", tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealth: Vault's shape and status codes, and the query parameters
// that change them; no token needed.
func TestHealth(t *testing.T) {
	e := start(t)
	h, err := e.client(t, "").Sys().Health()
	if err != nil || !h.Initialized || h.Sealed || h.Standby || h.Version != "1.2.3" || h.ClusterName != "kg" || h.ClusterID != "c-1" ||
		h.ReplicationDRMode != "disabled" || h.ReplicationPerformanceMode != "disabled" || time.Since(time.Unix(h.ServerTimeUTC, 0)) > time.Minute {
		t.Fatalf("%+v %v", h, err)
	}
	tests := []struct {
		name           string
		sealed, uninit bool
		method, query  string
		status         int
		body           string // a fragment of it
	}{
		{"active", false, false, "GET", "", 200, `"initialized":true,"sealed":false,"standby":false,"performance_standby":false`},
		{"active code", false, false, "GET", "?activecode=204&standbyok=true", 204, ""},
		{"sealed", true, false, "GET", "", 503, `"sealed":true`},
		{"sealed code", true, false, "GET", "?sealedcode=200", 200, `"sealed":true`},
		{"sealed names no cluster", true, false, "GET", "", 503, `"version":"1.2.3","enterprise":false,"echo_duration_ms"`},
		{"not initialized", false, true, "GET", "", 501, `"initialized":false`},
		{"not initialized code", false, true, "GET", "?uninitcode=299", 299, `"initialized":false`},
		{"uninit before sealed", true, true, "GET", "", 501, ``},
		{"head", false, false, "HEAD", "", 200, ""},
		{"head sealed", true, false, "HEAD", "", 503, ""},
		{"bad code", false, false, "GET", "?sealedcode=x", 400, "bad value for sealedcode parameter"},
		{"code out of range", false, false, "GET", "?activecode=5", 400, "bad value for activecode parameter"},
		{"bad standbyok", false, false, "GET", "?standbyok=maybe", 400, "bad value for standbyok"},
		{"post", false, false, "POST", "", 405, "unsupported operation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.sealed.Store(tt.sealed)
			e.uninit.Store(tt.uninit)
			st, b := e.get(t, tt.method, vaultsys.HealthPath+tt.query, "")
			if st != tt.status || !strings.Contains(b, tt.body) || tt.method == "HEAD" && b != "" {
				t.Errorf("%d %s, want %d with %s", st, b, tt.status, tt.body)
			}
		})
	}
}

// TestMounts: sys/mounts and ui/mounts as Vault's clients read them, and
// their refusals.
func TestMounts(t *testing.T) {
	e := start(t)
	tok := e.tokens.Token(t, "acme", "kgc_test")
	c := e.client(t, tok)
	ms, err := c.Sys().ListMounts()
	if err != nil {
		t.Fatal(err)
	}
	if kv := ms["secret/"]; kv == nil || kv.Type != "kv" || kv.Options["version"] != "2" || kv.Accessor == "" || kv.UUID == "" {
		t.Errorf("secret/: %+v", kv)
	}
	if tr := ms["transit/"]; tr == nil || tr.Type != "transit" || tr.Options != nil || len(ms) != 2 {
		t.Errorf("mounts %+v", ms)
	}
	// what the CLI's vault kv asks first (kvPreflightVersionRequest)
	for _, p := range []string{"secret/app/db", "secret", "secret/"} {
		s, err := c.Logical().Read("sys/internal/ui/mounts/" + p)
		if err != nil || s == nil || s.Data["path"] != "secret/" || s.Data["type"] != "kv" ||
			s.Data["options"].(map[string]any)["version"] != "2" {
			t.Errorf("%s: %+v %v", p, s, err)
		}
	}
	s, err := c.Logical().Read("sys/internal/ui/mounts/transit/keys/k")
	if err != nil || s.Data["path"] != "transit/" || s.Data["options"] != nil {
		t.Errorf("transit: %+v %v", s, err)
	}
	tests := []struct {
		name, method, path, tok string
		sealed                  bool
		status                  int
		body                    string
	}{
		{"no token", "GET", vaultsys.MountsPath, "", false, 403, "permission denied: no token"},
		{"bad token", "GET", vaultsys.MountsPath, "x", false, 403, "token refused"},
		{"no tenant", "GET", vaultsys.MountsPath, e.tokens.Mint(t, mint.Claims{Subject: "s", TTL: time.Hour}), false, 403, "names no tenant"},
		{"ui no token", "GET", vaultsys.UIMountsPrefix + "secret/", "", false, 403, "no token"},
		{"unknown mount", "GET", vaultsys.UIMountsPrefix + "secretx/a", tok, false, 403,
			`preflight capability check returned 403, please ensure client's policies grant access to path \"secretx/a\"`},
		{"every mount", "GET", vaultsys.UIMountsPrefix, tok, false, 200, `"data":{"auth":{},"secret":{"secret/":{`},
		{"sys mounts at the top level too", "GET", vaultsys.MountsPath, tok, false, 200, `"secret/":{"accessor":"kv_`},
		{"post", "POST", vaultsys.MountsPath, tok, false, 405, "unsupported operation"},
		{"sealed", "GET", vaultsys.MountsPath, tok, true, 503, "Vault is sealed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.sealed.Store(tt.sealed)
			defer e.sealed.Store(false)
			st, b := e.get(t, tt.method, tt.path, tt.tok)
			if st != tt.status || !strings.Contains(b, tt.body) {
				t.Errorf("%d %s, want %d with %s", st, b, tt.status, tt.body)
			}
		})
	}
	if _, err := vaultsys.NewMounts(vaultsys.MountsOptions{Verifier: e.tokens.Verifier, Mounts: []vaultsys.Mount{{Path: "a/b/", Type: "kv"}}}); err == nil {
		t.Error("a mount path of two segments accepted")
	}
}

// TestLookupSelf: the caller's token in Vault's shape, its jti as id,
// never the token.
func TestLookupSelf(t *testing.T) {
	e := start(t)
	tok := e.tokens.Token(t, "acme", "kgc_billing", "secrets:read:*", "transit:admin")
	s, err := e.client(t, tok).Auth().Token().LookupSelf()
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := s.TokenTTL()
	if err != nil || ttl < 59*time.Minute || ttl > time.Hour {
		t.Errorf("ttl %v %v", ttl, err)
	}
	policies, err := s.TokenPolicies()
	if err != nil || !slices.Equal(policies, []string{"secrets:read:*", "transit:admin"}) {
		t.Errorf("policies %v %v", policies, err)
	}
	d := s.Data
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	var claims struct {
		JTI string `json:"jti"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.JTI == "" || d["id"] != claims.JTI {
		t.Errorf("id %v, want the jti %q (%v)", d["id"], claims.JTI, err)
	}
	if b, _ := json.Marshal(d); strings.Contains(string(b), strings.Split(tok, ".")[2]) {
		t.Error("the answer holds the token")
	}
	if d["display_name"] != "kgc_billing" || d["meta"].(map[string]any)["tenant"] != "acme" || d["type"] != "service" {
		t.Errorf("data %v", d)
	}
	exp, err := time.Parse(time.RFC3339Nano, d["expire_time"].(string))
	iss, err2 := time.Parse(time.RFC3339Nano, d["issue_time"].(string))
	if err != nil || err2 != nil || exp.Sub(iss) != time.Hour {
		t.Errorf("times %v %v: %v %v", d["issue_time"], d["expire_time"], err, err2)
	}
	if ct, _ := d["creation_ttl"].(json.Number).Int64(); ct != 3600 {
		t.Errorf("creation_ttl %v", d["creation_ttl"])
	}
	st, b := e.get(t, "GET", vaultsys.LookupSelfPath, "")
	if st != 403 || !strings.Contains(b, "no token") {
		t.Errorf("no token: %d %s", st, b)
	}
	if st, b = e.get(t, "DELETE", vaultsys.LookupSelfPath, tok); st != 405 {
		t.Errorf("DELETE: %d %s", st, b)
	}
	if _, err := e.client(t, "garbage").Auth().Token().LookupSelfWithContext(context.Background()); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("garbage token: %v", err)
	}
}
