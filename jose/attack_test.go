package jose

// Attack tests: each builds a hostile token and asserts the exact Reason it
// is refused with. Where the point of an attack is that the parser, not the
// signature, must refuse it, the forged token is properly signed with a key
// the verifier trusts, so the test proves the parser's strictness.

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	atkIssuer   = "https://issuer.example.com/"
	atkAudience = "https://api.example.com"
)

// atkHeader is the header of a well-formed HS256 token from the trusted key.
const atkHeader = `{"alg":"HS256","kid":"k1","typ":"JWT"}`

// atkPayload builds claims that pass every check at testNow, with extra
// members spliced in before the closing brace.
func atkPayload(extra string) string {
	p := fmt.Sprintf(`{"iss":%q,"aud":%q,"exp":%d,"iat":%d`, atkIssuer, atkAudience, testNow.Unix()+3600, testNow.Unix())
	if extra != "" {
		p += "," + extra
	}
	return p + "}"
}

// atkToken base64url-encodes header and payload exactly as given and signs
// them with s, whatever the header says.
func atkToken(t testing.TB, s *Signer, header, payload string) string {
	t.Helper()
	return atkSign(t, s, b64.EncodeToString([]byte(header))+"."+b64.EncodeToString([]byte(payload)))
}

// atkSign signs input (the text before the second dot) exactly as given and
// appends the signature segment.
func atkSign(t testing.TB, s *Signer, input string) string {
	t.Helper()
	sig, err := s.sign([]byte(input))
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return input + "." + b64.EncodeToString(sig)
}

// atkTrusted is a KeySet holding testSigner's key (kid "k1") for every
// algorithm.
func atkTrusted(t testing.TB) *KeySet {
	t.Helper()
	var ks []*Key
	for _, a := range Algorithms() {
		ks = append(ks, testSigner(t, a).Key())
	}
	return NewKeySet(ks...)
}

