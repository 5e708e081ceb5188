// Package signingkeystest provides test doubles for a signing-key manager:
// a sealer standing in for the keyring, which a test seals and unseals at
// will, and a store that keeps signing keys in memory. They serve the
// tests of signingkeys and of its users, which need signing keys but
// neither a root key nor a database.
package signingkeystest

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// Store keeps signing keys in memory, with the store contract's errors: a
// signingkeys.Store.
type Store struct {
	mu   sync.Mutex
	keys map[string]store.SigningKey
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{keys: map[string]store.SigningKey{}} }

// Keys returns a copy of the keys stored, by kid.
func (s *Store) Keys() map[string]store.SigningKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.keys)
}

func (s *Store) PutSigningKey(_ context.Context, k store.SigningKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[k.KID]; ok {
		return store.ErrConflict
	}
	s.keys[k.KID] = k
	return nil
}

// ListSigningKeys lists the keys in the order they were created.
func (s *Store) ListSigningKeys(context.Context) ([]store.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Values(s.keys))
	slices.SortFunc(out, func(a, b store.SigningKey) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (s *Store) RetireSigningKey(_ context.Context, kid string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[kid]
	if !ok {
		return store.ErrNotFound
	}
	k.RetireAt = at
	s.keys[kid] = k
	return nil
}

func (s *Store) DeleteSigningKey(_ context.Context, kid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[kid]; !ok {
		return store.ErrNotFound
	}
	delete(s.keys, kid)
	return nil
}

// Sealer is a one-layer AES-256-GCM sealer standing in for the keyring.
// While sealed it reports Sealed and refuses to encrypt or decrypt.
type Sealer struct {
	aead   cipher.AEAD
	sealed atomic.Bool
}

// NewSealer returns an unsealed Sealer under a random key.
func NewSealer(t testing.TB) *Sealer {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	b, _ := aes.NewCipher(key) // a 32-byte key is always valid
	a, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return &Sealer{aead: a}
}

// SetSealed seals or unseals the sealer.
func (g *Sealer) SetSealed(sealed bool) { g.sealed.Store(sealed) }

func (g *Sealer) Sealed() bool { return g.sealed.Load() }

var errSealed = errors.New("sealed")

func (g *Sealer) Encrypt(pt, aad []byte) ([]byte, error) {
	if g.sealed.Load() {
		return nil, errSealed
	}
	nonce := make([]byte, g.aead.NonceSize())
	rand.Read(nonce)
	return g.aead.Seal(nonce, nonce, pt, aad), nil
}

func (g *Sealer) Decrypt(ct, aad []byte) ([]byte, error) {
	if g.sealed.Load() {
		return nil, errSealed
	}
	n := g.aead.NonceSize()
	if len(ct) < n {
		return nil, errors.New("ciphertext too short")
	}
	return g.aead.Open(nil, ct[:n], ct[n:], aad)
}
