package node

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

// Tenant data keys. What a tenant keeps secret in the store (its transit
// keys' versions; next, its secrets) is sealed under the tenant's own
// 256-bit data key, and only that key is sealed under the root key, in the
// tenant's row. A data key is made on the tenant's first use, stored once
// (of nodes racing to make one, one wins and the others read it), and held
// unsealed in memory until the node seals.
//
// A tenant deleted and made again under its name is another tenant, with
// another data key. What the node holds of the deleted one must not be
// used for it: so new key material is sealed only under the data key the
// tenant's row holds as it is read now (FreshTenantDataKey), a deletion
// is announced to every node (Publisher().TenantDeleted), which drops the
// tenant's data key and runs what OnTenantDeleted registered, and a value
// that does not open under the cached key is tried again under the row's
// current one (by the caller, with FreshTenantDataKey). (What is left: a
// deletion and re-creation landing between a writer's read of the row and
// its write. A tenant is deleted only once it holds no keys, so that takes
// an admin racing a key's creation within milliseconds.)

// DataKey is a tenant's data key, unsealed: AES-256-GCM with a random
// 96-bit nonce per Seal. It is opaque: the key bytes are never exported and
// it prints as its tenant's name. Every Seal and Open binds the tenant as
// well as the caller's associated data, so a sealed value moved to another
// tenant's record does not open (it is under another key anyway).
type DataKey struct {
	tenant string
	sealed []byte // as the tenant's row holds it: tells a key from another tenant's of the same name
	aead   cipher.AEAD
	rand   io.Reader
}

// dataKeyFormat is the first byte of what DataKey.Seal returns.
const dataKeyFormat = 1

// DataKeyOverhead is what Seal adds to a plaintext: the format byte,
// the nonce and the tag.
const DataKeyOverhead = 1 + 12 + 16

// ErrDataKeyOpen: a value sealed under a data key does not open: it was
// altered, moved to another record, or is not in the format.
var ErrDataKeyOpen = errors.New("sealed value does not open under the tenant's data key")

// Tenant is the tenant the key belongs to.
func (k *DataKey) Tenant() string { return k.tenant }

// String names the key without its material.
func (k *DataKey) String() string { return "DataKey(" + k.tenant + ")" }

// Seal encrypts plaintext and authenticates it with ad (which the caller
// makes name the record it is stored in) and the tenant.
func (k *DataKey) Seal(plaintext, ad []byte) ([]byte, error) {
	out := make([]byte, 1+12, DataKeyOverhead+len(plaintext))
	out[0] = dataKeyFormat
	if _, err := io.ReadFull(k.rand, out[1:]); err != nil {
		return nil, fmt.Errorf("data key nonce: %w", err)
	}
	return k.aead.Seal(out, out[1:13], plaintext, k.ad(ad)), nil
}

// Open decrypts what Seal returned for the same ad; anything else is
// ErrDataKeyOpen.
func (k *DataKey) Open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) < DataKeyOverhead || sealed[0] != dataKeyFormat {
		return nil, ErrDataKeyOpen
	}
	pt, err := k.aead.Open(nil, sealed[1:13], sealed[13:], k.ad(ad))
	if err != nil {
		return nil, ErrDataKeyOpen
	}
	return pt, nil
}

// ad is what a Seal authenticates: the tenant, then the caller's data.
func (k *DataKey) ad(ad []byte) []byte {
	b := make([]byte, 0, len("keygate tenant \x00")+len(k.tenant)+len(ad))
	b = append(b, "keygate tenant "...)
	b = append(b, k.tenant...)
	b = append(b, 0)
	return append(b, ad...)
}

// rootAD binds a sealed data key to its tenant's row.
func rootAD(tenant string) []byte { return []byte("tenant-data-key:" + tenant) }

// tenantKeys are the data keys this node has unsealed.
type tenantKeys struct {
	mu    sync.Mutex
	epoch uint64 // one more at each forget
	drops uint64 // one more at each drop: a key read before it is not kept after it
	keys  map[string]*DataKey
}

// forget drops every unsealed data key.
func (t *tenantKeys) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.epoch++
	clear(t.keys)
}

// drop forgets the tenant's data key.
func (t *tenantKeys) drop(tenant string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drops++
	delete(t.keys, tenant)
}

// TenantDataKey returns the tenant's data key to open what is stored: the
// one this node holds, or the one the tenant's row holds, made and stored
// on the tenant's first use. It fails with keyring.ErrSealed while the
// node is sealed, and with an error matching store.ErrNotFound for a
// tenant that does not exist (store.ErrUnavailable when the store does not
// answer). What it returns may be a deleted tenant's of the same name
// until the deletion's notice arrives: seal new values under
// FreshTenantDataKey's, and when a value does not open, try that one.
func (n *Node) TenantDataKey(ctx context.Context, tenant string) (*DataKey, error) {
	t := &n.tenants
	t.mu.Lock()
	k := t.keys[tenant]
	t.mu.Unlock()
	if k != nil {
		return k, nil
	}
	return n.FreshTenantDataKey(ctx, tenant)
}

