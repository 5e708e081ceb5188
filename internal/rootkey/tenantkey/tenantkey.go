package tenantkey

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

// Key is a tenant's data key, unsealed: every version the tenant's row
// holds, AES-256-GCM each, with a random 96-bit nonce per Seal under the
// current version. It is opaque: the key bytes are never exported and it
// prints as its tenant's name. Every Seal and Open binds the tenant as
// well as the caller's associated data, so a sealed value moved to
// another tenant's record does not open (it is under another key anyway).
type Key struct {
	tenant  string
	sealed  []byte // as the tenant's row holds it: tells a key from another tenant's of the same name
	current uint32
	cur     cipher.AEAD
	aeads   []versionAEAD // every version, ascending
	rand    io.Reader
}

type versionAEAD struct {
	version uint32
	aead    cipher.AEAD
}

// What Key.Seal returns: under version 1, keyFormat, the nonce, then the
// ciphertext and tag, as before data keys had versions (so that a node of
// an earlier release opens what a tenant never rotated holds); under a
// later version, versionedFormat, the version (4 bytes, big-endian), the
// nonce, the ciphertext and tag.
const (
	keyFormat       = 1
	versionedFormat = 2
	overhead1       = 1 + 12 + 16
	overhead2       = 1 + 4 + 12 + 16
)

// Overhead is the most that Seal adds to a plaintext: the format byte, the
// version, the nonce and the tag.
const Overhead = overhead2

// ErrOpen: a value sealed under a data key does not open: it was altered,
// moved to another record, is under a version the key does not hold
// (rotated in or retired since), or is not in the format.
var ErrOpen = errors.New("sealed value does not open under the tenant's data key")

// Tenant is the tenant the key belongs to.
func (k *Key) Tenant() string { return k.tenant }

// Version is the version Seal seals under.
func (k *Key) Version() uint32 { return k.current }

// Versions are the versions the key opens, ascending.
func (k *Key) Versions() []uint32 {
	out := make([]uint32, len(k.aeads))
	for i, a := range k.aeads {
		out[i] = a.version
	}
	return out
}

// String names the key without its material.
func (k *Key) String() string { return "DataKey(" + k.tenant + ")" }

// Seal encrypts plaintext under the current version and authenticates it
// with ad (which the caller makes name the record it is stored in) and
// the tenant.
func (k *Key) Seal(plaintext, ad []byte) ([]byte, error) {
	var out []byte
	if k.current == 1 {
		out = make([]byte, 1+12, overhead1+len(plaintext))
		out[0] = keyFormat
	} else {
		out = make([]byte, 1+4+12, overhead2+len(plaintext))
		out[0] = versionedFormat
		binary.BigEndian.PutUint32(out[1:], k.current)
	}
	nonce := out[len(out)-12:]
	if _, err := io.ReadFull(k.rand, nonce); err != nil {
		return nil, fmt.Errorf("data key nonce: %w", err)
	}
	return k.cur.Seal(out, nonce, plaintext, k.ad(ad)), nil
}

// Open decrypts what Seal returned for the same ad, under whichever
// version sealed it; anything else is ErrOpen.
func (k *Key) Open(sealed, ad []byte) ([]byte, error) {
	return k.OpenBound(sealed, k.ad(ad))
}

// Bind returns what Seal and Open authenticate for ad (the tenant, then
// ad), for OpenBound: a caller that opens the same record many times
// binds its ad once. It depends on the tenant's name alone, not on the
// key's material.
func (k *Key) Bind(ad []byte) []byte { return k.ad(ad) }

// OpenBound is Open with the ad as Bind returned it.
func (k *Key) OpenBound(sealed, bound []byte) ([]byte, error) {
	v, ok := SealedVersion(sealed)
	if !ok {
		return nil, ErrOpen
	}
	hdr := 1
	if sealed[0] == versionedFormat {
		hdr = 5
	}
	aead := k.cur
	if v != k.current {
		aead = nil
		for _, a := range k.aeads {
			if a.version == v {
				aead = a.aead
			}
		}
		if aead == nil {
			return nil, ErrOpen
		}
	}
	pt, err := aead.Open(nil, sealed[hdr:hdr+12], sealed[hdr+12:], bound)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// ad is what a Seal authenticates: the tenant, then the caller's data.
func (k *Key) ad(ad []byte) []byte {
	b := make([]byte, 0, len("keygate tenant \x00")+len(k.tenant)+len(ad))
	b = append(b, "keygate tenant "...)
	b = append(b, k.tenant...)
	b = append(b, 0)
	return append(b, ad...)
}

// rootAD binds a sealed data key to its tenant's row.
func rootAD(tenant string) []byte { return []byte("tenant-data-key:" + tenant) }

// Store is what Keys reads and writes of the store: the tenant's row,
// whose data key column holds the sealed key (store.Store is one).
type Store interface {
	GetTenant(ctx context.Context, name string) (store.Tenant, error)
	SetTenantDataKey(ctx context.Context, name string, sealed []byte) error
	// RewrapTenantDataKey replaces the sealed data key if it is still
	// old (store.ErrConflict otherwise): how a rotation changes the ring.
	RewrapTenantDataKey(ctx context.Context, name string, old, next []byte) error
}

// Root is the root key the data keys are sealed under (*rootkey.Keyring
// is one).
type Root interface {
	Sealed() bool
	Encrypt(plaintext, aad []byte) ([]byte, error)
	Decrypt(ciphertext, aad []byte) ([]byte, error)
}

// Config configures Keys.
type Config struct {
	Store  Store
	Root   Root
	Rand   io.Reader    // new data keys and nonces; nil means crypto/rand
	Logger *slog.Logger // nil discards logs
}

// Keys are the tenants' data keys a node has unsealed. Create them with
// New; they are safe for concurrent use.
type Keys struct {
	st   Store
	root Root
	rand io.Reader
	log  *slog.Logger

	mu    sync.Mutex
	epoch uint64 // one more at each Forget
	drops uint64 // one more at each Drop: a key read before it is not kept after it
	keys  map[string]*Key
}

// New returns the data keys of the tenants in cfg.Store, sealed under
// cfg.Root; it holds none yet.
func New(cfg Config) *Keys {
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Keys{st: cfg.Store, root: cfg.Root, rand: cfg.Rand, log: cfg.Logger, keys: map[string]*Key{}}
}

// Sealed reports whether the root key is sealed: no data key is made or
// opened until it is unsealed.
func (t *Keys) Sealed() bool { return t.root.Sealed() }

// Forget drops every unsealed data key: call it when the root key is
// sealed.
func (t *Keys) Forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.epoch++
	clear(t.keys)
}

