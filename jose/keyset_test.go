package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// jwkOf is the public JWK of key (a private key or a public one) under
// kid, declaring alg unless it is empty, with members replaced (nil
// deletes).
func jwkOf(t *testing.T, key any, kid, alg string, members map[string]any) map[string]any {
	t.Helper()
	pub := crypto.PublicKey(key)
	if s, ok := key.(crypto.Signer); ok {
		pub = s.Public()
	}
	ms, err := publicMembers(pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"kid": kid}
	for _, jm := range ms {
		m[jm.name] = jm.value
	}
	if alg != "" {
		m["alg"] = alg
	}
	for k, v := range members {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

func jwksDoc(t *testing.T, keys ...map[string]any) []byte {
	t.Helper()
	if keys == nil {
		keys = []map[string]any{}
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// asymmetric is every algorithm but HMAC.
var asymmetric = []Alg{RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA}

// bindings lists a set's keys as "kid:alg", in order.
func bindings(s *KeySet) string {
	var out []string
	for _, k := range s.Keys() {
		out = append(out, k.KeyID()+":"+k.Alg().String())
	}
	return strings.Join(out, ",")
}

func skips(s *KeySet) string {
	var out []string
	for _, k := range s.SkippedKeys() {
		out = append(out, k.KeyID+":"+string(k.Reason))
	}
	return strings.Join(out, ",")
}

// TestParsePublicKeySetBindsOneAlg: every key of a published JWKS is bound
// to exactly one algorithm, its declared one or the one its type and curve
// imply, however wide the allow-list: an RSA key without alg never
// verifies PS256 (or RS384...) tokens.
func TestParsePublicKeySetBindsOneAlg(t *testing.T) {
	k := privateKeys(t)
	doc := jwksDoc(t,
		jwkOf(t, k[RS256], "rsa", "", nil),
		jwkOf(t, k[RS256], "ps384", "PS384", nil),
		jwkOf(t, k[ES256], "p256", "", nil),
		jwkOf(t, k[ES384], "p384", "", nil),
		jwkOf(t, k[ES512], "p521", "", nil),
		jwkOf(t, k[EdDSA], "ed", "", nil),
	)
	for _, allowed := range [][]Alg{asymmetric, nil} {
		s, err := ParsePublicKeySet(doc, allowed...)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bindings(s), "rsa:RS256,ps384:PS384,p256:ES256,p384:ES384,p521:ES512,ed:EdDSA"; got != want {
			t.Errorf("allowed %v: bindings %s, want %s (skipped %s)", allowed, got, want, skips(s))
		}
		for _, a := range []Alg{RS384, RS512, PS256, PS384, PS512} {
			if _, err := s.ResolveKey("rsa", a); err == nil {
				t.Errorf("allowed %v: the RSA key without alg resolves for %v", allowed, a)
			}
		}
		if _, err := s.ResolveKey("ps384", RS256); err == nil {
			t.Errorf("allowed %v: the PS384 key resolves for RS256", allowed)
		}
	}

	// An allow-list that names one algorithm for a key without alg, other
	// than the implied one, binds the key to it; one that names several
	// leaves the key out rather than bind it to each.
	rsaOnly := jwksDoc(t, jwkOf(t, k[RS256], "rsa", "", nil))
	for _, tt := range []struct {
		allowed []Alg
		want    string
		skipped string
	}{
		{[]Alg{PS256}, "rsa:PS256", ""},
		{[]Alg{ES256, RS512}, "rsa:RS512", ""},
		{[]Alg{RS256, PS256}, "rsa:RS256", ""},
		{[]Alg{PS256, PS384}, "", "rsa:ambiguous_alg"},
		{[]Alg{ES256}, "", "rsa:alg_not_allowed"},
	} {
		s, err := ParsePublicKeySet(rsaOnly, tt.allowed...)
		if err != nil {
			t.Fatal(err)
		}
		if got, sk := bindings(s), skips(s); got != tt.want || sk != tt.skipped {
			t.Errorf("allowed %v: bindings %q, skipped %q; want %q, %q", tt.allowed, got, sk, tt.want, tt.skipped)
		}
	}
	// ParseKeySet keeps binding such a key to every allowed algorithm that
	// fits (key files rely on it).
	if s, _ := ParseKeySet(rsaOnly, RS256, PS256); bindings(s) != "rsa:RS256,rsa:PS256" {
		t.Errorf("ParseKeySet: %s", bindings(s))
	}
}

// TestParsePublicKeySetSkips: each kind of unusable key is left out with
// its reason, named by kid and thumbprint, and the others still load.
func TestParsePublicKeySetSkips(t *testing.T) {
	k := privateKeys(t)
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	doc := jwksDoc(t,
		jwkOf(t, k[ES256], "good", "", nil),
		jwkOf(t, weak, "weak", "RS256", nil),
		map[string]any{"kty": "EC", "crv": "secp256k1", "kid": "k1", "x": "AAAA", "y": "AAAA"},
		map[string]any{"kty": "OKP", "crv": "X25519", "kid": "x25519", "x": strings.Repeat("A", 43)},
		map[string]any{"kty": "foo", "kid": "foo"},
		jwkOf(t, k[ES384], "enc", "", map[string]any{"use": "enc"}),
		jwkOf(t, k[ES384], "ops", "", map[string]any{"key_ops": []string{"encrypt"}}),
		jwkOf(t, k[RS256], "rs1", "RS1", nil),
		jwkOf(t, k[RS256], "none", "none", nil),
		jwkOf(t, k[RS256], "mismatch", "ES256", nil),
		jwkOf(t, k[ES256], "curve", "ES384", nil),
		jwkOf(t, k[EdDSA], "hs", "HS256", nil),
		jwkOf(t, k[ES384], "p384", "ES384", nil),
		jwkOf(t, k[ES256], "badx", "", map[string]any{"x": "AAAA"}),
		jwkOf(t, k[ES256], "dup", "", nil),
		jwkOf(t, &other.PublicKey, "dup", "", nil),
		jwkOf(t, k[EdDSA], "copy", "", nil),
		jwkOf(t, k[EdDSA], "copy", "", nil),
	)
	s, err := ParsePublicKeySet(doc, ES256, RS256, EdDSA)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := bindings(s), "good:ES256,copy:EdDSA"; got != want {
		t.Errorf("bindings %s, want %s", got, want)
	}
	want := "weak:weak_key,k1:unsupported_kty,x25519:unsupported_kty,foo:unsupported_kty,enc:bad_use,ops:bad_use," +
		"rs1:unsupported_alg,none:unsupported_alg,mismatch:alg_mismatch,curve:alg_mismatch,hs:alg_mismatch," +
		"p384:alg_not_allowed,badx:invalid_key,dup:duplicate_kid,dup:duplicate_kid,copy:duplicate_kid"
	if got := skips(s); got != want {
		t.Errorf("skipped\n%s\nwant\n%s", got, want)
	}
	for _, sk := range s.SkippedKeys() {
		if ReasonOf(sk.Err) != ReasonInvalidKey || !errors.Is(sk, ErrInvalidKey) {
			t.Errorf("%s: error %v is not an invalid_key *Error", sk.KeyID, sk.Err)
		}
		parsed := !slices.Contains([]string{"weak", "k1", "x25519", "foo", "badx"}, sk.KeyID)
		if parsed != (sk.Thumbprint != "") {
			t.Errorf("%s: thumbprint %q", sk.KeyID, sk.Thumbprint)
		}
		if msg := sk.Error(); !strings.Contains(msg, `"`+sk.KeyID+`"`) || !strings.Contains(msg, string(sk.Reason)) {
			t.Errorf("%s: message %q", sk.KeyID, msg)
		}
	}

	// Secret keys are never taken from a published set; mixed with public
	// keys they make the document unusable, as in ParseKeySet.
	oct := map[string]any{"kty": "oct", "kid": "s", "k": strings.Repeat("A", 43), "alg": "HS256"}
	s, err = ParsePublicKeySet(jwksDoc(t, oct), HS256)
	if err != nil || s.Len() != 0 || skips(s) != "s:secret_key" || s.SkippedKeys()[0].Thumbprint != "" {
		t.Errorf("JWKS of a secret key: %v, %d keys, skipped %s", err, s.Len(), skips(s))
	}
	if _, err := ParsePublicKeySet(jwksDoc(t, oct, jwkOf(t, k[ES256], "good", "", nil))); err == nil {
		t.Error("a JWKS mixing secret and public keys was accepted")
	}
}

// TestNewKeySetCopies: the same key given twice under one kid (published
// twice, or in two key files during a rotation) is one key; two different
// keys under one kid and algorithm make that kid ambiguous.
func TestNewKeySetCopies(t *testing.T) {
	signer := func(k *ecdsa.PrivateKey) *Signer {
		s, err := NewSigner(ES256, "k1", k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	gen := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	ka := gen()
	a, copyOfA, b := signer(ka), signer(ka), signer(gen())
	set := NewKeySet(a.Key(), copyOfA.Key())
	if k, err := set.ResolveKey("k1", ES256); err != nil || k.Thumbprint() != a.Key().Thumbprint() || set.Len() != 1 {
		t.Errorf("a key and its copy: %v, %v, %d keys; want the one key", k, err, set.Len())
	}
	if _, err := NewKeySet(a.Key(), b.Key()).ResolveKey("k1", ES256); err == nil {
		t.Error("two different keys under one kid resolved")
	}
	if _, err := NewKeySet(a.Key(), copyOfA.Key(), b.Key()).ResolveKey("k1", ES256); err == nil {
		t.Error("a key, its copy and another key under one kid resolved")
	}
}

func TestKeySetSerial(t *testing.T) {
	a, b := NewKeySet(), NewKeySet()
	if a.Serial() == 0 || b.Serial() == 0 || a.Serial() == b.Serial() {
		t.Errorf("serials %d and %d: want distinct and non-zero", a.Serial(), b.Serial())
	}
	if s, err := ParsePublicKeySet([]byte(`{"keys":[]}`)); err != nil || s.Serial() == 0 || s.Serial() == b.Serial() {
		t.Errorf("a parsed set's serial: %v, %v", s, err)
	}
	if n := new(KeySet).Serial(); n != 0 {
		t.Errorf("a declared set has serial %d", n)
	}
}
