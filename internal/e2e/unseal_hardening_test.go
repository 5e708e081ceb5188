package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/ratelimit"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/jose"
)

// Tests of the unseal endpoint against an attacker who can reach the admin
// listener without the admin token: a local process, or a browser page
// posting to loopback.

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// sealedWithHeader starts a node sealed by a keyring.json made from
// testPassphrase, with an empty SQLite store, and returns it with the
// header's path and the root key the passphrase derives.
func sealedWithHeader(t *testing.T) (*live, string, rootkey.Key) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	header := filepath.Join(dir, node.KeyringFile)
	root, err := rootkey.InitPassphrase(header, []byte(testPassphrase), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.Destroy)
	l := startLive(t, server.Config{AdminToken: "admin-token-0123456789abcdef0123456789",
		Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience}})
	if !l.Sealed() {
		t.Fatal("a node with only a keyring.json is not sealed")
	}
	return l, header, root
}

// setKeyID rewrites key_id in a keyring.json, standing in for the 2³²
// HMACs it takes to find a key whose 32-bit ID matches the real one.
func setKeyID(t *testing.T, header string, id rootkey.KeyID) {
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
	keys, err := l.Store().ListSigningKeys(t.Context())
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
	wrong, err := rootkey.ParseKey([]byte(wrongText))
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
	if err := rootkey.GenerateKeyFile(keyFile, rand.Reader); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	token := "admin-token-0123456789abcdef0123456789"
	l := startLive(t, server.Config{AdminToken: token, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience,
			TokenService: config.TokenService{RootKeyFile: keyFile}}})
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "{}", adminJSON(token)); resp.StatusCode != http.StatusOK {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	if err := l.Store().Close(); err != nil { // every store call fails from now on
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

// sealedUnder checks every stored signing key against root, the fleet's
// root key, and returns the kids that root does not open: keys some other
// root key sealed.
func sealedUnder(t *testing.T, l *live, root rootkey.Key) (foreign []string, total int) {
	t.Helper()
	kr, err := rootkey.New(rootkey.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := l.Store().ListSigningKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, err := kr.Decrypt(k.Sealed, []byte("keygate signing-key "+k.KID)); err != nil {
			foreign = append(foreign, k.KID)
		}
	}
	return foreign, len(keys)
}

// churnKeys runs the signing-key schedule and rotations in a loop, as the
// node's ticker and an admin's rotations would, until the returned stop is
// called: every moment a wrong root key were installed, they would seal a
// new signing key under it.
func churnKeys(l *live) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				l.Keys().Tick(ctx)          //nolint:errcheck // sealed: ErrSealed, or nothing due
				l.Keys().Rotate(ctx, false) //nolint:errcheck
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// rotatingConfig is a node on a fresh SQLite store with a root key file,
// under a schedule in which every unsealed Tick creates a key; it returns
// the root key and its file too.
func rotatingConfig(t *testing.T) (server.Config, rootkey.Key, string) {
	t.Helper()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(keyFile, rand.Reader); err != nil {
		t.Fatal(err)
	}
	root, err := rootkey.LoadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.Destroy)
	return server.Config{AdminToken: "admin-token-0123456789abcdef0123456789",
		Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: testIssuer, Audience: testAudience,
			TokenService: config.TokenService{RootKeyFile: keyFile, KeyRotation: new(time.Minute), KeyPrePublish: 2 * time.Hour},
			// Hundreds of wrong keys from one address, each tried: the
			// per-address limit of unauthenticated attempts is not the
			// subject here.
			RefusalLimit: ratelimit.Limit{Rate: 1000, Burst: 10_000}}}, root, keyFile
}

// rotatingNode starts a rotatingConfig node and seals it through the API.
func rotatingNode(t *testing.T) (*live, rootkey.Key, string) {
	t.Helper()
	cfg, root, keyFile := rotatingConfig(t)
	l := startLive(t, cfg)
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "{}", adminJSON(cfg.AdminToken)); resp.StatusCode != http.StatusOK {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	return l, root, keyFile
}

