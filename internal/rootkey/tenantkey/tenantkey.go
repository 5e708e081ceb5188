package tenantkey

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

// Key is a tenant's data key, unsealed: AES-256-GCM with a random 96-bit
// nonce per Seal. It is opaque: the key bytes are never exported and it
// prints as its tenant's name. Every Seal and Open binds the tenant as
// well as the caller's associated data, so a sealed value moved to
// another tenant's record does not open (it is under another key anyway).
type Key struct {
	tenant string
	sealed []byte // as the tenant's row holds it: tells a key from another tenant's of the same name
	aead   cipher.AEAD
	rand   io.Reader
}

// keyFormat is the first byte of what Key.Seal returns.
const keyFormat = 1

// Overhead is what Seal adds to a plaintext: the format byte, the nonce
// and the tag.
const Overhead = 1 + 12 + 16

// ErrOpen: a value sealed under a data key does not open: it was altered,
// moved to another record, or is not in the format.
var ErrOpen = errors.New("sealed value does not open under the tenant's data key")

// Tenant is the tenant the key belongs to.
func (k *Key) Tenant() string { return k.tenant }

// String names the key without its material.
func (k *Key) String() string { return "DataKey(" + k.tenant + ")" }

// Seal encrypts plaintext and authenticates it with ad (which the caller
// makes name the record it is stored in) and the tenant.
func (k *Key) Seal(plaintext, ad []byte) ([]byte, error) {
	out := make([]byte, 1+12, Overhead+len(plaintext))
	out[0] = keyFormat
	if _, err := io.ReadFull(k.rand, out[1:]); err != nil {
		return nil, fmt.Errorf("data key nonce: %w", err)
	}
	return k.aead.Seal(out, out[1:13], plaintext, k.ad(ad)), nil
}

// Open decrypts what Seal returned for the same ad; anything else is
// ErrOpen.
func (k *Key) Open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) < Overhead || sealed[0] != keyFormat {
		return nil, ErrOpen
	}
	pt, err := k.aead.Open(nil, sealed[1:13], sealed[13:], k.ad(ad))
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// Bind returns what Seal and Open authenticate for ad (the tenant, then
// ad), for OpenBound: a caller that opens the same record many times
// binds its ad once. It depends on the tenant's name alone, not on the
// key's material.
func (k *Key) Bind(ad []byte) []byte { return k.ad(ad) }

// OpenBound is Open with the ad as Bind returned it.
func (k *Key) OpenBound(sealed, bound []byte) ([]byte, error) {
	if len(sealed) < Overhead || sealed[0] != keyFormat {
		return nil, ErrOpen
	}
	pt, err := k.aead.Open(nil, sealed[1:13], sealed[13:], bound)
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

// key builds the AEAD of raw, which it then overwrites; sealed is raw as
// the tenant's row holds it.
func (t *Keys) key(tenant string, raw, sealed []byte) (*Key, error) {
	defer clear(raw)
	if len(raw) != rootkey.KeySize {
		return nil, fmt.Errorf("tenant %q: data key of %d bytes", tenant, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{tenant: tenant, sealed: sealed, aead: aead, rand: t.rand}, nil
}
