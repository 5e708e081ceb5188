package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
)

// tamper changes one character in the middle of the token's signature.
func tamper(token string) string {
	i := len(token) - 20
	c := byte('A')
	if token[i] == 'A' {
		c = 'B'
	}
	return token[:i] + string(c) + token[i+1:]
}

func decodeClaims(t *testing.T, out string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("claims are not JSON: %v\n%s", err, out)
	}
	return m
}

// TestRoundTrip generates a key, signs a token with it and verifies it, with
// the key file and with a JWKS made from it.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		alg, signFlag string
	}{
		{"ES256", "--key"},
		{"RS256", "--key"},
		{"PS256", "--key"},
		{"EdDSA", "--key"},
		{"HS256", "--secret-file"},
	}
	for _, tt := range tests {
		t.Run(tt.alg, func(t *testing.T) {
			h := newHarness(t)
			key := h.generate(tt.alg, "key")
			token := strings.TrimSpace(h.must("token", "sign", tt.signFlag, key, "--alg", tt.alg,
				"--iss", "https://issuer.test", "--sub", "alice", "--aud", "api", "--aud", "web",
				"--scope", "read write", "--ttl", "10m", "--claim", "tenant=acme"))
			verify := []string{"token", "verify", tt.signFlag, key, "--alg", tt.alg,
				"--iss", "https://issuer.test", "--aud", "web", token}
			claims := decodeClaims(t, h.must(verify...))
			checkMinted(t, claims, h.now, 10*time.Minute)
			if claims["sub"] != "alice" || claims["scope"] != "read write" || claims["tenant"] != "acme" {
				t.Errorf("claims %v", claims)
			}
			if tt.signFlag == "--key" {
				jwks := h.write("jwks.json", []byte(h.must("keys", "jwks", "--alg", tt.alg, key)))
				h.must("token", "verify", "--jwks", jwks, "--alg", tt.alg, token)
			}
		})
	}
}

// checkMinted checks the claims token sign always sets.
func checkMinted(t *testing.T, claims map[string]any, now time.Time, ttl time.Duration) {
	t.Helper()
	iat, _ := claims["iat"].(float64)
	if int64(iat) != now.Unix() || claims["nbf"] != iat || int64(claims["exp"].(float64)) != now.Add(ttl).Unix() {
		t.Errorf("times: iat %v nbf %v exp %v, now %d", claims["iat"], claims["nbf"], claims["exp"], now.Unix())
	}
	if jti, _ := claims["jti"].(string); len(jti) != 22 {
		t.Errorf("jti %q is not 128 bits of base64url", jti)
	}
}

func TestTokenSignClaims(t *testing.T) {
	h := newHarness(t)
	key := h.generate("ES256", "ec.pem")
	token := strings.TrimSpace(h.must("token", "sign", "--key", key,
		"--claim", "n=3", "--claim", "s=hello", "--claim", `q="3"`, "--claim", `o={"a":[1,true]}`, "--claim", "empty="))
	claims := decodeClaims(t, h.must("token", "verify", "--key", key, "--alg", "ES256", token))
	want := map[string]any{"n": 3.0, "s": "hello", "q": "3", "empty": ""}
	for name, v := range want {
		if claims[name] != v {
			t.Errorf("%s = %#v, want %#v", name, claims[name], v)
		}
	}
	if o, _ := claims["o"].(map[string]any); o == nil || len(o["a"].([]any)) != 2 {
		t.Errorf("o = %#v", claims["o"])
	}
	tok, _ := jose.Parse(token)
	if tok.Header.KeyID != strings.TrimSpace(h.must("keys", "thumbprint", key)) {
		t.Errorf("kid %q is not the key's thumbprint", tok.Header.KeyID)
	}
	if _, ok := claims["aud"]; ok {
		t.Error("aud set without --aud")
	}
}