// TestUnsealNoWrongKeyWindow: a wrong root key is never installed, not
// even for the moment it takes to find out that it does not open the
// stored signing keys. Wrong keys are sent from two clients at once while
// the key schedule and rotations run in a loop; afterwards every stored
// signing key must open under the fleet's root key. Before the fix the
// unseal installed the key, then loaded the signing keys, then sealed
// again on failure, and the schedule sealed new signing keys under wrong
// keys in between.
func TestUnsealNoWrongKeyWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: unseals racing the key schedule and rotations; run without -short")
	}
	l, root, keyFile := rotatingNode(t)
	stop := churnKeys(l)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted []string
	for range 2 {
		wg.Go(func() {
			for range 100 {
				resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+randomKey(t)+`"}`, jsonHeader)
				if resp.StatusCode != http.StatusBadRequest {
					mu.Lock()
					accepted = append(accepted, resp.Status+" "+string(body))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	stop()
	if len(accepted) > 0 {
		t.Errorf("%d wrong keys were not refused with 400, e.g. %s", len(accepted), accepted[0])
	}
	if !l.Sealed() {
		t.Fatal("wrong keys left the node unsealed")
	}
	if foreign, total := sealedUnder(t, l, root); len(foreign) > 0 {
		t.Fatalf("%d of %d stored signing keys are sealed under a wrong root key, e.g. %s", len(foreign), total, foreign[0])
	}

	// The right key, racing a wrong one, unseals; the schedule then seals
	// new keys under it alone.
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	stop = churnKeys(l)
	right, _ := json.Marshal(map[string]string{"key": strings.TrimSpace(string(key))})
	wg.Go(func() { do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+randomKey(t)+`"}`, jsonHeader) })
	resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", string(right), jsonHeader)
	wg.Wait()
	for deadline := time.Now().Add(5 * time.Second); storedKeys(t, l) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // until the schedule has sealed a key under the right one
	}
	stop()
	if resp.StatusCode != http.StatusOK || l.Sealed() {
		t.Fatalf("the right key: %d %s", resp.StatusCode, body)
	}
	if id, _ := l.Keyring().Current(); id != root.ID() {
		t.Fatalf("unsealed with %v, want %v", id, root.ID())
	}
	if foreign, total := sealedUnder(t, l, root); len(foreign) > 0 || total < 2 {
		t.Fatalf("after the right key: %d of %d stored signing keys under a wrong root key", len(foreign), total)
	}
}

// TestUnsealPassphraseNoWrongKeyWindow: the passphrase path verifies the
// same way. Here keyring.json belongs to another root key than the one
// the store's signing keys are sealed under (a header copied from another
// fleet, or replaced): the passphrase passes the check value, but the key
// it derives must still open the stored keys before the keyring holds it.
// Before the fix it was installed, and the schedule sealed keys under it,
// until loading the signing keys failed.
func TestUnsealPassphraseNoWrongKeyWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: passphrase unseals racing the key schedule (Argon2id); run without -short")
	}
	cfg, root, _ := rotatingConfig(t)
	first := startLive(t, cfg) // seals the first signing key under root
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	other, err := rootkey.InitPassphrase(filepath.Join(cfg.Node.DataDir, node.KeyringFile), []byte(testPassphrase), nil)
	if err != nil {
		t.Fatal(err)
	}
	other.Destroy()
	cfg.Node.TokenService.RootKeyFile = ""
	l := startLive(t, cfg)
	if !l.Sealed() {
		t.Fatal("not sealed")
	}
	stop := churnKeys(l)
	for range 4 {
		if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"passphrase":"`+testPassphrase+`"}`, jsonHeader); resp.StatusCode != http.StatusBadRequest || !l.Sealed() {
			stop()
			t.Fatalf("a passphrase for another root key: %d %s, sealed=%v", resp.StatusCode, body, l.Sealed())
		}
	}
	stop()
	if foreign, total := sealedUnder(t, l, root); len(foreign) > 0 {
		t.Fatalf("%d of %d stored signing keys are sealed under the header's key, e.g. %s", len(foreign), total, foreign[0])
	}
}

// TestUnsealEmptyStoreNeedsInit: on a shared store with no signing key and
// no keyring.json, nothing can tell the fleet's root key from any other,
// so an unseal is refused (409 not_initialized) rather than taking the
// first key it is given. Before the fix, whoever reached an admin listener
// first chose the fleet's root key, with no credential at all.
func TestUnsealEmptyStoreNeedsInit(t *testing.T) {
	l := startLive(t, server.Config{AdminToken: "admin-token-0123456789abcdef0123456789",
		Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience,
			TokenService: config.TokenService{DatabaseURL: newSchema(t)}}})
	if !l.Sealed() {
		t.Fatal("a node with a database and no root key is not sealed")
	}
	resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+randomKey(t)+`"}`, jsonHeader)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "not_initialized") || !l.Sealed() {
		t.Fatalf("the first key on an empty store: %d %s, sealed=%v; want 409 not_initialized and sealed", resp.StatusCode, body, l.Sealed())
	}
	if n := storedKeys(t, l); n != 0 {
		t.Fatalf("%d signing keys were stored by a refused unseal", n)
	}
}

