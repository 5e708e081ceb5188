package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

func TestKeysGenerate(t *testing.T) {
	tests := []struct {
		args []string
		want jose.Alg // the alg the PEM implies
	}{
		{[]string{"--alg", "ES256"}, jose.ES256},
		{[]string{"--alg", "ES384"}, jose.ES384},
		{[]string{"--alg", "ES512"}, jose.ES512},
		{[]string{"--alg", "EdDSA"}, jose.EdDSA},
		{[]string{"--alg", "RS256"}, jose.RS256},
		{[]string{"--alg", "PS256", "--bits", "3072"}, jose.RS256},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := newHarness(t)
			out := h.path("key.pem")
			stdout := h.must(append(append([]string{"keys", "generate"}, tt.args...), "--out", out)...)
			if !strings.Contains(stdout, "thumbprint ") {
				t.Errorf("stdout %q", stdout)
			}
			info, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", info.Mode().Perm())
			}
			data, _ := os.ReadFile(out)
			priv, err := jose.ParsePrivatePEM(data)
			if err != nil {
				t.Fatalf("ParsePrivatePEM: %v", err)
			}
			if alg, _ := keyfile.DefaultAlg(priv.Public()); alg != tt.want {
				t.Errorf("key implies %v, want %v", alg, tt.want)
			}
		})
	}
}

func (h *harness) generate(alg, name string) string {
	h.t.Helper()
	p := h.path(name)
	h.must("keys", "generate", "--alg", alg, "--out", p)
	return p
}

func TestKeysGenerateToStdout(t *testing.T) {
	out := newHarness(t).must("keys", "generate", "--alg", "ES256")
	if !strings.HasPrefix(out, "-----BEGIN PRIVATE KEY-----\n") {
		t.Fatalf("stdout %q", out)
	}
	if _, err := jose.ParsePrivatePEM([]byte(out)); err != nil {
		t.Fatal(err)
	}
}

func TestKeysGenerateSecret(t *testing.T) {
	for alg, n := range map[string]int64{"HS256": 32, "HS384": 48, "HS512": 64} {
		h := newHarness(t)
		p := h.generate(alg, "secret")
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() != n || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: size %d mode %v", alg, info.Size(), info.Mode().Perm())
		}
	}
}

func TestKeysGenerateRefuses(t *testing.T) {
	h := newHarness(t)
	existing := h.write("existing.pem", []byte("keep me"))
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{}, ExitUsage, "--alg is required"},
		{[]string{"--alg", "none"}, ExitUsage, `unknown algorithm "none"`},
		{[]string{"--alg", "es256"}, ExitUsage, `unknown algorithm "es256"`},
		{[]string{"--alg", "ES256", "--bits", "2048"}, ExitUsage, "--bits applies only to RSA"},
		{[]string{"--alg", "RS256", "--bits", "1024"}, ExitUsage, "--bits must be one of"},
		{[]string{"--alg", "HS256"}, ExitUsage, "give --out FILE"},
		{[]string{"--alg", "ES256", "--out", existing}, ExitFail, "already exists"},
		{[]string{"--alg", "ES256", "--out", h.path("no/such/dir/key.pem")}, ExitFail, "no such file"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			expect(t, h.run(append([]string{"keys", "generate"}, tt.args...)...), tt.code, "", tt.stderr)
		})
	}
	if data, _ := os.ReadFile(existing); string(data) != "keep me" {
		t.Errorf("existing file overwritten: %q", data)
	}
}

func parseJWKS(t *testing.T, doc string) *jose.KeySet {
	t.Helper()
	set, err := jose.ParseKeySet([]byte(doc))
	if err != nil {
		t.Fatalf("ParseKeySet: %v\n%s", err, doc)
	}
	if len(set.Skipped()) != 0 {
		t.Errorf("skipped keys: %v", set.Skipped())
	}
	return set
}

func TestKeysJWKS(t *testing.T) {
	h := newHarness(t)
	ec, rsa, ed := h.generate("ES256", "ec.pem"), h.generate("RS256", "rsa.pem"), h.generate("EdDSA", "ed.pem")
	doc := h.must("keys", "jwks", ec, rsa, ed)
	set := parseJWKS(t, doc)
	if set.Len() != 3 {
		t.Fatalf("%d keys, want 3", set.Len())
	}
	if strings.Contains(doc, `"d"`) || strings.Contains(doc, `"p"`) {
		t.Errorf("JWKS holds private members:\n%s", doc)
	}
	for _, k := range set.Keys() {
		if k.KeyID() != k.Thumbprint() {
			t.Errorf("%v key: kid %q is not its thumbprint %q", k.Alg(), k.KeyID(), k.Thumbprint())
		}
	}
	tp := strings.TrimSpace(h.must("keys", "thumbprint", ec))
	if _, err := set.ResolveKey(tp, jose.ES256); err != nil {
		t.Errorf("keys thumbprint %q not a kid of the JWKS: %v", tp, err)
	}
}

