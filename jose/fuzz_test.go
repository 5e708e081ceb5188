package jose

// Native fuzz targets for everything that reads untrusted bytes: compact
// tokens (Parse, Verifier.Verify), JWKs and JWK sets. Beyond "never panics"
// each checks a property: parsed values agree with encoding/json, a token
// re-signed from the same header and payload verifies to identical claims,
// no mutation of a valid token verifies (no forgery), verdicts do not depend
// on a Verifier's header cache, and keys survive a MarshalJSON round trip
// with their thumbprint.
//
// Seeds come from the conformance vectors in internal/testvectors (Wycheproof
// json_web_*, the JOSE cookbook, the RFC examples) and from the handcrafted
// seeds below.
//
//	go test -run='^$' -fuzz='^FuzzParse$' -fuzztime=30s ./jose

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/testvectors"
)

// Fixed key material, so that seeds made by the fuzzing coordinator verify in
// its workers. (privateKeys makes fresh keys per process.)

// fzRSAPEM is a 2048-bit RSA key made for these tests only.
const fzRSAPEM = `-----BEGIN PRIVATE KEY-----
MIIEvwIBADANBgkqhkiG9w0BAQEFAASCBKkwggSlAgEAAoIBAQCiykIDJ8IpvjcV
R++nRxJU+mqE6GJTfY9TXVcs9ljV8QSzxkcG7LdXIu5QOuiJiVOmNfP+88xhAoxi
O86mtpeXFQgEbWoLIqKSQzxm1lbs/cFn6lklvK53MUc37IATahPpIRhT/XLtS7qD
V6ooKREOTreqA5RjdbXhBLlYl20BRaZBXrxW4IxHiRKKvAzzmUdqxMKkbcgHUdkE
ZFYVBYBcT7t4ZSxTqLBqJp7fwjUjOD0ZZmUbSNI61oSPgWS5MuTV/S8nTyD8VGFK
qQZQ7zD7ahXdNawYSCKiDrvVMJXng/s4KXn7fZQqn2klU6YjshI5Oatp2+5nMfcG
/4x07lvFAgMBAAECggEAALaACYGAESy7EwXIn+PoyaR7GO/nllQDb6sF+bVueClh
CuSAZSBeQSxu/Lz1TbzjN+QemGw65eXb9YYrhoFgMpIuAc702u2g5qESv6SKpukJ
ksns8ARegzkdBbqsaOlbAvdZIu0GNtHRFEgq/5gGchiYJ09ys+jNDho2MZQgLxQ8
N1UF8eQzboVik3lumDQOJxNtClw24St7s5/B9/skx6QJvDrzRDPRxrNxsJ7EMHNx
KBx1PuowUml0AdMz8f0yDS+1Aj0w6lOSfFhBqgjbSPwG4KmWiRGrWEBviLTGur0/
g8XWP7J8Cv/t0pXTNMIlNipBdGLlUZ4HfdUu10qF1QKBgQDQU5eD+xGic8BA/8uQ
SHycrx89Yp9G9oYHZemQKSNzSgg0et0RJnHMStpO/76V0q1hp8NTfdYPDDFYapx5
YHJqEi0E2fRoJPzVvNua1cykW7Q3MD0JLkyaMFGKaveZvPLGo7gGcuitx7u0lUxm
5pxJp8dpbqMQrV08knyP/JpWYwKBgQDICwAPZ0YmuvjmLw7AyNwgW7Ae3pGinkxh
IhVzMyRFdXPKir73XGnA3uDszqjPSbxENG8D5xh174PLj77E0e+3+KfaEk4Ytsur
vU6/9cO2sGFBEj4I6AQVctOvDvaW6XjlLKi8MzBWWDXtMOZt/lUkKnN9K/gDn6cj
1SLxV+RptwKBgQC+4nlIk3q7EbitVjSdxe14W/YR9xXenfB9QuJaF3fGIaWXAKUj
G8jV2hhinm9xNJNtkZymGf1T2GY2j6lEhh0QGAtsEJGkA5AwAFZwb0qNpwFgODEV
AnlqJq/wVsb89Wa2oDj0n8GXyhWyB8Lz3oaB7twHPTrpAxEVeVvtSxXX5QKBgQCz
Oc/S/SdH+gqYSR8BsLQwNZWlAqoetY8fE6d+MBrWNHYKyKZx/xUs3UNOR5XNKnYH
8aZpK7qpp29AiUhVFPaesKTKZ84arGPsOc79g5bW7k4kO9Dir+VAxkFMPa7G5OUR
ByMigwZSxfOC0GYTtGPZ5ELWqfcqX/cizonhC2s1HwKBgQDGvCTA8uRwy2Vb14kT
83glvR/ePuSCzCKcotuvaoKpKR2HkRAGjbWBYkBkcL0tlQdj6CsE9pULpHpsOSWW
L8sthsHO9MEUZpe6bx/1B6odmYEDq55pEgAgVaWndF01K137g4PUOcxwrU7vnjjM
MSCFm1g9rAUFRsaNIZokXNh7RA==
-----END PRIVATE KEY-----
`

var (
	fzOnce    sync.Once
	fzPrivs   map[Alg]any
	fzSigners map[Alg]*Signer
)

// fzKeys returns one fixed private key and signer (kid "k1") per algorithm.
// The EC and Ed25519 keys are derived from fixed labels.
func fzKeys() (map[Alg]any, map[Alg]*Signer) {
	fzOnce.Do(func() {
		rsaKey, err := ParsePrivatePEM([]byte(fzRSAPEM))
		if err != nil {
			panic(err)
		}
		ec := func(c elliptic.Curve, label string) *ecdsa.PrivateKey {
			d := sha512.Sum512([]byte(label))
			size := (c.Params().BitSize + 7) / 8
			scalar := make([]byte, size)
			copy(scalar[max(0, size-64):], d[:min(64, size)]) // P-521: two leading zero bytes
			k, err := ecdsa.ParseRawPrivateKey(c, scalar)
			if err != nil {
				panic(err)
			}
			return k
		}
		edSeed := sha256.Sum256([]byte("keygate fuzz Ed25519"))
		secret := sha512.Sum512([]byte("keygate fuzz HMAC"))
		fzPrivs = map[Alg]any{
			HS256: secret[:], HS384: secret[:], HS512: secret[:],
			RS256: rsaKey, RS384: rsaKey, RS512: rsaKey, PS256: rsaKey, PS384: rsaKey, PS512: rsaKey,
			ES256: ec(elliptic.P256(), "keygate fuzz P-256"),
			ES384: ec(elliptic.P384(), "keygate fuzz P-384"),
			ES512: ec(elliptic.P521(), "keygate fuzz P-521"),
			EdDSA: ed25519.NewKeyFromSeed(edSeed[:]),
		}
		fzSigners = map[Alg]*Signer{}
		for a, k := range fzPrivs {
			s, err := NewSigner(a, "k1", k)
			if err != nil {
				panic(err)
			}
			fzSigners[a] = s
		}
	})
	return fzPrivs, fzSigners
}