func TestTokenSignJWK(t *testing.T) {
	h := newHarness(t)
	jwk := h.write("ed.jwk", ed25519JWK(t, "jwk-kid"))
	for _, tt := range []struct {
		args []string
		kid  string
	}{
		{nil, "jwk-kid"},
		{[]string{"--kid", "override"}, "override"},
	} {
		token := strings.TrimSpace(h.must(append([]string{"token", "sign", "--key", jwk}, tt.args...)...))
		tok, err := jose.Parse(token)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Header.Alg != jose.EdDSA || tok.Header.KeyID != tt.kid {
			t.Errorf("header alg %v kid %q, want EdDSA %q", tok.Header.Alg, tok.Header.KeyID, tt.kid)
		}
		h.must("token", "verify", "--key", jwk, "--alg", "EdDSA", token)
	}
}

func TestTokenSignRefuses(t *testing.T) {
	h := newHarness(t)
	ec := h.generate("ES256", "ec.pem")
	hs := h.generate("HS256", "hs.key")
	priv, _ := jose.ParsePrivatePEM(mustRead(t, ec))
	pubPEM, _ := jose.MarshalPublicPEM(priv.Public())
	pub := h.write("ec.pub.pem", pubPEM)
	jwks := h.write("jwks.json", []byte(h.must("keys", "jwks", ec)))
	short := h.write("short.key", []byte("too short"))
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no key", nil, ExitUsage, "exactly one of --key and --secret-file"},
		{"two keys", []string{"--key", ec, "--secret-file", hs}, ExitUsage, "exactly one of"},
		{"missing file", []string{"--key", h.path("missing.pem")}, ExitFail, "no such file"},
		{"wrong alg for key", []string{"--key", ec, "--alg", "RS256"}, ExitFail, "invalid_key"},
		{"ES key as ES384", []string{"--key", ec, "--alg", "ES384"}, ExitFail, "invalid_key"},
		{"public key", []string{"--key", pub}, ExitFail, "no private key"},
		{"JWKS", []string{"--key", jwks}, ExitFail, "is a JWKS"},
		{"secret as RS256", []string{"--secret-file", hs, "--alg", "RS256"}, ExitFail, "invalid_key"},
		{"short secret", []string{"--secret-file", short}, ExitFail, "shorter than the hash"},
		{"bad ttl", []string{"--key", ec, "--ttl", "0s"}, ExitUsage, "--ttl must not be 0"},
		{"reserved claim", []string{"--key", ec, "--claim", "exp=1"}, ExitUsage, `"exp": claim is reserved`},
		{"claim without =", []string{"--key", ec, "--claim", "nope"}, ExitUsage, "not name=value"},
		{"claim twice", []string{"--key", ec, "--claim", "a=1", "--claim", "a=2"}, ExitUsage, "given twice"},
		{"argument", []string{"--key", ec, "extra"}, ExitUsage, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(append([]string{"token", "sign"}, tt.args...)...)
			expect(t, r, tt.code, "", tt.stderr)
			if r.stdout != "" {
				t.Errorf("stdout %q on failure", r.stdout)
			}
		})
	}
}

