// Package kwp implements AES Key Wrap with Padding (RFC 5649, NIST SP 800-38F
// KWP), the wrapping that Vault's transit import ("BYOK") puts around the key
// it imports: RSA-OAEP of an ephemeral AES-256 key, followed by KWP of the
// target key under that ephemeral key.
//
// # Security properties
//
// Unwrap authenticates before it returns anything: the alternative initial
// value, the message length indicator and the zero padding are checked
// together, without an early exit on the first mismatch, and every failure is
// the one error [ErrUnwrap], so a caller cannot learn which check failed.
// Wrap is deterministic (KWP has no nonce): wrapping the same key twice under
// the same key-encryption key gives the same bytes, which is why Vault wraps
// under a fresh ephemeral key every time.
package kwp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
)

// MaxPlaintext is the longest key Wrap accepts and Unwrap returns: far above
// any key (an RSA-4096 PKCS #8 key is about 2.4 KB), so that unwrapping
// attacker-supplied bytes costs a bounded amount of work.
const MaxPlaintext = 64 << 10

// aiv is the first half of RFC 5649's alternative initial value; the second
// half is the plaintext's length in bytes (the message length indicator).
const aiv = 0xA65959A6

var aivBytes = [4]byte{0xA6, 0x59, 0x59, 0xA6}

var (
	// ErrUnwrap is every unwrapping failure: a ciphertext of the wrong length,
	// a wrong key-encryption key, or any altered byte.
	ErrUnwrap = errors.New("unwrap failed: wrong key or corrupted ciphertext")
	// ErrKeySize is a key-encryption key that is not 16, 24 or 32 bytes.
	ErrKeySize = errors.New("key-encryption key must be 16, 24 or 32 bytes")
	// ErrPlaintextSize is a plaintext of zero bytes or more than MaxPlaintext.
	ErrPlaintextSize = errors.New("plaintext must be 1 to MaxPlaintext bytes")
)

func newBlock(kek []byte) (cipher.Block, error) {
	switch len(kek) {
	case 16, 24, 32:
	default:
		return nil, ErrKeySize
	}
	return aes.NewCipher(kek)
}

// WrappedLen is the length Wrap returns for a plaintext of n bytes: n rounded
// up to a multiple of 8, plus 8.
func WrappedLen(n int) int { return (n+7)/8*8 + 8 }

// Wrap wraps plaintext under the key-encryption key kek (RFC 5649 §4.1).
func Wrap(kek, plaintext []byte) ([]byte, error) {
	b, err := newBlock(kek)
	if err != nil {
		return nil, err
	}
	m := len(plaintext)
	if m == 0 || m > MaxPlaintext {
		return nil, ErrPlaintextSize
	}
	out := make([]byte, WrappedLen(m))
	binary.BigEndian.PutUint32(out[0:4], aiv)
	binary.BigEndian.PutUint32(out[4:8], uint32(m))
	copy(out[8:], plaintext) // the padding is already zero
	if len(out) == 16 {
		// One 64-bit block of padded plaintext: a single AES encryption of
		// AIV ‖ P (§4.1, step 2).
		b.Encrypt(out, out)
		return out, nil
	}
	wrap(b, out)
	return out, nil
}

// Unwrap reverses Wrap (RFC 5649 §4.2) and returns the plaintext, or
// ErrUnwrap.
func Unwrap(kek, ciphertext []byte) ([]byte, error) {
	b, err := newBlock(kek)
	if err != nil {
		return nil, err
	}
	n := len(ciphertext)
	if n < 16 || n%8 != 0 || n > WrappedLen(MaxPlaintext) {
		return nil, ErrUnwrap
	}
	buf := make([]byte, n)
	copy(buf, ciphertext)
	if n == 16 {
		b.Decrypt(buf, buf)
	} else {
		unwrap(b, buf)
	}
	padded := n - 8
	mli := binary.BigEndian.Uint32(buf[4:8])
	// ok stays 1 only if every check passes; each check is computed whatever
	// the others gave.
	ok := subtle.ConstantTimeCompare(buf[0:4], aivBytes[:])
	// 8*(n'-1) < MLI <= 8*n', where 8*n' is padded.
	ok &= constantTimeLessOrEq(uint32(padded-8)+1, mli)
	ok &= constantTimeLessOrEq(mli, uint32(padded))
	// The padding (up to 7 bytes after MLI) must be zero. Look at the last 8
	// bytes and require zero in every position at or after mli; positions
	// are masked, not branched on.
	var pad byte
	last := buf[n-8:]
	for i := range 8 {
		pos := uint32(padded - 8 + i) // position of last[i] in the plaintext
		inPad := constantTimeLessOrEq(mli, pos)
		pad |= last[i] & byte(-inPad)
	}
	ok &= subtle.ConstantTimeByteEq(pad, 0)
	if ok != 1 {
		clear(buf)
		return nil, ErrUnwrap
	}
	out := make([]byte, mli)
	copy(out, buf[8:8+int(mli)])
	clear(buf)
	return out, nil
}

// constantTimeLessOrEq returns 1 if a <= b and 0 otherwise, for a and b below
// 2^31, without branching on them.
func constantTimeLessOrEq(a, b uint32) int {
	return int(((uint64(a) - uint64(b) - 1) >> 63) & 1)
}

// wrap is RFC 3394's W (§2.2.1, the index-based form) over buf = A ‖ R[1..n],
// in place; A already holds the initial value.
func wrap(b cipher.Block, buf []byte) {
	n := len(buf)/8 - 1
	var blk [16]byte
	copy(blk[:8], buf[:8])
	t := uint64(1)
	for range 6 {
		for i := 1; i <= n; i++ {
			r := buf[i*8 : i*8+8]
			copy(blk[8:], r)
			b.Encrypt(blk[:], blk[:])
			a := binary.BigEndian.Uint64(blk[:8]) ^ t
			binary.BigEndian.PutUint64(blk[:8], a)
			copy(r, blk[8:])
			t++
		}
	}
	copy(buf[:8], blk[:8])
}

// unwrap is RFC 3394's W⁻¹ over buf = C[0] ‖ C[1..n], in place, leaving
// A ‖ R[1..n].
func unwrap(b cipher.Block, buf []byte) {
	n := len(buf)/8 - 1
	var blk [16]byte
	copy(blk[:8], buf[:8])
	t := uint64(6 * n)
	for range 6 {
		for i := n; i >= 1; i-- {
			r := buf[i*8 : i*8+8]
			a := binary.BigEndian.Uint64(blk[:8]) ^ t
			binary.BigEndian.PutUint64(blk[:8], a)
			copy(blk[8:], r)
			b.Decrypt(blk[:], blk[:])
			copy(r, blk[8:])
			t--
		}
	}
	copy(buf[:8], blk[:8])
	clear(blk[:])
}