// fzPayload is the payload of every FuzzVerify seed; it passes fzVerifier's
// checks at testNow.
const fzPayload = `{"iss":"https://issuer.example.com/","sub":"fuzz","aud":["https://api.example.com","x"],` +
	`"exp":4102444800,"iat":1800000000,"nbf":1800000000,"scope":"read write","scp":["admin"],"n":{"a":[1,2.5e3,null,true]}}`

// fzRandomized holds the signatures of the FuzzVerify seeds for the algorithms
// whose signatures are randomized: fzPayload signed once by fzKeys' Signer
// (header {"alg":...,"kid":"k1","typ":"JWT"}), so that every fuzzing process
// agrees on the seeds. HS*, RS* and EdDSA seeds are deterministic and are
// signed on the fly.
var fzRandomized = map[Alg]string{
	ES256: "2QPVT8Hd3j-UljqxhwrcUWZrd6nrLnXkj0xiIOOduek3JbLGRhnaC5gEMa0Fa-fx_bZdutglrK9ekRITUrVyOg",
	ES384: "iwrzZr9Jp2o_EfpnA36BYmqFzVId-y2y7ux-nVlQsAp0cIYnHboOdNZF211eMq6iDJR_7BtlFElTqNQvw8lAb06W" +
		"VHAltmZoh1N0DRgp0Y3e9GDKhJjVBktG5aNT_gFh",
	ES512: "AIfyoFOIZbTgFpfV8azsfAQP9JcXJ3bfh-0g-lv7YdKxpCZAC5P5jux8SLfiIYXNtjh9mDyQmzDXOQWwkpYLwWhW" +
		"Abjy-XVtLSeNcr06ZCcUr1qxPWjOFJWJt9-ZkUylT4E7O1gQqWFIzPDF9QPDPvLWVQaSOt0Hn3LvCqAMRfQHLJ6D",
	PS256: "a8JNkyR7nfPcUxIr3W11UmdAgIgWVxoMZOYzZZ7dEvmhJirjHYM_l2R7G6EO75BvbWIEFng4efOpB9Lh6BvKlexw" +
		"QKga_poUk6EBCqEJ4HkGjO8Gk6ju3kd7LKs10-XamSiFBZ5SgHRMHiKgCbl7HMldz8qetPPQemn7DkBN-lJjZAgI" +
		"vWf1C6JRkdumDV_d30XAmuxCYbGGeNd7ZfPo9i_0y9s0PD6Cq_onytDwpS4vm7nZkz3aF4Eohd0-nRSwcRhXMvfO" +
		"QsuBnvuDjFjWxZYteZCLU_LVczxwBcH1nHAY5x-pFao4WOFC8aLePFUL5vjjLs0mzZa7nIFM2f-Y5w",
	PS384: "MEk3P8ZgYoc0IjgUetKuvpmVjN9ySmnCX5pOXOJ3ka2WJnVcrKY74DlHya-Xtv1yD9DBYLJgEM4bvYSEKcNQQENF" +
		"pifegULyQNX0HnQmxAD7TmVXT6lt4wY0XtCgnHTFqE85kA_3_9cd76cdsOta0JFoe8wY-JC1yMzjPpU6yH9Pysdl" +
		"S151caP6S3Rlnp6wyM6g8xmlobzLhREpAS7QkM8Ud_0icBuaxpssJoM1IhyDATvz7UhpvJ2gJzIbTrBc59ryKbZl" +
		"pJAqu4gdfNgxNgXSmTZzfTRlyCGeCn-OHiXvQeBbj2pqdswcF2-0p02hW-xJx9sxs-vHy5jhzVKPgQ",
	PS512: "jhUB9xgT1cwNa60vC6qGZsPpFGu4jV4lvwHaUIsKEi_gH8Aax5uaLGa0QRxx1AsslZOSCOxzrlvIq5AoTzyU1kNM" +
		"huf6q5U5PyZYhKzA5UG3-QzqqZ5rzPv0NP2RqwGnyF86VDM4dYGdED6ZNHNCIz8TXhOo5BzbWek-4AhU9Hvneimc" +
		"3ZX1rAd_MIvy6ffTG3_8uVGQt9-vlRbP95KQGoXrglFAJqaNSTApnu_o6ExJCtJTf3gpb0ji1cq1tzPuTjN_SF6k" +
		"-W9Ovn9ik8sajb00pVvpLYH8-Da2TXVM5p4MkLLHbt5tKKYImagmscnxDIMdii7zvotBkjltO4mEmQ",
}

