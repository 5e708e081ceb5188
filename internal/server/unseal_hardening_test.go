package server

import (
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/keyring"
)

// Tests of the unseal endpoint against an attacker who can reach the admin
// listener without the admin token: a local process, or a browser page
// posting to loopback.

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// sealedWithHeader starts a node sealed by a keyring.json made from
// testPassphrase, with an empty SQLite store, and returns it with the
// header's path and the root key the passphrase derives.
func sealedWithHeader(t *testing.T) (*live, string, keyring.RootKey) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	header := filepath.Join(dir, KeyringFile)
	root, err := keyring.InitPassphrase(header, []byte(testPassphrase), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.Destroy)
	l := startLive(t, Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience,
		AdminToken: "admin-token-0123456789abcdef0123456789"})
	if !l.Sealed() {
		t.Fatal("a node with only a keyring.json is not sealed")
	}
	return l, header, root
}

// setKeyID rewrites key_id in a keyring.json, standing in for the 2³²
// HMACs it takes to find a key whose 32-bit ID matches the real one.
func setKeyID(t *testing.T, header string, id keyring.KeyID) {
	t.Helper()
	data, err := os.ReadFile(header)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["key_id"] = id.String()
	data, _ = json.Marshal(m)
	if err := os.WriteFile(header, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func storedKeys(t *testing.T, l *live) int {
	t.Helper()
	keys, err := l.store.ListSigningKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// TestUnsealRawKeyNeedsCheckValue: with a keyring.json and an empty
// store, a raw root key whose 32-bit ID matches the header's is not
// enough: it must authenticate against the header's key-check value.
// Before the fix the key ID was all that was compared, and the wrong key
// became the node's root key and sealed the first signing key.
func TestUnsealRawKeyNeedsCheckValue(t *testing.T) {
	l, header, _ := sealedWithHeader(t)
	wrongText := randomKey(t)
	wrong, err := keyring.ParseKey([]byte(wrongText))
	if err != nil {
		t.Fatal(err)
	}
	setKeyID(t, header, wrong.ID())
	resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+wrongText+`"}`, jsonHeader)
	if resp.StatusCode != http.StatusBadRequest || !l.Sealed() {
		t.Fatalf("a key matching only the key ID: %d %s, sealed=%v; want 400 and sealed", resp.StatusCode, body, l.Sealed())
	}
	if n := storedKeys(t, l); n != 0 {
		t.Fatalf("%d signing keys were sealed under a key that fails the check value", n)
	}
}

// TestSealEndpointsRefuseBrowsers: seal and unseal take only
// application/json (a cross-site form or text/plain POST needs no CORS
// preflight, and the body would decode as JSON all the same) and refuse
// any request with an Origin header, which browsers send on every
// cross-site POST. Before the fix a text/plain body unsealed the node.
func TestSealEndpointsRefuseBrowsers(t *testing.T) {
	l, _, _ := sealedWithHeader(t)
	pass := `{"passphrase":"` + testPassphrase + `"}`
	for _, tc := range []struct {
		name string
		h    http.Header
		want int
	}{
		{"text/plain", http.Header{"Content-Type": {"text/plain"}}, http.StatusUnsupportedMediaType},
		{"form", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType},
		{"multipart", http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}, http.StatusUnsupportedMediaType},
		{"no Content-Type", nil, http.StatusUnsupportedMediaType},
		{"application/jsonp", http.Header{"Content-Type": {"application/jsonp"}}, http.StatusUnsupportedMediaType},
		{"cross-site", http.Header{"Content-Type": {"application/json"}, "Origin": {"https://attacker.example"}}, http.StatusForbidden},
		{"same origin", http.Header{"Content-Type": {"application/json"}, "Origin": {"http://127.0.0.1"}}, http.StatusForbidden},
		{"opaque origin", http.Header{"Content-Type": {"application/json"}, "Origin": {"null"}}, http.StatusForbidden},
		{"empty Origin", http.Header{"Content-Type": {"application/json"}, "Origin": {""}}, http.StatusForbidden},
		{"text/plain from a page", http.Header{"Content-Type": {"text/plain;charset=UTF-8"}, "Origin": {"https://attacker.example"}}, http.StatusForbidden},
	} {
		if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", pass, tc.h); resp.StatusCode != tc.want || !l.Sealed() {
			t.Fatalf("unseal, %s: %d %s, sealed=%v; want %d and sealed", tc.name, resp.StatusCode, body, l.Sealed(), tc.want)
		}
	}
	utf8 := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", pass, utf8); resp.StatusCode != http.StatusOK || l.Sealed() {
		t.Fatalf("unseal with application/json; charset=utf-8: %d %s", resp.StatusCode, body)
	}

	token := "Bearer admin-token-0123456789abcdef0123456789"
	for _, tc := range []struct {
		name string
		h    http.Header
		want int
	}{
		{"text/plain", http.Header{"Authorization": {token}, "Content-Type": {"text/plain"}}, http.StatusUnsupportedMediaType},
		{"no Content-Type", http.Header{"Authorization": {token}}, http.StatusUnsupportedMediaType},
		{"Origin", http.Header{"Authorization": {token}, "Content-Type": {"application/json"}, "Origin": {"https://attacker.example"}}, http.StatusForbidden},
	} {
		if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "{}", tc.h); resp.StatusCode != tc.want || l.Sealed() {
			t.Fatalf("seal, %s: %d %s, sealed=%v; want %d and unsealed", tc.name, resp.StatusCode, body, l.Sealed(), tc.want)
		}
	}
	h := http.Header{"Authorization": {token}, "Content-Type": {"application/json"}}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "", h); resp.StatusCode != http.StatusOK || !l.Sealed() {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	// GET seal-status is unchanged: without CORS a page cannot read it.
	if resp, _ := do(t, http.MethodGet, l.admin+"/v1/sys/seal-status", "", http.Header{"Origin": {"https://attacker.example"}}); resp.StatusCode != http.StatusOK {
		t.Errorf("seal-status with an Origin: %d", resp.StatusCode)
	}
}

// TestUnsealHidesStoreErrors: an unseal the store fails answers 503
// "store unavailable" and nothing more; the detail goes to the log. The
// caller needs no credential (the passphrase or key is what is being
// tested), so store error text, which names tables, hosts or files, is
// not for them. Before the fix the answer carried the store's error.
func TestUnsealHidesStoreErrors(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "root.key")
	if err := keyring.GenerateKeyFile(keyFile, rand.Reader); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	token := "admin-token-0123456789abcdef0123456789"
	l := startLive(t, Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience,
		RootKeyFile: keyFile, AdminToken: token, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "{}", adminJSON(token)); resp.StatusCode != http.StatusOK {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	if err := l.store.Close(); err != nil { // every store call fails from now on
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"key": strings.TrimSpace(string(key))})
	resp, b := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", string(body), jsonHeader)
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("unseal: %d %s", resp.StatusCode, b)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error != "temporarily_unavailable" || e.Description != "store unavailable" {
		t.Errorf("unseal with the store down: %d %s; want 503 temporarily_unavailable \"store unavailable\"", resp.StatusCode, b)
	}
	if !l.Sealed() {
		t.Error("an unseal whose keys could not be checked left the node unsealed")
	}
	if !strings.Contains(logs.String(), "closed") {
		t.Errorf("the store's error is not in the log:\n%s", logs)
	}
}
