package jose

// Conformance tests against independent vectors, read through
// internal/testvectors (its testdata/README.md names each file's source; the
// upstream quirks skipped here are named where they are skipped):
//
//   - Project Wycheproof primitive files for every JOSE algorithm, driven
//     through jose's own key import (NewKey, NewHMACKey, ParseJWK) and its
//     verify path (Key.Verify on a token whose signing input is the vector's
//     msg);
//   - Wycheproof's JWS-level files (json_web_signature, json_web_key,
//     json_web_crypto), through ParseJWK/ParseKeySet, ParseJWS, ResolveKey and
//     Key.Verify;
//   - the RFC 7520 cookbook (JWS and JWK) and its RFC 8037 Ed25519 example;
//   - RFC 7515 Appendix A, RFC 8037 Appendix A, RFC 7517 Appendix A/B and the
//     RFC 7638 thumbprint example.
//
// Every failure names the vector file and the case (tcId or example id).
// Every skipped case is counted under a stated reason and logged; each file
// also checks that the cases it ran plus the cases it skipped add up to the
// number the file declares, so nothing is dropped silently.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/testvectors"
)

// readVectorJSON decodes the vector file name (a path under testvectors'
// testdata, such as "wycheproof/hmac_sha256_test.json") into v. A missing or
// altered file fails the test.
func readVectorJSON(t *testing.T, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(testvectors.Read(t, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func vecHex(t *testing.T, id, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("%s: bad hex in vector: %v", id, err)
	}
	return b
}

func vecB64(t *testing.T, id, s string) []byte {
	t.Helper()
	b, err := b64.DecodeString(s)
	if err != nil {
		t.Fatalf("%s: bad base64url in vector: %v", id, err)
	}
	return b
}

// tally counts one vector file's cases. A case either runs (and passes or
// fails with t.Errorf) or is skipped under a stated reason.
type tally struct {
	file        string
	declared    int // numberOfTests, or 0 when the file declares none
	ran, passed int
	skipped     map[string]int
	// acceptable[0] counts Wycheproof "acceptable" cases jose accepted,
	// acceptable[1] those it rejected.
	acceptable [2]int
	notes      []string
}

func newTally(file string, declared int) *tally {
	return &tally{file: file, declared: declared, skipped: map[string]int{}}
}

func (c *tally) skip(reason string, n int) { c.skipped[reason] += n }

// check records a case that must succeed (err == nil).
func (c *tally) check(t *testing.T, id string, err error) {
	t.Helper()
	c.ran++
	if err != nil {
		t.Errorf("%s %s: %v", c.file, id, err)
		return
	}
	c.passed++
}

// judge compares jose's verdict (err == nil: accepted) with a Wycheproof
// result.
//
// "acceptable" marks legacy or borderline inputs that a verifier may accept or
// reject (in the files used here: the RSA PKCS#1 v1.5 DigestInfo with its
// NULL parameter missing). Such a case never fails the test, but how jose
// treated it is counted and logged, so that a change is visible in -v output.
func (c *tally) judge(t *testing.T, id, result string, err error) {
	t.Helper()
	c.ran++
	switch result {
	case "valid":
		if err != nil {
			t.Errorf("%s %s: valid case rejected: %v", c.file, id, err)
			return
		}
	case "invalid":
		if err == nil {
			t.Errorf("%s %s: invalid case accepted", c.file, id)
			return
		}
	case "acceptable":
		if err == nil {
			c.acceptable[0]++
		} else {
			c.acceptable[1]++
		}
	default:
		t.Errorf("%s %s: unknown expected result %q", c.file, id, result)
		return
	}
	c.passed++
}

func (c *tally) report(t *testing.T) {
	t.Helper()
	nskip := 0
	reasons := make([]string, 0, len(c.skipped))
	for r, n := range c.skipped {
		nskip += n
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	t.Logf("%s: ran %d, passed %d, failed %d, skipped %d", c.file, c.ran, c.passed, c.ran-c.passed, nskip)
	for _, r := range reasons {
		t.Logf("%s:   skipped %d: %s", c.file, c.skipped[r], r)
	}
	if c.acceptable[0]+c.acceptable[1] > 0 {
		t.Logf("%s:   acceptable cases: %d accepted, %d rejected (either is allowed)", c.file, c.acceptable[0], c.acceptable[1])
	}
	for _, n := range c.notes {
		t.Logf("%s:   %s", c.file, n)
	}
	if c.declared > 0 && c.ran+nskip != c.declared {
		t.Errorf("%s: accounted for %d cases (ran %d + skipped %d) but the file declares %d", c.file, c.ran+nskip, c.ran, nskip, c.declared)
	}
}

// verifyInput runs jose's verify path over a signing input that is exactly
// msg: the token below is what Parse would build for a compact JWS whose
// "header.payload" text is msg, so Key.Verify performs its alg check and then
// (*Key).verify(msg, sig), the same code every parsed token goes through.
func verifyInput(k *Key, msg, sig []byte) error {
	t := &Token{raw: string(msg), signedLen: int32(len(msg)), sig: sig}
	t.Header.Alg = k.Alg()
	return k.Verify(t)
}

// verifyCompact parses a compact JWS whose payload is arbitrary bytes and
// verifies it with the key res resolves from its kid and alg.
func verifyCompact(res KeyResolver, jws string) (*Token, error) {
	tok, err := ParseJWS(jws, 0)
	if err != nil {
		return nil, err
	}
	k, err := res.ResolveKey(tok.Header.KeyID, tok.Header.Alg)
	if err != nil {
		return tok, err
	}
	return tok, k.Verify(tok)
}

// deterministic reports whether alg's signatures can be reproduced byte for
// byte: HMAC, RSA PKCS#1 v1.5 and Ed25519 can, PSS and ECDSA are randomized.
func deterministic(alg Alg) bool {
	switch alg.family() {
	case famHMAC, famRSA, famEd:
		return true
	}
	return false
}

// ---------------------------------------------------------------------------
// Wycheproof primitive files.

type wpPrimitiveFile struct {
	Algorithm     string `json:"algorithm"`
	NumberOfTests int    `json:"numberOfTests"`
	TestGroups    []struct {
		Type         string          `json:"type"`
		SHA          string          `json:"sha"`
		MGFSHA       string          `json:"mgfSha"`
		SLen         int             `json:"sLen"`
		KeySize      int             `json:"keySize"`
		TagSize      int             `json:"tagSize"`
		PublicKeyDer string          `json:"publicKeyDer"`
		PublicKeyJwk json.RawMessage `json:"publicKeyJwk"`
		KeyJwk       json.RawMessage `json:"keyJwk"` // the rsa_signature_* name
		Tests        []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Flags   []string `json:"flags"`
			Key     string   `json:"key"`
			Msg     string   `json:"msg"`
			Sig     string   `json:"sig"`
			Tag     string   `json:"tag"`
			Result  string   `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

var wycheproofPrimitives = []struct {
	file, groupType string
	alg             Alg
}{
	{"ecdsa_secp256r1_sha256_p1363_test.json", "EcdsaP1363Verify", ES256},
	{"ecdsa_secp384r1_sha384_p1363_test.json", "EcdsaP1363Verify", ES384},
	{"ecdsa_secp521r1_sha512_p1363_test.json", "EcdsaP1363Verify", ES512},
	{"ed25519_test.json", "EddsaVerify", EdDSA},
	{"rsa_signature_2048_sha256_test.json", "RsassaPkcs1Verify", RS256},
	{"rsa_signature_3072_sha256_test.json", "RsassaPkcs1Verify", RS256},
	{"rsa_signature_2048_sha384_test.json", "RsassaPkcs1Verify", RS384},
	{"rsa_signature_3072_sha384_test.json", "RsassaPkcs1Verify", RS384},
	{"rsa_signature_2048_sha512_test.json", "RsassaPkcs1Verify", RS512},
	{"rsa_signature_3072_sha512_test.json", "RsassaPkcs1Verify", RS512},
	{"rsa_pss_2048_sha256_mgf1_32_test.json", "RsassaPssVerify", PS256},
	{"rsa_pss_3072_sha256_mgf1_32_test.json", "RsassaPssVerify", PS256},
	{"rsa_pss_2048_sha384_mgf1_48_test.json", "RsassaPssVerify", PS384},
	{"rsa_pss_4096_sha512_mgf1_64_test.json", "RsassaPssVerify", PS512},
	{"hmac_sha256_test.json", "MacTest", HS256},
	{"hmac_sha384_test.json", "MacTest", HS384},
	{"hmac_sha512_test.json", "MacTest", HS512},
}

// wpSHA is the Wycheproof name of alg's hash.
func wpSHA(alg Alg) string {
	return fmt.Sprintf("SHA-%d", alg.hash().Size()*8)
}

// keyPolicyRefusal says why jose's documented key policy refuses pub, or
// returns "" if the policy allows it. It is written from the policy (package
// doc, MinRSABits/MaxRSABits), not from jose's checks, so that the two are
// compared.
func keyPolicyRefusal(pub any) string {
	if p, ok := pub.(*rsa.PublicKey); ok {
		if b := p.N.BitLen(); b < MinRSABits || b > MaxRSABits {
			return fmt.Sprintf("RSA modulus of %d bits is outside jose's %d..%d-bit policy", b, MinRSABits, MaxRSABits)
		}
		if p.E < 3 || p.E%2 == 0 {
			return fmt.Sprintf("RSA public exponent %d is refused by jose's policy (odd, at least 3)", p.E)
		}
	}
	return ""
}

func TestVectorsWycheproofPrimitives(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: every Wycheproof primitive vector; run without -short")
	}
	for _, tc := range wycheproofPrimitives {
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			t.Parallel()
			var f wpPrimitiveFile
			readVectorJSON(t, "wycheproof/"+tc.file, &f)
			c := newTally(tc.file, f.NumberOfTests)
			if tc.alg.family() == famHMAC {
				runWycheproofMAC(t, c, tc.alg, tc.groupType, &f)
			} else {
				runWycheproofSignature(t, c, tc.alg, tc.groupType, &f)
			}
			c.report(t)
		})
	}
}

func runWycheproofSignature(t *testing.T, c *tally, alg Alg, groupType string, f *wpPrimitiveFile) {
	for gi := range f.TestGroups {
		g := &f.TestGroups[gi]
		gid := fmt.Sprintf("group %d (tcId %d..%d)", gi, g.Tests[0].TcID, g.Tests[len(g.Tests)-1].TcID)
		if g.Type != groupType {
			t.Errorf("%s %s: group type %q, want %q", c.file, gid, g.Type, groupType)
		}
		if alg != EdDSA && g.SHA != wpSHA(alg) {
			t.Errorf("%s %s: sha %q does not match %v", c.file, gid, g.SHA, alg)
		}
		if alg.family() == famPSS && (g.MGFSHA != g.SHA || g.SLen != alg.hash().Size()) {
			// RFC 7518 §3.5: PS* uses MGF1 with the same hash and a salt as
			// long as the hash; jose verifies exactly that and nothing else.
			c.skip(fmt.Sprintf("PSS parameters (mgf %s, sLen %d) are not those of %v", g.MGFSHA, g.SLen, alg), len(g.Tests))
			continue
		}
		der := vecHex(t, c.file+" "+gid, g.PublicKeyDer)
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			t.Fatalf("%s %s: the standard library cannot parse publicKeyDer: %v", c.file, gid, err)
		}
		jwkRaw := g.PublicKeyJwk
		if len(jwkRaw) == 0 {
			jwkRaw = g.KeyJwk
		}
		key, kerr := NewKey(alg, "", pub)
		if why := keyPolicyRefusal(pub); why != "" {
			// jose must refuse the key at import; nothing in the group can
			// then be verified, so the group is skipped with the reason.
			if kerr == nil {
				t.Errorf("%s %s: NewKey accepted a key jose's policy refuses: %s", c.file, gid, why)
			}
			if len(jwkRaw) > 0 {
				if _, err := ParseJWK(jwkRaw); err == nil {
					t.Errorf("%s %s: ParseJWK accepted a key jose's policy refuses: %s", c.file, gid, why)
				}
			}
			c.skip("key refused at import by policy: "+why, len(g.Tests))
			t.Logf("%s %s: key refused at import (%s); %d cases skipped", c.file, gid, why, len(g.Tests))
			continue
		}
		if kerr != nil {
			t.Errorf("%s %s: NewKey refused the group's key: %v", c.file, gid, kerr)
			c.ran += len(g.Tests) // all of them fail
			continue
		}
		keys := []*Key{key}
		defer func() {
			// Every RSA key here must be verified on the prepared path, not
			// handed to crypto/rsa, or these vectors would not test it.
			for _, k := range keys {
				if f := alg.family(); (f == famRSA || f == famPSS) && (k.rsa == nil || k.rsa.n == nil) {
					t.Errorf("%s %s: %v key is not on RSAVerifier's prepared path", c.file, gid, alg)
				}
			}
		}()
		if len(jwkRaw) > 0 {
			// The same key through the JWK import path: it must give the
			// same key and the same verdicts.
			j, err := ParseJWK(jwkRaw)
			if err != nil {
				t.Errorf("%s %s: ParseJWK refused the group's JWK: %v", c.file, gid, err)
			} else if jk, err := j.Key(alg); err != nil {
				t.Errorf("%s %s: JWK.Key(%v): %v", c.file, gid, alg, err)
			} else if jk.Thumbprint() != key.Thumbprint() {
				t.Errorf("%s %s: JWK thumbprint %s differs from the DER key's %s", c.file, gid, jk.Thumbprint(), key.Thumbprint())
			} else {
				keys = append(keys, jk)
			}
		}
		for _, tv := range g.Tests {
			id := fmt.Sprintf("tcId %d (%s)", tv.TcID, tv.Comment)
			msg, sig := vecHex(t, id, tv.Msg), vecHex(t, id, tv.Sig)
			verdict := verifyInput(keys[0], msg, sig)
			for _, k := range keys[1:] {
				if err := verifyInput(k, msg, sig); (err == nil) != (verdict == nil) {
					t.Errorf("%s %s: DER key and JWK key disagree: %v vs %v", c.file, id, verdict, err)
				}
			}
			if verdict != nil && ReasonOf(verdict) != ReasonBadSignature {
				t.Errorf("%s %s: rejected with reason %v, want bad_signature: %v", c.file, id, ReasonOf(verdict), verdict)
			}
			c.judge(t, id, tv.Result, verdict)
		}
	}
}

func runWycheproofMAC(t *testing.T, c *tally, alg Alg, groupType string, f *wpPrimitiveFile) {
	hashBits := alg.hash().Size() * 8
	truncRejected := 0
	for gi := range f.TestGroups {
		g := &f.TestGroups[gi]
		gid := fmt.Sprintf("group %d (keySize %d, tagSize %d)", gi, g.KeySize, g.TagSize)
		if g.Type != groupType {
			t.Errorf("%s %s: group type %q, want %q", c.file, gid, g.Type, groupType)
		}
		for _, tv := range g.Tests {
			id := fmt.Sprintf("tcId %d (%s)", tv.TcID, tv.Comment)
			secret, msg, tag := vecHex(t, id, tv.Key), vecHex(t, id, tv.Msg), vecHex(t, id, tv.Tag)
			key, kerr := NewHMACKey(alg, "", secret)
			j, jerr := ParseJWK(fmt.Appendf(nil, `{"kty":"oct","k":%q}`, b64.EncodeToString(secret)))
			if jerr != nil {
				t.Fatalf("%s %s: ParseJWK of an oct key: %v", c.file, id, jerr)
			}
			jkey, jkerr := j.Key(alg)
			if len(secret) < alg.hash().Size() {
				// RFC 7518 §3.2: an HS* key must be at least as long as the
				// hash output. jose must refuse it, by both import paths.
				if kerr == nil || ReasonOf(kerr) != ReasonInvalidKey {
					t.Errorf("%s %s: NewHMACKey with a %d-byte key for %v: got %v, want invalid_key", c.file, id, len(secret), alg, kerr)
				}
				if jkerr == nil {
					t.Errorf("%s %s: JWK.Key accepted a %d-byte key for %v", c.file, id, len(secret), alg)
				}
				c.skip(fmt.Sprintf("key shorter than the %d-bit hash: refused by NewHMACKey (asserted), RFC 7518 §3.2", hashBits), 1)
				continue
			}
			if kerr != nil || jkerr != nil {
				t.Errorf("%s %s: %d-byte key refused: NewHMACKey %v, JWK.Key %v", c.file, id, len(secret), kerr, jkerr)
				c.ran++
				continue
			}
			if key.Thumbprint() != jkey.Thumbprint() {
				t.Errorf("%s %s: NewHMACKey and JWK thumbprints differ", c.file, id)
			}
			verdict := verifyInput(key, msg, tag)
			if err := verifyInput(jkey, msg, tag); (err == nil) != (verdict == nil) {
				t.Errorf("%s %s: NewHMACKey and JWK keys disagree: %v vs %v", c.file, id, verdict, err)
			}
			if g.TagSize != hashBits {
				// A JWS HS* signature is the full HMAC output (RFC 7518
				// §3.2), so truncated-tag groups are not JWS conformance
				// cases. As a side check, jose must never accept one.
				if verdict == nil {
					t.Errorf("%s %s: accepted a %d-bit truncated tag", c.file, id, g.TagSize)
				} else {
					truncRejected++
				}
				c.skip(fmt.Sprintf("truncated %d-bit tag: JWS %v needs the full %d-bit HMAC (side check: jose rejects it)", g.TagSize, alg, hashBits), 1)
				continue
			}
			if verdict != nil && ReasonOf(verdict) != ReasonBadSignature {
				t.Errorf("%s %s: rejected with reason %v, want bad_signature: %v", c.file, id, ReasonOf(verdict), verdict)
			}
			c.judge(t, id, tv.Result, verdict)
		}
	}
	c.notes = append(c.notes, fmt.Sprintf("side check: %d truncated tags (with keys jose accepts) all rejected", truncRejected))
}

// ---------------------------------------------------------------------------
// Wycheproof JWS-level files.

type wpJOSEFile struct {
	NumberOfTests int `json:"numberOfTests"`
	TestGroups    []struct {
		Comment string          `json:"comment"`
		Private json.RawMessage `json:"private"`
		Public  json.RawMessage `json:"public"`
		Tests   []struct {
			TcID    int             `json:"tcId"`
			Comment string          `json:"comment"`
			Flags   []string        `json:"flags"`
			JWS     json.RawMessage `json:"jws"`
			JWE     json.RawMessage `json:"jwe"`
			Result  string          `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

type jwsQuirk struct {
	joseAccepts bool   // jose's own, pinned verdict
	reason      Reason // when jose rejects: the reason it must give
	why         string
	// variant, if set, checks a corrected form of the case that jose must
	// get right; it gets the group's key material and the case's JWS.
	variant func(material json.RawMessage, jws string) error
}

const (
	quirkDupOf357  = "byte-identical to tcId 357 (ValidMac, valid) yet expected invalid: upstream data bug, C2SP/wycheproof#236; jose accepts it like 357"
	quirkQuestion  = "expected valid although a '?' sits inside a base64url segment: strict base64url (RFC 7515 §2, RFC 7519 §7.2) rejects it, and so does jose"
	quirkPS256Key  = "RFC 7520 §4.2 token is PS384 but the key declares alg PS256: jose binds a key to its one declared alg and refuses the mismatch"
	quirkES521Key  = "RFC 7520 §4.3 key declares the non-standard alg \"ES521\" for an ES512 token: jose refuses a key whose declared alg it does not know"
	quirkDupKid    = "not in the README: the second key under the duplicated kid has a \"k\" that is not strict base64url (non-zero trailing bits), so jose refuses that JWK and ParseKeySet skips it; one usable key is left for the kid, no ambiguity remains, and the token (made with the first key) verifies. The same set with that k canonically encoded must be refused as ambiguous (asserted)"
	skipJWE        = "JWE case: jose implements JWS only"
	wpJWSSignature = "json_web_signature_test.json"
)

// wycheproofJOSEQuirks are the README's known quirks: cases whose expected
// result a strict verifier disagrees with. They are skipped from the
// conformance count, but jose's verdict on each is still asserted (and the
// rejections are for the stated reason), so the skip is not a blind spot.
var wycheproofJOSEQuirks = map[string]map[int]jwsQuirk{
	wpJWSSignature: {
		367: {joseAccepts: true, why: quirkDupOf357},
		370: {joseAccepts: true, why: quirkDupOf357},
		372: {joseAccepts: false, reason: ReasonMalformed, why: quirkQuestion},
		373: {joseAccepts: false, reason: ReasonMalformed, why: quirkQuestion},
		346: {joseAccepts: false, reason: ReasonUnsupportedAlg, why: quirkPS256Key},
		350: {joseAccepts: false, reason: ReasonUnsupportedAlg, why: quirkPS256Key},
		347: {joseAccepts: false, reason: ReasonInvalidKey, why: quirkES521Key},
		351: {joseAccepts: false, reason: ReasonInvalidKey, why: quirkES521Key},
	},
	"json_web_key_test.json": {
		4: {joseAccepts: true, why: quirkDupKid, variant: duplicateKidVariant},
	},
}

// duplicateKidVariant re-encodes every oct "k" of a JWKS canonically (the
// vector's second key has non-zero trailing bits, which only a lenient
// decoder reads) and requires jose to refuse the token: two usable keys now
// share the token's kid and alg, which ParseKeySet must make ambiguous.
func duplicateKidVariant(material json.RawMessage, jws string) error {
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(material, &doc); err != nil {
		return err
	}
	for _, k := range doc.Keys {
		s, _ := k["k"].(string)
		raw, err := base64.RawURLEncoding.DecodeString(s) // lenient on purpose
		if err != nil {
			return err
		}
		k["k"] = b64.EncodeToString(raw)
	}
	fixed, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	set, err := ParseKeySet(fixed)
	if err != nil {
		return err
	}
	if set.Len() != 2 {
		return fmt.Errorf("canonical variant: %d usable keys, want 2 (skipped: %v)", set.Len(), set.Skipped())
	}
	if _, err := verifyCompact(set, jws); ReasonOf(err) != ReasonUnknownKID {
		return fmt.Errorf("canonical variant: got %v, want an unknown_kid (ambiguous) rejection", err)
	}
	return nil
}

// wycheproofROCA are the cases whose key has the ROCA fingerprint
// (CVE-2017-15361): jose must refuse the key, and for that reason.
var wycheproofROCA = map[string]int{
	"json_web_crypto_test.json": 46,
	"json_web_key_test.json":    7,
}

// joseKeyMaterial imports a Wycheproof json_web_* group's key: a JWKS
// through ParseKeySet, a single JWK through ParseJWK and JWK.Key(0). It
// returns the resolver, the import error, and every import error's text
// (including the keys ParseKeySet skipped).
func joseKeyMaterial(raw json.RawMessage) (KeyResolver, error, string) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, err, err.Error()
	}
	if _, isSet := probe["keys"]; isSet {
		set, err := ParseKeySet(raw)
		if err != nil {
			return nil, err, err.Error()
		}
		var notes []string
		for _, e := range set.Skipped() {
			notes = append(notes, e.Error())
		}
		return set, nil, strings.Join(notes, "; ")
	}
	j, err := ParseJWK(raw)
	if err != nil {
		return nil, err, err.Error()
	}
	k, err := j.Key(0)
	if err != nil {
		return nil, err, err.Error()
	}
	return k, nil, ""
}

func TestVectorsWycheproofJOSE(t *testing.T) {
	for _, file := range []string{wpJWSSignature, "json_web_key_test.json", "json_web_crypto_test.json"} {
		t.Run(strings.TrimSuffix(file, ".json"), func(t *testing.T) {
			t.Parallel()
			var f wpJOSEFile
			readVectorJSON(t, "wycheproof/"+file, &f)
			c := newTally(file, f.NumberOfTests)
			quirks := wycheproofJOSEQuirks[file]
			rocaID, rocaSeen := wycheproofROCA[file], false
			for _, g := range f.TestGroups {
				// The group's verification key: "public" when present,
				// else "private" (oct keys only have the latter).
				material := g.Public
				if len(material) == 0 || string(material) == "null" {
					material = g.Private
				}
				res, importErr, importNotes := joseKeyMaterial(material)
				for _, tv := range g.Tests {
					id := fmt.Sprintf("tcId %d (%s/%s)", tv.TcID, g.Comment, tv.Comment)
					if len(tv.JWE) > 0 {
						c.skip(skipJWE, 1)
						continue
					}
					// A JSON-serialized JWS is given as a string in some
					// files and as an object in others; either way it is
					// handed to the compact parser as text, which must
					// refuse it.
					var jws string
					if err := json.Unmarshal(tv.JWS, &jws); err != nil {
						jws = string(tv.JWS)
					}
					var verdict error
					if importErr != nil {
						verdict = importErr
					} else {
						_, verdict = verifyCompact(res, jws)
					}
					if q, ok := quirks[tv.TcID]; ok {
						if (verdict == nil) != q.joseAccepts {
							t.Errorf("%s %s: known quirk (%s): jose accepted=%v, expected accepted=%v (%v)", file, id, q.why, verdict == nil, q.joseAccepts, verdict)
						}
						if verdict != nil && ReasonOf(verdict) != q.reason {
							t.Errorf("%s %s: known quirk (%s): rejected with reason %v, want %v (%v)", file, id, q.why, ReasonOf(verdict), q.reason, verdict)
						}
						if q.variant != nil {
							if err := q.variant(material, jws); err != nil {
								t.Errorf("%s %s: %v", file, id, err)
							}
						}
						c.skip("known quirk: "+q.why, 1)
						continue
					}
					if tv.TcID == rocaID {
						rocaSeen = true
						if !strings.Contains(importNotes, "ROCA") {
							t.Errorf("%s %s: ROCA key not refused at import for its fingerprint (import: %q, verdict: %v)", file, id, importNotes, verdict)
						}
					}
					c.judge(t, id, tv.Result, verdict)
				}
			}
			if rocaID != 0 && !rocaSeen {
				t.Errorf("%s: ROCA case tcId %d not found", file, rocaID)
			}
			c.report(t)
		})
	}
}

// ---------------------------------------------------------------------------
// RFC 7520 cookbook JWS examples and the cookbook's RFC 8037 Ed25519 JWS.

type cookbookJWS struct {
	Title        string `json:"title"`
	Reproducible bool   `json:"reproducible"`
	Input        struct {
		Payload string          `json:"payload"`
		Key     json.RawMessage `json:"key"` // a JWK, or an array of them (4.8)
		Alg     json.RawMessage `json:"alg"` // a name, or an array (4.8)
	} `json:"input"`
	Signing json.RawMessage `json:"signing"` // an object, or an array (4.8)
	Output  struct {
		Compact string `json:"compact"`
		JSON    struct {
			Payload    *string `json:"payload"` // absent: detached content
			Signatures []struct {
				Protected string `json:"protected"`
				Signature string `json:"signature"`
			} `json:"signatures"`
		} `json:"json"`
	} `json:"output"`
}

type cookbookSigning struct {
	ProtectedB64u string `json:"protected_b64u"`
	SigInput      string `json:"sig-input"`
	Sig           string `json:"sig"`
}

// oneOrMany decodes raw, a JSON value or an array of them, into elements.
func oneOrMany(t *testing.T, id string, raw json.RawMessage) []json.RawMessage {
	t.Helper()
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && raw[0] == '[' {
		var out []json.RawMessage
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return out
	}
	return []json.RawMessage{raw}
}

func TestVectorsCookbookJWS(t *testing.T) {
	files := append(testvectors.Glob(t, "jose-cookbook/jws/*.json"), "jose-cookbook/curve25519/jws.json")
	for _, name := range files {
		t.Run(strings.TrimPrefix(name, "jose-cookbook/"), func(t *testing.T) {
			var v cookbookJWS
			readVectorJSON(t, name, &v)
			c := newTally(name, 0)
			runCookbookJWS(t, c, &v)
			c.report(t)
		})
	}
}

func runCookbookJWS(t *testing.T, c *tally, v *cookbookJWS) {
	keys := oneOrMany(t, c.file, v.Input.Key)
	algs := oneOrMany(t, c.file, v.Input.Alg)
	signings := oneOrMany(t, c.file, v.Signing)
	if len(keys) != len(algs) || len(keys) != len(signings) {
		t.Fatalf("%s: %d keys, %d algs, %d signings", c.file, len(keys), len(algs), len(signings))
	}
	payloadB64 := b64.EncodeToString([]byte(v.Input.Payload))
	detached := v.Output.JSON.Payload == nil
	for i := range keys {
		var algName string
		var s cookbookSigning
		if err := json.Unmarshal(algs[i], &algName); err != nil {
			t.Fatalf("%s: alg %d: %v", c.file, i, err)
		}
		if err := json.Unmarshal(signings[i], &s); err != nil {
			t.Fatalf("%s: signing %d: %v", c.file, i, err)
		}
		id := fmt.Sprintf("signature %d (%s)", i, algName)
		alg, err := ParseAlg(algName)
		if err != nil {
			t.Errorf("%s %s: ParseAlg: %v", c.file, id, err)
			continue
		}
		jwk, err := ParseJWK(keys[i])
		if err != nil {
			t.Errorf("%s %s: ParseJWK: %v", c.file, id, err)
			continue
		}
		key, err := jwk.Key(alg)
		if err != nil {
			t.Errorf("%s %s: JWK.Key(%v): %v", c.file, id, alg, err)
			continue
		}
		sig := vecB64(t, c.file+" "+id, s.Sig)
		sigInput := []byte(s.SigInput)
		if s.ProtectedB64u != "" && s.SigInput != s.ProtectedB64u+"."+payloadB64 {
			t.Errorf("%s %s: sig-input is not protected_b64u.BASE64URL(payload)", c.file, id)
		}

		// 1. The compact serialization, through ParseJWS, ResolveKey and
		// Key.Verify.
		compact := ""
		switch {
		case detached:
			// RFC 7520 §4.5: detached content. The compact output has an
			// empty payload segment and the payload is carried out of band
			// (RFC 7515 App. F); jose has no detached-payload API, so this
			// form is not verified here (the signature itself is, in step 2).
			c.skip("detached content (RFC 7520 §4.5): jose has no detached-payload API", 1)
		case s.ProtectedB64u == "":
			// RFC 7520 §4.7 and the second signature of §4.8: no protected
			// header at all, alg and kid sit in the unprotected header. The
			// compact serialization cannot carry an unprotected header, so
			// there is no compact form to verify (step 2 still checks the
			// signature over the exact signing input).
			c.skip("no protected header (alg only in the unprotected header): no compact form exists", 1)
		case v.Output.Compact != "" && len(signings) == 1:
			compact = v.Output.Compact
			if want := s.ProtectedB64u + "." + payloadB64 + "." + s.Sig; compact != want {
				t.Errorf("%s %s: output.compact differs from protected.payload.sig", c.file, id)
			}
		default:
			// RFC 7520 §4.6 (kid unprotected) and §4.8 (general JSON):
			// the compact form of one signature is protected.payload.sig;
			// the unprotected kid is simply absent from it.
			compact = s.ProtectedB64u + "." + payloadB64 + "." + s.Sig
			if len(signings) > 1 {
				if js := v.Output.JSON.Signatures; i >= len(js) || js[i].Protected != s.ProtectedB64u || js[i].Signature != s.Sig ||
					v.Output.JSON.Payload == nil || *v.Output.JSON.Payload != payloadB64 {
					t.Errorf("%s %s: output.json signature %d differs from signing[%d]", c.file, id, i, i)
				}
			}
		}
		if compact != "" {
			tok, err := verifyCompact(key, compact)
			if err == nil && (tok.SigningInput() != s.SigInput || string(tok.Payload()) != v.Input.Payload) {
				err = fmt.Errorf("parsed signing input or payload differs from the vector")
			}
			c.check(t, id+" compact verify", err)
		}

		// 2. The signature over the exact signing input, through Key.Verify.
		c.check(t, id+" signature over sig-input", verifyInput(key, sigInput, sig))

		// 3. Signing. Deterministic algorithms must reproduce the vector's
		// bytes over its exact signing input (jose's Signer writes its own
		// header, so (*Signer).sign is given the vector's signing input).
		// Randomized ones must at least produce a signature the key accepts.
		signer, err := jwk.Signer(alg)
		if err != nil {
			c.check(t, id+" JWK.Signer", err)
			continue
		}
		if v.Reproducible && !deterministic(alg) {
			t.Errorf("%s %s: file says reproducible but %v is randomized", c.file, id, alg)
		}
		got, err := signer.sign(sigInput)
		switch {
		case err != nil:
		case deterministic(alg) && !bytes.Equal(got, sig):
			err = fmt.Errorf("re-signing gave %s, want %s", b64.EncodeToString(got), s.Sig)
		case !deterministic(alg):
			err = verifyInput(key, sigInput, got)
		}
		if deterministic(alg) {
			c.check(t, id+" re-sign identical", err)
		} else {
			c.check(t, id+" fresh signature verifies", err)
		}
		// When jose's own header (alg, then kid; no typ) is byte-identical
		// to the vector's, the whole compact token must come out the same.
		if deterministic(alg) && compact != "" {
			if ws := signer.WithType(""); string(ws.prefix) == s.ProtectedB64u+"." {
				out, err := ws.Sign([]byte(v.Input.Payload))
				if err == nil && out != compact {
					err = fmt.Errorf("Signer.Sign gave %s, want %s", out, compact)
				}
				c.check(t, id+" Signer.Sign identical token", err)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// RFC 7520 §3 cookbook JWKs.

func TestVectorsCookbookJWK(t *testing.T) {
	// What each file is: its kty, whether it is private, the algorithm it
	// serves (0: not a signing key), and the public file of the same key.
	want := map[string]struct {
		kty     string
		private bool
		alg     Alg
		public  string
	}{
		"3_1.ec_public_key.json":                 {"EC", false, ES512, ""},
		"3_2.ec_private_key.json":                {"EC", true, ES512, "3_1.ec_public_key.json"},
		"3_3.rsa_public_key.json":                {"RSA", false, RS256, ""},
		"3_4.rsa_private_key.json":               {"RSA", true, RS256, "3_3.rsa_public_key.json"},
		"3_5.symmetric_key_mac_computation.json": {"oct", true, HS256, ""},
		// "use":"enc", "alg":"A256GCM": it must parse, but jose must not
		// let it verify or sign.
		"3_6.symmetric_key_encryption.json": {"oct", true, 0, ""},
	}
	files := testvectors.Glob(t, "jose-cookbook/jwk/*.json")
	c := newTally("jose-cookbook/jwk", 0)
	parsed := map[string]*JWK{}
	for _, file := range files {
		name := strings.TrimPrefix(file, "jose-cookbook/jwk/")
		w, ok := want[name]
		if !ok {
			t.Errorf("jose-cookbook/jwk/%s: file not classified by this test", name)
			continue
		}
		j, err := ParseJWK(testvectors.Read(t, file))
		c.check(t, name+" ParseJWK", err)
		if err != nil {
			continue
		}
		parsed[name] = j
		if j.KeyType() != w.kty || j.IsPrivate() != w.private {
			t.Errorf("jose-cookbook/jwk/%s: kty %s private %v, want %s %v", name, j.KeyType(), j.IsPrivate(), w.kty, w.private)
		}
		if w.alg == 0 {
			_, kerr := j.Key(0)
			_, serr := j.Signer(0)
			if kerr == nil || serr == nil {
				err = fmt.Errorf("an encryption key was usable for JWS: Key %v, Signer %v", kerr, serr)
			}
			c.check(t, name+" refused for JWS", err)
			continue
		}
		key, err := j.Key(w.alg)
		c.check(t, name+" JWK.Key", err)
		if err != nil {
			continue
		}
		if key.Thumbprint() != j.Thumbprint() {
			t.Errorf("jose-cookbook/jwk/%s: Key and JWK thumbprints differ", name)
		}
		if !w.private {
			if _, err := j.Signer(w.alg); err == nil {
				t.Errorf("jose-cookbook/jwk/%s: a public JWK produced a Signer", name)
			}
			continue
		}
		signer, err := j.Signer(w.alg)
		c.check(t, name+" JWK.Signer", err)
		if err != nil {
			continue
		}
		tok, err := signer.Sign([]byte("RFC 7520 cookbook key"))
		if err == nil {
			_, err = verifyCompact(key, tok)
		}
		c.check(t, name+" sign then verify", err)
		if signer.Key().Thumbprint() != j.Thumbprint() {
			t.Errorf("jose-cookbook/jwk/%s: Signer key thumbprint differs from the JWK's", name)
		}
	}
	for name, w := range want {
		if w.public == "" || parsed[name] == nil || parsed[w.public] == nil {
			continue
		}
		if parsed[name].Thumbprint() != parsed[w.public].Thumbprint() {
			t.Errorf("jose-cookbook/jwk/%s: thumbprint differs from %s's", name, w.public)
		}
	}
	c.report(t)
}

// ---------------------------------------------------------------------------
// RFC 7515 Appendix A.

type rfc7515Example struct {
	ID                     string            `json:"id"`
	Alg                    json.RawMessage   `json:"alg"`
	Serialization          string            `json:"serialization"`
	JWK                    json.RawMessage   `json:"jwk"`
	JWS                    string            `json:"jws"`
	JWSJSON                json.RawMessage   `json:"jws_json"`
	KeysBySignatureIndex   []json.RawMessage `json:"keys_by_signature_index"`
	ProtectedHeaderJSON    string            `json:"protected_header_json"`
	Payload                string            `json:"payload"`
	SigningInput           string            `json:"signing_input"`
	SignatureB64u          string            `json:"signature_b64u"`
	DeterministicSignature bool              `json:"deterministic_signature"`
	Expected               string            `json:"expected"`
}

func TestVectorsRFC7515AppendixA(t *testing.T) {
	var f struct {
		Examples []rfc7515Example `json:"examples"`
	}
	path := "rfc/rfc7515_appendix_a.json"
	readVectorJSON(t, path, &f)
	c := newTally(path, 0)
	seen := map[string]bool{}
	for _, ex := range f.Examples {
		seen[ex.ID] = true
		algs := oneOrMany(t, ex.ID, ex.Alg)
		switch ex.Serialization {
		case "compact":
			var algName string
			json.Unmarshal(algs[0], &algName)
			if ex.Expected == "invalid" {
				// A.5, the unsecured JWS: "none" is never supported, and the
				// rejection must say so rather than call the token malformed.
				for _, parse := range []func(string) error{
					func(s string) error { _, err := ParseJWS(s, 0); return err },
					func(s string) error { _, err := Parse(s); return err },
				} {
					err := parse(ex.JWS)
					if ReasonOf(err) != ReasonUnsupportedAlg {
						err = fmt.Errorf("alg %q: got %v, want reason unsupported_alg", algName, err)
					} else {
						err = nil
					}
					c.check(t, ex.ID+" rejected", err)
				}
				continue
			}
			alg, err := ParseAlg(algName)
			if err != nil {
				t.Errorf("%s %s: %v", c.file, ex.ID, err)
				continue
			}
			j, err := ParseJWK(ex.JWK)
			if err != nil {
				c.check(t, ex.ID+" ParseJWK", err)
				continue
			}
			key, err := j.Key(alg)
			if err != nil {
				c.check(t, ex.ID+" JWK.Key", err)
				continue
			}
			tok, err := verifyCompact(key, ex.JWS)
			if err == nil && (tok.SigningInput() != ex.SigningInput || string(tok.Payload()) != ex.Payload ||
				string(tok.Header.JSON()) != ex.ProtectedHeaderJSON) {
				err = fmt.Errorf("parsed header, payload or signing input differs from the vector")
			}
			c.check(t, ex.ID+" verify", err)
			if strings.HasPrefix(ex.Payload, "{") {
				// A.1-A.3 carry JWT claims (with CR LF white space): the
				// JWT parser must read them too. The 2011 "exp" is not
				// checked here: Parse does not validate claims.
				tok, err := Parse(ex.JWS)
				if err == nil && (tok.Claims.Issuer != "joe" || tok.Claims.Expiry.Unix != 1300819380) {
					err = fmt.Errorf("claims decoded wrong: %+v", tok.Claims)
				}
				c.check(t, ex.ID+" Parse as JWT", err)
			}
			if ex.DeterministicSignature != deterministic(alg) {
				t.Errorf("%s %s: deterministic_signature %v for %v", c.file, ex.ID, ex.DeterministicSignature, alg)
			}
			if deterministic(alg) {
				signer, err := j.Signer(alg)
				if err == nil {
					var got []byte
					if got, err = signer.sign([]byte(ex.SigningInput)); err == nil && b64.EncodeToString(got) != ex.SignatureB64u {
						err = fmt.Errorf("re-signing gave %s, want %s", b64.EncodeToString(got), ex.SignatureB64u)
					}
				}
				c.check(t, ex.ID+" re-sign identical", err)
			}
		case "json_general", "json_flattened":
			// A.6 and A.7: jose reads compact JWS only, so each signature is
			// verified as the compact string protected.payload.signature
			// with its own key (the unprotected kid is left out).
			var doc struct {
				Payload    string `json:"payload"`
				Protected  string `json:"protected"`
				Signature  string `json:"signature"`
				Signatures []struct {
					Protected string `json:"protected"`
					Signature string `json:"signature"`
				} `json:"signatures"`
			}
			if err := json.Unmarshal(ex.JWSJSON, &doc); err != nil {
				t.Fatalf("%s %s: %v", c.file, ex.ID, err)
			}
			keys := ex.KeysBySignatureIndex
			if ex.Serialization == "json_flattened" {
				doc.Signatures = append(doc.Signatures, struct {
					Protected string `json:"protected"`
					Signature string `json:"signature"`
				}{doc.Protected, doc.Signature})
				keys = []json.RawMessage{ex.JWK}
			}
			if len(doc.Signatures) != len(keys) || len(doc.Signatures) != len(algs) {
				t.Fatalf("%s %s: %d signatures, %d keys, %d algs", c.file, ex.ID, len(doc.Signatures), len(keys), len(algs))
			}
			for i, s := range doc.Signatures {
				id := fmt.Sprintf("%s signature %d", ex.ID, i)
				var algName string
				json.Unmarshal(algs[i], &algName)
				alg, err := ParseAlg(algName)
				var key *Key
				if err == nil {
					var j *JWK
					if j, err = ParseJWK(keys[i]); err == nil {
						key, err = j.Key(alg)
					}
				}
				if err == nil {
					var tok *Token
					tok, err = verifyCompact(key, s.Protected+"."+doc.Payload+"."+s.Signature)
					if err == nil && string(tok.Payload()) != ex.Payload {
						err = fmt.Errorf("payload differs from the vector")
					}
				}
				c.check(t, id+" verify (compact reconstruction)", err)
			}
		default:
			t.Errorf("%s %s: unknown serialization %q", c.file, ex.ID, ex.Serialization)
		}
	}
	for _, id := range []string{"A.1", "A.2", "A.3", "A.4", "A.5", "A.6", "A.7"} {
		if !seen[id] {
			t.Errorf("%s: example %s missing", c.file, id)
		}
	}
	c.report(t)
}

// ---------------------------------------------------------------------------
// RFC 8037 Appendix A (Ed25519).

func TestVectorsRFC8037Ed25519(t *testing.T) {
	var f struct {
		Private    json.RawMessage `json:"A.1_private_jwk"`
		Public     json.RawMessage `json:"A.2_public_jwk"`
		Thumbprint struct {
			Canonical string `json:"canonical_json"`
			SHA256    string `json:"sha256_b64u"`
		} `json:"A.3_thumbprint"`
		JWS struct {
			Alg                 string `json:"alg"`
			ProtectedHeaderJSON string `json:"protected_header_json"`
			ProtectedB64u       string `json:"protected_b64u"`
			Payload             string `json:"payload"`
			SigningInput        string `json:"signing_input"`
			SignatureB64u       string `json:"signature_b64u"`
			JWS                 string `json:"jws"`
		} `json:"A.4_jws"`
	}
	path := "rfc/rfc8037_ed25519.json"
	readVectorJSON(t, path, &f)
	c := newTally(path, 0)

	// The vector's own canonical JSON must hash to its thumbprint, or the
	// comparison below would prove nothing.
	sum := sha256.Sum256([]byte(f.Thumbprint.Canonical))
	if b64.EncodeToString(sum[:]) != f.Thumbprint.SHA256 {
		t.Fatalf("%s: A.3 canonical_json does not hash to sha256_b64u", c.file)
	}

	priv, err := ParseJWK(f.Private)
	c.check(t, "A.1 ParseJWK (private)", err)
	pub, err2 := ParseJWK(f.Public)
	c.check(t, "A.2 ParseJWK (public)", err2)
	if err != nil || err2 != nil {
		c.report(t)
		return
	}
	if _, ok := pub.Public().(ed25519.PublicKey); !ok || pub.IsPrivate() || !priv.IsPrivate() {
		t.Errorf("%s: A.1/A.2 parsed to the wrong kinds of key", c.file)
	}
	for _, tp := range []struct{ id, got string }{{"A.1", priv.Thumbprint()}, {"A.2", pub.Thumbprint()}} {
		var err error
		if tp.got != f.Thumbprint.SHA256 {
			err = fmt.Errorf("thumbprint %s, want %s", tp.got, f.Thumbprint.SHA256)
		}
		c.check(t, tp.id+" thumbprint = A.3", err)
	}

	key, err := pub.Key(0)
	if err == nil && key.Alg() != EdDSA {
		err = fmt.Errorf("key bound to %v, want EdDSA", key.Alg())
	}
	c.check(t, "A.2 JWK.Key", err)
	if err != nil {
		c.report(t)
		return
	}
	// A.5: the A.4 JWS verifies with the A.2 public key.
	tok, err := verifyCompact(key, f.JWS.JWS)
	if err == nil && (tok.SigningInput() != f.JWS.SigningInput || string(tok.Payload()) != f.JWS.Payload ||
		string(tok.Header.JSON()) != f.JWS.ProtectedHeaderJSON) {
		err = fmt.Errorf("parsed header, payload or signing input differs from the vector")
	}
	c.check(t, "A.4/A.5 verify", err)

	// Ed25519 is deterministic: the A.1 key re-signs to the same bytes, and
	// since jose's header without typ is exactly {"alg":"EdDSA"}, the whole
	// token comes out identical.
	signer, err := priv.Signer(0)
	if err == nil {
		var got []byte
		if got, err = signer.sign([]byte(f.JWS.SigningInput)); err == nil && b64.EncodeToString(got) != f.JWS.SignatureB64u {
			err = fmt.Errorf("re-signing gave %s, want %s", b64.EncodeToString(got), f.JWS.SignatureB64u)
		}
	}
	c.check(t, "A.4 re-sign identical", err)
	if signer != nil {
		out, err := signer.WithType("").Sign([]byte(f.JWS.Payload))
		if err == nil && out != f.JWS.JWS {
			err = fmt.Errorf("Signer.Sign gave %s, want %s", out, f.JWS.JWS)
		}
		c.check(t, "A.4 Signer.Sign identical token", err)
	}
	c.report(t)
}

// ---------------------------------------------------------------------------
// RFC 7517 Appendix A/B key sets and the RFC 7638 §3.1 thumbprint.

func TestVectorsRFC7517RFC7638(t *testing.T) {
	var f struct {
		PublicKeys    json.RawMessage `json:"rfc7517_A.1_public_keys"`
		PrivateKeys   json.RawMessage `json:"rfc7517_A.2_private_keys"`
		SymmetricKeys json.RawMessage `json:"rfc7517_A.3_symmetric_keys"`
		X5CKey        json.RawMessage `json:"rfc7517_B_public_key_with_x5c"`
		RFC7638       struct {
			JWK        json.RawMessage `json:"jwk"`
			Thumbprint string          `json:"thumbprint_sha256_b64u"`
		} `json:"rfc7638_3.1"`
	}
	path := "rfc/rfc7517_rfc7638_jwk.json"
	readVectorJSON(t, path, &f)
	c := newTally(path, 0)

	// RFC 7638 §3.1.
	j, err := ParseJWK(f.RFC7638.JWK)
	if err == nil && j.Thumbprint() != f.RFC7638.Thumbprint {
		err = fmt.Errorf("thumbprint %s, want %s", j.Thumbprint(), f.RFC7638.Thumbprint)
	}
	c.check(t, "RFC 7638 §3.1 thumbprint", err)
	if err == nil {
		k, err := j.Key(0)
		if err == nil && k.Thumbprint() != f.RFC7638.Thumbprint {
			err = fmt.Errorf("Key thumbprint %s, want %s", k.Thumbprint(), f.RFC7638.Thumbprint)
		}
		c.check(t, "RFC 7638 §3.1 Key thumbprint", err)
	}

	// Each set must parse. Its usable signing keys are kept; the rest
	// (the "use":"enc" EC key, the A128KW key) are skipped by ParseKeySet
	// with a reason, as its contract says.
	sets := []struct {
		id      string
		raw     json.RawMessage
		kid     string
		alg     Alg
		skipped int
	}{
		{"A.1 public keys", f.PublicKeys, "2011-04-29", RS256, 1},
		{"A.2 private keys", f.PrivateKeys, "2011-04-29", RS256, 1},
		{"A.3 symmetric keys", f.SymmetricKeys, "HMACkeyusedinJWSspecAppendixA.1example", HS256, 1},
	}
	for _, s := range sets {
		set, err := ParseKeySet(s.raw)
		if err == nil && (set.Len() != 1 || len(set.Skipped()) != s.skipped) {
			err = fmt.Errorf("%d keys and %d skipped (%v), want 1 and %d", set.Len(), len(set.Skipped()), set.Skipped(), s.skipped)
		}
		if err == nil {
			var k *Key
			if k, err = set.ResolveKey(s.kid, s.alg); err == nil && s.alg == RS256 && k.Thumbprint() != f.RFC7638.Thumbprint {
				// The RFC 7638 example key is the RFC 7517 A.1 RSA key.
				err = fmt.Errorf("RSA key thumbprint %s, want %s", k.Thumbprint(), f.RFC7638.Thumbprint)
			}
		}
		c.check(t, s.id+" ParseKeySet", err)
		// Every member is a well-formed JWK, even those the set skips.
		var doc struct {
			Keys []json.RawMessage `json:"keys"`
		}
		json.Unmarshal(s.raw, &doc)
		for i, raw := range doc.Keys {
			_, err := ParseJWK(raw)
			c.check(t, fmt.Sprintf("%s key %d ParseJWK", s.id, i), err)
		}
	}
	// A.2's RSA private key signs.
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	json.Unmarshal(f.PrivateKeys, &doc)
	if len(doc.Keys) == 2 {
		j, err := ParseJWK(doc.Keys[1])
		if err == nil {
			var s *Signer
			if s, err = j.Signer(0); err == nil && s.Key().Thumbprint() != f.RFC7638.Thumbprint {
				err = fmt.Errorf("signer key thumbprint %s", s.Key().Thumbprint())
			}
		}
		c.check(t, "A.2 RSA private key JWK.Signer", err)
	} else {
		t.Errorf("%s: A.2 has %d keys, want 2", c.file, len(doc.Keys))
	}
	// The A.3 HMAC key is the RFC 7515 A.1 key: the set must verify that
	// kid-less token by its alg alone (the set holds one HS256 key).
	if set, err := ParseKeySet(f.SymmetricKeys); err == nil {
		var a struct {
			Examples []rfc7515Example `json:"examples"`
		}
		readVectorJSON(t, "rfc/rfc7515_appendix_a.json", &a)
		if len(a.Examples) > 0 && a.Examples[0].ID == "A.1" {
			_, err := verifyCompact(set, a.Examples[0].JWS)
			c.check(t, "A.3 set verifies RFC 7515 A.1", err)
		}
	}
	// Appendix B: x5c is read past (never trusted), the key itself imports.
	j, err = ParseJWK(f.X5CKey)
	if err == nil {
		var k *Key
		if k, err = j.Key(0); err == nil && (k.Alg() != RS256 || k.KeyID() != "1b94c") {
			err = fmt.Errorf("key bound to %v kid %q", k.Alg(), k.KeyID())
		}
	}
	c.check(t, "B key with x5c", err)
	c.report(t)
}
