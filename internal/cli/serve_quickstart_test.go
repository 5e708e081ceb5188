package cli

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gjwt "github.com/golang-jwt/jwt/v5"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// idpKey is one key an independent identity provider publishes: the JWKS
// is written by lestrrat-go/jwx, the tokens signed by golang-jwt.
type idpKey struct {
	kid     string
	alg     string // the algorithm the provider signs with
	declare bool   // whether the JWK names it
	priv    crypto.Signer
}

// independentIDP serves the JWKS of keys, made by jwx, on 127.0.0.1.
func independentIDP(t *testing.T, keys []idpKey) *httptest.Server {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		xk, err := jwk.PublicKeyOf(k.priv)
		if err != nil {
			t.Fatal(err)
		}
		if err := xk.Set(jwk.KeyIDKey, k.kid); err != nil {
			t.Fatal(err)
		}
		if k.declare {
			a, ok := jwa.LookupSignatureAlgorithm(k.alg)
			if !ok {
				t.Fatalf("jwx does not know %s", k.alg)
			}
			if err := xk.Set(jwk.AlgorithmKey, a); err != nil {
				t.Fatal(err)
			}
		}
		if err := set.AddKey(xk); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// gjwtToken signs a token for issuer https://idp.test/ and audience api
// with golang-jwt.
func gjwtToken(t *testing.T, alg, kid string, priv crypto.Signer) string {
	t.Helper()
	m := gjwt.GetSigningMethod(alg)
	if m == nil {
		t.Fatalf("golang-jwt does not know %s", alg)
	}
	tok := gjwt.NewWithClaims(m, gjwt.MapClaims{"iss": "https://idp.test/", "aud": "api", "sub": "alice",
		"exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	key := any(priv)
	if ed, ok := priv.(ed25519.PrivateKey); ok {
		key = ed
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("%s: %v", alg, err)
	}
	return s
}

func quickStartKeys(t *testing.T) []idpKey {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ec := func(c elliptic.Curve) *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return []idpKey{
		{"rsa", "RS256", false, rsaKey}, // no alg: RSA implies RS256
		{"rs384", "RS384", true, rsaKey},
		{"rs512", "RS512", true, rsaKey},
		{"ps256", "PS256", true, rsaKey},
		{"ps384", "PS384", true, rsaKey},
		{"ps512", "PS512", true, rsaKey},
		{"p256", "ES256", false, ec(elliptic.P256())}, // implied by the curve
		{"p384", "ES384", false, ec(elliptic.P384())},
		{"p521", "ES512", true, ec(elliptic.P521())},
		{"ed", "EdDSA", false, ed}, // implied by Ed25519
	}
}

// TestServeQuickStartAlgorithms: `serve --jwks-url` without --alg accepts
// tokens of every asymmetric algorithm the provider's keys declare or
// imply, signed by an independent library, while each key still verifies
// one algorithm only; an explicit --alg still restricts, and HMAC cannot
// be asked of a remote JWKS.
func TestServeQuickStartAlgorithms(t *testing.T) {
	h := newHarness(t)
	keys := quickStartKeys(t)
	idp := independentIDP(t, keys)

	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", h.path("data"), "--issuer", "https://idp.test/",
		"--jwks-url", idp.URL, "--audience", "api")
	for _, k := range keys {
		if resp := get(t, "http://"+s.addr+"/auth", gjwtToken(t, k.alg, k.kid, k.priv)); resp.StatusCode != http.StatusOK {
			t.Errorf("%s token (kid %s): %d %s", k.alg, k.kid, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// The RSA key published without alg is bound to RS256 alone: the same
	// key signing PS256 or RS512 under its kid is refused.
	for _, alg := range []string{"PS256", "RS512"} {
		if resp := get(t, "http://"+s.addr+"/auth", gjwtToken(t, alg, "rsa", keys[0].priv)); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s token under the alg-less RSA key's kid: %d, want 401", alg, resp.StatusCode)
		}
	}
	if code := s.stop(); code != ExitOK {
		t.Fatalf("serve exit %d:\n%s", code, s.stderr)
	}
	if logs := s.stderr.String(); strings.Contains(logs, "JWKS key skipped") {
		t.Errorf("quick start skipped keys of the provider:\n%s", logs)
	}

	// An explicit allow-list still restricts: ES256 only.
	s = h.serve("--listen", "127.0.0.1:0", "--data-dir", h.path("data2"), "--issuer", "https://idp.test/",
		"--jwks-url", idp.URL, "--audience", "api", "--alg", "ES256")
	defer s.stop()
	for _, k := range keys {
		resp := get(t, "http://"+s.addr+"/auth", gjwtToken(t, k.alg, k.kid, k.priv))
		switch {
		case k.alg == "ES256" && resp.StatusCode != http.StatusOK:
			t.Errorf("ES256 token with --alg ES256: %d", resp.StatusCode)
		case k.alg != "ES256" && (resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "unsupported_alg")):
			t.Errorf("%s token with --alg ES256: %d %s, want 401 unsupported_alg", k.alg, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

// TestQuickStartAlgs: without --alg the quick start allows every asymmetric
// algorithm and no HMAC one; --alg narrows it, and an HMAC algorithm, which
// no remote JWKS can serve, is a usage error.
func TestQuickStartAlgs(t *testing.T) {
	f := serveFlags{issuer: "https://idp.test/", jwksURL: "https://idp.test/jwks"}
	cfg, err := f.quickStart()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(cfg.Issuers[0].Algorithms, ","), "RS256,RS384,RS512,PS256,PS384,PS512,ES256,ES384,ES512,EdDSA"; got != want {
		t.Errorf("default algorithms %s, want %s", got, want)
	}
	f.algs = stringList{"ES256", "PS256"}
	if cfg, err := f.quickStart(); err != nil || strings.Join(cfg.Issuers[0].Algorithms, ",") != "ES256,PS256" {
		t.Errorf("--alg ES256 --alg PS256: %v %v", cfg, err)
	}
	f.algs = stringList{"ES256", "HS256"}
	if _, err := f.quickStart(); err == nil || !strings.Contains(err.Error(), "key_files") {
		t.Errorf("--alg HS256 with --jwks-url: %v", err)
	}
}
