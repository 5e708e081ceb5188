package jose

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
)

// JWK is one parsed JSON Web Key (RFC 7517) of type RSA, EC (P-256, P-384,
// P-521), OKP (Ed25519 only, RFC 8037) or oct. It is not yet bound to an
// algorithm: [JWK.Key] and [JWK.Signer] do that.
type JWK struct {
	_         [0]func()
	KeyID     string
	Use       string   // "sig", "enc" or empty
	KeyOps    []string // "key_ops"
	Algorithm string   // "alg" as written, possibly empty or unsupported

	kty     string
	public  crypto.PublicKey // nil for oct
	private crypto.Signer    // nil unless the JWK has private members
	secret  []byte           // oct only
	thumb   string
}

// jwkJSON is the wire form. Members keygate does not use (x5c, x5t, x5u) are
// read past: a key is never found or trusted through them.
type jwkJSON struct {
	Kty    string          `json:"kty"`
	Use    string          `json:"use"`
	KeyOps []string        `json:"key_ops"`
	Alg    string          `json:"alg"`
	Kid    string          `json:"kid"`
	Crv    string          `json:"crv"`
	X      b64Bytes        `json:"x"`
	Y      b64Bytes        `json:"y"`
	D      b64Bytes        `json:"d"`
	N      b64Bytes        `json:"n"`
	E      b64Bytes        `json:"e"`
	P      b64Bytes        `json:"p"`
	Q      b64Bytes        `json:"q"`
	DP     b64Bytes        `json:"dp"`
	DQ     b64Bytes        `json:"dq"`
	QI     b64Bytes        `json:"qi"`
	K      b64Bytes        `json:"k"`
	Oth    json.RawMessage `json:"oth"`
}

// b64Bytes is a strictly base64url-decoded JSON string; present records
// whether the member appeared, so that "k":"" differs from no k.
type b64Bytes struct {
	b       []byte
	present bool
}

func (v *b64Bytes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return keyError("key member is not a string")
	}
	b, err := b64.DecodeString(s)
	if err != nil {
		return keyError("key member is not strict base64url")
	}
	v.b, v.present = b, true
	return nil
}

// strictObject checks that data is one JSON object with no duplicate member
// names at its top level, which encoding/json would silently accept.
func strictObject(data []byte) error {
	s := scanner{b: data}
	if !s.expect('{') {
		return errJSONNotObject
	}
	if s.expect('}') {
		return s.end()
	}
	var names [][]byte
	arena := make([]byte, 0, len(data))
	for {
		name, err := s.name(&arena)
		if err != nil {
			return err
		}
		for _, n := range names {
			if bytes.Equal(n, name) {
				return errJSONDuplicate
			}
		}
		if len(names) == maxMembers {
			return errJSONMembers
		}
		names = append(names, name)
		if err := s.skip(1); err != nil {
			return err
		}
		if s.expect('}') {
			return s.end()
		}
		if !s.expect(',') {
			return errJSONSyntax
		}
	}
}

// ParseJWK parses one JWK, checking its key material: RSA moduli of 2048 to
// 8192 bits with a sane exponent, EC points on their curve with coordinates
// of full width, Ed25519 keys of 32 bytes. Private members, when present,
// must match the public ones.
func ParseJWK(data []byte) (*JWK, error) {
	if err := strictObject(data); err != nil {
		return nil, err
	}
	var w jwkJSON
	if err := json.Unmarshal(data, &w); err != nil {
		if e, ok := err.(*Error); ok {
			return nil, e
		}
		return nil, &Error{Reason: ReasonInvalidKey, Detail: "JWK is not valid JSON", Err: err}
	}
	return w.build()
}

func (w *jwkJSON) build() (*JWK, error) {
	j := &JWK{KeyID: w.Kid, Use: w.Use, KeyOps: w.KeyOps, Algorithm: w.Alg, kty: w.Kty}
	var err error
	switch w.Kty {
	case "RSA":
		err = w.rsa(j)
	case "EC":
		err = w.ec(j)
	case "OKP":
		err = w.okp(j)
	case "oct":
		if !w.K.present || len(w.K.b) == 0 {
			return nil, keyError("oct key has no k")
		}
		j.secret = w.K.b
	case "":
		return nil, keyError("JWK has no kty")
	default:
		return nil, unsupportedKey("unsupported kty " + quote(w.Kty))
	}
	if err != nil {
		return nil, err
	}
	if j.thumb, err = thumbprint(j.public, j.secret); err != nil {
		return nil, err
	}
	return j, nil
}

