package jose

import (
	"bytes"
	"crypto"
	"crypto/fips140"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"math/big"
	"math/bits"

	"filippo.io/bigmod"
)

// RSAVerifier checks RSA signatures (RSASSA-PKCS1-v1_5 and RSASSA-PSS, RFC
// 8017 §8) with one public key, accepting and refusing exactly what
// rsa.VerifyPKCS1v15 and rsa.VerifyPSS do with the same arguments.
//
// crypto/rsa prepares the modulus for Montgomery arithmetic on every call,
// because an rsa.PublicKey carries no precomputation; that is about a quarter
// of a 2048-bit verification. An RSAVerifier prepares it once, when it is
// made. Only public values (key, message, signature) meet the variable-time
// arithmetic, as in crypto/rsa's own verification.
//
// Keys the fast path does not take (a modulus under 1024 or over 8192 bits, an
// even modulus, an exponent crypto/rsa refuses), hashes it does not know, and
// FIPS 140-3 mode go to crypto/rsa itself, so the verdict and its error are
// crypto/rsa's. An RSAVerifier is immutable and safe for concurrent use.
type RSAVerifier struct {
	pub  rsa.PublicKey   // a copy of the key, for what goes to crypto/rsa
	n    *bigmod.Modulus // nil: every call goes to crypto/rsa
	e    uint
	size int // the modulus in bytes
	bits int // the modulus in bits
}

// maxFastRSABytes bounds the stack buffers of the fast path: moduli up to
// MaxRSABits take it, larger ones go to crypto/rsa.
const maxFastRSABytes = MaxRSABits / 8

// NewRSAVerifier prepares pub for verification. It copies pub, so later
// changes to pub do not reach the verifier. A nil pub gives a verifier that
// refuses every signature.
func NewRSAVerifier(pub *rsa.PublicKey) *RSAVerifier {
	v := &RSAVerifier{}
	if pub == nil || pub.N == nil {
		return v // crypto/rsa answers "missing public modulus"
	}
	v.pub = rsa.PublicKey{N: new(big.Int).Set(pub.N), E: pub.E}
	n, e := v.pub.N, v.pub.E
	// The conditions crypto/rsa checks before it verifies (an odd modulus; an
	// odd exponent from 3 to 2^31-1) and its minimum key size, whose GODEBUG
	// exception stays crypto/rsa's to apply. FIPS 140-3 mode keeps the
	// validated module's own code path.
	if n.Sign() <= 0 || n.Bit(0) == 0 || n.BitLen() < 1024 || n.BitLen() > MaxRSABits ||
		e < 3 || e&1 == 0 || e > 1<<31-1 || uint64(e) > uint64(^uint(0)) || fips140.Enabled() {
		return v
	}
	m, err := bigmod.NewModulus(n.Bytes())
	if err != nil {
		return v
	}
	v.n, v.e, v.size, v.bits = m, uint(e), (n.BitLen()+7)/8, n.BitLen()
	return v
}

// Prepared reports whether the verifier checks signatures with its prepared
// modulus; false means every call goes to crypto/rsa (see RSAVerifier).
func (v *RSAVerifier) Prepared() bool { return v.n != nil }

// Public returns (a copy of) the key the verifier checks with.
func (v *RSAVerifier) Public() *rsa.PublicKey {
	p := v.pub
	if p.N != nil {
		p.N = new(big.Int).Set(p.N)
	}
	return &p
}

var errRSANotHashed = errors.New("crypto/rsa: input must be hashed message")

// VerifyPKCS1v15 is rsa.VerifyPKCS1v15 with the prepared key: hash 0 means
// hashed is signed directly, without a DigestInfo.
func (v *RSAVerifier) VerifyPKCS1v15(hash crypto.Hash, hashed, sig []byte) error {
	if v.n == nil {
		return rsa.VerifyPKCS1v15(&v.pub, hash, hashed, sig)
	}
	var prefix []byte
	if hash != 0 {
		p, ok := digestInfoPrefixes[hash]
		if !ok {
			return rsa.VerifyPKCS1v15(&v.pub, hash, hashed, sig)
		}
		if len(hashed) != hash.Size() {
			return errRSANotHashed
		}
		prefix = p
	}
	// RFC 8017 §8.2.2 step 1: the signature is exactly k octets.
	k := v.size
	if len(sig) != k {
		return rsa.ErrVerification
	}
	// EMSA-PKCS1-v1_5 needs at least 8 octets of 0xff padding.
	tLen := len(prefix) + len(hashed)
	if k < tLen+11 {
		return rsa.ErrVerification
	}
	var emBuf, wantBuf [maxFastRSABytes]byte
	em := emBuf[:k]
	if !v.publicOp(em, sig) {
		return rsa.ErrVerification
	}
	// The whole expected encoding EM = 0x00 0x01 PS 0x00 DigestInfo, built
	// and compared as one: the recovered padding is never parsed.
	want := wantBuf[:k]
	want[0], want[1] = 0x00, 0x01
	for i := 2; i < k-tLen-1; i++ {
		want[i] = 0xff
	}
	want[k-tLen-1] = 0x00
	copy(want[k-tLen:], prefix)
	copy(want[k-len(hashed):], hashed)
	if subtle.ConstantTimeCompare(em, want) != 1 {
		return rsa.ErrVerification
	}
	return nil
}