// FreshTenantDataKey returns the data key the tenant's row holds as it is
// read now, made and stored if it holds none, and keeps it as the
// tenant's: the key to seal new values under (a read of the tenant's row
// each time), and to try when a value does not open under TenantDataKey's.
// It fails as TenantDataKey does.
func (n *Node) FreshTenantDataKey(ctx context.Context, tenant string) (*DataKey, error) {
	t := &n.tenants
	for range 3 {
		if n.keyring.Sealed() {
			return nil, rootkey.ErrSealed
		}
		t.mu.Lock()
		cur, epoch, drops := t.keys[tenant], t.epoch, t.drops
		t.mu.Unlock()
		k, err := n.loadDataKey(ctx, tenant, cur)
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
		if t.keys == nil {
			t.keys = map[string]*DataKey{}
		}
		t.keys[tenant] = k
		t.mu.Unlock()
		return k, nil
	}
	return nil, fmt.Errorf("tenant %q: data key: %w", tenant, store.ErrConflict)
}

// loadDataKey reads the tenant's sealed data key and opens it (cur, if
// that is what cur was opened from), or makes one: sealed under the root
// key and stored unless another node stored its own first, which is then
// read.
func (n *Node) loadDataKey(ctx context.Context, tenant string, cur *DataKey) (*DataKey, error) {
	for range 2 {
		tn, err := n.store.GetTenant(ctx, tenant)
		if err != nil {
			return nil, fmt.Errorf("tenant %q: %w", tenant, err)
		}
		if tn.DataKey != nil {
			if cur != nil && bytes.Equal(cur.sealed, tn.DataKey) {
				return cur, nil
			}
			raw, err := n.keyring.Decrypt(tn.DataKey, rootAD(tenant))
			if err != nil {
				return nil, fmt.Errorf("tenant %q: data key: %w", tenant, err)
			}
			return n.dataKey(tenant, raw, tn.DataKey)
		}
		raw := make([]byte, rootkey.KeySize)
		if _, err := io.ReadFull(n.cfg.Rand, raw); err != nil {
			return nil, fmt.Errorf("tenant %q: new data key: %w", tenant, err)
		}
		sealed, err := n.keyring.Encrypt(raw, rootAD(tenant))
		if err != nil {
			clear(raw)
			return nil, fmt.Errorf("tenant %q: sealing its data key: %w", tenant, err)
		}
		switch err := n.store.SetTenantDataKey(ctx, tenant, sealed); {
		case err == nil:
			n.log.Info("tenant data key created", "tenant", tenant)
			return n.dataKey(tenant, raw, sealed)
		case errors.Is(err, store.ErrConflict): // another node stored one first: use it
			clear(raw)
		default:
			clear(raw)
			return nil, fmt.Errorf("tenant %q: storing its data key: %w", tenant, err)
		}
	}
	return nil, fmt.Errorf("tenant %q: data key: %w", tenant, store.ErrConflict)
}

// dataKey builds the AEAD of raw, which it then overwrites; sealed is
// raw as the tenant's row holds it.
func (n *Node) dataKey(tenant string, raw, sealed []byte) (*DataKey, error) {
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
	return &DataKey{tenant: tenant, sealed: sealed, aead: aead, rand: n.cfg.Rand}, nil
}

// hooks are what other parts of the node's state ask to be told of.
type hooks struct {
	mu       sync.Mutex
	onSeal   []func()
	onTick   []func(context.Context)
	onTenant []func(string)
}

// OnSeal registers f to run each time the node seals, after the root key,
// the private signing key and the tenants' data keys are forgotten: what
// holds key material opened under them forgets it too.
func (n *Node) OnSeal(f func()) {
	n.hooks.mu.Lock()
	defer n.hooks.mu.Unlock()
	n.hooks.onSeal = append(n.hooks.onSeal, f)
}

// OnTick registers f to run at each Tick, after the node's own schedule:
// the periodic work of what is built on the node (transit's automatic key
// rotation). f runs on Tick's goroutine and the next Tick waits for it:
// work that can take long, such as generating keys, belongs on a goroutine
// that f starts and bounds.
func (n *Node) OnTick(f func(ctx context.Context)) {
	n.hooks.mu.Lock()
	defer n.hooks.mu.Unlock()
	n.hooks.onTick = append(n.hooks.onTick, f)
}

// OnTenantDeleted registers f to run each time a tenant is deleted, at
// this node or (told by a notice) at another of the fleet, after the
// tenant's data key is forgotten: what holds anything of the tenant
// (opened keys, wrapping keys) forgets it too, since a tenant made again
// under the name is another one.
func (n *Node) OnTenantDeleted(f func(tenant string)) {
	n.hooks.mu.Lock()
	defer n.hooks.mu.Unlock()
	n.hooks.onTenant = append(n.hooks.onTenant, f)
}

// tenantDeleted drops what the node holds of a deleted tenant.
func (n *Node) tenantDeleted(tenant string) {
	n.tenants.drop(tenant)
	n.hooks.mu.Lock()
	fs := n.hooks.onTenant
	n.hooks.mu.Unlock()
	for _, f := range fs {
		f(tenant)
	}
}

func (h *hooks) sealed() {
	h.mu.Lock()
	fs := h.onSeal
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func (h *hooks) ticked(ctx context.Context) {
	h.mu.Lock()
	fs := h.onTick
	h.mu.Unlock()
	for _, f := range fs {
		f(ctx)
	}
}