func (w *jwkJSON) rsa(j *JWK) error {
	if !w.N.present || !w.E.present {
		return keyError("RSA key needs n and e")
	}
	if len(w.Oth) > 0 {
		return keyError("multi-prime RSA keys are not supported")
	}
	if len(w.E.b) > 4 {
		return errRSAExp
	}
	e := 0
	for _, c := range w.E.b {
		e = e<<8 | int(c)
	}
	pub := &rsa.PublicKey{N: bigFromBytes(w.N.b), E: e}
	if err := checkRSA(pub); err != nil {
		return err
	}
	j.public = pub
	if !w.D.present {
		return nil
	}
	if !w.P.present || !w.Q.present {
		return keyError("RSA private key needs p and q")
	}
	priv := &rsa.PrivateKey{PublicKey: *pub, D: bigFromBytes(w.D.b),
		Primes: []*big.Int{bigFromBytes(w.P.b), bigFromBytes(w.Q.b)}}
	if err := priv.Validate(); err != nil {
		return &Error{Reason: ReasonInvalidKey, Detail: "RSA private key is inconsistent", Err: err}
	}
	priv.Precompute()
	j.private = priv
	return nil
}

func curveByName(crv string) (elliptic.Curve, Alg) {
	switch crv {
	case "P-256":
		return elliptic.P256(), ES256
	case "P-384":
		return elliptic.P384(), ES384
	case "P-521":
		return elliptic.P521(), ES512
	}
	return nil, 0
}

func (w *jwkJSON) ec(j *JWK) error {
	curve, _ := curveByName(w.Crv)
	switch {
	case curve == nil && w.Crv == "":
		return keyError("EC JWK has no crv")
	case curve == nil:
		return unsupportedKey("unsupported EC curve " + quote(w.Crv))
	}
	size := (curve.Params().BitSize + 7) / 8
	if len(w.X.b) != size || len(w.Y.b) != size {
		return keyError("EC coordinates must be full width for the curve")
	}
	point := make([]byte, 0, 1+2*size)
	point = append(append(append(point, 4), w.X.b...), w.Y.b...)
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return errECCurve
	}
	j.public = pub
	if !w.D.present {
		return nil
	}
	if len(w.D.b) != size {
		return keyError("EC private scalar must be full width for the curve")
	}
	priv, err := ecdsa.ParseRawPrivateKey(curve, w.D.b)
	if err != nil {
		return &Error{Reason: ReasonInvalidKey, Detail: "EC private key is invalid", Err: err}
	}
	if !priv.PublicKey.Equal(pub) {
		return keyError("EC private key does not match x and y")
	}
	j.private = priv
	return nil
}

func (w *jwkJSON) okp(j *JWK) error {
	switch w.Crv {
	case "Ed25519":
	case "":
		return keyError("OKP JWK has no crv")
	default:
		return unsupportedKey("unsupported OKP curve " + quote(w.Crv) + " (only Ed25519 signs)")
	}
	if len(w.X.b) != ed25519.PublicKeySize {
		return errEdSize
	}
	pub := ed25519.PublicKey(w.X.b)
	j.public = pub
	if !w.D.present {
		return nil
	}
	if len(w.D.b) != ed25519.SeedSize {
		return keyError("Ed25519 private key must be a 32-byte seed")
	}
	priv := ed25519.NewKeyFromSeed(w.D.b)
	if !pub.Equal(priv.Public()) {
		return keyError("Ed25519 private key does not match x")
	}
	j.private = priv
	return nil
}

// Public returns the public key, or nil for an oct key.
func (j *JWK) Public() crypto.PublicKey { return j.public }

// IsPrivate reports whether the JWK carries private or secret material.
func (j *JWK) IsPrivate() bool { return j.private != nil || j.secret != nil }

// KeyType returns "RSA", "EC", "OKP" or "oct".
func (j *JWK) KeyType() string { return j.kty }

// Thumbprint returns the RFC 7638 SHA-256 thumbprint, base64url-encoded.
func (j *JWK) Thumbprint() string { return j.thumb }

// usableFor reports whether use and key_ops allow op ("verify" or "sign").
func (j *JWK) usableFor(op string) error {
	if j.Use != "" && j.Use != "sig" {
		return keyError("key use is " + quote(j.Use) + ", not sig")
	}
	if j.KeyOps != nil && !slices.Contains(j.KeyOps, op) {
		return keyError("key_ops does not allow " + op)
	}
	return nil
}

