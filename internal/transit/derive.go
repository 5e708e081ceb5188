package transit

import (
	"bytes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"hash/maphash"
	"sync"
)

// derived is what a derived key's version yields for one context: Vault's
// kdf hkdf_sha256, HKDF-SHA256 with the version's key as the secret, no
// salt, and the context as info.
//
// For the AEAD types the first 16 or 32 bytes of output are the encryption
// key; a convergent key reads 32 more, the key of the HMAC-SHA256 that makes
// the nonce (Vault's convergent version 3). HKDF's output is one stream, so
// both read the same encryption key. For ed25519 the first 32 bytes are the
// seed of the derived signing key (the secret being the 64-byte private key
// seed‖public, as Vault stores it).
//
// nonceKey and ed wipe themselves once nothing refers to them (wipe.go),
// not when the derived key is evicted: an operation that took them from an
// entry the cache has since dropped still holds them intact.
type derived struct {
	ctx      []byte      // the context itself, to tell hash collisions apart
	aead     cipher.AEAD // holds its own copy of the encryption key
	nonceKey []byte
	ed       ed25519.PrivateKey
}

func deriveKey(v *Version, ctx []byte, convergent bool) (*derived, error) {
	d := &derived{ctx: bytes.Clone(ctx)}
	key := v.key
	if beforeKeyUse != nil && len(key) > 0 {
		beforeKeyUse(key)
	}
	switch {
	case v.typ.symmetricAEAD():
		size := v.typ.symmetricKeySize()
		n := size
		if convergent {
			n += 32
		}
		okm, err := hkdf.Key(sha256.New, key, nil, string(ctx), n)
		if err != nil {
			return nil, wrapError(ReasonInternal, "deriving a key", err)
		}
		defer clear(okm)
		if d.aead, err = newAEAD(v.typ, okm[:size]); err != nil {
			return nil, err
		}
		if convergent {
			d.nonceKey = takeKeyBytes(okm[size:])
		}
	case v.typ == Ed25519:
		if len(key) == 0 {
			return nil, versionError(ReasonNoPrivateKey, "derivation needs the private key", v.num)
		}
		seed, err := hkdf.Key(sha256.New, key, nil, string(ctx), ed25519.SeedSize)
		if err != nil {
			return nil, wrapError(ReasonInternal, "deriving a key", err)
		}
		d.ed = takeKeyBytes(ed25519.NewKeyFromSeed(seed))
		clear(seed)
	default:
		return nil, newError(ReasonUnsupported, "key derivation is not supported by the key type")
	}
	return d, nil
}

// derivedCache keeps derived keys by (version, context), bounded by entries:
// a full shard drops an arbitrary entry (Go's map iteration order is
// random) before adding one, so attacker-chosen contexts can churn the cache
// but never grow it. Contexts over MaxCachedContextBytes are not cached, so
// its memory is bounded too. Lookups take a shard's read lock and allocate
// nothing.
type derivedCache struct {
	seed   maphash.Seed
	perCap int
	shards [16]derivedShard
}

type derivedShard struct {
	mu sync.RWMutex
	m  map[derivedKey]*derived
	_  [40]byte // keep shards on separate cache lines
}

type derivedKey struct {
	version uint64
	hash    uint64
}

func newDerivedCache(entries int) *derivedCache {
	if entries < 0 {
		return nil
	}
	c := &derivedCache{seed: maphash.MakeSeed(), perCap: max(entries/len(derivedCache{}.shards), 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[derivedKey]*derived)
	}
	return c
}

// get returns the derived key of v for ctx, from the cache or made now.
func (c *derivedCache) get(v *Version, ctx []byte, convergent bool) (*derived, error) {
	if c == nil || len(ctx) > MaxCachedContextBytes {
		return deriveKey(v, ctx, convergent)
	}
	h := maphash.Bytes(c.seed, ctx)
	k := derivedKey{version: v.id, hash: h}
	s := &c.shards[h%uint64(len(c.shards))]
	s.mu.RLock()
	d := s.m[k]
	s.mu.RUnlock()
	if d != nil && bytes.Equal(d.ctx, ctx) {
		return d, nil
	}
	d, err := deriveKey(v, ctx, convergent)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.m) >= c.perCap {
		for old := range s.m {
			delete(s.m, old)
			break
		}
	}
	s.m[k] = d
	s.mu.Unlock()
	return d, nil
}

// clear drops every entry.
func (c *derivedCache) clear() {
	if c == nil {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.mu.Unlock()
	}
}

// purge drops the entries of the given versions (after a trim or a
// deletion).
func (c *derivedCache) purge(ids map[uint64]bool) {
	if c == nil || len(ids) == 0 {
		return
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k := range s.m {
			if ids[k.version] {
				delete(s.m, k)
			}
		}
		s.mu.Unlock()
	}
}

// len counts the entries.
func (c *derivedCache) len() int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		c.shards[i].mu.RLock()
		n += len(c.shards[i].m)
		c.shards[i].mu.RUnlock()
	}
	return n
}