// VerifyPSS is rsa.VerifyPSS with the prepared key: opts.SaltLength is
// rsa.PSSSaltLengthAuto (also for nil opts: any salt length, found from the
// padding), rsa.PSSSaltLengthEqualsHash, or a length in bytes; MGF1 uses hash.
func (v *RSAVerifier) VerifyPSS(hash crypto.Hash, digest, sig []byte, opts *rsa.PSSOptions) error {
	if v.n == nil || !fastHash(hash) {
		// rsa.VerifyPSS keeps digest escaping; the copy keeps the callers'
		// stack buffers on the stack on the prepared path.
		return rsa.VerifyPSS(&v.pub, hash, bytes.Clone(digest), sig, opts)
	}
	hLen := hash.Size()
	sLen := rsa.PSSSaltLengthAuto
	if opts != nil {
		sLen = opts.SaltLength
	}
	switch {
	case sLen == rsa.PSSSaltLengthAuto:
		sLen = saltAutodetect
	case sLen == rsa.PSSSaltLengthEqualsHash:
		sLen = hLen
	case sLen < 0:
		return errors.New("crypto/rsa: salt length cannot be negative")
	case sLen > v.size:
		// Longer than any encoding; refused here so that hLen+sLen+2 below
		// cannot overflow.
		return rsa.ErrVerification
	}
	if len(sig) != v.size {
		return rsa.ErrVerification
	}
	var emBuf [maxFastRSABytes]byte
	em := emBuf[:v.size]
	if !v.publicOp(em, sig) {
		return rsa.ErrVerification
	}
	// emBits = modBits - 1: when modBits-1 is a multiple of 8 the encoding is
	// one octet shorter than the modulus, and that leading octet must be 0.
	emBits := v.bits - 1
	emLen := (emBits + 7) / 8
	for len(em) > emLen {
		if em[0] != 0 {
			return rsa.ErrVerification
		}
		em = em[1:]
	}
	if !emsaPSSVerify(hash, hLen, digest, em, emBits, sLen) {
		return rsa.ErrVerification
	}
	return nil
}

// saltAutodetect asks emsaPSSVerify to find the salt length from the
// padding, as crypto/rsa does for rsa.PSSSaltLengthAuto.
const saltAutodetect = -1

// emsaPSSVerify is EMSA-PSS-VERIFY (RFC 8017 §9.1.2) with MGF1 over the same
// hash, step by step as crypto/rsa runs it. It may overwrite em.
func emsaPSSVerify(hash crypto.Hash, hLen int, mHash, em []byte, emBits, sLen int) bool {
	emLen := len(em)
	// 2. mHash is the message's digest.
	if len(mHash) != hLen {
		return false
	}
	// 3. emLen >= hLen + sLen + 2 (with sLen -1 when it is to be found).
	if emLen < hLen+sLen+2 {
		return false
	}
	// 4. The rightmost octet is 0xbc.
	if em[emLen-1] != 0xbc {
		return false
	}
	// 5. maskedDB, then H.
	db := em[:emLen-hLen-1]
	h := em[emLen-hLen-1 : emLen-1]
	// 6. The leftmost 8*emLen - emBits bits of maskedDB are zero.
	bitMask := byte(0xff >> (8*emLen - emBits))
	if em[0]&^bitMask != 0 {
		return false
	}
	// 7, 8. DB = maskedDB xor MGF1(H, emLen - hLen - 1).
	mgf1XOR(db, hash, h)
	// 9. Clear those leftmost bits of DB.
	db[0] &= bitMask
	if sLen == saltAutodetect {
		ps := bytes.IndexByte(db, 0x01)
		if ps < 0 {
			return false
		}
		sLen = len(db) - ps - 1
	}
	// 10. DB = PS (zeros) || 0x01 || salt.
	psLen := emLen - hLen - sLen - 2
	for _, b := range db[:psLen] {
		if b != 0x00 {
			return false
		}
	}
	if db[psLen] != 0x01 {
		return false
	}
	// 11-13. H' = Hash(0x00 x 8 || mHash || salt).
	salt := db[len(db)-sLen:]
	var mBuf [8 + 64 + maxFastRSABytes]byte
	mPrime := append(append(mBuf[:8], mHash...), salt...)
	var sum [64]byte
	hPrime := hashInto(hash, &sum, mPrime)
	// 14. H = H'.
	return subtle.ConstantTimeCompare(h, hPrime) == 1
}

