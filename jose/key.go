package jose

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"math/big"
	"sync"
	"unicode/utf8"
)

// RSA modulus bounds. Under 2048 bits is refused as weak (NIST SP 800-131A);
// over 8192 bits is refused because verifying with it costs an attacker
// nothing and the verifier a great deal.
const (
	MinRSABits = 2048
	MaxRSABits = 8192
)

// Key is a verification key bound to exactly one algorithm. It is immutable
// and safe for concurrent use. Keys holding an HMAC secret never expose it
// and cannot be compared with ==.
type Key struct {
	_   [0]func() // not comparable: compare keys by Thumbprint
	alg Alg
	kid string
	pub crypto.PublicKey // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey; nil for HMAC
	mac *macKey          // HMAC only
	rsa *RSAVerifier     // RS* and PS* only: the modulus prepared once
	// thumb is the RFC 7638 thumbprint (of the public key; of the secret for
	// HMAC, hashed so it can be logged safely).
	thumb string

	// ES256 only: a table of the key's multiples, built when the key is used.
	p256 *P256Verifier
}

// macKey pools keyed HMAC states: hmac.New costs several allocations, Reset
// on a pooled state costs none.
type macKey struct {
	secret []byte
	pool   sync.Pool // *macState
	h      func() hash.Hash
}

type macState struct {
	h   hash.Hash
	sum [sha512.Size]byte
}

func newMACKey(alg Alg, secret []byte) *macKey {
	m := &macKey{secret: append([]byte(nil), secret...)}
	switch alg.hash() {
	case crypto.SHA256:
		m.h = sha256.New
	case crypto.SHA384:
		m.h = sha512.New384
	default:
		m.h = sha512.New
	}
	m.pool.New = func() any { return &macState{h: hmac.New(m.h, m.secret)} }
	return m
}

// tag computes the HMAC of msg and passes it to use before the state goes
// back to the pool.
func (m *macKey) equal(msg, tag []byte) bool {
	st := m.pool.Get().(*macState)
	st.h.Reset()
	st.h.Write(msg)
	sum := st.h.Sum(st.sum[:0])
	ok := hmac.Equal(sum, tag)
	m.pool.Put(st)
	return ok
}

func (m *macKey) sign(msg []byte) []byte {
	h := hmac.New(m.h, m.secret)
	h.Write(msg)
	return h.Sum(nil)
}

// Alg returns the one algorithm the key verifies.
func (k *Key) Alg() Alg { return k.alg }

// KeyID returns the key's "kid", possibly empty.
func (k *Key) KeyID() string { return k.kid }

// Public returns the public key, or nil for an HMAC key.
func (k *Key) Public() crypto.PublicKey { return k.pub }

// Thumbprint returns the RFC 7638 SHA-256 thumbprint, base64url-encoded. For
// an HMAC key it is the thumbprint of the oct JWK, which reveals nothing
// usable about the secret and is safe to log.
func (k *Key) Thumbprint() string { return k.thumb }

// WithKeyID returns a copy of k carrying another kid.
func (k *Key) WithKeyID(kid string) *Key {
	c := &Key{alg: k.alg, kid: kid, pub: k.pub, mac: k.mac, rsa: k.rsa, thumb: k.thumb}
	c.p256 = k.p256
	return c
}

// NewKey binds a public key to alg after checking that they fit and that the
// key is not weak: RSA needs 2048 to 8192 bits and a sane exponent, EC keys
// must be on the curve alg names, Ed25519 keys must be 32 bytes.
func NewKey(alg Alg, kid string, pub crypto.PublicKey) (*Key, error) {
	if !utf8.ValidString(kid) {
		return nil, errKeyIDUTF8
	}
	if err := checkPublic(alg, pub); err != nil {
		return nil, err
	}
	switch p := pub.(type) {
	case ecdsa.PublicKey:
		pub = &p
	case rsa.PublicKey:
		pub = &p
	case *ed25519.PublicKey:
		pub = *p
	}
	thumb, err := thumbprint(pub, nil)
	if err != nil {
		return nil, err
	}
	return newPublicKey(alg, kid, pub, thumb), nil
}