// atkVerifier checks iss and aud at testNow, allowing algs (every algorithm
// when nil) with keys (atkTrusted when nil).
func atkVerifier(t testing.TB, keys KeyResolver, algs []Alg, opts ...Option) *Verifier {
	t.Helper()
	if keys == nil {
		keys = atkTrusted(t)
	}
	if algs == nil {
		algs = Algorithms()
	}
	opts = append([]Option{WithClock(func() time.Time { return testNow })}, opts...)
	v, err := NewVerifier(keys, algs, Expected{Issuer: atkIssuer, Audience: []string{atkAudience}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var atkSentinels = map[Reason]error{
	ReasonMalformed: ErrMalformed, ReasonTooLarge: ErrTooLarge, ReasonUnsupportedAlg: ErrUnsupportedAlg,
	ReasonUnknownKID: ErrUnknownKID, ReasonBadSignature: ErrBadSignature, ReasonExpired: ErrExpired,
	ReasonNotYetValid: ErrNotYetValid, ReasonWrongIssuer: ErrWrongIssuer, ReasonWrongAudience: ErrWrongAudience,
	ReasonMissingClaim: ErrMissingClaim,
}

// atkRefused asserts that v refuses tok with exactly want.
func atkRefused(t *testing.T, v *Verifier, tok string, want Reason) {
	t.Helper()
	got, err := v.Verify(tok)
	if err == nil {
		t.Fatalf("ACCEPTED a hostile token (want %v): claims %s", want, got.Claims.JSON())
	}
	if got != nil {
		t.Errorf("Verify returned a token with error %v", err)
	}
	if r := ReasonOf(err); r != want {
		t.Fatalf("reason %v (%v), want %v", r, err, want)
	}
	if !errors.Is(err, atkSentinels[want]) {
		t.Errorf("errors.Is(%v, sentinel %v) = false", err, want)
	}
	// VerifyInto into a used Token agrees.
	var tk Token
	_ = ParseInto(&tk, atkToken(t, testSigner(t, HS256), atkHeader, atkPayload("")), 0)
	if err := v.VerifyInto(&tk, tok); ReasonOf(err) != want {
		t.Errorf("VerifyInto: reason %v, want %v", ReasonOf(err), want)
	}
}

// atkAccepted is the control: the same verifier accepts the benign form.
func atkAccepted(t *testing.T, v *Verifier, tok string) *Token {
	t.Helper()
	got, err := v.Verify(tok)
	if err != nil {
		t.Fatalf("control token refused: %v", err)
	}
	return got
}

// atkParse asserts that Parse itself refuses tok with want.
func atkParse(t *testing.T, tok string, want Reason) {
	t.Helper()
	if _, err := Parse(tok); ReasonOf(err) != want {
		t.Errorf("Parse: %v, want %v", err, want)
	}
}

func TestAttackAlgNone(t *testing.T) {
	v := atkVerifier(t, nil, nil)
	hs := testSigner(t, HS256)
	atkAccepted(t, v, atkToken(t, hs, atkHeader, atkPayload("")))
	input := func(alg string) string {
		h := `{"alg":` + alg + `,"kid":"k1","typ":"JWT"}`
		return b64.EncodeToString([]byte(h)) + "." + b64.EncodeToString([]byte(atkPayload("")))
	}
	for _, name := range []string{"none", "None", "NONE", "nOnE"} {
		alg := strconv.Quote(name)
		// An unsecured JWS (RFC 7515 §A.5) has an empty signature; the
		// header is read first, so the alg is what is refused.
		t.Run("alg="+name+"/empty-signature", func(t *testing.T) {
			tok := input(alg) + "."
			atkRefused(t, v, tok, ReasonUnsupportedAlg)
			atkParse(t, tok, ReasonUnsupportedAlg)
		})
		// With a signature (here a valid HS256 MAC from the trusted key),
		// the alg itself is refused.
		t.Run("alg="+name+"/with-signature", func(t *testing.T) {
			tok := atkSign(t, hs, input(alg))
			atkRefused(t, v, tok, ReasonUnsupportedAlg)
			atkParse(t, tok, ReasonUnsupportedAlg)
		})
		if _, err := ParseAlg(name); ReasonOf(err) != ReasonUnsupportedAlg {
			t.Errorf("ParseAlg(%q): %v", name, err)
		}
	}
	for _, c := range []struct {
		name, alg string
		want      Reason
	}{
		{"alg=hs256-lowercase", `"hs256"`, ReasonUnsupportedAlg},
		{"alg=HS256-trailing-space", `"HS256 "`, ReasonUnsupportedAlg},
		{"alg=empty", `""`, ReasonUnsupportedAlg},
		{"alg=null", `null`, ReasonMalformed},
		{"alg=array", `["HS256"]`, ReasonMalformed},
		{"alg=escaped-HS256-is-HS256", `"HS\u0032\u0035\u0036"`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := atkSign(t, hs, input(c.alg))
			if c.want == 0 {
				atkAccepted(t, v, tok)
				return
			}
			atkRefused(t, v, tok, c.want)
		})
	}
	t.Run("alg=missing", func(t *testing.T) {
		atkRefused(t, v, atkToken(t, hs, `{"kid":"k1","typ":"JWT"}`, atkPayload("")), ReasonMalformed)
	})
}

// TestAttackRSAPublicKeyAsHMACSecret is the classic algorithm confusion: the
// attacker MACs a token with the server's RSA public key, in whatever
// encoding a naive verifier would feed to HMAC, and sets alg HS*.
func TestAttackRSAPublicKeyAsHMACSecret(t *testing.T) {
	rsaPriv := privateKeys(t)[RS256].(*rsa.PrivateKey)
	pub := &rsaPriv.PublicKey
	rsaKey := testSigner(t, RS256).Key() // RS256, kid "k1"
	pkixPEM, err := MarshalPublicPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	pkixDER, _ := x509.MarshalPKIXPublicKey(pub)
	pkcs1DER := x509.MarshalPKCS1PublicKey(pub)
	pkcs1PEM := []byte("-----BEGIN RSA PUBLIC KEY-----\n" + base64.StdEncoding.EncodeToString(pkcs1DER) + "\n-----END RSA PUBLIC KEY-----\n")
	jwkJSON, _ := rsaKey.MarshalJSON()
	secrets := []struct {
		name   string
		secret []byte
	}{
		{"pkix-pem", pkixPEM},
		{"pkix-pem-no-newline", []byte(strings.TrimSpace(string(pkixPEM)))},
		{"pkcs1-pem", pkcs1PEM},
		{"pkix-der", pkixDER},
		{"pkcs1-der", pkcs1DER},
		{"jwk-json", jwkJSON},
		{"modulus", pub.N.Bytes()},
	}

	jwks := []byte(`{"keys":[` + string(jwkJSON) + `]}`)
	var bare map[string]any
	_ = json.Unmarshal(jwkJSON, &bare)
	delete(bare, "alg")
	bareJSON, _ := json.Marshal(bare)
	bareJWKS := []byte(`{"keys":[` + string(bareJSON) + `]}`)
	bare["alg"] = "HS256"
	declaredHS, _ := json.Marshal(bare)
	declaredJWKS := []byte(`{"keys":[` + string(declaredHS) + `]}`)

	parsedSet, err := ParseKeySet(bareJWKS, HS256, RS256)
	if err != nil || parsedSet.Len() != 1 || parsedSet.Keys()[0].Alg() != RS256 {
		t.Fatalf("JWKS with an alg-less RSA key, allowed HS256+RS256: %v, %d keys", err, parsedSet.Len())
	}
	declaredSet, err := ParseKeySet(declaredJWKS, HS256, RS256)
	if err != nil || declaredSet.Len() != 0 || len(declaredSet.Skipped()) != 1 ||
		ReasonOf(declaredSet.Skipped()[0]) != ReasonInvalidKey {
		t.Fatalf(`JWKS with an RSA key declaring "alg":"HS256" must skip it: %v, %d keys, skipped %v`, err, declaredSet.Len(), declaredSet.Skipped())
	}
	exported, err := ParseKeySet(jwks)
	if err != nil || exported.Len() != 1 {
		t.Fatal(err)
	}

	verifiers := []struct {
		name      string
		v         *Verifier
		want      Reason // for a token with kid "k1"
		wantNoKID Reason // for a token without kid
	}{
		// Only RS256 is allowed: the HS* alg is refused before any key lookup.
		{"rs256-only-keyset", atkVerifier(t, NewKeySet(rsaKey), []Alg{RS256}), ReasonUnsupportedAlg, ReasonUnsupportedAlg},
		// HS* is allowed too, but no key in the set is bound to it.
		{"hs+rs-keyset", atkVerifier(t, NewKeySet(rsaKey), []Alg{HS256, HS384, HS512, RS256}), ReasonUnknownKID, ReasonUnknownKID},
		{"hs+rs-jwks-without-alg", atkVerifier(t, parsedSet, []Alg{HS256, HS384, HS512, RS256}), ReasonUnknownKID, ReasonUnknownKID},
		{"hs+rs-jwks-exported", atkVerifier(t, exported, []Alg{HS256, HS384, HS512, RS256}), ReasonUnknownKID, ReasonUnknownKID},
		{"hs+rs-jwks-declaring-HS256", atkVerifier(t, declaredSet, []Alg{HS256, HS384, HS512, RS256}), ReasonUnknownKID, ReasonUnknownKID},
		// A single Key as the resolver: the alg does not match the key's.
		{"hs+rs-single-key", atkVerifier(t, rsaKey, []Alg{HS256, HS384, HS512, RS256}), ReasonUnsupportedAlg, ReasonUnsupportedAlg},
	}
	control := atkToken(t, testSigner(t, RS256), `{"alg":"RS256","kid":"k1"}`, atkPayload(""))
	for _, vc := range verifiers {
		if vc.name != "hs+rs-jwks-declaring-HS256" {
			atkAccepted(t, vc.v, control)
		}
	}
	for _, sc := range secrets {
		for _, alg := range []Alg{HS256, HS384, HS512} {
			if len(sc.secret) < alg.hash().Size() {
				continue
			}
			mac, err := NewSigner(alg, "", sc.secret)
			if err != nil {
				t.Fatal(err)
			}
			withKID := atkToken(t, mac, `{"alg":"`+alg.String()+`","kid":"k1","typ":"JWT"}`, atkPayload(""))
			noKID := atkToken(t, mac, `{"alg":"`+alg.String()+`","typ":"JWT"}`, atkPayload(""))
			for _, vc := range verifiers {
				t.Run(alg.String()+"-with-"+sc.name+"/"+vc.name, func(t *testing.T) {
					atkRefused(t, vc.v, withKID, vc.want)
					atkRefused(t, vc.v, noKID, vc.wantNoKID)
				})
			}
			t.Run(alg.String()+"-with-"+sc.name+"/Key.Verify", func(t *testing.T) {
				tok, err := Parse(withKID)
				if err != nil {
					t.Fatal(err)
				}
				if err := rsaKey.Verify(tok); ReasonOf(err) != ReasonUnsupportedAlg {
					t.Errorf("RSA Key.Verify on an HS token: %v, want unsupported_alg", err)
				}
			})
		}
	}
}

func TestAttackKID(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	big := atkVerifier(t, nil, nil, WithMaxTokenSize(64<<10))
	atkAccepted(t, v, atkToken(t, hs, atkHeader, atkPayload("")))
	long := strings.Repeat("A", 10<<10)
	for _, c := range []struct {
		name, kid string
		v         *Verifier
		want      Reason
	}{
		{"path-traversal", "../../../dev/null", v, ReasonUnknownKID},
		{"path-traversal-absolute", "/etc/passwd", v, ReasonUnknownKID},
		{"sql-injection", "' OR 1=1 --", v, ReasonUnknownKID},
		{"sql-injection-union", "k1' UNION SELECT 'secret", v, ReasonUnknownKID},
		{"nul-suffix", "k1\x00", v, ReasonUnknownKID},
		{"case-variant", "K1", v, ReasonUnknownKID},
		{"10KiB-default-limit", long, v, ReasonTooLarge},
		{"10KiB-raised-limit", long, big, ReasonUnknownKID},
	} {
		t.Run(c.name, func(t *testing.T) {
			kid, _ := json.Marshal(c.kid)
			tok := atkToken(t, hs, `{"alg":"HS256","kid":`+string(kid)+`,"typ":"JWT"}`, atkPayload(""))
			atkRefused(t, c.v, tok, c.want)
		})
	}
	t.Run("kid-number", func(t *testing.T) {
		atkRefused(t, v, atkToken(t, hs, `{"alg":"HS256","kid":1}`, atkPayload("")), ReasonMalformed)
	})
	t.Run("kid-mismatch-single-key", func(t *testing.T) {
		atkRefused(t, atkVerifier(t, hs.Key(), []Alg{HS256}),
			atkToken(t, hs, `{"alg":"HS256","kid":"../k1"}`, atkPayload("")), ReasonUnknownKID)
	})
}

// TestAttackEmbeddedKey: jku, x5u, jwk and x5c point at a key the attacker
// holds. keygate never fetches or trusts them.
func TestAttackEmbeddedKey(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "attacker server", http.StatusOK)
	}))
	defer srv.Close()

	for _, alg := range []Alg{ES256, EdDSA} {
		var attacker any
		switch alg {
		case ES256:
			attacker, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		case EdDSA:
			_, attacker, _ = ed25519.GenerateKey(rand.Reader)
		}
		as, err := NewSigner(alg, "attacker", attacker)
		if err != nil {
			t.Fatal(err)
		}
		ajwk, _ := as.Key().MarshalJSON()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "k1"},
			NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, as.Key().Public(), attacker)
		if err != nil {
			t.Fatal(err)
		}
		x5c := `["` + base64.StdEncoding.EncodeToString(der) + `"]`
		v := atkVerifier(t, nil, []Alg{alg})
		atkAccepted(t, v, atkToken(t, testSigner(t, alg), `{"alg":"`+alg.String()+`","kid":"k1"}`, atkPayload("")))
		members := map[string]string{
			"jku": `"` + srv.URL + `/jwks.json"`,
			"x5u": `"` + srv.URL + `/cert.pem"`,
			"jwk": string(ajwk),
			"x5c": x5c,
			"all": `"` + srv.URL + `/jwks.json","x5u":"` + srv.URL + `/cert.pem","jwk":` + string(ajwk) + `,"x5c":` + x5c,
		}
		for _, m := range []string{"jku", "x5u", "jwk", "x5c", "all"} {
			name := m
			if m == "all" {
				name = "jku"
			}
			for _, kc := range []struct {
				name, kid string
				want      Reason
			}{
				// The victim's kid: its key is used, the signature fails.
				{"victim-kid", `"kid":"k1",`, ReasonBadSignature},
				// No kid: the one trusted key for the alg is used.
				{"no-kid", ``, ReasonBadSignature},
				// The attacker's own kid names no trusted key.
				{"attacker-kid", `"kid":"attacker",`, ReasonUnknownKID},
			} {
				t.Run(alg.String()+"/"+m+"/"+kc.name, func(t *testing.T) {
					h := `{"alg":"` + alg.String() + `",` + kc.kid + `"` + name + `":` + members[m] + `}`
					if !json.Valid([]byte(h)) {
						t.Fatalf("bad test header %s", h)
					}
					atkRefused(t, v, atkToken(t, as, h, atkPayload("")), kc.want)
				})
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the attacker's server saw %d requests, want 0", n)
	}
}

