package rootkey

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"io"
)

// The one AEAD the package uses, for both layers and the key-check value:
// AES-256-GCM with 96-bit nonces and 128-bit tags.
const (
	nonceSize = 12
	tagSize   = 16
)

// newGCM returns AES-256-GCM under key. It refuses keys of any other size,
// so a short key can never select AES-128 by accident.
func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w, not %d", ErrKeyLength, len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b) // standard 12-byte nonce, 16-byte tag
}

// gcmSeal is single-layer AES-256-GCM encryption: it returns
// ciphertext||tag. nonce must be nonceSize bytes.
func gcmSeal(key, nonce, plaintext, aad []byte) ([]byte, error) {
	a, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(nonce) != nonceSize {
		return nil, fmt.Errorf("nonce is %d bytes, want %d", len(nonce), nonceSize)
	}
	return a.Seal(nil, nonce, plaintext, aad), nil
}

// gcmOpen is single-layer AES-256-GCM decryption of ciphertext||tag. Any
// authentication failure is ErrDecrypt.
func gcmOpen(key, nonce, ciphertext, aad []byte) ([]byte, error) {
	a, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(nonce) != nonceSize {
		return nil, fmt.Errorf("nonce is %d bytes, want %d", len(nonce), nonceSize)
	}
	if len(ciphertext) < tagSize {
		return nil, ErrDecrypt
	}
	pt, err := a.Open(nil, nonce, ciphertext, aad)
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}

func randOrDefault(r io.Reader) io.Reader {
	if r == nil {
		return rand.Reader
	}
	return r
}
