package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/store"
)

const testPassphrase = "correct horse battery staple"

// sealState reads GET /v1/sys/seal-status.
func sealState(t *testing.T, l *live) map[string]any {
	t.Helper()
	resp, body := do(t, http.MethodGet, l.admin+"/v1/sys/seal-status", "", nil)
	var st map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &st) != nil {
		t.Fatalf("seal-status: %d %s", resp.StatusCode, body)
	}
	return st
}

// addClient stores a client directly: the store needs no root key.
func addClient(t *testing.T, l *live, id string) string {
	t.Helper()
	secret, err := issuer.NewSecret(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d := issuer.SecretDigest(secret)
	if err := l.Store().CreateClient(t.Context(), store.Client{ID: id, Name: id, SecretDigest: d[:], Scopes: []string{"demo"}}); err != nil {
		t.Fatal(err)
	}
	return secret
}

func tokenStatus(t *testing.T, l *live, id, secret string) (int, string) {
	t.Helper()
	h := form()
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth(id, secret)
	h.Set("Authorization", req.Header.Get("Authorization"))
	resp, body := do(t, http.MethodPost, l.base+"/oauth2/token", "grant_type=client_credentials", h)
	return resp.StatusCode, string(body)
}

// passphraseDataDir returns a new data directory holding a keyring.json
// for testPassphrase.
func passphraseDataDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := rootkey.InitPassphrase(filepath.Join(dir, node.KeyringFile), []byte(testPassphrase), nil)
	if err != nil {
		t.Fatal(err)
	}
	root.Destroy()
	return dir
}

// TestSealedStartPassphrase: with a keyring header and no root key the
// node starts sealed — issuance and readiness answer 503, the gateway and
// the store still work — and the passphrase over the admin API unseals it.
// Sealing again through the API stops issuance at once.
func TestSealedStartPassphrase(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a sealed start unsealed by passphrase (Argon2id); run without -short")
	}
	dir := passphraseDataDir(t)
	cfg := server.Config{AdminToken: "admin-token-0123456789abcdef0123456789", Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience}}
	l := startLive(t, cfg)
	if !l.Sealed() || l.Bootstrap().Dev {
		t.Fatalf("not started sealed: sealed=%v %+v", l.Sealed(), l.Bootstrap())
	}
	if _, err := os.Stat(filepath.Join(dir, node.RootKeyFile)); err == nil {
		t.Fatal("a dev root key was generated beside a keyring header")
	}
	secret := addClient(t, l, "svc")
	if code, body := tokenStatus(t, l, "svc", secret); code != http.StatusServiceUnavailable || !strings.Contains(body, "temporarily_unavailable") {
		t.Fatalf("token while sealed: %d %s", code, body)
	}
	if resp, body := do(t, http.MethodGet, l.admin+"/readyz", "", nil); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"reasons":["sealed"`) {
		t.Errorf("readyz while sealed: %d %s", resp.StatusCode, body)
	}
	if st := sealState(t, l); st["sealed"] != true || st["passphrase"] != true {
		t.Errorf("seal-status: %v", st)
	}
	jh := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct{ name, body string }{
		{"wrong passphrase", `{"passphrase":"not the passphrase at all"}`},
		{"both fields", `{"passphrase":"` + testPassphrase + `","key":"AAAA"}`},
		{"neither", `{}`},
		{"unknown field", `{"pass":"x"}`},
		{"not json", `passphrase=x`},
		{"bad key", `{"key":"not base64!"}`},
		// The store is empty: only the header's key ID tells this key apart.
		{"random key", `{"key":"` + randomKey(t) + `"}`},
	} {
		if resp, b := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", tc.body, jh); resp.StatusCode != http.StatusBadRequest || !l.Sealed() {
			t.Fatalf("unseal with %s: %d %s, sealed=%v; want 400 and sealed", tc.name, resp.StatusCode, b, l.Sealed())
		}
	}

	resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"passphrase":"`+testPassphrase+`"}`, jh)
	if resp.StatusCode != http.StatusOK || l.Sealed() || !strings.Contains(string(body), `"sealed":false`) {
		t.Fatalf("unseal: %d %s", resp.StatusCode, body)
	}
	kid := l.Thumbprint()
	tok := clientToken(t, l.base, "svc", secret)
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(tok)); resp.StatusCode != http.StatusOK {
		t.Fatalf("/auth after unseal: %d", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodGet, l.admin+"/readyz", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("readyz after unseal: %d", resp.StatusCode)
	}

	if resp, _ := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "", jh); resp.StatusCode != http.StatusUnauthorized || l.Sealed() {
		t.Fatalf("seal without the admin token: %d sealed=%v", resp.StatusCode, l.Sealed())
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "", adminJSON(cfg.AdminToken)); resp.StatusCode != http.StatusOK || !l.Sealed() {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	if code, body := tokenStatus(t, l, "svc", secret); code != http.StatusServiceUnavailable {
		t.Fatalf("token after seal: %d %s", code, body)
	}
	if resp, _ := do(t, http.MethodGet, l.base+"/auth", "", bearer(tok)); resp.StatusCode != http.StatusOK {
		t.Errorf("/auth while sealed refused a valid token: %d", resp.StatusCode)
	}
	if err := l.stop(); err != nil {
		t.Fatal(err)
	}

	// Restarted, it is sealed again with the key published, and the same
	// passphrase brings back the same signing key.
	again := startLive(t, cfg)
	if !again.Sealed() {
		t.Fatal("restart with a keyring header is not sealed")
	}
	if resp, body := do(t, http.MethodGet, again.base+"/.well-known/jwks.json", "", nil); !strings.Contains(string(body), kid) {
		t.Errorf("sealed JWKS lacks %s: %d %s", kid, resp.StatusCode, body)
	}
	if resp, _ := do(t, http.MethodGet, again.base+"/auth", "", bearer(tok)); resp.StatusCode != http.StatusOK {
		t.Errorf("/auth on a sealed restart: %d", resp.StatusCode)
	}
	if resp, body := do(t, http.MethodPost, again.admin+"/v1/sys/unseal", `{"passphrase":"`+testPassphrase+`"}`, jh); resp.StatusCode != http.StatusOK {
		t.Fatalf("unseal after restart: %d %s", resp.StatusCode, body)
	}
	if again.Thumbprint() != kid {
		t.Errorf("signing kid after unseal %q, want %q", again.Thumbprint(), kid)
	}
}