// TestAttackECDSAZeroSignature covers CVE-2022-21449 ("psychic signatures")
// and its relatives: r or s of zero, of the group order n, or above it.
func TestAttackECDSAZeroSignature(t *testing.T) {
	v := atkVerifier(t, nil, nil)
	for _, alg := range []Alg{ES256, ES384, ES512} {
		s := testSigner(t, alg)
		tok := atkToken(t, s, `{"alg":"`+alg.String()+`","kid":"k1"}`, atkPayload(""))
		atkAccepted(t, v, tok)
		input := tok[:strings.LastIndexByte(tok, '.')]
		good, _ := b64.DecodeString(tok[len(input)+1:])
		size := len(good) / 2
		n := curveOf(alg).Params().N
		fixed := func(x *big.Int) []byte { return x.FillBytes(make([]byte, size)) }
		zero, one := fixed(big.NewInt(0)), fixed(big.NewInt(1))
		nb := fixed(n)
		n1 := fixed(new(big.Int).Add(n, big.NewInt(1)))
		ff := []byte(strings.Repeat("\xff", size))
		r, sv := good[:size], good[size:]
		// s' = n - s is the malleated twin of a valid signature; it is
		// valid ECDSA and not what this test is about.
		for _, c := range []struct {
			name string
			r, s []byte
		}{
			{"r=s=0", zero, zero},
			{"r=0", zero, sv},
			{"s=0", r, zero},
			{"r=n", nb, sv},
			{"s=n", r, nb},
			{"r=s=n", nb, nb},
			{"r=n+1", n1, sv},
			{"s=n+1", r, n1},
			{"r>n(all-ones)", ff, sv},
			{"s>n(all-ones)", r, ff},
			{"r=s=1", one, one},
			{"r=n,s=0", nb, zero},
		} {
			t.Run(alg.String()+"/"+c.name, func(t *testing.T) {
				sig := append(append([]byte{}, c.r...), c.s...)
				atkRefused(t, v, input+"."+b64.EncodeToString(sig), ReasonBadSignature)
			})
		}
	}
}

