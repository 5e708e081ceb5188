package rootkey

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

// A Key is 32 bytes of root key material. It is opaque: the bytes are
// never exported, it cannot be compared with == (use Equal, which runs in
// constant time), and it formats and logs as "Key(<id>)". Copies of a
// Key share the key material; Destroy wipes it for all of them.
//
// The zero Key holds no key.
type Key struct {
	_ [0]func() // not comparable
	k *rootKeyBytes
}

type rootKeyBytes struct {
	b    [KeySize]byte
	id   KeyID
	live bool
}

// NewRootKey returns a Key holding a copy of b, which must be KeySize
// bytes. The caller may wipe b afterwards.
func NewRootKey(b []byte) (Key, error) {
	if len(b) != KeySize {
		return Key{}, fmt.Errorf("%w, not %d", ErrKeyLength, len(b))
	}
	k := &rootKeyBytes{live: true}
	copy(k.b[:], b)
	k.id = deriveKeyID(&k.b)
	return Key{k: k}, nil
}

// Generate returns a new root key read from rand (crypto/rand.Reader
// when nil).
func Generate(rand io.Reader) (Key, error) {
	k := &rootKeyBytes{live: true}
	if _, err := io.ReadFull(randOrDefault(rand), k.b[:]); err != nil {
		clear(k.b[:])
		return Key{}, fmt.Errorf("generate root key: %w", err)
	}
	k.id = deriveKeyID(&k.b)
	return Key{k: k}, nil
}

// valid reports whether k holds key material.
func (k Key) valid() bool { return k.k != nil && k.k.live }

// IsZero reports whether k holds no key: it is the zero Key or was
// destroyed.
func (k Key) IsZero() bool { return !k.valid() }

// ID returns the key's ID, or 0 for a Key that holds no key.
func (k Key) ID() KeyID {
	if !k.valid() {
		return 0
	}
	return k.k.id
}

// Equal reports whether k and o hold the same key, in constant time with
// respect to the key bytes. Keys that hold nothing are equal to nothing.
func (k Key) Equal(o Key) bool {
	if !k.valid() || !o.valid() {
		return false
	}
	return subtle.ConstantTimeCompare(k.k.b[:], o.k.b[:]) == 1
}

// Destroy overwrites the key material with zeros. k, and every copy of it,
// holds no key afterwards. A Keyring keeps its own copy: destroying a key
// after Unseal or Rotate does not affect the keyring.
func (k Key) Destroy() {
	if k.k == nil {
		return
	}
	clear(k.k.b[:])
	k.k.id = 0
	k.k.live = false
}

// String returns "Key(<id>)", never key material.
func (k Key) String() string {
	if !k.valid() {
		return "Key(none)"
	}
	return "Key(" + k.k.id.String() + ")"
}

// Format makes every fmt verb (%v, %#v, %x, %d, ...) print String.
func (k Key) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// LogValue makes slog log only the key ID.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

var (
	_ slog.LogValuer = Key{}
	_ fmt.Formatter  = Key{}
	_ fmt.Stringer   = Key{}
)
