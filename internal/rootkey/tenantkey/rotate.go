package tenantkey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
)

// Rotating a tenant's data key is two changes of its ring, each written
// by compare-and-swap on the sealed value the row holds, so that of nodes
// changing it at once (or a root-key rotation rewrapping it) one wins and
// the others read it again: Rotate adds a version and makes it current;
// once nothing is sealed under the older versions any more (the caller
// rewraps what is), Retire drops them. Between the two every version
// opens what it sealed, so no reader is ever refused.

// ErrTooManyVersions: a rotation would make the ring hold more than
// MaxVersions versions; the rotations under way must finish first.
var ErrTooManyVersions = fmt.Errorf("the tenant's data key has %d versions; retire the older ones first", MaxVersions)

// ErrRetireCurrent: Retire was asked to drop the current version.
var ErrRetireCurrent = errors.New("the current data key version cannot be retired")

// Rotate makes a new version of the tenant's data key current (making the
// tenant's first key if it has none) and returns it: from then on every
// node seals under it, at once for the values it writes (sealed under
// Fresh's key), while every older version still opens what it sealed.
func (t *Keys) Rotate(ctx context.Context, tenant string) (*Key, error) {
	return t.change(ctx, tenant, func(r *ring) error {
		if len(r.versions) >= MaxVersions {
			return ErrTooManyVersions
		}
		raw := make([]byte, rootkey.KeySize)
		if _, err := io.ReadFull(t.rand, raw); err != nil {
			return fmt.Errorf("new data key: %w", err)
		}
		r.current = r.versions[len(r.versions)-1] + 1
		r.versions = append(r.versions, r.current)
		r.keys = append(r.keys, raw)
		return nil
	})
}

// Retire drops every version of the tenant's data key below version,
// which must be current or older (ErrRetireCurrent otherwise), and
// returns the key as its row then holds it. What was sealed under a
// retired version never opens again: retire only what no record uses.
func (t *Keys) Retire(ctx context.Context, tenant string, version uint32) (*Key, error) {
	return t.change(ctx, tenant, func(r *ring) error {
		if r.current < version {
			return fmt.Errorf("%w: version %d is current, not %d", ErrRetireCurrent, r.current, version)
		}
		i := slices.IndexFunc(r.versions, func(v uint32) bool { return v >= version })
		if i <= 0 {
			return errUnchanged
		}
		r.versions, r.keys = r.versions[i:], r.keys[i:]
		return nil
	})
}

// errUnchanged: a change found nothing to do.
var errUnchanged = errors.New("unchanged")

// change applies f to the tenant's ring as its row holds it now and
// stores the result if the row still holds what was read; then it holds
// the new key as the tenant's.
func (t *Keys) change(ctx context.Context, tenant string, f func(*ring) error) (*Key, error) {
	for range 5 {
		if t.root.Sealed() {
			return nil, rootkey.ErrSealed
		}
		tn, err := t.st.GetTenant(ctx, tenant)
		if err != nil {
			return nil, fmt.Errorf("tenant %q: %w", tenant, err)
		}
		if tn.DataKey == nil { // never used: make its first key, then change it
			if _, err := t.Fresh(ctx, tenant); err != nil {
				return nil, err
			}
			continue
		}
		next, err := t.changed(tenant, tn.DataKey, f)
		if errors.Is(err, errUnchanged) {
			return t.Fresh(ctx, tenant)
		} else if err != nil {
			return nil, err
		}
		switch err := t.st.RewrapTenantDataKey(ctx, tenant, tn.DataKey, next); {
		case errors.Is(err, store.ErrConflict): // changed meanwhile: read it again
			continue
		case err != nil:
			return nil, fmt.Errorf("tenant %q: storing its data key: %w", tenant, err)
		}
		t.Drop(tenant)
		return t.Fresh(ctx, tenant)
	}
	return nil, fmt.Errorf("tenant %q: data key: %w", tenant, store.ErrConflict)
}

// changed opens sealed, applies f to the ring and seals the result.
func (t *Keys) changed(tenant string, sealed []byte, f func(*ring) error) ([]byte, error) {
	raw, err := t.root.Decrypt(sealed, rootAD(tenant))
	if err != nil {
		return nil, fmt.Errorf("tenant %q: data key: %w", tenant, err)
	}
	defer clear(raw)
	r, err := parseRing(raw)
	if err != nil {
		return nil, fmt.Errorf("tenant %q: %w", tenant, err)
	}
	if err := f(&r); err != nil {
		clearRing(r)
		return nil, err
	}
	plain := r.encode()
	defer clear(plain)
	clearRing(r)
	next, err := t.root.Encrypt(plain, rootAD(tenant))
	if err != nil {
		return nil, fmt.Errorf("tenant %q: sealing its data key: %w", tenant, err)
	}
	return next, nil
}

// clearRing overwrites the keys the ring holds.
func clearRing(r ring) {
	for _, k := range r.keys {
		clear(k)
	}
}

// RecordAD is the additional data a record of the store is sealed with
// under its tenant's data key, by kind: what binds a sealed value to the
// row it is stored in (the tenant is bound by the key). The engines that
// seal the records and the rotation that rewraps them use it alike.
func RecordAD(tenant string, ref store.SealedRef) []byte {
	switch ref.Kind {
	case store.SealedTransitVersion:
		return []byte("transit-key-version\x00" + ref.Name + "\x00" + strconv.Itoa(ref.Version))
	case store.SealedSecretMeta:
		return []byte("kv2:meta\x00" + tenant + "\x00" + ref.Name)
	case store.SealedSecretValue:
		return []byte("kv2:value\x00" + tenant + "\x00" + ref.Name + "\x00" + strconv.Itoa(ref.Version))
	}
	return nil
}

// Rewrap opens sealed with ad under whichever version sealed it and seals
// it again under the current version; nil, nil when it already is under
// the current version. What does not open is ErrOpen.
func (k *Key) Rewrap(sealed, ad []byte) ([]byte, error) {
	if v, ok := SealedVersion(sealed); ok && v == k.current {
		return nil, nil
	}
	pt, err := k.Open(sealed, ad)
	if err != nil {
		return nil, err
	}
	defer clear(pt)
	return k.Seal(pt, ad)
}