func TestAttackSignatureLength(t *testing.T) {
	v := atkVerifier(t, nil, nil)
	for _, alg := range Algorithms() {
		tok := atkToken(t, testSigner(t, alg), `{"alg":"`+alg.String()+`","kid":"k1"}`, atkPayload(""))
		atkAccepted(t, v, tok)
		input := tok[:strings.LastIndexByte(tok, '.')]
		sig, _ := b64.DecodeString(tok[len(input)+1:])
		for _, c := range []struct {
			name string
			sig  []byte
		}{
			{"one-byte-short", sig[:len(sig)-1]},
			{"one-byte-long", append(append([]byte{}, sig...), 0)},
			{"leading-zero", append([]byte{0}, sig...)},
			{"one-byte", sig[:1]},
			{"doubled", append(append([]byte{}, sig...), sig...)},
		} {
			t.Run(alg.String()+"/"+c.name, func(t *testing.T) {
				atkRefused(t, v, input+"."+b64.EncodeToString(c.sig), ReasonBadSignature)
			})
		}
	}
	// Ed25519 S+L: the same signature with S raised by the group order L is
	// non-canonical and must be refused (RFC 8032 §5.1.7).
	t.Run("EdDSA/S+L-malleability", func(t *testing.T) {
		tok := atkToken(t, testSigner(t, EdDSA), `{"alg":"EdDSA","kid":"k1"}`, atkPayload(""))
		input := tok[:strings.LastIndexByte(tok, '.')]
		sig, _ := b64.DecodeString(tok[len(input)+1:])
		l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
		le := func(b []byte) []byte { // little-endian <-> big-endian
			out := make([]byte, len(b))
			for i := range b {
				out[len(b)-1-i] = b[i]
			}
			return out
		}
		s := new(big.Int).SetBytes(le(sig[32:]))
		s.Add(s, l)
		if s.BitLen() > 256 {
			t.Skip("S+L does not fit in 32 bytes for this signature")
		}
		mal := append(append([]byte{}, sig[:32]...), le(s.FillBytes(make([]byte, 32)))...)
		atkRefused(t, v, input+"."+b64.EncodeToString(mal), ReasonBadSignature)
	})
}