func TestTokenVerifyRejects(t *testing.T) {
	h := newHarness(t)
	ec := h.generate("ES256", "ec.pem")
	hs := h.generate("HS256", "hs.key")
	jwks := h.write("jwks.json", []byte(h.must("keys", "jwks", ec)))
	sign := func(args ...string) string {
		return strings.TrimSpace(h.must(append([]string{"token", "sign", "--key", ec, "--iss", "me", "--aud", "api"}, args...)...))
	}
	valid := sign()
	future := h.now
	h.now = future.Add(-2 * time.Hour)
	expired := sign("--ttl", "1h")
	h.now = future.Add(time.Hour)
	notYet := sign()
	h.now = future
	hsToken := strings.TrimSpace(h.must("token", "sign", "--secret-file", hs))
	tests := []struct {
		name   string
		args   []string
		reason string
	}{
		{"tampered", []string{"--key", ec, "--alg", "ES256", tamper(valid)}, "bad_signature"},
		{"expired", []string{"--key", ec, "--alg", "ES256", expired}, "expired"},
		{"not yet valid", []string{"--key", ec, "--alg", "ES256", notYet}, "not_yet_valid"},
		{"wrong audience", []string{"--key", ec, "--alg", "ES256", "--aud", "other", valid}, "wrong_audience"},
		{"wrong issuer", []string{"--key", ec, "--alg", "ES256", "--iss", "you", valid}, "wrong_issuer"},
		{"missing claim", []string{"--key", ec, "--alg", "ES256", "--require", "exp,sub", valid}, "missing_claim"},
		{"alg not allowed", []string{"--key", ec, "--alg", "ES256", hsToken}, "unsupported_alg"},
		{"kid mismatch", []string{"--key", ec, "--alg", "ES256", "--kid", "other", valid}, "unknown_kid"},
		{"kid not in JWKS", []string{"--jwks", jwks, "--alg", "ES256", sign("--kid", "nope")}, "unknown_kid"},
		{"malformed", []string{"--key", ec, "--alg", "ES256", "not.a.token"}, "malformed"},
		{"HMAC forged with other secret", []string{"--secret-file", h.generate("HS256", "other.key"), "--alg", "HS256", hsToken}, "bad_signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(append([]string{"token", "verify"}, tt.args...)...)
			expect(t, r, ExitFail, "", "rejected: "+tt.reason+": ")
			if r.stdout != "" {
				t.Errorf("claims printed for a rejected token: %s", r.stdout)
			}
			if strings.Contains(r.stderr, "keygate:") {
				t.Errorf("rejection reported as an error: %s", r.stderr)
			}
		})
	}
	// Leeway: expired 30 s ago is accepted with the default 60 s, refused with 0.
	h.now = future.Add(-time.Hour - 30*time.Second)
	recent := sign("--ttl", "1h")
	h.now = future
	h.must("token", "verify", "--key", ec, "--alg", "ES256", recent)
	expect(t, h.run("token", "verify", "--key", ec, "--alg", "ES256", "--leeway", "0s", recent), ExitFail, "", "rejected: expired")
}

func TestTokenVerifyKeyOptions(t *testing.T) {
	h := newHarness(t)
	rsa := h.generate("RS256", "rsa.pem")
	ps := strings.TrimSpace(h.must("token", "sign", "--key", rsa, "--alg", "PS256", "--kid", "whatever"))
	// With --key the token's kid is not consulted; several --alg are allowed.
	h.must("token", "verify", "--key", rsa, "--alg", "RS256", "--alg", "PS256", ps)
	h.must("token", "verify", "--key", rsa, "--alg", "RS256,PS256", "--kid", "whatever", ps)
	priv, _ := jose.ParsePrivatePEM(mustRead(t, rsa))
	pubPEM, _ := jose.MarshalPublicPEM(priv.Public())
	h.must("token", "verify", "--key", h.write("rsa.pub", pubPEM), "--alg", "PS256", ps)
	h.stdin = "\n" + ps + "\n"
	h.must("token", "verify", "--key", rsa, "--alg", "PS256", "-")
}

func TestTokenVerifyUsage(t *testing.T) {
	h := newHarness(t)
	ec := h.generate("ES256", "ec.pem")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no alg", []string{"--key", ec, "tok"}, ExitUsage, "--alg is required"},
		{"bad alg", []string{"--key", ec, "--alg", "none", "tok"}, ExitUsage, `unknown algorithm "none"`},
		{"no key", []string{"--alg", "ES256", "tok"}, ExitUsage, "exactly one of --key, --jwks and --secret-file"},
		{"two keys", []string{"--key", ec, "--jwks", ec, "--alg", "ES256", "tok"}, ExitUsage, "exactly one of"},
		{"kid with jwks", []string{"--jwks", ec, "--kid", "k", "--alg", "ES256", "tok"}, ExitUsage, "--kid does not apply"},
		{"no token", []string{"--key", ec, "--alg", "ES256"}, ExitUsage, "too few arguments"},
		{"missing key file", []string{"--key", h.path("missing"), "--alg", "ES256", "tok"}, ExitFail, "no such file"},
		{"key does not fit alg", []string{"--key", ec, "--alg", "RS256", "tok"}, ExitFail, "invalid_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, h.run(append([]string{"token", "verify"}, tt.args...)...), tt.code, "", tt.stderr)
		})
	}
}