// TestUnsealWithRootKey: a node sealed through the API takes its root key
// itself (base64, as in a key file) to unseal.
func TestUnsealWithRootKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(keyFile, rand.Reader); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{AdminToken: "admin-token-0123456789abcdef0123456789",
		Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience,
			TokenService: config.TokenService{RootKeyFile: keyFile}}}
	l := startLive(t, cfg)
	secret := addClient(t, l, "svc")
	clientToken(t, l.base, "svc", secret)
	if resp, _ := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "", adminJSON(cfg.AdminToken)); resp.StatusCode != http.StatusOK {
		t.Fatalf("seal: %d", resp.StatusCode)
	}
	jh := http.Header{"Content-Type": {"application/json"}}
	if resp, _ := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"passphrase":"`+testPassphrase+`"}`, jh); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("passphrase unseal without a keyring header: %d", resp.StatusCode)
	}
	// Another spelling of the field, alone or beside the right one, is
	// refused: one reader must not see a key another reader does not.
	for _, bad := range []string{`{"KEY":"%s"}`, `{"key":"%s","Key":"x"}`, `{"passphrase":"x","Passphrase":"%s"}`} {
		if resp, _ := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", fmt.Sprintf(bad, strings.TrimSpace(string(key))), jh); resp.StatusCode != http.StatusBadRequest || !l.Sealed() {
			t.Errorf("unseal with %s: %d, want 400 and still sealed", bad, resp.StatusCode)
		}
	}
	body, _ := json.Marshal(map[string]string{"key": string(key)})
	if resp, b := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", string(body), jh); resp.StatusCode != http.StatusOK || l.Sealed() {
		t.Fatalf("unseal with the root key: %d %s", resp.StatusCode, b)
	}
	clientToken(t, l.base, "svc", secret)
}

// adminJSON is the headers of a seal request: the admin token and JSON.
func adminJSON(token string) http.Header {
	h := bearer(token)
	h.Set("Content-Type", "application/json")
	return h
}

func randomKey(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "k")
	if err := rootkey.GenerateKeyFile(path, rand.Reader); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestSealWithPassphrase: a passphrase-sealed node without an admin token
// can still be sealed, by the unseal passphrase; a wrong passphrase, or a
// passphrase on a node without a keyring, seals nothing.
func TestSealWithPassphrase(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: sealing by passphrase (Argon2id); run without -short")
	}
	dir := passphraseDataDir(t)
	l := startLive(t, server.Config{Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience}})
	jh := http.Header{"Content-Type": {"application/json"}}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"passphrase":"`+testPassphrase+`"}`, jh); resp.StatusCode != http.StatusOK {
		t.Fatalf("unseal: %d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct{ name, body string }{
		{"no credential", ``},
		{"empty object", `{}`},
		{"wrong passphrase", `{"passphrase":"not the passphrase at all"}`},
		{"unknown field", `{"passphrase":"` + testPassphrase + `","x":1}`},
	} {
		if resp, b := do(t, http.MethodPost, l.admin+"/v1/sys/seal", tc.body, jh); resp.StatusCode != http.StatusUnauthorized || l.Sealed() {
			t.Fatalf("seal with %s: %d %s, sealed=%v; want 401 and unsealed", tc.name, resp.StatusCode, b, l.Sealed())
		}
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", `{"passphrase":"`+testPassphrase+`"}`, jh); resp.StatusCode != http.StatusOK || !l.Sealed() {
		t.Fatalf("seal with the passphrase: %d %s sealed=%v", resp.StatusCode, body, l.Sealed())
	}

	// A node without a keyring passphrase takes only the admin token.
	plain := startLive(t, server.Config{AdminToken: "admin-token-0123456789abcdef0123456789", Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "d"),
		Issuer: testIssuer, Audience: testAudience, Dev: true}})
	if resp, b := do(t, http.MethodPost, plain.admin+"/v1/sys/seal", `{"passphrase":"`+testPassphrase+`"}`, jh); resp.StatusCode != http.StatusUnauthorized ||
		plain.Sealed() || !strings.Contains(string(b), "no unseal passphrase") {
		t.Errorf("seal by passphrase without a keyring: %d %s sealed=%v", resp.StatusCode, b, plain.Sealed())
	}
}