func TestAttackSegments(t *testing.T) {
	v := atkVerifier(t, nil, nil)
	hs := testSigner(t, HS256)
	tok := atkToken(t, hs, atkHeader, atkPayload(""))
	atkAccepted(t, v, tok)
	parts := strings.Split(tok, ".")
	for _, c := range []struct{ name, tok string }{
		{"empty-string", ""},
		{"one-segment", parts[0]},
		{"one-segment-dot", parts[0] + "."},
		{"two-segments", parts[0] + "." + parts[1]},
		{"two-segments-sig", parts[0] + "." + parts[2]},
		{"four-segments", tok + "." + parts[2]},
		{"four-segments-trailing-dot", tok + "."},
		{"five-segments-jwe-shape", tok + ".." + parts[2]},
		{"dots-only", ".."},
		{"three-dots", "..."},
		{"empty-header", "." + parts[1] + "." + parts[2]},
		{"empty-signature", parts[0] + "." + parts[1] + "."},
		{"json-serialization", `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			atkRefused(t, v, c.tok, ReasonMalformed)
			atkParse(t, c.tok, ReasonMalformed)
		})
	}
	// An empty payload segment, properly signed, is not a JSON object.
	t.Run("empty-payload-signed", func(t *testing.T) {
		atkRefused(t, v, atkSign(t, hs, parts[0]+"."), ReasonMalformed)
	})
}

func TestAttackWhitespace(t *testing.T) {
	v := atkVerifier(t, nil, nil)
	hs := testSigner(t, HS256)
	tok := atkToken(t, hs, atkHeader, atkPayload(""))
	atkAccepted(t, v, tok)
	h, p, s := func() (string, string, string) {
		x := strings.Split(tok, ".")
		return x[0], x[1], x[2]
	}()
	for _, ws := range []struct{ name, c string }{
		{"space", " "}, {"tab", "\t"}, {"CR", "\r"}, {"LF", "\n"}, {"CRLF", "\r\n"}, {"NUL", "\x00"}, {"NBSP", "\u00a0"},
	} {
		mid := func(x string) string { return x[:len(x)/2] + ws.c + x[len(x)/2:] }
		for _, c := range []struct{ name, tok string }{
			// Changes inside the signing input are re-signed, so only the
			// parser's strictness stands between them and acceptance.
			{"leading", atkSign(t, hs, ws.c+h+"."+p)},
			{"inside-header", atkSign(t, hs, mid(h)+"."+p)},
			{"after-header", atkSign(t, hs, h+ws.c+"."+p)},
			{"before-payload", atkSign(t, hs, h+"."+ws.c+p)},
			{"inside-payload", atkSign(t, hs, h+"."+mid(p))},
			{"after-payload", atkSign(t, hs, h+"."+p+ws.c)},
			{"before-signature", h + "." + p + "." + ws.c + s},
			{"inside-signature", h + "." + p + "." + mid(s)},
			{"trailing", tok + ws.c},
		} {
			t.Run(ws.name+"/"+c.name, func(t *testing.T) {
				atkRefused(t, v, c.tok, ReasonMalformed)
			})
		}
	}
}

// TestAttackBase64 checks that only canonical unpadded base64url is read:
// every byte string then has exactly one encoding, so a token cannot be
// altered without invalidating its signature.
func TestAttackBase64(t *testing.T) {
	v := atkVerifier(t, nil, nil)
	hs := testSigner(t, HS256)
	tok := atkToken(t, hs, atkHeader, atkPayload(""))
	atkAccepted(t, v, tok)
	x := strings.Split(tok, ".")
	h, p, s := x[0], x[1], x[2]
	// pad adds standard padding, or one '=' to a segment that needs none.
	pad := func(seg string) string {
		if len(seg)%4 == 0 {
			return seg + "="
		}
		for len(seg)%4 != 0 {
			seg += "="
		}
		return seg
	}
	for _, c := range []struct{ name, tok string }{
		{"padded-header", atkSign(t, hs, pad(h)+"."+p)},
		{"padded-payload", atkSign(t, hs, h+"."+pad(p))},
		{"padded-signature", h + "." + p + "." + pad(s)},
		{"padding-only-signature", h + "." + p + ".===="},
		{"std-base64-whole-token", atkSign(t, hs, base64.StdEncoding.EncodeToString([]byte(atkHeader))+"."+
			base64.StdEncoding.EncodeToString([]byte(atkPayload(""))))},
		{"invalid-char-?", atkSign(t, hs, h+"."+p[:4]+"?"+p[5:])},
		{"length-1-mod-4", atkSign(t, hs, h+"."+p+"A")},
	} {
		t.Run(c.name, func(t *testing.T) { atkRefused(t, v, c.tok, ReasonMalformed) })
	}

	// '+' and '/' (the standard alphabet) in each segment: find claims
	// whose encodings contain '-' and '_', then swap in '+' and '/'.
	t.Run("std-alphabet", func(t *testing.T) {
		var hdr, pl, sig string
		for i := 0; hdr == "" || pl == "" || sig == ""; i++ {
			if i > 100000 {
				t.Fatal("no encoding with - and _ found")
			}
			ph := b64.EncodeToString([]byte(`{"alg":"HS256","kid":"k1","n":"` + strconv.Itoa(i) + `~~~?>?>"}`))
			pp := b64.EncodeToString([]byte(atkPayload(`"n":"` + strconv.Itoa(i) + `~~~?>?>"`)))
			if hdr == "" && strings.ContainsAny(ph, "-_") {
				hdr = ph
			}
			if pl == "" && strings.ContainsAny(pp, "-_") {
				pl = pp
			}
			if sig == "" {
				t2 := atkSign(t, hs, h+"."+pp)
				if s2 := t2[strings.LastIndexByte(t2, '.')+1:]; strings.ContainsAny(s2, "-_") {
					sig = t2
					atkAccepted(t, v, t2)
				}
			}
		}
		std := strings.NewReplacer("-", "+", "_", "/").Replace
		atkAccepted(t, v, atkSign(t, hs, hdr+"."+p))
		atkAccepted(t, v, atkSign(t, hs, h+"."+pl))
		for _, c := range []struct{ name, tok string }{
			{"header", atkSign(t, hs, std(hdr)+"."+p)},
			{"payload", atkSign(t, hs, h+"."+std(pl))},
			{"signature", sig[:strings.LastIndexByte(sig, '.')+1] + std(sig[strings.LastIndexByte(sig, '.')+1:])},
		} {
			t.Run(c.name, func(t *testing.T) { atkRefused(t, v, c.tok, ReasonMalformed) })
		}
	})

	// Non-zero trailing bits: the last character of a segment whose length
	// is 2 or 3 mod 4 carries 4 or 2 unused bits that must be zero. Setting
	// one decodes to the same bytes under a lenient decoder, which would make
	// signatures malleable.
	t.Run("trailing-bits", func(t *testing.T) {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		dirty := func(seg string) string {
			last := strings.IndexByte(alphabet, seg[len(seg)-1])
			return seg[:len(seg)-1] + string(alphabet[last|1])
		}
		for _, alg := range Algorithms() {
			st := testSigner(t, alg)
			// Three lengths in a row cover every length mod 3.
			for i, extra := range []string{`"x":""`, `"x":"a"`, `"x":"ab"`} {
				hextra := []string{``, `,"x":""`, `,"x":"a"`}[i]
				tk := atkToken(t, st, `{"alg":"`+alg.String()+`","kid":"k1"`+hextra+`}`, atkPayload(extra))
				atkAccepted(t, v, tk)
				x := strings.Split(tk, ".")
				if len(x[2])%4 != 0 && i == 0 {
					t.Run(fmt.Sprintf("%v/signature-len%%4=%d", alg, len(x[2])%4), func(t *testing.T) {
						atkRefused(t, v, x[0]+"."+x[1]+"."+dirty(x[2]), ReasonMalformed)
					})
				}
				if len(x[1])%4 != 0 && alg == HS256 {
					t.Run(fmt.Sprintf("payload-len%%4=%d", len(x[1])%4), func(t *testing.T) {
						atkRefused(t, v, atkSign(t, st, x[0]+"."+dirty(x[1])), ReasonMalformed)
					})
				}
				if len(x[0])%4 != 0 && alg == HS256 {
					t.Run(fmt.Sprintf("header-len%%4=%d", len(x[0])%4), func(t *testing.T) {
						atkRefused(t, v, atkSign(t, st, dirty(x[0])+"."+x[1]), ReasonMalformed)
					})
				}
			}
		}
	})
}

func TestAttackDeepNesting(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	roomy := atkVerifier(t, nil, nil, WithMaxTokenSize(1<<20))
	const depth = 10000
	arrays := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	objects := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
	open := strings.Repeat("[", depth)
	shallow := strings.Repeat("[", 16) + strings.Repeat("]", 16)
	atkAccepted(t, roomy, atkToken(t, hs, `{"alg":"HS256","kid":"k1","x":`+shallow+`}`, atkPayload(`"x":`+shallow)))
	for _, c := range []struct{ name, header, payload string }{
		{"header-arrays", `{"alg":"HS256","kid":"k1","x":` + arrays + `}`, atkPayload("")},
		{"header-objects", `{"alg":"HS256","kid":"k1","x":` + objects + `}`, atkPayload("")},
		{"header-unclosed", `{"alg":"HS256","kid":"k1","x":` + open, atkPayload("")},
		{"payload-arrays", atkHeader, atkPayload(`"x":` + arrays)},
		{"payload-objects", atkHeader, atkPayload(`"x":` + objects)},
		{"payload-unclosed", atkHeader, atkPayload(`"x":` + open)},
		{"payload-is-nested-array", atkHeader, arrays},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := atkToken(t, hs, c.header, c.payload)
			atkRefused(t, roomy, tok, ReasonMalformed)
			atkRefused(t, v, tok, ReasonTooLarge)
			if err := ParseInto(new(Token), tok, 1<<20); ReasonOf(err) != ReasonMalformed {
				t.Errorf("ParseInto: %v", err)
			}
		})
	}
}

func TestAttackDuplicateMembers(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	atkAccepted(t, v, atkToken(t, hs, atkHeader, atkPayload("")))
	exp := testNow.Unix() + 3600
	for _, c := range []struct {
		name, header, payload string
		want                  Reason
	}{
		{"header-alg-twice-same", `{"alg":"HS256","alg":"HS256","kid":"k1"}`, atkPayload(""), ReasonMalformed},
		{"header-alg-HS256-then-none", `{"alg":"HS256","kid":"k1","alg":"none"}`, atkPayload(""), ReasonMalformed},
		// The first alg is read and refused before the duplicate is seen.
		{"header-alg-none-then-HS256", `{"alg":"none","kid":"k1","alg":"HS256"}`, atkPayload(""), ReasonUnsupportedAlg},
		{"header-alg-escaped-duplicate", `{"alg":"HS256","kid":"k1","\u0061lg":"HS256"}`, atkPayload(""), ReasonMalformed},
		{"header-kid-twice", `{"alg":"HS256","kid":"k1","kid":"k2"}`, atkPayload(""), ReasonMalformed},
		{"header-kid-escaped-duplicate", `{"alg":"HS256","kid":"k1","k\u0069d":"k1"}`, atkPayload(""), ReasonMalformed},
		{"header-unknown-twice", `{"alg":"HS256","kid":"k1","x":1,"x":2}`, atkPayload(""), ReasonMalformed},
		{"claims-exp-twice", atkHeader, atkPayload(fmt.Sprintf(`"exp":%d`, exp+1)), ReasonMalformed},
		{"claims-exp-escaped", atkHeader, atkPayload(fmt.Sprintf(`"\u0065xp":%d`, exp-7200)), ReasonMalformed},
		{"claims-exp-all-escaped", atkHeader, atkPayload(fmt.Sprintf(`"\u0065\u0078\u0070":%d`, exp)), ReasonMalformed},
		{"claims-iss-twice", atkHeader, atkPayload(`"iss":"https://evil.example/"`), ReasonMalformed},
		{"claims-iss-escaped", atkHeader, atkPayload(`"i\u0073s":"https://evil.example/"`), ReasonMalformed},
		{"claims-aud-twice", atkHeader, atkPayload(`"aud":"x"`), ReasonMalformed},
		{"claims-sub-twice", atkHeader, atkPayload(`"sub":"alice","sub":"admin"`), ReasonMalformed},
		{"claims-private-twice", atkHeader, atkPayload(`"role":"user","role":"admin"`), ReasonMalformed},
		{"claims-private-escaped-slash", atkHeader, atkPayload(`"a/b":1,"a\/b":2`), ReasonMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			atkRefused(t, v, atkToken(t, hs, c.header, c.payload), c.want)
		})
	}
}

func TestAttackClaimTypes(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	hdr := atkHeader
	base := fmt.Sprintf(`"iss":%q,"iat":%d`, atkIssuer, testNow.Unix())
	good := fmt.Sprintf(`{%s,"aud":%q,"exp":%d}`, base, atkAudience, testNow.Unix()+3600)
	atkAccepted(t, v, atkToken(t, hs, hdr, good))
	// exp replaced, aud kept.
	withExp := func(exp string) string { return fmt.Sprintf(`{%s,"aud":%q,"exp":%s}`, base, atkAudience, exp) }
	withNbf := func(nbf string) string {
		return fmt.Sprintf(`{%s,"aud":%q,"exp":%d,"nbf":%s}`, base, atkAudience, testNow.Unix()+3600, nbf)
	}
	withAud := func(aud string) string { return fmt.Sprintf(`{%s,"aud":%s,"exp":%d}`, base, aud, testNow.Unix()+3600) }
	for _, c := range []struct{ name, payload string }{
		{"exp-string", withExp(`"1800003600"`)},
		{"exp-true", withExp(`true`)},
		{"exp-null", withExp(`null`)},
		{"exp-array", withExp(`[1800003600]`)},
		{"exp-object", withExp(`{"v":1800003600}`)},
		{"exp-1e300", withExp(`1e300`)},
		{"exp-huge-integer", withExp(`99999999999999999999999999`)},
		{"exp-past-year-9999", withExp(`253402300800`)},
		{"exp-negative", withExp(`-1`)},
		{"exp-negative-huge", withExp(`-1e300`)},
		{"exp-negative-fraction", withExp(`-0.5`)},
		{"exp-leading-plus", withExp(`+1800003600`)},
		{"exp-leading-zero", withExp(`01800003600`)},
		{"exp-hex", withExp(`0x6B49D200`)},
		{"exp-NaN", withExp(`NaN`)},
		{"exp-Infinity", withExp(`Infinity`)},
		{"nbf-string", withNbf(`"1800000000"`)},
		{"nbf-1e300", withNbf(`1e300`)},
		{"nbf-negative", withNbf(`-1`)},
		{"iat-string", fmt.Sprintf(`{"iss":%q,"aud":%q,"exp":%d,"iat":"0"}`, atkIssuer, atkAudience, testNow.Unix()+3600)},
		{"aud-array-with-number", withAud(fmt.Sprintf(`[%q,1]`, atkAudience))},
		{"aud-array-with-null", withAud(fmt.Sprintf(`[%q,null]`, atkAudience))},
		{"aud-array-nested", withAud(fmt.Sprintf(`[[%q]]`, atkAudience))},
		{"aud-number", withAud(`1`)},
		{"aud-object", withAud(fmt.Sprintf(`{%q:true}`, atkAudience))},
		{"aud-null", withAud(`null`)},
		{"iss-number", fmt.Sprintf(`{"iss":1,"aud":%q,"exp":%d}`, atkAudience, testNow.Unix()+3600)},
		{"iss-array", fmt.Sprintf(`{"iss":[%q],"aud":%q,"exp":%d}`, atkIssuer, atkAudience, testNow.Unix()+3600)},
		{"sub-object", withAud(fmt.Sprintf(`%q,"sub":{"id":1}`, atkAudience))},
	} {
		t.Run(c.name, func(t *testing.T) {
			atkRefused(t, v, atkToken(t, hs, hdr, c.payload), ReasonMalformed)
			atkParse(t, atkToken(t, hs, hdr, c.payload), ReasonMalformed)
		})
	}
}

func TestAttackHeaderCrit(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	for _, c := range []struct{ name, header string }{
		{"crit-unknown-extension", `{"alg":"HS256","kid":"k1","crit":["x-acme"],"x-acme":true}`},
		{"crit-b64-false", `{"alg":"HS256","kid":"k1","b64":false,"crit":["b64"]}`},
		{"crit-exp", `{"alg":"HS256","kid":"k1","crit":["exp"],"exp":1}`},
		{"crit-empty", `{"alg":"HS256","kid":"k1","crit":[]}`},
		{"crit-not-array", `{"alg":"HS256","kid":"k1","crit":"x"}`},
		{"crit-before-alg", `{"crit":["x"],"alg":"HS256","kid":"k1","x":1}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			atkRefused(t, v, atkToken(t, hs, c.header, atkPayload("")), ReasonMalformed)
		})
	}
	t.Run("too-many-header-members", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"alg":"HS256","kid":"k1"`)
		for i := range 64 {
			fmt.Fprintf(&b, `,"m%d":%d`, i, i)
		}
		b.WriteString("}")
		atkRefused(t, v, atkToken(t, hs, b.String(), atkPayload("")), ReasonMalformed)
	})
}

func TestAttackNonObject(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	for _, c := range []struct{ name, header, payload string }{
		{"payload-array", atkHeader, `[` + atkPayload("") + `]`},
		{"payload-empty-array", atkHeader, `[]`},
		{"payload-string", atkHeader, `"` + atkIssuer + `"`},
		{"payload-json-string-of-object", atkHeader, strconv.Quote(atkPayload(""))},
		{"payload-number", atkHeader, `1800003600`},
		{"payload-true", atkHeader, `true`},
		{"payload-null", atkHeader, `null`},
		{"payload-empty", atkHeader, ``},
		{"payload-whitespace", atkHeader, " \t\r\n"},
		{"payload-not-json", atkHeader, `iss=https://issuer.example.com/`},
		{"payload-bom", atkHeader, "\ufeff" + atkPayload("")},
		{"header-array", `[{"alg":"HS256","kid":"k1"}]`, atkPayload("")},
		{"header-string", `"HS256"`, atkPayload("")},
		{"header-null", `null`, atkPayload("")},
		{"header-empty-object", `{}`, atkPayload("")},
	} {
		t.Run(c.name, func(t *testing.T) {
			atkRefused(t, v, atkToken(t, hs, c.header, c.payload), ReasonMalformed)
		})
	}
}