// mgf1XOR xors out with MGF1(seed) over hash (RFC 8017 §B.2.1).
func mgf1XOR(out []byte, hash crypto.Hash, seed []byte) {
	var in [64 + 4]byte
	n := copy(in[:], seed)
	var sum [64]byte
	for counter, done := uint32(0), 0; done < len(out); counter++ {
		in[n], in[n+1], in[n+2], in[n+3] = byte(counter>>24), byte(counter>>16), byte(counter>>8), byte(counter)
		d := hashInto(hash, &sum, in[:n+4])
		done += subtle.XORBytes(out[done:], out[done:], d)
	}
}

// publicOp writes sig^e mod n into em (len(em) == v.size), or reports false
// if sig is not below n, which RFC 8017 §5.2.2 refuses.
func (v *RSAVerifier) publicOp(em, sig []byte) bool {
	s, err := bigmod.NewNat().SetBytes(sig, v.n)
	if err != nil {
		return false
	}
	m := bigmod.NewNat().ExpShortVarTime(s, v.e, v.n)
	// m.Bytes(v.n) would allocate; the limbs are written into em instead.
	i := len(em)
	for _, limb := range m.Bits() {
		for j := 0; j < bits.UintSize/8; j++ {
			i--
			if i < 0 {
				if limb != 0 {
					return false // cannot happen: m < n
				}
				break
			}
			em[i] = byte(limb)
			limb >>= 8
		}
	}
	clear(em[:max(i, 0)])
	return true
}

// fastHash reports whether hashInto computes hash; the others go to
// crypto/rsa.
func fastHash(h crypto.Hash) bool {
	_, ok := digestInfoPrefixes[h]
	return ok
}

// hashInto returns hash(in) in sum. The concrete Sum functions keep in from
// escaping, so the callers' stack buffers stay on the stack.
func hashInto(h crypto.Hash, sum *[64]byte, in []byte) []byte {
	switch h {
	case crypto.SHA1:
		s := sha1.Sum(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA224:
		s := sha256.Sum224(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA256:
		s := sha256.Sum256(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA384:
		s := sha512.Sum384(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA512:
		s := sha512.Sum512(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA512_224:
		s := sha512.Sum512_224(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA512_256:
		s := sha512.Sum512_256(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA3_224:
		s := sha3.Sum224(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA3_256:
		s := sha3.Sum256(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA3_384:
		s := sha3.Sum384(in)
		return append(sum[:0], s[:]...)
	case crypto.SHA3_512:
		s := sha3.Sum512(in)
		return append(sum[:0], s[:]...)
	}
	panic("jose: hashInto called with an unsupported hash")
}

// digestInfoPrefixes are the DER DigestInfo headers (RFC 8017 §9.2 note 1)
// of the hashes the fast path knows, the same bytes crypto/rsa uses; the
// digest follows each.
var digestInfoPrefixes = map[crypto.Hash][]byte{
	crypto.SHA1:       {0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14},
	crypto.SHA224:     {0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x04, 0x05, 0x00, 0x04, 0x1c},
	crypto.SHA256:     {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20},
	crypto.SHA384:     {0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30},
	crypto.SHA512:     {0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40},
	crypto.SHA512_224: {0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x05, 0x05, 0x00, 0x04, 0x1c},
	crypto.SHA512_256: {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x06, 0x05, 0x00, 0x04, 0x20},
	crypto.SHA3_224:   {0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x07, 0x05, 0x00, 0x04, 0x1c},
	crypto.SHA3_256:   {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x08, 0x05, 0x00, 0x04, 0x20},
	crypto.SHA3_384:   {0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x09, 0x05, 0x00, 0x04, 0x30},
	crypto.SHA3_512:   {0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x0a, 0x05, 0x00, 0x04, 0x40},
}