// fzVerifier trusts the fixed keys for every algorithm and checks iss and aud
// at testNow. Each call makes a fresh Verifier, with an empty header cache.
func fzVerifier(tb testing.TB, opts ...Option) *Verifier {
	_, signers := fzKeys()
	var ks []*Key
	for _, a := range Algorithms() {
		ks = append(ks, signers[a].Key())
	}
	opts = append([]Option{WithClock(func() time.Time { return testNow })}, opts...)
	v, err := NewVerifier(NewKeySet(ks...), Algorithms(),
		Expected{Issuer: "https://issuer.example.com/", Audience: []string{"https://api.example.com"}}, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// fzAlgResolver returns the fixed key for a token's alg whatever its kid.
type fzAlgResolver struct{}

func (fzAlgResolver) ResolveKey(_ string, alg Alg) (*Key, error) {
	_, signers := fzKeys()
	if s, ok := signers[alg]; ok {
		return s.Key(), nil
	}
	return nil, ErrUnknownKID
}

// fzSeedTokens returns the valid FuzzVerify seeds, one per algorithm.
func fzSeedTokens(tb testing.TB) map[Alg]string {
	_, signers := fzKeys()
	out := map[Alg]string{}
	for _, a := range Algorithms() {
		tok, err := signers[a].Sign([]byte(fzPayload))
		if err != nil {
			tb.Fatal(err)
		}
		if sig, ok := fzRandomized[a]; ok {
			tok = tok[:strings.LastIndexByte(tok, '.')+1] + sig
		}
		out[a] = tok
	}
	return out
}

// fzCheckToken exercises every accessor of a parsed token and compares what
// keygate decoded with encoding/json's reading of the same JSON.
func fzCheckToken(t *testing.T, tok *Token, raw string) {
	t.Helper()
	if tok.Raw() != raw {
		t.Fatalf("Raw() = %q", tok.Raw())
	}
	dot := strings.LastIndexByte(raw, '.')
	if tok.SigningInput() != raw[:dot] {
		t.Fatalf("SigningInput() = %q, want %q", tok.SigningInput(), raw[:dot])
	}
	if got := b64.EncodeToString(tok.Signature()); got != raw[dot+1:] {
		t.Fatalf("Signature() re-encodes to %q, token has %q", got, raw[dot+1:])
	}
	if got := b64.EncodeToString(tok.Payload()); got != raw[strings.IndexByte(raw, '.')+1:dot] {
		t.Fatalf("Payload() re-encodes to %q", got)
	}
	if !bytes.Equal(tok.Claims.JSON(), tok.Payload()) {
		t.Fatalf("Claims.JSON() differs from Payload()")
	}

	// Header: the members keygate reads agree with encoding/json.
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(tok.Header.JSON(), &hdr); err != nil {
		t.Fatalf("keygate accepted a header encoding/json refuses: %v: %q", err, tok.Header.JSON())
	}
	fzJSONString(t, hdr, "alg", tok.Header.Alg.String(), true)
	fzJSONString(t, hdr, "kid", tok.Header.KeyID, false)
	fzJSONString(t, hdr, "typ", tok.Header.Type, false)
	fzJSONString(t, hdr, "cty", tok.Header.ContentType, false)
	if _, ok := hdr["crit"]; ok {
		t.Fatalf("accepted a header with crit: %q", tok.Header.JSON())
	}

	// Claims: names, raw values and registered claims agree too.
	c := &tok.Claims
	var m map[string]json.RawMessage
	if err := c.Decode(&m); err != nil {
		t.Fatalf("keygate accepted claims encoding/json refuses: %v: %q", err, c.JSON())
	}
	names := c.Names()
	if len(names) != len(m) {
		t.Fatalf("Names() = %q, encoding/json found %d members", names, len(m))
	}
	for _, n := range names {
		r, ok := c.Raw(n)
		if !ok || !c.Has(n) {
			t.Fatalf("Raw(%q) missing", n)
		}
		if !bytes.Equal(r, m[n]) {
			t.Fatalf("Raw(%q) = %q, encoding/json %q", n, r, m[n])
		}
	}
	if c.Has("\x00no such claim") {
		t.Fatal("Has reports a claim that is not there")
	}
	// Has answers for the registered claims from bits parse sets; they
	// must agree with the members, present or absent.
	for _, n := range []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "scope", "scp"} {
		if _, ok := m[n]; c.Has(n) != ok {
			t.Fatalf("Has(%q) = %v, encoding/json finds it: %v", n, c.Has(n), ok)
		}
	}
	fzJSONString(t, m, "iss", c.Issuer, false)
	fzJSONString(t, m, "sub", c.Subject, false)
	fzJSONString(t, m, "jti", c.ID, false)
	if r, ok := m["aud"]; ok {
		var one string
		var many []string
		if json.Unmarshal(r, &one) == nil {
			many = []string{one}
		} else if err := json.Unmarshal(r, &many); err != nil {
			t.Fatalf("aud %s accepted but not a string or array of strings", r)
		}
		if len(many) != len(c.Audience) || (len(many) > 0 && !reflect.DeepEqual(many, c.Audience)) {
			t.Fatalf("Audience = %q, encoding/json %q", c.Audience, many)
		}
	} else if len(c.Audience) != 0 {
		t.Fatalf("Audience %q without aud", c.Audience)
	}
	for _, d := range []struct {
		name string
		nd   NumericDate
	}{{"exp", c.Expiry}, {"nbf", c.NotBefore}, {"iat", c.IssuedAt}} {
		r, ok := m[d.name]
		if ok != d.nd.Valid {
			t.Fatalf("%s present %v, Valid %v", d.name, ok, d.nd.Valid)
		}
		if !ok {
			continue
		}
		var f float64
		if err := json.Unmarshal(r, &f); err != nil {
			t.Fatalf("%s %s accepted but not a number", d.name, r)
		}
		if f < 0 || f > maxNumericDate || d.nd.Unix != int64(f) {
			t.Fatalf("%s %s read as %d", d.name, r, d.nd.Unix)
		}
	}
	// Scope joins "scope" and "scp" with single spaces, in token order.
	var scopes []string
	for _, n := range names {
		if n != "scope" && n != "scp" {
			continue
		}
		var one string
		var many []string
		if json.Unmarshal(m[n], &one) == nil {
			many = []string{one}
		} else if err := json.Unmarshal(m[n], &many); err != nil {
			t.Fatalf("%s %s accepted but not a string or array of strings", n, m[n])
		}
		for _, s := range many {
			if s != "" {
				scopes = append(scopes, s)
			}
		}
	}
	if want := strings.Join(scopes, " "); c.Scope != want {
		t.Fatalf("Scope = %q, want %q", c.Scope, want)
	}
	for _, s := range strings.Split(c.Scope, " ") {
		if s != "" && !c.HasScope(s) {
			t.Fatalf("HasScope(%q) false for Scope %q", s, c.Scope)
		}
	}
	if c.HasScope("") {
		t.Fatal(`HasScope("") is true`)
	}
}

// fzJSONString checks that member name of m, if present, is the JSON string
// want (and is present when required).
func fzJSONString(t *testing.T, m map[string]json.RawMessage, name, want string, required bool) {
	t.Helper()
	r, ok := m[name]
	if !ok {
		if required || want != "" {
			t.Fatalf("%s: keygate read %q, encoding/json found none", name, want)
		}
		return
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		t.Fatalf("%s %s accepted but is not a string", name, r)
	}
	if s != want {
		t.Fatalf("%s: keygate read %q, encoding/json %q", name, want, s)
	}
}

// fzSame reports how two parsed tokens differ, or "" if they agree in every
// decoded field.
func fzSame(a, b *Token) string {
	if a.Header.Alg != b.Header.Alg || a.Header.KeyID != b.Header.KeyID || a.Header.Type != b.Header.Type ||
		a.Header.ContentType != b.Header.ContentType || !bytes.Equal(a.Header.JSON(), b.Header.JSON()) {
		return fmt.Sprintf("headers differ: %+v / %+v", a.Header, b.Header)
	}
	ca, cb := &a.Claims, &b.Claims
	if ca.Issuer != cb.Issuer || ca.Subject != cb.Subject || ca.ID != cb.ID || ca.Scope != cb.Scope ||
		ca.Expiry != cb.Expiry || ca.NotBefore != cb.NotBefore || ca.IssuedAt != cb.IssuedAt ||
		len(ca.Audience) != len(cb.Audience) || (len(ca.Audience) > 0 && !reflect.DeepEqual(ca.Audience, cb.Audience)) ||
		!bytes.Equal(ca.JSON(), cb.JSON()) || !reflect.DeepEqual(ca.Names(), cb.Names()) {
		return fmt.Sprintf("claims differ: %+v / %+v", *ca, *cb)
	}
	for _, n := range ca.Names() {
		ra, _ := ca.Raw(n)
		rb, _ := cb.Raw(n)
		if !bytes.Equal(ra, rb) {
			return fmt.Sprintf("Raw(%q) differs: %q / %q", n, ra, rb)
		}
	}
	return ""
}

// fzVerifyTwice verifies tok with v twice (the second call may take the
// header from v's cache), into a fresh and a reused Token, and with a fresh
// Verifier, and checks that all agree. It returns the first result.
func fzVerifyTwice(t *testing.T, v, fresh *Verifier, tok string) (*Token, error) {
	t.Helper()
	t1, err1 := v.Verify(tok)
	t2, err2 := v.Verify(tok)
	var reused Token
	_ = ParseInto(&reused, fzDirty, 0)
	err3 := v.VerifyInto(&reused, tok)
	t4, err4 := fresh.Verify(tok)
	r := ReasonOf(err1)
	if (err1 == nil) != (t1 != nil) {
		t.Fatalf("Verify returned token %v with error %v", t1 != nil, err1)
	}
	if err1 != nil && r == 0 {
		t.Fatalf("rejection without a Reason: %v", err1)
	}
	if ReasonOf(err2) != r || ReasonOf(err3) != r || ReasonOf(err4) != r {
		t.Fatalf("verdicts differ: %v / again %v / VerifyInto %v / fresh Verifier %v", err1, err2, err3, err4)
	}
	if err1 == nil {
		for _, o := range []*Token{t2, &reused, t4} {
			if d := fzSame(t1, o); d != "" {
				t.Fatalf("re-verification differs: %s", d)
			}
		}
	}
	return t1, err1
}

// fzDirty is a token with many claims, parsed into a Token before it is
// reused so that stale state would show.
var fzDirty = func() string {
	h := b64.EncodeToString([]byte(`{"alg":"HS256","kid":"dirty","typ":"dirty","cty":"dirty"}`))
	p := b64.EncodeToString([]byte(`{"iss":"dirty","sub":"dirty","jti":"dirty","aud":["d1","d2","d3"],"exp":1,"nbf":1,"iat":1,` +
		`"scope":"dirty","scp":["d"],"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13}`))
	return h + "." + p + ".AAAA"
}()

// ---------------------------------------------------------------------------
// Seeds from internal/testvectors.

type fzVectorSeeds struct {
	tokens []string // compact JWS strings
	jwks   [][]byte // single JWK objects
	sets   [][]byte // {"keys":[...]} documents
}

// fzLoadVectors walks the JOSE vector files and collects every compact JWS
// string, JWK object and JWK set in them. A missing or altered file fails t.
// It runs once per fuzz target (milliseconds each), not behind a sync.Once,
// which a failed read would leave half done for the next target.
func fzLoadVectors(t testing.TB) fzVectorSeeds {
	t.Helper()
	var seeds fzVectorSeeds
	var files []string
	for _, pattern := range []string{"wycheproof/json_web_*.json", "jose-cookbook/*/*.json", "rfc/*.json"} {
		files = append(files, testvectors.Glob(t, pattern)...)
	}
	seen := map[string]bool{}
	add := func(dst *[][]byte, b []byte) {
		if len(b) > 64<<10 || seen[string(b)] {
			return
		}
		seen[string(b)] = true
		*dst = append(*dst, append([]byte(nil), b...))
	}
	var walk func(raw json.RawMessage, depth int)
	walk = func(raw json.RawMessage, depth int) {
		raw = bytes.TrimSpace(raw)
		if depth > 20 || len(raw) == 0 {
			return
		}
		switch raw[0] {
		case '"':
			var s string
			if json.Unmarshal(raw, &s) == nil && strings.Count(s, ".") == 2 && len(s) <= 64<<10 && !seen[s] {
				seen[s] = true
				seeds.tokens = append(seeds.tokens, s)
			}
		case '[':
			var a []json.RawMessage
			if json.Unmarshal(raw, &a) == nil {
				for _, e := range a {
					walk(e, depth+1)
				}
			}
		case '{':
			var o map[string]json.RawMessage
			if json.Unmarshal(raw, &o) != nil {
				return
			}
			if _, ok := o["kty"]; ok {
				add(&seeds.jwks, raw)
			}
			if k, ok := o["keys"]; ok && bytes.HasPrefix(bytes.TrimSpace(k), []byte("[")) {
				add(&seeds.sets, raw)
			}
			for _, v := range o {
				walk(v, depth+1)
			}
		}
	}
	for _, f := range files {
		walk(testvectors.Read(t, f), 0)
	}
	return seeds
}

// ---------------------------------------------------------------------------
// Handcrafted seeds.

// fzHS256Token signs header and payload (JSON texts) with the fuzz
// harness's HS256 key.
func fzHS256Token(header, payload string) string {
	_, signers := fzKeys()
	in := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(payload))
	sig, err := signers[HS256].sign([]byte(in))
	if err != nil {
		panic(err)
	}
	return in + "." + b64.EncodeToString(sig)
}