func TestAttackTrailingData(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	// White space after the object is JSON; anything else is not.
	atkAccepted(t, v, atkToken(t, hs, atkHeader+" \n", atkPayload("")+"\r\n\t "))
	for _, c := range []struct{ name, header, payload string }{
		{"payload-garbage", atkHeader, atkPayload("") + "x"},
		{"payload-second-object", atkHeader, atkPayload("") + `{"iss":"https://evil.example/"}`},
		{"payload-closing-bracket", atkHeader, atkPayload("") + "]"},
		{"payload-extra-brace", atkHeader, atkPayload("") + "}"},
		{"payload-comma", atkHeader, atkPayload("") + ","},
		{"payload-NUL", atkHeader, atkPayload("") + "\x00"},
		{"payload-unterminated", atkHeader, strings.TrimSuffix(atkPayload(""), "}")},
		{"payload-trailing-comma", atkHeader, strings.TrimSuffix(atkPayload(""), "}") + ",}"},
		{"payload-comment", atkHeader, atkPayload("") + "//x"},
		{"header-garbage", atkHeader + "x", atkPayload("")},
		{"header-second-object", atkHeader + `{"alg":"none"}`, atkPayload("")},
		{"header-NUL", atkHeader + "\x00", atkPayload("")},
	} {
		t.Run(c.name, func(t *testing.T) {
			atkRefused(t, v, atkToken(t, hs, c.header, c.payload), ReasonMalformed)
		})
	}
}

