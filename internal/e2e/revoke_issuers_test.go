package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
)

// adminRevoke posts a revocation to the admin API at adminURL.
func adminRevoke(t *testing.T, adminURL, token string, body map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, rb := do(t, http.MethodPost, adminURL+"/v1/admin/revocations", string(b),
		http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + token}})
	var m map[string]any
	json.Unmarshal(rb, &m) //nolint:errcheck // an empty map fails the caller's checks
	return resp.StatusCode, m
}

// TestRevokeKeyFileIssuer: a token of a key_files issuer of the gateway is
// refused at /auth once the admin API revokes it by jti, and once it
// revokes its subject, though both were cached as valid; the same jti and
// subject of the token service's own issuer stay untouched, and an issuer
// the configuration does not trust is a 400 — until a reload trusts it.
func TestRevokeKeyFileIssuer(t *testing.T) {
	k := ecSigner(t, "k1")
	f := newKeyFile(t, k)
	c := startConfigured(t, keyFileYAML(f.path))
	token := c.Bootstrap().AdminToken
	if token == "" {
		t.Fatal("no dev admin token")
	}
	iat := time.Now().Add(-time.Minute).Unix()
	byJTI := idpToken(t, k, map[string]any{"jti": "j-1", "sub": "kgu_alice", "iat": iat})
	bySub := idpToken(t, k, map[string]any{"jti": "j-2", "sub": "bob", "iat": iat})
	other := idpToken(t, k, map[string]any{"jti": "j-3", "sub": "carol", "iat": iat})
	for _, tok := range []string{byJTI, bySub, other} {
		if code := authCode(t, c, tok); code != 200 { // and cached
			t.Fatalf("/auth before any revocation: %d", code)
		}
	}

	// Under the token service's own issuer (the default), the same jti and
	// subject are other tokens' and change nothing here.
	for _, body := range []map[string]any{{"jti": "j-1"}, {"subject": "bob"}} {
		if code, m := adminRevoke(t, c.admin, token, body); code != 201 || m["issuer"] != "http://self" {
			t.Fatalf("revoke %v under the own issuer: %d %v", body, code, m)
		}
	}
	if authCode(t, c, byJTI) != 200 || authCode(t, c, bySub) != 200 {
		t.Fatal("a revocation under the token service's issuer refused a key_files issuer's token")
	}

	if code, m := adminRevoke(t, c.admin, token, map[string]any{"issuer": idpIssuer, "jti": "j-1"}); code != 201 || m["issuer"] != idpIssuer {
		t.Fatalf("revoke the idp's jti: %d %v", code, m)
	}
	if code, m := adminRevoke(t, c.admin, token, map[string]any{"issuer": idpIssuer, "subject": "bob"}); code != 201 {
		t.Fatalf("revoke the idp's subject: %d %v", code, m)
	}
	if code := authCode(t, c, byJTI); code != 401 {
		t.Errorf("/auth with the idp token revoked by jti: %d, want 401", code)
	}
	if code := authCode(t, c, bySub); code != 401 {
		t.Errorf("/auth with the idp token of the revoked subject: %d, want 401", code)
	}
	if code := authCode(t, c, other); code != 200 {
		t.Errorf("/auth with another idp token: %d, want 200", code)
	}
	// A token of the subject issued after the revocation is valid.
	fresh := idpToken(t, k, map[string]any{"jti": "j-4", "sub": "bob", "iat": time.Now().Add(time.Second).Unix()})
	if code := authCode(t, c, fresh); code != 200 {
		t.Errorf("/auth with the subject's token issued after the revocation: %d, want 200", code)
	}

	// An issuer the configuration does not name.
	const second = "https://second.test/"
	code, m := adminRevoke(t, c.admin, token, map[string]any{"issuer": second, "subject": "bob"})
	if desc, _ := m["error_description"].(string); code != 400 || !strings.Contains(desc, second) {
		t.Errorf("revoke for an untrusted issuer: %d %v, want 400 naming it", code, m)
	}
	yaml := keyFileYAML(f.path) + strings.ReplaceAll(strings.SplitN(keyFileYAML(f.path), "issuers:\n", 2)[1], idpIssuer, second)
	if err := os.WriteFile(c.path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, m := adminRevoke(t, c.admin, token, map[string]any{"issuer": second, "subject": "bob"}); code != 201 {
		t.Errorf("revoke for an issuer added by a reload: %d %v", code, m)
	}
}

// TestFleetRevokeKeyFileIssuer: on a fleet (PostgreSQL and Redis), a
// key_files issuer's token revoked at node A's admin API, by jti and by
// subject, is refused at node B within a second, though B had it cached as
// valid, and at a node started afterwards.
func TestFleetRevokeKeyFileIssuer(t *testing.T) {
	if os.Getenv("REDIS_URL") == "" || os.Getenv("DATABASE_URL") == "" {
		t.Skip("needs PostgreSQL and Redis: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable REDIS_URL=redis://127.0.0.1:6379/0")
	}
	redisURL, prefix := redisPrefix(t)
	dbURL := newSchema(t)
	dir := t.TempDir()
	rootKey := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	k := ecSigner(t, "k1")
	f := newKeyFile(t, k)
	cfgPath := filepath.Join(dir, "keygate.yaml")
	if err := os.WriteFile(cfgPath, []byte(keyFileYAML(f.path)), 0o600); err != nil {
		t.Fatal(err)
	}
	adminToken := strings.Repeat("f", 40)
	node := func(name string) *live {
		gw, err := config.Load(cfgPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		return startLive(t, server.Config{AdminToken: adminToken, Gateway: gw, ConfigPath: cfgPath,
			Node: &node.Config{DataDir: filepath.Join(dir, name), Issuer: "https://keygate.fleet.test", Audience: testAudience,
				TokenService: config.TokenService{DatabaseURL: dbURL, RootKeyFile: rootKey, RedisURL: redisURL, RedisPrefix: prefix}}})
	}
	a, b := node("a"), node("b")
	authAt := func(n *live, tok string) int {
		t.Helper()
		code, _, _ := get(t, n.base+"/auth", tok)
		return code
	}
	iat := time.Now().Add(-time.Minute).Unix()
	byJTI := idpToken(t, k, map[string]any{"jti": "j-1", "sub": "alice", "iat": iat})
	bySub := idpToken(t, k, map[string]any{"jti": "j-2", "sub": "bob", "iat": iat})
	other := idpToken(t, k, map[string]any{"jti": "j-3", "sub": "carol", "iat": iat})
	for _, tok := range []string{byJTI, bySub, other} {
		if code := authAt(b, tok); code != 200 { // and cached at B
			t.Fatalf("/auth at B before any revocation: %d", code)
		}
	}
	if code, m := adminRevoke(t, a.admin, adminToken, map[string]any{"issuer": idpIssuer, "jti": "j-1"}); code != 201 {
		t.Fatalf("revoke the idp's jti at A: %d %v", code, m)
	}
	if code, m := adminRevoke(t, a.admin, adminToken, map[string]any{"issuer": idpIssuer, "subject": "bob"}); code != 201 {
		t.Fatalf("revoke the idp's subject at A: %d %v", code, m)
	}
	for _, tok := range []string{byJTI, bySub} {
		start := time.Now()
		for authAt(b, tok) != 401 {
			if time.Since(start) > time.Second {
				t.Fatalf("B still accepts an idp token revoked at A after %v", time.Since(start))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if code := authAt(b, other); code != 200 {
		t.Errorf("/auth at B with an idp token not revoked: %d", code)
	}
	c := node("c")
	for _, tok := range []string{byJTI, bySub} {
		if code := authAt(c, tok); code != 401 {
			t.Errorf("/auth at a node started after the revocations: %d, want 401", code)
		}
	}
}