// Algs returns the algorithms this key may be bound to. A declared "alg"
// is the only one allowed (and must be supported); otherwise EC and OKP keys
// follow from their curve, and RSA and oct keys take every algorithm of
// their family in allowed, or RS256 and HS256 when allowed is empty.
func (j *JWK) Algs(allowed []Alg) ([]Alg, error) {
	algs, _, err := j.algsFor(allowed, false)
	return algs, err
}

// impliedAlg is the one algorithm the key's type and curve imply: RS256
// for RSA, ES256/384/512 for P-256/384/521, EdDSA for Ed25519, HS256 for
// oct.
func (j *JWK) impliedAlg() Alg {
	switch j.kty {
	case "EC":
		_, a := curveByName(j.public.(*ecdsa.PublicKey).Curve.Params().Name)
		return a
	case "OKP":
		return EdDSA
	case "RSA":
		return RS256
	case "oct":
		return HS256
	}
	return 0
}

// algsFor is Algs, and with one the binding ParsePublicKeySet makes:
// exactly one algorithm, which must be in allowed (when allowed is not
// empty). On failure it also says why, as a SkipReason.
func (j *JWK) algsFor(allowed []Alg, one bool) ([]Alg, SkipReason, error) {
	isAllowed := func(a Alg) bool { return len(allowed) == 0 || slices.Contains(allowed, a) }
	if j.Algorithm != "" {
		a := lookupAlg(j.Algorithm)
		if a == 0 {
			return nil, SkipUnsupportedAlg, keyError("key alg " + quote(j.Algorithm) + " is not a supported JWS algorithm")
		}
		if err := checkFits(j, a); err != nil {
			return nil, fitReason(err), err
		}
		if one && !isAllowed(a) {
			return nil, SkipAlgNotAllowed, keyError(a.String() + " is not an allowed algorithm")
		}
		return []Alg{a}, "", nil
	}
	if one {
		implied := j.impliedAlg()
		if err := checkFits(j, implied); err != nil {
			return nil, fitReason(err), err
		}
		if isAllowed(implied) {
			return []Alg{implied}, "", nil
		}
		// The implied algorithm is not allowed: an allow-list naming exactly
		// one algorithm that fits the key says which the issuer uses.
		var fits []Alg
		for _, a := range allowed {
			if checkFits(j, a) == nil {
				fits = append(fits, a)
			}
		}
		switch len(fits) {
		case 0:
			return nil, SkipAlgNotAllowed, keyError("the key has no alg and " + implied.String() + ", which it implies, is not an allowed algorithm")
		case 1:
			return fits, "", nil
		}
		return nil, SkipAmbiguousAlg, keyError("the key has no alg, " + implied.String() + " is not allowed and several allowed algorithms fit it")
	}
	var cands []Alg
	switch j.kty {
	case "RSA":
		cands = []Alg{RS256, RS384, RS512, PS256, PS384, PS512}
	case "oct":
		cands = []Alg{HS256, HS384, HS512}
	}
	if len(cands) == 0 || len(allowed) == 0 {
		cands = []Alg{j.impliedAlg()}
	}
	var out []Alg
	var weak error
	for _, a := range cands {
		if !isAllowed(a) {
			continue
		}
		if err := checkFits(j, a); err != nil {
			if fitReason(err) == SkipWeakKey && weak == nil {
				weak = err
			}
			continue
		}
		out = append(out, a)
	}
	switch {
	case len(out) > 0:
		return out, "", nil
	case weak != nil:
		return nil, SkipWeakKey, weak
	}
	return nil, SkipAlgNotAllowed, keyError("no allowed algorithm fits the key")
}

// fitReason classifies checkFits's refusal of a key for an algorithm.
func fitReason(err error) SkipReason {
	switch {
	case isWeak(err):
		return SkipWeakKey
	case err == errKeyAlg || err == errECCurve: // sentinels, returned unwrapped
		return SkipAlgMismatch
	}
	return SkipInvalidKey
}

// isWeak reports whether err is a refusal of key material that is well
// formed but too weak to trust.
// errUnsupportedKey marks a key type or curve jose does not implement, as
// opposed to one whose material is broken.
var errUnsupportedKey = errors.New("unsupported key type or curve")

func unsupportedKey(detail string) *Error {
	return &Error{Reason: ReasonInvalidKey, Detail: detail, Err: errUnsupportedKey}
}

func isWeak(err error) bool {
	switch err { // sentinels of this package, returned unwrapped
	case errRSASize, errRSAExp, errROCA, errHMACShort:
		return true
	}
	return false
}