// TestSealedStartPostgres: nodes on a shared database with no key source
// start sealed. Once Init (keygate operator init) has sealed the first
// signing key under the root key, only that key unseals, on any node.
func TestSealedStartPostgres(t *testing.T) {
	dbURL := newSchema(t)
	cfg := func() server.Config {
		return server.Config{Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience,
			TokenService: config.TokenService{DatabaseURL: dbURL}}}
	}
	key := randomKey(t)
	root, err := rootkey.ParseKey([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.Init(t.Context(), *cfg().Node, root); err != nil {
		t.Fatal(err)
	}
	a := startLive(t, cfg())
	if !a.Sealed() {
		t.Fatal("a node with a database and no root key is not sealed")
	}
	jh := http.Header{"Content-Type": {"application/json"}}
	if resp, b := do(t, http.MethodPost, a.admin+"/v1/sys/unseal", `{"key":"`+key+`"}`, jh); resp.StatusCode != http.StatusOK {
		t.Fatalf("first unseal: %d %s", resp.StatusCode, b)
	}
	secret := addClient(t, a, "svc")
	tok := clientToken(t, a.base, "svc", secret)

	b := startLive(t, cfg())
	if !b.Sealed() {
		t.Fatal("second node not sealed")
	}
	if resp, _ := do(t, http.MethodGet, b.base+"/auth", "", bearer(tok)); resp.StatusCode != http.StatusOK {
		t.Errorf("sealed node B refused A's token: %d", resp.StatusCode)
	}
	if resp, body := do(t, http.MethodPost, b.admin+"/v1/sys/unseal", `{"key":"`+randomKey(t)+`"}`, jh); resp.StatusCode != http.StatusBadRequest || !b.Sealed() {
		t.Fatalf("unseal B with another key: %d %s sealed=%v", resp.StatusCode, body, b.Sealed())
	}
	if resp, body := do(t, http.MethodPost, b.admin+"/v1/sys/unseal", `{"key":"`+key+`"}`, jh); resp.StatusCode != http.StatusOK {
		t.Fatalf("unseal B with the root key: %d %s", resp.StatusCode, body)
	}
	if b.Thumbprint() != a.Thumbprint() {
		t.Errorf("B signs with %s, A with %s", b.Thumbprint(), a.Thumbprint())
	}
	clientToken(t, b.base, "svc", secret)
}

// TestPassphraseAttemptsSpaced: unauthenticated passphrase checks (each an
// Argon2id derivation) are spaced node-wide: after a burst, 429 with
// Retry-After, and nothing is checked or sealed; time refills the gate.
func TestPassphraseAttemptsSpaced(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a burst of passphrase checks (Argon2id); run without -short")
	}
	var now atomic.Pointer[time.Time]
	t0 := time.Now()
	now.Store(&t0)
	dir := passphraseDataDir(t)
	l := startLive(t, server.Config{Now: func() time.Time { return *now.Load() },
		Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience}})
	jh := http.Header{"Content-Type": {"application/json"}}
	wrong := `{"passphrase":"not the passphrase at all"}`
	for i := range server.PassphraseBurst {
		if resp, b := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", wrong, jh); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("attempt %d inside the burst: %d %s", i+1, resp.StatusCode, b)
		}
	}
	resp, b := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"passphrase":"`+testPassphrase+`"}`, jh)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !l.Sealed() {
		t.Fatalf("past the burst, even the right passphrase: %d %s (Retry-After %q), sealed=%v; want 429 and still sealed",
			resp.StatusCode, b, resp.Header.Get("Retry-After"), l.Sealed())
	}
	later := t0.Add(server.PassphraseEvery)
	now.Store(&later)
	if resp, b := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"passphrase":"`+testPassphrase+`"}`, jh); resp.StatusCode != http.StatusOK || l.Sealed() {
		t.Fatalf("after the gate refilled: %d %s", resp.StatusCode, b)
	}
	// The seal by passphrase draws from the same gate: empty again now.
	if resp, _ := do(t, http.MethodPost, l.admin+"/v1/sys/seal", wrong, jh); resp.StatusCode != http.StatusTooManyRequests || l.Sealed() {
		t.Errorf("seal by passphrase with the gate empty: %d, sealed=%v", resp.StatusCode, l.Sealed())
	}
}