// newPublicKey makes the Key of a checked public key, preparing an RSA key's
// modulus once here rather than on every verification, and an ES256 key's
// verifier (whose table it builds when the key is used).
func newPublicKey(alg Alg, kid string, pub crypto.PublicKey, thumb string) *Key {
	k := &Key{alg: alg, kid: kid, pub: pub, thumb: thumb}
	if p, ok := pub.(*rsa.PublicKey); ok {
		k.rsa = NewRSAVerifier(p)
	}
	if p, ok := pub.(*ecdsa.PublicKey); ok && alg == ES256 {
		k.p256 = NewP256Verifier(p)
	}
	return k
}

// NewHMACKey binds a shared secret to an HS* algorithm. Secrets shorter than
// the hash output are refused (RFC 7518 §3.2).
func NewHMACKey(alg Alg, kid string, secret []byte) (*Key, error) {
	if alg.family() != famHMAC {
		return nil, keyError(alg.String() + " is not an HMAC algorithm")
	}
	if !utf8.ValidString(kid) {
		return nil, errKeyIDUTF8
	}
	if len(secret) < alg.hash().Size() {
		return nil, errHMACShort
	}
	thumb, err := thumbprint(nil, secret)
	if err != nil {
		return nil, err
	}
	return &Key{alg: alg, kid: kid, mac: newMACKey(alg, secret), thumb: thumb}, nil
}

var (
	errKeyAlg    = keyError("key type does not fit the algorithm")
	errRSASize   = keyError("RSA modulus must be 2048 to 8192 bits")
	errRSAExp    = keyError("RSA public exponent must be odd, at least 3 and below 2^31")
	errECCurve   = keyError("EC key is not on the curve the algorithm names")
	errEdSize    = keyError("Ed25519 public key must be 32 bytes")
	errROCA      = keyError("RSA key has the ROCA fingerprint (CVE-2017-15361)")
	errHMACShort = keyError("HMAC secret is shorter than the hash output")
	errNoKeyAlg  = keyError("algorithm is not supported")
	// A kid is a JSON string: one that is not UTF-8 cannot be written into
	// a header as it is, and no parsed header could ever name it.
	errKeyIDUTF8 = keyError("kid is not valid UTF-8")
)

func checkPublic(alg Alg, pub crypto.PublicKey) error {
	switch p := pub.(type) {
	case *rsa.PublicKey:
		if f := alg.family(); f != famRSA && f != famPSS {
			return errKeyAlg
		}
		return checkRSA(p)
	case rsa.PublicKey:
		return checkPublic(alg, &p)
	case *ecdsa.PublicKey:
		if alg.family() != famEC {
			return errKeyAlg
		}
		if p.Curve != curveOf(alg) {
			return errECCurve
		}
		if _, err := p.ECDH(); err != nil { // rejects points off the curve
			return errECCurve
		}
		return nil
	case ecdsa.PublicKey:
		return checkPublic(alg, &p)
	case ed25519.PublicKey:
		if alg != EdDSA {
			return errKeyAlg
		}
		if len(p) != ed25519.PublicKeySize {
			return errEdSize
		}
		return nil
	case *ed25519.PublicKey:
		return checkPublic(alg, *p)
	case nil:
		return errNoKeyAlg
	}
	return keyError("unsupported public key type")
}

func checkRSA(p *rsa.PublicKey) error {
	if p.N == nil {
		return errRSASize
	}
	if b := p.N.BitLen(); b < MinRSABits || b > MaxRSABits {
		return errRSASize
	}
	if p.E < 3 || p.E&1 == 0 || p.E > 1<<31-1 { // crypto/rsa refuses larger ones
		return errRSAExp
	}
	if isROCA(p.N) {
		return errROCA
	}
	return nil
}

func curveOf(alg Alg) elliptic.Curve {
	switch alg {
	case ES256:
		return elliptic.P256()
	case ES384:
		return elliptic.P384()
	case ES512:
		return elliptic.P521()
	}
	return nil
}

// maxDERSig is the largest ASN.1 ECDSA signature (P-521).
const maxDERSig = 2*(66+3) + 3

