package audit

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"sync"
)

// SeedSize is the size of a SigningKey's seed and the minimum size of an
// HMACKey's secret: 32 bytes.
const SeedSize = 32

// ErrKeySize is returned for a signing-key seed or HMAC secret of the wrong
// size.
var ErrKeySize = errors.New("key material has the wrong size")

// A SigningKey is the Ed25519 private key that signs checkpoints. It is
// opaque: the private key is never exported, it cannot be compared with ==,
// and it formats and logs as "audit.SigningKey(<key id>)". Give verifiers
// its Public key out of band.
type SigningKey struct {
	_    [0]func() // not comparable
	priv ed25519.PrivateKey
	id   string
}

// NewSigningKey returns the signing key with the given 32-byte seed (as
// kept, sealed, by whoever stores the node's keys). The caller may wipe
// seed afterwards.
func NewSigningKey(seed []byte) (*SigningKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: signing seed is %d bytes, want %d", ErrKeySize, len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return &SigningKey{priv: priv, id: KeyID(priv.Public().(ed25519.PublicKey))}, nil
}

// GenerateSigningKey returns a new signing key whose seed is read from rand,
// which must be a cryptographically secure source such as crypto/rand.Reader.
func GenerateSigningKey(rand io.Reader) (*SigningKey, error) {
	var seed [ed25519.SeedSize]byte
	defer clear(seed[:])
	if _, err := io.ReadFull(rand, seed[:]); err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	return NewSigningKey(seed[:])
}

// Public returns the public key that verifies the checkpoints k signs.
func (k *SigningKey) Public() ed25519.PublicKey {
	return k.priv.Public().(ed25519.PublicKey)
}

// KeyID returns KeyID(k.Public()).
func (k *SigningKey) KeyID() string { return k.id }

// String returns "audit.SigningKey(<key id>)", never key material.
func (k *SigningKey) String() string { return "audit.SigningKey(" + k.id + ")" }

// GoString is String, so %#v prints no key material either.
func (k *SigningKey) GoString() string { return k.String() }

// LogValue logs the key as String does.
func (k *SigningKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// KeyID names a checkpoint key: the first 8 bytes of the SHA-256 of the
// public key, in hex. Checkpoints carry it so that a verifier can say which
// key signed them; a verifier never takes the key itself from a file.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// An HMACKey is the per-deployment secret under which values that must be
// matchable but never stored (a jti, a client-supplied reference) are
// recorded as Digests. It is opaque like SigningKey and formats as
// "audit.HMACKey(redacted)".
type HMACKey struct {
	_    [0]func() // not comparable
	k    []byte
	pool sync.Pool // *hmacState: Sum allocates nothing in steady state
}

type hmacState struct {
	m   hash.Hash
	buf []byte // the value, and then the sum
}

// NewHMACKey returns an HMAC key holding a copy of secret, which must be at
// least 32 bytes.
func NewHMACKey(secret []byte) (*HMACKey, error) {
	if len(secret) < SeedSize {
		return nil, fmt.Errorf("%w: HMAC secret is %d bytes, want at least %d", ErrKeySize, len(secret), SeedSize)
	}
	k := &HMACKey{k: append([]byte(nil), secret...)}
	k.pool.New = func() any { return &hmacState{m: hmac.New(sha256.New, k.k)} }
	return k, nil
}

// Sum returns the HMAC-SHA256 of value under k.
func (k *HMACKey) Sum(value string) Digest {
	st := k.pool.Get().(*hmacState)
	st.m.Reset()
	st.buf = append(st.buf[:0], value...)
	st.m.Write(st.buf)
	st.buf = st.m.Sum(st.buf[:0])
	var d Digest
	copy(d.sum[:], st.buf)
	d.set = true
	clear(st.buf)
	k.pool.Put(st)
	return d
}

// String returns "audit.HMACKey(redacted)".
func (k *HMACKey) String() string { return "audit.HMACKey(redacted)" }

// GoString is String.
func (k *HMACKey) GoString() string { return k.String() }

// LogValue logs the key as String does.
func (k *HMACKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// A Digest is an HMAC-SHA256 made by HMACKey.Sum; it is the only form in
// which a Record carries a value that must not be stored. It prints as
// "hmac-sha256:<64 hex digits>". The zero Digest holds nothing and is
// refused in a Record.
type Digest struct {
	sum [sha256.Size]byte
	set bool
}

const digestPrefix = "hmac-sha256:"

// IsZero reports whether d holds no digest.
func (d Digest) IsZero() bool { return !d.set }

// Equal reports whether d and o are the same digest, in constant time.
func (d Digest) Equal(o Digest) bool {
	return d.set && o.set && subtle.ConstantTimeCompare(d.sum[:], o.sum[:]) == 1
}

// String returns "hmac-sha256:<hex>", or "" for the zero Digest.
func (d Digest) String() string {
	if !d.set {
		return ""
	}
	return string(d.appendText(nil))
}

func (d Digest) appendText(dst []byte) []byte {
	dst = append(dst, digestPrefix...)
	return appendHex32(dst, &d.sum)
}

// parseDigest reads the form String writes, lower-case hex only.
func parseDigest(s string) (Digest, bool) {
	var d Digest
	if len(s) != len(digestPrefix)+2*sha256.Size || s[:len(digestPrefix)] != digestPrefix {
		return d, false
	}
	if !parseHex(d.sum[:], s[len(digestPrefix):]) {
		return d, false
	}
	d.set = true
	return d, true
}