// fzTokenSeeds are tokens with features the parser must handle: every alg,
// escapes, unicode, arrays, nesting, and some near misses.
func fzTokenSeeds() []string {
	tok := fzHS256Token
	h := `{"alg":"HS256","kid":"k1","typ":"JWT"}`
	out := []string{
		"", ".", "..", "...", "a.b.c", "e30.e30.AAAA", "e30.e30.", "eyJhbGciOiJub25lIn0.e30.",
		tok(h, `{}`),
		tok(h, fzPayload),
		tok(h, string(testPayload)),
		tok(h, `{"sub":"\u00e9\ud83d\ude00\n\"\\\/\b\f\r\t","iss":"\ud800","aud":"a","n\u0061me":"x"}`),
		tok(h, `{"aud":["a","b","c","d"],"scope":"a b","scp":["c","","d"],"exp":1e9,"nbf":1.5,"iat":0}`),
		tok(h, `{"exp":-0,"nbf":253402300799,"iat":999999999999999}`),
		tok(h, `{"x":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]],"y":{"a":{"b":{"c":null}}},"z":[true,false,null,-1.5e-3]}`),
		tok(h, ` { "iss" : "x" , "aud" : [ "y" ] } `),
		tok(`{"alg":"HS256","kid":"\u006b1","typ":"at+jwt","cty":"JWT","x5c":["AA"],"jwk":{"kty":"oct"}}`, `{"iss":"i"}`),
		tok(`{"alg":"none"}`, `{}`),
		tok(`{"alg":"HS256","crit":["b64"],"b64":false}`, `{}`),
		tok(`{"alg":"HS256","alg":"HS256"}`, `{}`),
		tok(h, `{"exp":1,"\u0065xp":2}`),
		tok(h, `{"exp":"1"}`),
		tok(h, `[]`),
		tok(h, `{"a":1}x`),
	}
	_, signers := fzKeys()
	for _, a := range Algorithms() {
		if s, err := signers[a].Sign([]byte(`{"iss":"https://issuer.example.com/","exp":1800003600}`)); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// fzPrivateJWK writes a private JWK for one of the fixed keys.
func fzPrivateJWK(priv any, extra string) []byte {
	e := func(b []byte) string { return b64.EncodeToString(b) }
	var s string
	switch k := priv.(type) {
	case []byte:
		s = `{"kty":"oct","k":"` + e(k) + `"`
	case *rsa.PrivateKey:
		k.Precompute()
		s = fmt.Sprintf(`{"kty":"RSA","n":%q,"e":%q,"d":%q,"p":%q,"q":%q,"dp":%q,"dq":%q,"qi":%q`,
			e(k.N.Bytes()), e(big.NewInt(int64(k.E)).Bytes()), e(k.D.Bytes()), e(k.Primes[0].Bytes()), e(k.Primes[1].Bytes()),
			e(k.Precomputed.Dp.Bytes()), e(k.Precomputed.Dq.Bytes()), e(k.Precomputed.Qinv.Bytes()))
	case *ecdsa.PrivateKey:
		pt, _ := k.PublicKey.Bytes()
		d, _ := k.Bytes()
		size := (len(pt) - 1) / 2
		s = fmt.Sprintf(`{"kty":"EC","crv":%q,"x":%q,"y":%q,"d":%q`, k.Curve.Params().Name, e(pt[1:1+size]), e(pt[1+size:]), e(d))
	case ed25519.PrivateKey:
		s = fmt.Sprintf(`{"kty":"OKP","crv":"Ed25519","x":%q,"d":%q`, e(k.Public().(ed25519.PublicKey)), e(k.Seed()))
	default:
		panic("unexpected key")
	}
	if extra != "" {
		s += "," + extra
	}
	return []byte(s + "}")
}

// fzJWKSeeds are JWKs made from the fixed keys, public and private, with and
// without alg, kid, use and key_ops, and some broken ones.
func fzJWKSeeds() [][]byte {
	privs, signers := fzKeys()
	var out [][]byte
	for _, a := range []Alg{HS256, HS512, RS256, PS384, ES256, ES384, ES512, EdDSA} {
		if a.family() != famHMAC {
			b, err := signers[a].Key().MarshalJSON()
			if err != nil {
				panic(err)
			}
			out = append(out, b)
		}
		out = append(out, fzPrivateJWK(privs[a], ""))
		out = append(out, fzPrivateJWK(privs[a], `"alg":"`+a.String()+`","kid":"k-`+a.String()+`","use":"sig","key_ops":["sign","verify"]`))
	}
	out = append(out,
		fzPrivateJWK(privs[RS256], `"alg":"HS256"`),
		fzPrivateJWK(privs[ES256], `"alg":"ES384"`),
		fzPrivateJWK(privs[EdDSA], `"use":"enc"`),
		fzPrivateJWK(privs[HS256], `"key_ops":["verify"]`),
		[]byte(`{"kty":"EC","crv":"P-256","x":"","y":""}`),
		[]byte(`{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}`),
		[]byte(`{"kty":"RSA","n":"AQAB","e":"AQAB"}`),
		[]byte(`{"kty":"oct","k":""}`),
		[]byte(`{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`),
		[]byte(`{"kty":"OKP","crv":"X25519","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`),
		[]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"\u0000","alg":"EdDSA"}`),
		[]byte(`{"kty":"RSA","kty":"EC"}`),
		[]byte(`{}`), []byte(`[]`), []byte(`null`), []byte(``),
	)
	return out
}

// ---------------------------------------------------------------------------
// Fuzz targets.

// FuzzParse: Parse never panics and refuses only with a Reason; whatever it
// accepts reads back consistently through every accessor and agrees with
// encoding/json; the same header and payload re-signed with a known key
// verify to identical claims; and a Verifier gives the same verdict and
// claims on a second call.
func FuzzParse(f *testing.F) {
	for _, s := range fzTokenSeeds() {
		f.Add(s)
	}
	for _, s := range fzLoadVectors(f).tokens {
		f.Add(s)
	}
	_, signers := fzKeys()
	resolver := fzAlgResolver{}
	newV := func() *Verifier {
		v, err := NewVerifier(resolver, Algorithms(), Expected{}, WithClock(func() time.Time { return testNow }), WithMaxTokenSize(1<<20))
		if err != nil {
			f.Fatal(err)
		}
		return v
	}
	shared := newV()
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		var into Token
		_ = ParseInto(&into, fzDirty, 0)
		errInto := ParseInto(&into, s, DefaultMaxTokenSize)
		if ReasonOf(errInto) != ReasonOf(err) {
			t.Fatalf("Parse: %v, ParseInto a used Token: %v", err, errInto)
		}
		byParser, errParser := NewParser(0).Parse(s)
		if ReasonOf(errParser) != ReasonOf(err) || (errParser == nil) != (byParser != nil) {
			t.Fatalf("Parse: %v, Parser.Parse: %v", err, errParser)
		}
		if err != nil {
			if tok != nil || ReasonOf(err) == 0 {
				t.Fatalf("rejection %v (%T) without a Reason, or with a token", err, err)
			}
			var e *Error
			if !errors.As(err, &e) || e.Error() == "" {
				t.Fatalf("rejection is not an *Error: %v", err)
			}
			return
		}
		fzCheckToken(t, tok, s)
		if d := fzSame(tok, &into); d != "" {
			t.Fatalf("ParseInto a used Token differs from Parse: %s", d)
		}
		if d := fzSame(tok, byParser); d != "" {
			t.Fatalf("Parser.Parse differs from Parse: %s", d)
		}
		if c, _ := tok.Clone(0); !reflect.DeepEqual(tok, c) {
			t.Fatalf("Clone differs from Parse: %+v / %+v", *tok, *c)
		}
		jws, err := ParseJWS(s, 0)
		if err != nil || jws.Header.Alg != tok.Header.Alg || !bytes.Equal(jws.Payload(), tok.Payload()) {
			t.Fatalf("a JWT that parses must parse as a JWS: %v", err)
		}

		// Re-sign the very same signing input with the fixed key for its alg.
		input := tok.SigningInput()
		signer := signers[tok.Header.Alg]
		sig, err := signer.sign([]byte(input))
		if err != nil {
			t.Fatal(err)
		}
		resigned := input + "." + b64.EncodeToString(sig)
		var again Token
		if err := ParseInto(&again, resigned, 1<<20); err != nil {
			t.Fatalf("re-signed token does not parse: %v", err)
		}
		if err := signer.Key().Verify(&again); err != nil {
			t.Fatalf("re-signed token does not verify: %v", err)
		}
		if d := fzSame(tok, &again); d != "" {
			t.Fatalf("re-signed token reads differently: %s", d)
		}
		// The original signature verifies only if it is the one we made
		// (HS*, RS*, EdDSA are deterministic) or by chance of ES*/PS*.
		if tok.Header.Alg.family() == famHMAC || tok.Header.Alg.family() == famRSA || tok.Header.Alg == EdDSA {
			if err := signer.Key().Verify(tok); (err == nil) != bytes.Equal(tok.Signature(), sig) {
				t.Fatalf("fixed-key verify of the original: %v, signature equal %v", err, bytes.Equal(tok.Signature(), sig))
			}
		}
		got, err := fzVerifyTwice(t, shared, newV(), resigned)
		if err == nil {
			if d := fzSame(tok, got); d != "" {
				t.Fatalf("verified claims differ from parsed: %s", d)
			}
		} else if r := ReasonOf(err); r != ReasonExpired && r != ReasonNotYetValid {
			t.Fatalf("a properly signed token refused with %v", err)
		}
	})
}

// FuzzVerify: seeded with a valid token per algorithm under fixed keys. No
// mutation may verify: an accepted token must be byte-identical to one of the
// seeds that verified when the target started.
// Verdicts and claims do not change on a second call, with the Verifier's
// header cache warm or cold.
func FuzzVerify(f *testing.F) {
	seeds := fzSeedTokens(f)
	valid := map[string]bool{}
	shared := fzVerifier(f)
	for _, a := range Algorithms() {
		tok := seeds[a]
		if _, err := shared.Verify(tok); err != nil {
			f.Fatalf("%v seed does not verify: %v", a, err)
		}
		valid[tok] = true
		f.Add(tok)
	}
	// Some handcrafted seeds are signed with the fixed keys and valid too.
	for _, s := range append(fzTokenSeeds(), fzLoadVectors(f).tokens...) {
		if _, err := shared.Verify(s); err == nil {
			valid[s] = true
		}
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := fzVerifyTwice(t, shared, fzVerifier(t), s)
		if err != nil {
			return
		}
		if !valid[s] {
			t.Fatalf("FORGERY: a token that is not one of the signed seeds verified: %q (claims %s)", s, got.Claims.JSON())
		}
	})
}

// FuzzParseJWK: ParseJWK never panics and refuses only with a Reason. A
// parsed JWK's Algs and Key agree; its Key exports with MarshalJSON to a JWK
// that parses back to the same thumbprint, kid and alg; a private JWK signs
// tokens its public half verifies.
func FuzzParseJWK(f *testing.F) {
	for _, b := range fzJWKSeeds() {
		f.Add(b)
	}
	for _, b := range fzLoadVectors(f).jwks {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJWK(data)
		if err != nil {
			if j != nil || ReasonOf(err) == 0 {
				t.Fatalf("rejection %v (%T) without a Reason, or with a JWK", err, err)
			}
			return
		}
		fzCheckJWK(t, j)
	})
}

func fzCheckJWK(t *testing.T, j *JWK) {
	t.Helper()
	kty := j.KeyType()
	switch {
	case j.Thumbprint() == "":
		t.Fatal("empty thumbprint")
	case (kty == "oct") != (j.Public() == nil):
		t.Fatalf("kty %q with public key %T", kty, j.Public())
	case kty != "oct" && kty != "RSA" && kty != "EC" && kty != "OKP":
		t.Fatalf("kty %q accepted", kty)
	case kty == "oct" && !j.IsPrivate():
		t.Fatal("oct key is not private")
	}
	usable := j.usableFor("verify") == nil
	algs, aerr := j.Algs(nil)
	k, kerr := j.Key(0)
	if kerr == nil {
		if !usable || aerr != nil || len(algs) != 1 || algs[0] != k.Alg() {
			t.Fatalf("Key(0) bound %v, but Algs(nil) = %v, %v (usable %v)", k.Alg(), algs, aerr, usable)
		}
		if k.KeyID() != j.KeyID || k.Thumbprint() != j.Thumbprint() {
			t.Fatalf("Key(0) kid %q thumbprint %s, JWK %q %s", k.KeyID(), k.Thumbprint(), j.KeyID, j.Thumbprint())
		}
	} else {
		if ReasonOf(kerr) == 0 {
			t.Fatalf("Key(0) error without a Reason: %v", kerr)
		}
		if usable && aerr == nil && len(algs) == 1 {
			t.Fatalf("Algs(nil) = %v but Key(0) fails: %v", algs, kerr)
		}
	}
	if aerr == nil && usable {
		for _, a := range algs {
			if ka, err := j.Key(a); err != nil || ka.Alg() != a {
				t.Fatalf("Algs lists %v but Key(%v): %v", a, a, err)
			}
		}
	}
	// Every algorithm Algs offers under a full allow-list fits the key.
	if all, err := j.Algs(Algorithms()); err == nil && usable {
		for _, a := range all {
			if _, err := j.Key(a); err != nil {
				t.Fatalf("Algs(all) lists %v but Key(%v): %v", a, a, err)
			}
		}
	}
	if kerr != nil {
		return
	}

	// Export and re-import.
	b, err := k.MarshalJSON()
	if j.Public() == nil {
		if err == nil {
			t.Fatalf("an HMAC key was exported: %s", b)
		}
	} else {
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		j2, err := ParseJWK(b)
		if err != nil {
			t.Fatalf("MarshalJSON output %s does not parse: %v", b, err)
		}
		if j2.Thumbprint() != j.Thumbprint() || j2.KeyID != j.KeyID || j2.IsPrivate() {
			t.Fatalf("re-parsed JWK: thumbprint %s kid %q private %v; was %s %q", j2.Thumbprint(), j2.KeyID, j2.IsPrivate(), j.Thumbprint(), j.KeyID)
		}
		k2, err := j2.Key(0)
		if err != nil || k2.Alg() != k.Alg() || k2.Thumbprint() != k.Thumbprint() {
			t.Fatalf("re-parsed key: %v", err)
		}
		if s, err := ParseKeySet([]byte(`{"keys":[` + string(b) + `]}`)); err != nil || s.Len() != 1 {
			t.Fatalf("one exported key as a JWKS: %v", err)
		}
	}

	// A private JWK signs what its public half verifies.
	if !j.IsPrivate() || j.usableFor("sign") != nil {
		return
	}
	if p, ok := j.Public().(*rsa.PublicKey); ok && p.N.BitLen() > 4096 {
		return // correct but slow
	}
	s, err := j.Signer(0)
	if err != nil {
		t.Fatalf("private JWK whose Key(0) works has no Signer: %v", err)
	}
	if s.Alg() != k.Alg() || s.Key().Thumbprint() != k.Thumbprint() {
		t.Fatalf("Signer %v %s, Key %v %s", s.Alg(), s.Key().Thumbprint(), k.Alg(), k.Thumbprint())
	}
	tok, err := s.Sign([]byte(`{"sub":"fuzz"}`))
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	parsed, err := Parse(tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Verify(parsed); err != nil {
		t.Fatalf("the JWK's own key refuses its signature: %v", err)
	}
}

// fzPublicKeySet checks ParsePublicKeySet on data: it refuses exactly the
// documents ParseKeySet refuses; it keeps no secret key, only keys that
// ParseKeySet binds too, and never two under one kid and algorithm, each
// resolving by its kid; and every key it leaves out has a reason.
func fzPublicKeySet(t *testing.T, data []byte) {
	t.Helper()
	pub, err := ParsePublicKeySet(data, Algorithms()...)
	wide, werr := ParseKeySet(data, Algorithms()...)
	if (err == nil) != (werr == nil) {
		t.Fatalf("ParsePublicKeySet error %v, ParseKeySet error %v", err, werr)
	}
	if err != nil {
		return
	}
	have := map[string]bool{}
	for _, k := range wide.Keys() {
		have[k.KeyID()+"\x00"+k.Alg().String()+"\x00"+k.Thumbprint()] = true
	}
	seen := map[string]bool{}
	for _, k := range pub.Keys() {
		if k.Public() == nil {
			t.Fatalf("secret key %q kept", k.KeyID())
		}
		if !have[k.KeyID()+"\x00"+k.Alg().String()+"\x00"+k.Thumbprint()] {
			t.Fatalf("key %q/%v is not one ParseKeySet binds", k.KeyID(), k.Alg())
		}
		if k.KeyID() == "" {
			continue
		}
		id := k.KeyID() + "\x00" + k.Alg().String()
		if seen[id] {
			t.Fatalf("two keys kept under %q/%v", k.KeyID(), k.Alg())
		}
		seen[id] = true
		if r, err := pub.ResolveKey(k.KeyID(), k.Alg()); err != nil || r != k {
			t.Fatalf("key %q/%v does not resolve: %v", k.KeyID(), k.Alg(), err)
		}
	}
	for _, sk := range pub.SkippedKeys() {
		if sk.Reason == "" || ReasonOf(sk.Err) == 0 {
			t.Fatalf("skipped without a reason: %v", sk)
		}
	}
}

// FuzzParseKeySet: ParseKeySet never panics and refuses only with a Reason.
// Every key resolves by its kid and alg unless that pair is ambiguous. A set
// without HMAC keys survives MarshalJSON: it re-parses to one key per
// distinct (kid, key), which is its Len when no key is listed twice.
func FuzzParseKeySet(f *testing.F) {
	for _, b := range fzJWKSeeds() {
		f.Add([]byte(`{"keys":[` + string(b) + `]}`))
	}
	_, signers := fzKeys()
	var ks []*Key
	for _, a := range Algorithms() {
		if a.family() != famHMAC {
			ks = append(ks, signers[a].Key())
		}
	}
	if b, err := NewKeySet(ks...).MarshalJSON(); err == nil {
		f.Add(b)
	}
	// The same key listed twice under one kid and alg.
	ps, _ := fzKeys()
	twice := fzPrivateJWK(ps[PS256], `"alg":"PS256","kid":"twice"`)
	if j, err := ParseJWK(twice); err == nil {
		if k, err := j.Key(0); err == nil {
			pub, _ := k.MarshalJSON()
			f.Add([]byte(`{"keys":[` + string(pub) + `,` + string(pub) + `]}`))
		}
	}
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Add([]byte(`{"keys":[1,"a",null,{}]}`))
	f.Add([]byte(`{"keys":[],"keys":[]}`))
	for _, b := range fzLoadVectors(f).sets {
		f.Add(b)
	}
	for _, b := range fzLoadVectors(f).jwks {
		f.Add([]byte(`{"keys":[` + string(b) + `]}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fzPublicKeySet(t, data)
		s, err := ParseKeySet(data)
		if err != nil {
			if s != nil || ReasonOf(err) == 0 {
				t.Fatalf("rejection %v (%T) without a Reason, or with a set", err, err)
			}
			return
		}
		keys := s.Keys()
		if len(keys) != s.Len() {
			t.Fatalf("Keys() has %d, Len() %d", len(keys), s.Len())
		}
		for _, e := range s.Skipped() {
			if ReasonOf(e) == 0 {
				t.Fatalf("skipped without a Reason: %v", e)
			}
		}
		type kidAlgKey struct {
			kid string
			alg Alg
		}
		type group struct{ kid, thumb string }
		perKidAlg := map[kidAlgKey]int{}
		perAlg := map[Alg]int{}
		groups := map[group][]*Key{}
		hmac := false
		for _, k := range keys {
			perKidAlg[kidAlgKey{k.KeyID(), k.Alg()}]++
			perAlg[k.Alg()]++
			groups[group{k.KeyID(), k.Thumbprint()}] = append(groups[group{k.KeyID(), k.Thumbprint()}], k)
			hmac = hmac || k.Public() == nil
		}
		for _, k := range keys {
			r, err := s.ResolveKey(k.KeyID(), k.Alg())
			if k.KeyID() == "" {
				// The same lookup as a token without kid, checked below.
			} else if n := perKidAlg[kidAlgKey{k.KeyID(), k.Alg()}]; n == 1 && (err != nil || r != k) {
				t.Fatalf("key %q/%v does not resolve: %v", k.KeyID(), k.Alg(), err)
			} else if n > 1 && ReasonOf(err) != ReasonUnknownKID {
				t.Fatalf("ambiguous %q/%v resolved: %v", k.KeyID(), k.Alg(), err)
			}
			r, err = s.ResolveKey("", k.Alg())
			if n := perAlg[k.Alg()]; n == 1 && (err != nil || r != k) {
				t.Fatalf("the only %v key does not resolve without kid: %v", k.Alg(), err)
			} else if n > 1 && ReasonOf(err) != ReasonUnknownKID {
				t.Fatalf("%d %v keys, resolved without kid: %v", n, k.Alg(), err)
			}
		}
		// A wider allow-list keeps every key the default one binds.
		if wide, err := ParseKeySet(data, Algorithms()...); err != nil {
			t.Fatalf("allowing every algorithm refuses the set: %v", err)
		} else {
			have := map[string]bool{}
			for _, k := range wide.Keys() {
				have[k.KeyID()+"\x00"+k.Alg().String()+"\x00"+k.Thumbprint()] = true
			}
			for _, k := range keys {
				if !have[k.KeyID()+"\x00"+k.Alg().String()+"\x00"+k.Thumbprint()] {
					t.Fatalf("key %q/%v lost when every algorithm is allowed", k.KeyID(), k.Alg())
				}
			}
		}

		b, err := s.MarshalJSON()
		if hmac {
			if err == nil {
				t.Fatalf("a set with HMAC keys was exported: %s", b)
			}
			return
		}
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		s2, err := ParseKeySet(b)
		if err != nil {
			t.Fatalf("MarshalJSON output %s does not parse: %v", b, err)
		}
		if len(s2.Skipped()) != 0 {
			t.Fatalf("MarshalJSON output %s re-parses with skipped keys %v", b, s2.Skipped())
		}
		if s2.Len() != len(groups) {
			t.Fatalf("re-parsed %d keys, want %d (one per distinct kid and key): %s", s2.Len(), len(groups), b)
		}
		for _, k2 := range s2.Keys() {
			g, ok := groups[group{k2.KeyID(), k2.Thumbprint()}]
			if !ok {
				t.Fatalf("re-parsed a key %q %s that was not in the set", k2.KeyID(), k2.Thumbprint())
			}
			// A key bound to one algorithm keeps it, however often it is
			// listed. (One bound to several is written without alg and
			// re-binds by the default rules.)
			single := true
			for _, k := range g {
				single = single && k.Alg() == g[0].Alg()
			}
			if single && g[0].Alg() != k2.Alg() {
				t.Fatalf("key %q bound to %v (%d times) re-parsed as %v: %s", k2.KeyID(), g[0].Alg(), len(g), k2.Alg(), b)
			}
		}
		if len(groups) == len(keys) && s2.Len() != s.Len() {
			t.Fatalf("Len %d re-parsed as %d", s.Len(), s2.Len())
		}
	})
}
