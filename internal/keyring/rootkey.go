package keyring

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
)

// KeySize is the size of a root key and of a data key: 32 bytes, for
// AES-256.
const KeySize = 32

// KeyID names a root key inside ciphertexts and the keyring header. It is
// derived from the key (the first four bytes of HMAC-SHA256 keyed with the
// root key over a fixed label), so the same key has the same ID wherever it
// is loaded from, and the ID reveals nothing usable about the key.
type KeyID uint32

// String formats the ID as eight hex digits.
func (id KeyID) String() string { return fmt.Sprintf("%08x", uint32(id)) }

// keyIDLabel is the HMAC message a KeyID is computed over.
const keyIDLabel = "keygate keyring root key id v1"

func deriveKeyID(key *[KeySize]byte) KeyID {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(keyIDLabel))
	var sum [sha256.Size]byte
	return KeyID(binary.BigEndian.Uint32(m.Sum(sum[:0])))
}

// A RootKey is 32 bytes of root key material. It is opaque: the bytes are
// never exported, it cannot be compared with == (use Equal, which runs in
// constant time), and it formats and logs as "RootKey(<id>)". Copies of a
// RootKey share the key material; Destroy wipes it for all of them.
//
// The zero RootKey holds no key.
type RootKey struct {
	_ [0]func() // not comparable
	k *rootKeyBytes
}

type rootKeyBytes struct {
	b    [KeySize]byte
	id   KeyID
	live bool
}

// NewRootKey returns a RootKey holding a copy of b, which must be KeySize
// bytes. The caller may wipe b afterwards.
func NewRootKey(b []byte) (RootKey, error) {
	if len(b) != KeySize {
		return RootKey{}, fmt.Errorf("%w, not %d", ErrKeyLength, len(b))
	}
	k := &rootKeyBytes{live: true}
	copy(k.b[:], b)
	k.id = deriveKeyID(&k.b)
	return RootKey{k: k}, nil
}

// GenerateRootKey returns a new root key read from rand (crypto/rand.Reader
// when nil).
func GenerateRootKey(rand io.Reader) (RootKey, error) {
	k := &rootKeyBytes{live: true}
	if _, err := io.ReadFull(randOrDefault(rand), k.b[:]); err != nil {
		clear(k.b[:])
		return RootKey{}, fmt.Errorf("keyring: generate root key: %w", err)
	}
	k.id = deriveKeyID(&k.b)
	return RootKey{k: k}, nil
}

// valid reports whether k holds key material.
func (k RootKey) valid() bool { return k.k != nil && k.k.live }

// IsZero reports whether k holds no key: it is the zero RootKey or was
// destroyed.
func (k RootKey) IsZero() bool { return !k.valid() }

// ID returns the key's ID, or 0 for a RootKey that holds no key.
func (k RootKey) ID() KeyID {
	if !k.valid() {
		return 0
	}
	return k.k.id
}

// Equal reports whether k and o hold the same key, in constant time with
// respect to the key bytes. Keys that hold nothing are equal to nothing.
func (k RootKey) Equal(o RootKey) bool {
	if !k.valid() || !o.valid() {
		return false
	}
	return subtle.ConstantTimeCompare(k.k.b[:], o.k.b[:]) == 1
}

// Destroy overwrites the key material with zeros. k, and every copy of it,
// holds no key afterwards. A Keyring keeps its own copy: destroying a key
// after Unseal or Rotate does not affect the keyring.
func (k RootKey) Destroy() {
	if k.k == nil {
		return
	}
	clear(k.k.b[:])
	k.k.id = 0
	k.k.live = false
}

// String returns "RootKey(<id>)", never key material.
func (k RootKey) String() string {
	if !k.valid() {
		return "RootKey(none)"
	}
	return "RootKey(" + k.k.id.String() + ")"
}

// Format makes every fmt verb (%v, %#v, %x, %d, ...) print String.
func (k RootKey) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// LogValue makes slog log only the key ID.
func (k RootKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

var (
	_ slog.LogValuer = RootKey{}
	_ fmt.Formatter  = RootKey{}
	_ fmt.Stringer   = RootKey{}
)
