package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
)

// TestJWKSSkippedKeysReportedOnce: keys of an issuer's JWKS that keygate
// leaves out (here an ES384 key the allow-list does not take and a
// 1024-bit RSA key) are each logged once, naming the issuer, kid,
// thumbprint and reason, and counted once in
// keygate_jwks_keys_skipped_total, however many times the unchanged JWKS is
// fetched again.
func TestJWKSSkippedKeysReportedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: waits for three JWKS refreshes; run without -short")
	}
	p := newIDP(t)
	k1 := ecSigner(t, "k1")
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	es384, err := jose.NewKey(jose.ES384, "k384", &p384.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	for _, k := range []*jose.Key{k1.Key(), es384} {
		b, err := k.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		doc.Keys = append(doc.Keys, b)
	}
	weakJWK, _ := json.Marshal(map[string]string{"kty": "RSA", "kid": "weak", "alg": "RS256",
		"n": b64(weak.N.Bytes()), "e": b64(big.NewInt(int64(weak.E)).Bytes())})
	doc.Keys = append(doc.Keys, weakJWK)
	body, _ := json.Marshal(doc)
	p.jwks.Store(&body)

	var logs syncBuffer
	c := startConfiguredWith(t, configYAML(p.srv.URL, ""), &logs)
	if code := authCode(t, c, idpToken(t, k1, nil)); code != 200 {
		t.Fatalf("token of the usable key: %d", code)
	}
	// The IdP says max-age=1: wait for three more fetches of the same JWKS.
	n := p.fetches.Load()
	eventually(t, "three refreshes", func() bool { return p.fetches.Load() >= n+3 })
	time.Sleep(100 * time.Millisecond) // the last fetch's report

	metrics := scrape(t, c)
	for _, want := range []string{
		`keygate_jwks_keys_skipped_total{issuer="https://idp.test/",reason="alg_not_allowed"} 1`,
		`keygate_jwks_keys_skipped_total{issuer="https://idp.test/",reason="weak_key"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "JWKS key skipped") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d skipped-key log lines after %d fetches, want 2:\n%s", len(lines), p.fetches.Load(), logs.String())
	}
	for _, want := range [][]string{
		{"issuer=https://idp.test/", "kid=k384", "thumbprint=" + es384.Thumbprint(), "reason=alg_not_allowed"},
		{"issuer=https://idp.test/", "kid=weak", "reason=weak_key"},
	} {
		found := false
		for _, l := range lines {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(l, w)
			}
			found = found || ok
		}
		if !found {
			t.Errorf("no log line with %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	if strings.Contains(logs.String(), b64(weak.N.Bytes())[:40]) {
		t.Error("the log holds key material")
	}
}

// TestJWKSKeyBoundToOneAlg: an RSA key published without "alg" verifies
// RS256 tokens only, even when the issuer's allow-list also names PS256
// and RS512: the same key's signature under another algorithm is refused.
func TestJWKSKeyBoundToOneAlg(t *testing.T) {
	p := newIDP(t)
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	body, _ := json.Marshal(map[string]any{"keys": []any{map[string]string{"kty": "RSA", "kid": "rsa",
		"n": b64(priv.N.Bytes()), "e": b64(big.NewInt(int64(priv.E)).Bytes())}}})
	p.jwks.Store(&body)
	c := startConfigured(t, strings.Replace(configYAML(p.srv.URL, ""), "algorithms: [ES256]", "algorithms: [RS256, PS256, RS512]", 1))
	for _, tt := range []struct {
		alg  jose.Alg
		want int
	}{{jose.RS256, 200}, {jose.PS256, 401}, {jose.RS512, 401}} {
		s, err := jose.NewSigner(tt.alg, "rsa", priv)
		if err != nil {
			t.Fatal(err)
		}
		if code := authCode(t, c, idpToken(t, s, nil)); code != tt.want {
			t.Errorf("%v token signed by the alg-less RSA key: %d, want %d", tt.alg, code, tt.want)
		}
	}
}