// Drop forgets the tenant's data key: call it when the tenant is deleted,
// at this node or another.
func (t *Keys) Drop(tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drops++
	delete(t.keys, tenant)
}

// Get returns the tenant's data key to open what is stored: the one held,
// or the one the tenant's row holds, made and stored on the tenant's
// first use. It fails with rootkey.ErrSealed while the root key is
// sealed, and with an error matching store.ErrNotFound for a tenant that
// does not exist (store.ErrUnavailable when the store does not answer).
// What it returns may be a deleted tenant's of the same name until the
// deletion's notice arrives: seal new values under Fresh's, and when a
// value does not open, try that one.
func (t *Keys) Get(ctx context.Context, tenant string) (*Key, error) {
	t.mu.Lock()
	k := t.keys[tenant]
	t.mu.Unlock()
	if k != nil {
		return k, nil
	}
	return t.Fresh(ctx, tenant)
}

// Fresh returns the data key the tenant's row holds as it is read now,
// made and stored if it holds none, and keeps it as the tenant's: the key
// to seal new values under (a read of the tenant's row each time), and to
// try when a value does not open under Get's. It fails as Get does.
func (t *Keys) Fresh(ctx context.Context, tenant string) (*Key, error) {
	for range 3 {
		if t.root.Sealed() {
			return nil, rootkey.ErrSealed
		}
		t.mu.Lock()
		cur, epoch, drops := t.keys[tenant], t.epoch, t.drops
		t.mu.Unlock()
		k, err := t.load(ctx, tenant, cur)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		switch {
		case t.epoch != epoch: // sealed meanwhile: the key must not outlive the seal
			t.mu.Unlock()
			return nil, rootkey.ErrSealed
		case t.drops != drops: // a tenant was deleted meanwhile: maybe this one, read before
			t.mu.Unlock()
			continue
		}
		t.keys[tenant] = k
		t.mu.Unlock()
		return k, nil
	}
	return nil, fmt.Errorf("tenant %q: data key: %w", tenant, store.ErrConflict)
}

// load reads the tenant's sealed data key and opens it (cur, if that is
// what cur was opened from), or makes one: sealed under the root key and
// stored unless another node stored its own first, which is then read.
func (t *Keys) load(ctx context.Context, tenant string, cur *Key) (*Key, error) {
	for range 2 {
		tn, err := t.st.GetTenant(ctx, tenant)
		if err != nil {
			return nil, fmt.Errorf("tenant %q: %w", tenant, err)
		}
		if tn.DataKey != nil {
			if cur != nil && bytes.Equal(cur.sealed, tn.DataKey) {
				return cur, nil
			}
			raw, err := t.root.Decrypt(tn.DataKey, rootAD(tenant))
			if err != nil {
				return nil, fmt.Errorf("tenant %q: data key: %w", tenant, err)
			}
			return t.key(tenant, raw, tn.DataKey)
		}
		raw := make([]byte, rootkey.KeySize)
		if _, err := io.ReadFull(t.rand, raw); err != nil {
			return nil, fmt.Errorf("tenant %q: new data key: %w", tenant, err)
		}
		sealed, err := t.root.Encrypt(raw, rootAD(tenant))
		if err != nil {
			clear(raw)
			return nil, fmt.Errorf("tenant %q: sealing its data key: %w", tenant, err)
		}
		switch err := t.st.SetTenantDataKey(ctx, tenant, sealed); {
		case err == nil:
			t.log.Info("tenant data key created", "tenant", tenant)
			return t.key(tenant, raw, sealed)
		case errors.Is(err, store.ErrConflict): // another node stored one first: use it
			clear(raw)
		default:
			clear(raw)
			return nil, fmt.Errorf("tenant %q: storing its data key: %w", tenant, err)
		}
	}
	return nil, fmt.Errorf("tenant %q: data key: %w", tenant, store.ErrConflict)
}

// key opens the ring raw holds, which it then overwrites; sealed is raw
// as the tenant's row holds it.
func (t *Keys) key(tenant string, raw, sealed []byte) (*Key, error) {
	defer clear(raw)
	r, err := parseRing(raw)
	if err != nil {
		return nil, fmt.Errorf("tenant %q: %w", tenant, err)
	}
	k := &Key{tenant: tenant, sealed: sealed, current: r.current, rand: t.rand}
	for i, v := range r.versions {
		block, err := aes.NewCipher(r.keys[i])
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		k.aeads = append(k.aeads, versionAEAD{v, aead})
		if v == r.current {
			k.cur = aead
		}
	}
	return k, nil
}