func TestAttackInvalidUTF8(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	atkAccepted(t, v, atkToken(t, hs, atkHeader, atkPayload(`"sub":"Zoë 日本 😀"`)))
	for _, bad := range []struct{ name, s string }{
		{"0xFF", "\xff"},
		{"lone-continuation", "\x80"},
		{"overlong-slash", "\xc0\xaf"},
		{"overlong-NUL", "\xc0\x80"},
		{"utf8-surrogate", "\xed\xa0\x80"},
		{"truncated", "\xe2\x82"},
		{"above-U+10FFFF", "\xf4\x90\x80\x80"},
	} {
		for _, c := range []struct{ name, header, payload string }{
			{"sub", atkHeader, atkPayload(`"sub":"user` + bad.s + `"`)},
			{"iss", atkHeader, fmt.Sprintf(`{"iss":"%s%s","aud":%q,"exp":%d}`, atkIssuer, bad.s, atkAudience, testNow.Unix()+3600)},
			{"private-claim", atkHeader, atkPayload(`"name":"` + bad.s + `"`)},
			{"nested-private-claim", atkHeader, atkPayload(`"x":{"y":["` + bad.s + `"]}`)},
			{"claim-name", atkHeader, atkPayload(`"` + bad.s + `":1`)},
			{"aud-element", atkHeader, fmt.Sprintf(`{"iss":%q,"aud":[%q,"%s"],"exp":%d}`, atkIssuer, atkAudience, bad.s, testNow.Unix()+3600)},
			{"header-kid", `{"alg":"HS256","kid":"k1` + bad.s + `"}`, atkPayload("")},
			{"header-typ", `{"alg":"HS256","kid":"k1","typ":"` + bad.s + `"}`, atkPayload("")},
		} {
			t.Run(bad.name+"/"+c.name, func(t *testing.T) {
				atkRefused(t, v, atkToken(t, hs, c.header, c.payload), ReasonMalformed)
			})
		}
	}
	// Raw control characters are not allowed inside JSON strings either.
	t.Run("raw-control-char", func(t *testing.T) {
		atkRefused(t, v, atkToken(t, hs, atkHeader, atkPayload("\"sub\":\"a\x01b\"")), ReasonMalformed)
	})
	t.Run("bad-escape", func(t *testing.T) {
		atkRefused(t, v, atkToken(t, hs, atkHeader, atkPayload(`"sub":"a\xb"`)), ReasonMalformed)
		atkRefused(t, v, atkToken(t, hs, atkHeader, atkPayload(`"sub":"a\u12"`)), ReasonMalformed)
	})
}