// derPool holds buffers for converting signatures: crypto/ecdsa keeps its
// argument escaping, so a stack buffer would cost an allocation per verify.
var derPool = sync.Pool{New: func() any { return new([maxDERSig]byte) }}

// pssVerify is what PS* verification accepts: a salt exactly as long as the
// hash (RFC 7518 §3.5), the length jose signs with.
var pssVerify = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}

var (
	errAlgMismatch = reject(ReasonUnsupportedAlg, "token alg does not match the key's algorithm")
	errSignature   = reject(ReasonBadSignature, "signature does not verify")
)

// Verify checks t's signature with k. It refuses a token whose alg is not the
// key's before any cryptography runs. It does not check claims.
func (k *Key) Verify(t *Token) error {
	if t.Header.Alg != k.alg {
		return errAlgMismatch
	}
	if !k.verify(bytesOf(t.SigningInput()), t.sig) {
		return errSignature
	}
	return nil
}

func (k *Key) verify(msg, sig []byte) bool {
	switch k.alg.family() {
	case famHMAC:
		return k.mac.equal(msg, sig)
	case famRSA, famPSS:
		var d [sha512.Size]byte
		digest := sum(k.alg.hash(), msg, &d)
		if k.alg.family() == famRSA {
			return k.rsa.VerifyPKCS1v15(k.alg.hash(), digest, sig) == nil
		}
		return k.rsa.VerifyPSS(k.alg.hash(), digest, sig, pssVerify) == nil
	case famEC:
		var d [sha512.Size]byte
		digest := sum(k.alg.hash(), msg, &d)
		if k.p256 != nil {
			return k.p256.VerifyP1363(digest, sig)
		}
		der := derPool.Get().(*[maxDERSig]byte)
		asn, ok := p1363ToDER(der[:0], sig, (curveOf(k.alg).Params().BitSize+7)/8)
		ok = ok && ecdsa.VerifyASN1(k.pub.(*ecdsa.PublicKey), digest, asn)
		derPool.Put(der)
		return ok
	case famEd:
		return len(sig) == ed25519.SignatureSize && ed25519.Verify(k.pub.(ed25519.PublicKey), msg, sig)
	}
	return false
}

// sum hashes msg into d without allocating.
func sum(h crypto.Hash, msg []byte, d *[sha512.Size]byte) []byte {
	switch h {
	case crypto.SHA256:
		s := sha256.Sum256(msg)
		return append(d[:0], s[:]...)
	case crypto.SHA384:
		s := sha512.Sum384(msg)
		return append(d[:0], s[:]...)
	default:
		s := sha512.Sum512(msg)
		return append(d[:0], s[:]...)
	}
}

// p1363ToDER converts a JWS ECDSA signature (fixed-width r‖s, RFC 7518
// §3.4) into the ASN.1 form crypto/ecdsa verifies, appending to dst. A
// signature of the wrong width is refused rather than padded.
func p1363ToDER(dst, sig []byte, size int) ([]byte, bool) {
	if len(sig) != 2*size {
		return nil, false
	}
	r, s := trimInt(sig[:size]), trimInt(sig[size:])
	body := derIntLen(r) + derIntLen(s)
	dst = append(dst, 0x30)
	if body >= 0x80 {
		dst = append(dst, 0x81)
	}
	dst = append(dst, byte(body))
	return appendDERInt(appendDERInt(dst, r), s), true
}

// trimInt drops leading zero bytes, keeping at least one.
func trimInt(b []byte) []byte {
	for len(b) > 1 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// derIntLen is the encoded size of a DER INTEGER holding the unsigned b.
func derIntLen(b []byte) int { return 2 + len(b) + int(b[0]>>7) }

func appendDERInt(dst, b []byte) []byte {
	pad := int(b[0] >> 7) // a set high bit needs a zero byte to stay positive
	dst = append(dst, 0x02, byte(len(b)+pad))
	if pad == 1 {
		dst = append(dst, 0)
	}
	return append(dst, b...)
}

// bigFromBytes is used by JWK import.
func bigFromBytes(b []byte) *big.Int { return new(big.Int).SetBytes(b) }
