package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/jose"
)

// hmacJWKS writes a JWKS of oct keys, the form Oathkeeper's file:// JWKS
// and Envoy's local_jwks take shared secrets in.
func hmacJWKS(t *testing.T, dir string, secrets map[string][]byte) string {
	t.Helper()
	var members []string
	for kid, s := range secrets {
		members = append(members, fmt.Sprintf(`{"kty":"oct","kid":%q,"alg":"HS256","k":%q}`,
			kid, base64.RawURLEncoding.EncodeToString(s)))
	}
	path := filepath.Join(dir, "hs.jwks")
	if err := os.WriteFile(path, []byte(`{"keys":[`+strings.Join(members, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func hsSigner(t *testing.T, kid string, secret []byte) *jose.Signer {
	t.Helper()
	s, err := jose.NewSigner(jose.HS256, kid, secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStaticHMACIssuer: an issuer whose shared HS256 secrets come from a
// JWKS file verifies tokens MACed with either secret, and refuses one MACed
// with another secret, an ES256 token under the same issuer, and a token
// naming an unknown kid; nothing about the secret reaches the responses.
func TestStaticHMACIssuer(t *testing.T) {
	dir := t.TempDir()
	s1, s2 := randomBytes(t, 32), randomBytes(t, 48)
	path := hmacJWKS(t, dir, map[string][]byte{"hs1": s1, "hs2": s2})
	c := startConfigured(t, fmt.Sprintf(`
issuers:
  - issuer: %s
    key_files: [%s]
    algorithms: [HS256]
    audiences: [api]
    headers: {X-Auth-Subject: sub}
`, idpIssuer, path))

	tests := []struct {
		name string
		tok  string
		code int
	}{
		{"first secret", idpToken(t, hsSigner(t, "hs1", s1), nil), 200},
		{"second secret", idpToken(t, hsSigner(t, "hs2", s2), nil), 200},
		{"other secret, known kid", idpToken(t, hsSigner(t, "hs1", randomBytes(t, 32)), nil), 401},
		{"unknown kid", idpToken(t, hsSigner(t, "hs3", s1), nil), 401},
		{"ES256 under the HMAC issuer", idpToken(t, ecSigner(t, "hs1"), nil), 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, h, body := get(t, c.url+"/auth", tt.tok)
			if code != tt.code {
				t.Fatalf("status %d, want %d: %s", code, tt.code, body)
			}
			if code == 200 && h.Get("X-Auth-Subject") != "alice" {
				t.Errorf("X-Auth-Subject = %q", h.Get("X-Auth-Subject"))
			}
			for _, secret := range [][]byte{s1, s2} {
				if strings.Contains(body, base64.RawURLEncoding.EncodeToString(secret)) || bytes.Contains([]byte(body), secret) {
					t.Error("the response holds a secret")
				}
			}
		})
	}
}

// TestStaticHMACIssuerWeakSecret: a shared secret shorter than the hash
// output is refused when the configuration is loaded, naming the file,
// rather than leaving an issuer that can never verify.
func TestStaticHMACIssuerWeakSecret(t *testing.T) {
	dir := t.TempDir()
	path := hmacJWKS(t, dir, map[string][]byte{"weak": randomBytes(t, 16)})
	cfgPath := filepath.Join(dir, "keygate.yaml")
	yaml := fmt.Sprintf("issuers:\n  - issuer: %s\n    key_files: [%s]\n    algorithms: [HS256]\n    audiences: [api]\n", idpIssuer, path)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = server.New(context.Background(), server.Config{Gateway: cfg, ConfigPath: cfgPath,
		Node: &node.Config{DataDir: filepath.Join(dir, "data"), Issuer: "http://self", Audience: "x"}})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "shorter than the hash output") {
		t.Fatalf("New with a 16-byte HS256 secret: %v; want an error naming %s and the reason", err, path)
	}
}