func TestAttackTimeAndIdentity(t *testing.T) {
	hs := testSigner(t, HS256)
	now := testNow.Unix()
	clock := WithClock(func() time.Time { return testNow })
	mk := func(payload string) string { return atkToken(t, hs, atkHeader, payload) }
	claims := func(iss, aud string, exp, nbf, iat int64) string {
		p := "{"
		if iss != "" {
			p += `"iss":` + strconv.Quote(iss) + ","
		}
		if aud != "" {
			p += `"aud":` + aud + ","
		}
		p += fmt.Sprintf(`"exp":%d`, exp)
		if nbf != 0 {
			p += fmt.Sprintf(`,"nbf":%d`, nbf)
		}
		if iat != 0 {
			p += fmt.Sprintf(`,"iat":%d`, iat)
		}
		return p + "}"
	}
	aud := strconv.Quote(atkAudience)
	v := atkVerifier(t, nil, nil)
	atkAccepted(t, v, mk(claims(atkIssuer, aud, now+1, now, now)))
	for _, c := range []struct {
		name string
		tok  string
		want Reason
	}{
		{"expired", mk(claims(atkIssuer, aud, now-1, 0, 0)), ReasonExpired},
		{"expired-at-exp", mk(claims(atkIssuer, aud, now, 0, 0)), ReasonExpired},
		{"expired-long-ago", mk(claims(atkIssuer, aud, 0, 0, 0)), ReasonExpired},
		{"not-yet-valid", mk(claims(atkIssuer, aud, now+3600, now+1, 0)), ReasonNotYetValid},
		{"issued-in-the-future", mk(claims(atkIssuer, aud, now+3600, 0, now+60)), ReasonNotYetValid},
		{"wrong-issuer", mk(claims("https://evil.example/", aud, now+3600, 0, 0)), ReasonWrongIssuer},
		{"issuer-case-variant", mk(claims("https://ISSUER.example.com/", aud, now+3600, 0, 0)), ReasonWrongIssuer},
		{"issuer-prefix", mk(claims("https://issuer.example.com", aud, now+3600, 0, 0)), ReasonWrongIssuer},
		{"issuer-suffix", mk(claims(atkIssuer+"evil", aud, now+3600, 0, 0)), ReasonWrongIssuer},
		{"issuer-empty", mk(`{"iss":"","aud":` + aud + fmt.Sprintf(`,"exp":%d}`, now+3600)), ReasonWrongIssuer},
		{"issuer-missing", mk(claims("", aud, now+3600, 0, 0)), ReasonMissingClaim},
		{"wrong-audience", mk(claims(atkIssuer, `"https://other.example.com"`, now+3600, 0, 0)), ReasonWrongAudience},
		{"wrong-audience-array", mk(claims(atkIssuer, `["a","b"]`, now+3600, 0, 0)), ReasonWrongAudience},
		{"audience-prefix", mk(claims(atkIssuer, `"https://api.example.co"`, now+3600, 0, 0)), ReasonWrongAudience},
		{"audience-space-joined", mk(claims(atkIssuer, strconv.Quote(atkAudience+" x"), now+3600, 0, 0)), ReasonWrongAudience},
		{"audience-empty-array", mk(claims(atkIssuer, `[]`, now+3600, 0, 0)), ReasonMissingClaim},
		{"audience-missing", mk(claims(atkIssuer, "", now+3600, 0, 0)), ReasonMissingClaim},
		// Expiry is checked before identity.
		{"expired-and-wrong-issuer", mk(claims("https://evil.example/", aud, now-1, 0, 0)), ReasonExpired},
	} {
		t.Run(c.name, func(t *testing.T) { atkRefused(t, v, c.tok, c.want) })
	}

	t.Run("require-exp", func(t *testing.T) {
		rv, _ := NewVerifier(atkTrusted(t), []Alg{HS256}, Expected{Require: []string{"exp", "sub"}}, clock)
		atkRefused(t, rv, mk(`{"sub":"x"}`), ReasonMissingClaim)
		atkRefused(t, rv, mk(fmt.Sprintf(`{"exp":%d}`, now+1)), ReasonMissingClaim)
		atkAccepted(t, rv, mk(fmt.Sprintf(`{"exp":%d,"sub":"x"}`, now+1)))
	})

	t.Run("typ", func(t *testing.T) {
		tv, _ := NewVerifier(atkTrusted(t), []Alg{HS256}, Expected{Type: "at+jwt"}, clock)
		p := fmt.Sprintf(`{"exp":%d}`, now+1)
		atkAccepted(t, tv, atkToken(t, hs, `{"alg":"HS256","kid":"k1","typ":"at+jwt"}`, p))
		atkAccepted(t, tv, atkToken(t, hs, `{"alg":"HS256","kid":"k1","typ":"application/AT+JWT"}`, p))
		atkRefused(t, tv, atkToken(t, hs, `{"alg":"HS256","kid":"k1","typ":"JWT"}`, p), ReasonMalformed)
		atkRefused(t, tv, atkToken(t, hs, `{"alg":"HS256","kid":"k1"}`, p), ReasonMalformed)
		atkRefused(t, tv, atkToken(t, hs, `{"alg":"HS256","kid":"k1","typ":"at+jwt2"}`, p), ReasonMalformed)
	})

	// Leeway: with L seconds, a token is accepted until exp+L (exclusive)
	// and from nbf-L (inclusive), and refused one second beyond either.
	for _, leeway := range []int64{0, 1, 30, 300} {
		lv, err := NewVerifier(atkTrusted(t), []Alg{HS256},
			Expected{Issuer: atkIssuer, Audience: []string{atkAudience}, Leeway: time.Duration(leeway) * time.Second}, clock)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("leeway-%ds", leeway), func(t *testing.T) {
			atkAccepted(t, lv, mk(claims(atkIssuer, aud, now-leeway+1, 0, 0)))
			atkRefused(t, lv, mk(claims(atkIssuer, aud, now-leeway, 0, 0)), ReasonExpired)
			atkAccepted(t, lv, mk(claims(atkIssuer, aud, now+3600, now+leeway, 0)))
			atkRefused(t, lv, mk(claims(atkIssuer, aud, now+3600, now+leeway+1, 0)), ReasonNotYetValid)
			atkAccepted(t, lv, mk(claims(atkIssuer, aud, now+3600, 0, now+leeway)))
			atkRefused(t, lv, mk(claims(atkIssuer, aud, now+3600, 0, now+leeway+1)), ReasonNotYetValid)
		})
	}
}

func TestAttackOversize(t *testing.T) {
	hs := testSigner(t, HS256)
	v := atkVerifier(t, nil, nil)
	pad := strings.Repeat("x", DefaultMaxTokenSize)
	tok := atkToken(t, hs, atkHeader, atkPayload(`"pad":"`+pad+`"`))
	atkRefused(t, v, tok, ReasonTooLarge)
	atkParse(t, tok, ReasonTooLarge)
	atkAccepted(t, atkVerifier(t, nil, nil, WithMaxTokenSize(len(tok))), tok)
	atkRefused(t, atkVerifier(t, nil, nil, WithMaxTokenSize(len(tok)-1)), tok, ReasonTooLarge)
	// Size is checked before anything else: even garbage gets too_large.
	atkRefused(t, v, strings.Repeat(".", DefaultMaxTokenSize+1), ReasonTooLarge)
}

// TestAttackHeaderCache: a Verifier remembers the headers of tokens whose
// signature verified. Reusing such a header must not let a forged payload or
// signature through, and verdicts must not depend on what is cached, also
// when many goroutines churn the cache at once.
func TestAttackHeaderCache(t *testing.T) {
	v := atkVerifier(t, nil, nil)
	type tc struct {
		tok  string
		want Reason // 0: accepted
	}
	var cases []tc
	for i, alg := range []Alg{HS256, HS384, ES256, EdDSA, RS256, PS256} {
		s := testSigner(t, alg)
		h := fmt.Sprintf(`{"alg":%q,"kid":"k1","n":%d}`, alg.String(), i)
		good := atkToken(t, s, h, atkPayload(""))
		x := strings.Split(good, ".")
		forged := x[0] + "." + b64.EncodeToString([]byte(atkPayload(`"sub":"admin"`))) + "." + x[2]
		hsSigned := atkToken(t, testSigner(t, HS256), h, atkPayload(`"sub":"admin"`))
		cases = append(cases,
			tc{good, 0},
			tc{forged, ReasonBadSignature},
			tc{x[0] + "." + x[1] + ".", ReasonMalformed},
			tc{atkToken(t, s, h, `{"iss":"https://evil.example/"}`), ReasonWrongIssuer},
		)
		if alg != HS256 {
			// The cached header says alg; an HMAC tag does not fit its key.
			cases = append(cases, tc{hsSigned, ReasonBadSignature})
		}
	}
	check := func(t *testing.T, c tc) {
		_, err := v.Verify(c.tok)
		if ReasonOf(err) != c.want {
			t.Errorf("%.60s…: got %v, want %v", c.tok, err, c.want)
		}
	}
	// Twice in order: the second pass takes every header from the cache
	// (or, past its four slots, decodes again).
	for range 2 {
		for _, c := range cases {
			check(t, c)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				check(t, cases[(i*7+g)%len(cases)])
			}
		}()
	}
	wg.Wait()
}