// TestInit: Init seals the first signing key of an empty shared store
// under the root key it is given; nodes then unseal with that key and no
// other, and a second Init changes nothing.
func TestInit(t *testing.T) {
	dbURL := newSchema(t)
	cfg := server.Config{Node: &node.Config{DataDir: filepath.Join(t.TempDir(), "data"), Issuer: testIssuer, Audience: testAudience,
		TokenService: config.TokenService{DatabaseURL: dbURL, SigningAlg: "EdDSA"}}}
	key := randomKey(t)
	root, err := rootkey.ParseKey([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Destroy()
	kid, err := node.Init(t.Context(), *cfg.Node, root)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := rootkey.Generate(nil)
	defer other.Destroy()
	if _, err := node.Init(t.Context(), *cfg.Node, other); !errors.Is(err, signingkeys.ErrInitialized) {
		t.Errorf("a second Init: %v, want ErrInitialized", err)
	}
	if _, err := node.Init(t.Context(), node.Config{DataDir: t.TempDir()}, root); err == nil {
		t.Error("Init without a database URL succeeded")
	}

	l := startLive(t, cfg)
	if !l.Sealed() {
		t.Fatal("not sealed")
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+randomKey(t)+`"}`, jsonHeader); resp.StatusCode != http.StatusBadRequest || !l.Sealed() {
		t.Fatalf("another key after Init: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+key+`"}`, jsonHeader); resp.StatusCode != http.StatusOK || l.Sealed() {
		t.Fatalf("the key Init was given: %d %s", resp.StatusCode, body)
	}
	if l.Thumbprint() != kid || l.Keys().Signer().Alg() != jose.EdDSA {
		t.Errorf("signing with %s (%v), want Init's %s (EdDSA)", l.Thumbprint(), l.Keys().Signer().Alg(), kid)
	}
	if foreign, total := sealedUnder(t, l, root); len(foreign) > 0 || total != 1 {
		t.Errorf("%d of %d keys not under the root key", len(foreign), total)
	}
}

// TestUnsealMalformedKeys: keys of the wrong length or encoding, and
// bodies over the limit, are refused with 400 before anything else, and
// the answer never echoes the key.
func TestUnsealMalformedKeys(t *testing.T) {
	l, _, _ := sealedWithHeader(t)
	b64 := func(n int) string {
		b := make([]byte, n)
		rand.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	long := b64(64)
	for _, key := range []string{b64(16), b64(31), b64(33), long, strings.Repeat("a", 64), "0x" + strings.Repeat("ab", 32), "%%%%"} {
		resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+key+`"}`, jsonHeader)
		if resp.StatusCode != http.StatusBadRequest || !l.Sealed() || strings.Contains(string(body), key) {
			t.Errorf("key %.12q...: %d %s, sealed=%v", key, resp.StatusCode, body, l.Sealed())
		}
	}
	huge := `{"key":"` + strings.Repeat("A", server.MaxUnsealBody) + `"}`
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", huge, jsonHeader); resp.StatusCode != http.StatusBadRequest || !l.Sealed() {
		t.Errorf("a body over %d bytes: %d %s", server.MaxUnsealBody, resp.StatusCode, body)
	}
	if n := storedKeys(t, l); n != 0 {
		t.Errorf("%d signing keys stored", n)
	}
}

// TestStartRefusesKeyFileNotMatchingHeader: a root key given at start
// beside a keyring.json made for another key is refused too: the node does
// not start rather than seal signing keys under a key the passphrase does
// not derive.
func TestStartRefusesKeyFileNotMatchingHeader(t *testing.T) {
	dir := passphraseDataDir(t)
	keyFile := filepath.Join(t.TempDir(), "root.key")
	if err := rootkey.GenerateKeyFile(keyFile, rand.Reader); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(t.Context(), server.Config{Node: &node.Config{DataDir: dir, Issuer: testIssuer, Audience: testAudience,
		TokenService: config.TokenService{RootKeyFile: keyFile}}})
	if !errors.Is(err, rootkey.ErrWrongKey) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("New with a key file keyring.json was not made for: %v, want ErrWrongKey", err)
	}
}