func TestTokenInspect(t *testing.T) {
	h := newHarness(t)
	ec := h.generate("ES256", "ec.pem")
	token := strings.TrimSpace(h.must("token", "sign", "--key", ec, "--sub", "alice"))
	for _, args := range [][]string{{token}, {tamper(token)}, {"-"}} {
		h.stdin = token
		out := h.must(append([]string{"token", "inspect"}, args...)...)
		for _, want := range []string{"UNVERIFIED", "header (UNVERIFIED):", `"alg": "ES256"`, "claims (UNVERIFIED):", `"sub": "alice"`} {
			if !strings.Contains(out, want) {
				t.Errorf("inspect %v lacks %q:\n%s", args, want, out)
			}
		}
	}
	expect(t, h.run("token", "inspect", "garbage"), ExitFail, "", "malformed")
	expect(t, h.run("token", "inspect"), ExitUsage, "", "too few arguments")
}

// TestTokenSignExpiredAndNotYetValid: a negative --ttl mints a token that
// expired that long ago, --nbf one that is not valid yet; verify refuses
// each for that reason and takes them once the clock says so.
func TestTokenSignExpiredAndNotYetValid(t *testing.T) {
	h := newHarness(t)
	key := h.generate("ES256", "ec.pem")
	verify := func(tok string) result {
		return h.run("token", "verify", "--key", key, "--alg", "ES256", "--leeway", "0s", tok)
	}
	expired := strings.TrimSpace(h.must("token", "sign", "--key", key, "--ttl", "-2h"))
	expect(t, verify(expired), ExitFail, "", "expired")
	notYet := strings.TrimSpace(h.must("token", "sign", "--key", key, "--nbf", "30m"))
	expect(t, verify(notYet), ExitFail, "", "not_yet_valid")
	tok, _ := jose.Parse(expired)
	if exp := tok.Claims.Expiry.Unix; exp != h.now.Add(-2*time.Hour).Unix() {
		t.Errorf("exp %d, want now-2h %d", exp, h.now.Add(-2*time.Hour).Unix())
	}
	h.now = h.now.Add(31 * time.Minute)
	if r := verify(notYet); r.code != ExitOK {
		t.Errorf("the not-yet-valid token after its nbf: %d %s", r.code, r.stderr)
	}
}

// TestTokenInspectJSON: --json prints the claims alone as one JSON object,
// so that `| jq .jti` works, and the warning on stderr.
func TestTokenInspectJSON(t *testing.T) {
	h := newHarness(t)
	ec := h.generate("ES256", "ec.pem")
	token := strings.TrimSpace(h.must("token", "sign", "--key", ec, "--sub", "alice"))
	r := h.run("token", "inspect", "--json", token)
	var claims map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &claims); r.code != ExitOK || err != nil || claims["jti"] == nil || claims["jti"] == "" || claims["sub"] != "alice" {
		t.Errorf("inspect --json: exit %d %v\n%s", r.code, err, r.stdout)
	}
	if !strings.Contains(r.stderr, "UNVERIFIED") {
		t.Errorf("inspect --json warned nothing on stderr: %q", r.stderr)
	}
}

// TestTokenVerifyJWKSURL: --jwks takes the URL of a running node's JWKS as
// well as a file, https or loopback http only.
func TestTokenVerifyJWKSURL(t *testing.T) {
	h := newHarness(t)
	s, _ := h.serveDev(t)
	m := tokenLine.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("no sample token:\n%s", s.stdout)
	}
	jwks := "http://" + s.addr + "/.well-known/jwks.json"
	if claims := decodeClaims(t, h.must("token", "verify", "--jwks", jwks, "--alg", "ES256", m[1])); claims["sub"] != "demo" {
		t.Errorf("verify against %s: %v", jwks, claims)
	}
	expect(t, h.run("token", "verify", "--jwks", jwks, "--alg", "ES256", tamper(m[1])), ExitFail, "", "rejected: bad_signature")
	expect(t, h.run("token", "verify", "--jwks", "http://keys.example.com/jwks.json", "--alg", "ES256", m[1]), ExitFail, "", "--jwks")
	expect(t, h.run("token", "verify", "--jwks", "http://"+s.addr+"/no/such/jwks", "--alg", "ES256", m[1]), ExitFail, "", "404")
}