func checkFits(j *JWK, a Alg) error {
	if j.kty == "oct" {
		if a.family() != famHMAC {
			return errKeyAlg
		}
		if len(j.secret) < a.hash().Size() {
			return errHMACShort
		}
		return nil
	}
	return checkPublic(a, j.public)
}

// Key binds the JWK's public key (or secret) to alg for verification. With
// alg 0 the declared or implied algorithm is used, and must be unique. A key
// marked for encryption, or whose key_ops exclude verify, is refused.
func (j *JWK) Key(alg Alg) (*Key, error) {
	if err := j.usableFor("verify"); err != nil {
		return nil, err
	}
	a, err := j.pick(alg)
	if err != nil {
		return nil, err
	}
	if j.kty == "oct" {
		return NewHMACKey(a, j.KeyID, j.secret)
	}
	return newPublicKey(a, j.KeyID, j.public, j.thumb), nil
}

// Signer binds the JWK's private key (or secret) to alg for signing.
func (j *JWK) Signer(alg Alg) (*Signer, error) {
	if !j.IsPrivate() {
		return nil, keyError("JWK has no private key")
	}
	if err := j.usableFor("sign"); err != nil {
		return nil, err
	}
	a, err := j.pick(alg)
	if err != nil {
		return nil, err
	}
	if j.kty == "oct" {
		return NewSigner(a, j.KeyID, j.secret)
	}
	return NewSigner(a, j.KeyID, j.private)
}

func (j *JWK) pick(alg Alg) (Alg, error) {
	var allowed []Alg
	if alg != 0 {
		allowed = []Alg{alg}
	}
	algs, err := j.Algs(allowed)
	if err != nil {
		return 0, err
	}
	if alg != 0 && algs[0] != alg {
		return 0, errKeyAlg
	}
	if len(algs) != 1 {
		return 0, keyError("key fits several algorithms; name one")
	}
	return algs[0], nil
}

// publicJWK builds the public members of a JWK in RFC 7638 order (which is
// also lexicographic), so the same bytes serve for thumbprints.
func publicMembers(pub crypto.PublicKey, secret []byte) ([]jsonMember, error) {
	switch p := pub.(type) {
	case *rsa.PublicKey:
		e := big.NewInt(int64(p.E)).Bytes()
		return []jsonMember{{"e", b64.EncodeToString(e)}, {"kty", "RSA"}, {"n", b64.EncodeToString(p.N.Bytes())}}, nil
	case *ecdsa.PublicKey:
		b, err := p.Bytes()
		if err != nil {
			return nil, errECCurve
		}
		size := (len(b) - 1) / 2
		return []jsonMember{{"crv", p.Curve.Params().Name}, {"kty", "EC"},
			{"x", b64.EncodeToString(b[1 : 1+size])}, {"y", b64.EncodeToString(b[1+size:])}}, nil
	case ed25519.PublicKey:
		return []jsonMember{{"crv", "Ed25519"}, {"kty", "OKP"}, {"x", b64.EncodeToString(p)}}, nil
	case nil:
		if secret != nil {
			return []jsonMember{{"k", b64.EncodeToString(secret)}, {"kty", "oct"}}, nil
		}
	}
	return nil, keyError("unsupported key type")
}

type jsonMember struct{ name, value string }

func appendMembers(b []byte, ms []jsonMember) []byte {
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, m.name)
		b = append(b, ':')
		b = appendJSONString(b, m.value)
	}
	return b
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return string(appendJSONString(nil, s))
}

// thumbprint is RFC 7638: SHA-256 over the required members, sorted, with no
// white space.
func thumbprint(pub crypto.PublicKey, secret []byte) (string, error) {
	ms, err := publicMembers(pub, secret)
	if err != nil {
		return "", err
	}
	canon := append(appendMembers([]byte{'{'}, ms), '}')
	sum := sha256.Sum256(canon)
	return b64.EncodeToString(sum[:]), nil
}

// MarshalJSON encodes the public JWK with kid, alg and "use":"sig". An HMAC
// key refuses: its secret is never exported this way.
func (k *Key) MarshalJSON() ([]byte, error) {
	if k.mac != nil {
		return nil, keyError("an HMAC key is secret and is not exported")
	}
	ms, err := publicMembers(k.pub, nil)
	if err != nil {
		return nil, err
	}
	head := []jsonMember{{"alg", k.alg.String()}}
	if k.kid != "" {
		head = append(head, jsonMember{"kid", k.kid})
	}
	head = append(head, jsonMember{"use", "sig"})
	b := appendMembers([]byte{'{'}, append(head, ms...))
	return append(b, '}'), nil
}