func TestKeysJWKSFlags(t *testing.T) {
	h := newHarness(t)
	rsa := h.generate("RS256", "rsa.pem")
	set := parseJWKS(t, h.must("keys", "jwks", "--alg", "PS256", "--kid", "k1", rsa))
	if _, err := set.ResolveKey("k1", jose.PS256); err != nil {
		t.Errorf("no PS256 key k1: %v", err)
	}
	// The public half alone, as PEM, gives the same JWK.
	priv, _ := jose.ParsePrivatePEM(mustRead(t, rsa))
	pubPEM, _ := jose.MarshalPublicPEM(priv.Public())
	pub := h.write("rsa.pub.pem", pubPEM)
	if h.must("keys", "jwks", pub) != h.must("keys", "jwks", rsa) {
		t.Error("public and private PEM give different JWKS")
	}
	expect(t, h.run("keys", "jwks", "--kid", "k", rsa, pub), ExitUsage, "", "--kid needs exactly one FILE")
	expect(t, h.run("keys", "jwks", "--alg", "ES256", rsa), ExitFail, "", "does not fit")
	expect(t, h.run("keys", "jwks", h.path("missing.pem")), ExitFail, "", "no such file")
	expect(t, h.run("keys", "jwks", h.write("junk", []byte("junk"))), ExitFail, "", "invalid_key")
}

func TestKeysJWKSFromJWK(t *testing.T) {
	h := newHarness(t)
	jwk := h.write("ed.jwk", ed25519JWK(t, "my-key"))
	set := parseJWKS(t, h.must("keys", "jwks", jwk))
	if _, err := set.ResolveKey("my-key", jose.EdDSA); err != nil {
		t.Errorf("JWK's own kid not kept: %v", err)
	}
	// A secret must never be published.
	oct := h.write("oct.jwk", []byte(`{"kty":"oct","k":"`+base64.RawURLEncoding.EncodeToString(make([]byte, 32))+`"}`))
	expect(t, h.run("keys", "jwks", oct), ExitFail, "", "secret")
}

func TestKeysThumbprint(t *testing.T) {
	h := newHarness(t)
	jwk := h.write("ed.jwk", ed25519JWK(t, ""))
	j, err := jose.ParseJWK(mustRead(t, jwk))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(h.must("keys", "thumbprint", jwk)); got != j.Thumbprint() {
		t.Errorf("thumbprint %q, want %q", got, j.Thumbprint())
	}
	expect(t, h.run("keys", "thumbprint", h.path("missing")), ExitFail, "", "no such file")
	expect(t, h.run("keys", "thumbprint", "a", "b"), ExitUsage, "", "unexpected argument")
}

// ed25519JWK returns a fresh private Ed25519 JWK (RFC 8037).
func ed25519JWK(t *testing.T, kid string) []byte {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	m := map[string]string{"kty": "OKP", "crv": "Ed25519", "x": b64(pub), "d": b64(priv.Seed())}
	if kid != "" {
		m["kid"] = kid
	}
	data, _ := json.Marshal(m)
	return data
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestKeysJWKSSecret: keys jwks --secret-file turns an HMAC secret into the
// oct JWKS key_files take, and a token signed with the secret verifies
// against it; a secret too short for the algorithm is refused.
func TestKeysJWKSSecret(t *testing.T) {
	h := newHarness(t)
	secret := h.path("hs.key")
	h.must("keys", "generate", "--alg", "HS256", "--out", secret)
	r := h.run("keys", "jwks", "--secret-file", secret, "--kid", "k1")
	if r.code != ExitOK || !strings.Contains(r.stderr, "holds the secret") || !strings.Contains(r.stdout, `"kty": "oct"`) {
		t.Fatalf("keys jwks --secret-file: %d %s %s", r.code, r.stdout, r.stderr)
	}
	jwks := h.write("hs.jwks.json", []byte(r.stdout))
	tok := strings.TrimSpace(h.must("token", "sign", "--secret-file", secret, "--kid", "k1", "--sub", "bob"))
	if out := h.must("token", "verify", "--jwks", jwks, "--alg", "HS256", tok); !strings.Contains(out, `"sub": "bob"`) {
		t.Errorf("a token of the secret against its oct JWKS: %s", out)
	}
	expect(t, h.run("keys", "jwks", "--secret-file", secret, "--alg", "HS512"), ExitFail, "", "shorter than the hash output")
	expect(t, h.run("keys", "jwks", "--secret-file", secret, "--alg", "ES256"), ExitUsage, "", "HS256, HS384 or HS512")
	expect(t, h.run("keys", "jwks"), ExitUsage, "", "too few arguments")
}
