package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
)

// ErrCorrupt: what the store holds for a path does not open under its
// tenant's data key, or does not parse. The store or its sealing is
// broken (a 500), or a row was moved.
var ErrCorrupt = errors.New("stored secret does not load")

// Store is what the engine needs of the store: store.Secrets (every
// backend implements it).
type Store interface {
	GetSecret(ctx context.Context, tenant, path string) (store.SecretMeta, error)
	GetSecretValue(ctx context.Context, tenant, path string, version int) (store.SecretValue, error)
	PutSecret(ctx context.Context, m store.SecretMeta, add *store.SecretValue, erase []int) (int64, error)
	DeleteSecret(ctx context.Context, tenant, path string) error
	ListSecrets(ctx context.Context, tenant, prefix, start string, limit int) ([]string, error)
	GetSecretConfig(ctx context.Context, tenant string) ([]byte, error)
	SetSecretConfig(ctx context.Context, tenant string, config []byte) error
}

var _ Store = store.Store(nil)

// Options configure New.
type Options struct {
	Store Store
	Keys  *tenantkey.Keys
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Logger; nil discards. Values and custom metadata are never logged.
	Logger *slog.Logger
	// Retries bounds the attempts of a write without cas that loses a
	// race to another writer of its path (0: DefaultRetries).
	Retries int
	// CacheBytes bounds the read cache, which holds sealed values and the
	// metadata a read needs (0: DefaultCacheBytes; negative: no cache).
	// With it the engine also keeps each tenant's mount configuration,
	// which writes apply.
	CacheBytes int64
	// CacheMaxAge is how old a cached path may be when it is served (0:
	// DefaultCacheMaxAge): it bounds how stale a node that missed a change
	// notice can be.
	CacheMaxAge time.Duration
	// Notices, if set, announce this engine's changes to the fleet and
	// drop what other nodes change, and the cache on a seal or a tenant's
	// deletion. Without it only this engine's own changes are seen at once
	// (a single node); other writers' within CacheMaxAge.
	Notices Notices
}

// DefaultRetries is how many times a write without cas is tried against
// writers of the same path before it fails with store.ErrConflict.
const DefaultRetries = 16

// Engine is the KV version 2 engine over a store. Between calls it keeps
// only a bounded cache of sealed values and the metadata a read needs
// (see CacheChannel), never a value in the clear.
type Engine struct {
	st      Store
	keys    *tenantkey.Keys
	now     func() time.Time
	log     *slog.Logger
	retries int
	cache   *readCache   // nil: none
	configs *configCache // nil: none (with the read cache, not without)
	notices Notices      // nil: no fleet, no node events
	// internal: this is the view of keygate's own records (Internal).
	internal bool
}

// Internal returns the engine's view of keygate's own records, kept beside
// a tenant's secrets under paths that begin with InternalPrefix, which no
// user's path can (ValidPath) and which the other view never lists: TOTP
// keys and password policies. The mount configuration does not apply to
// them (a mount that requires cas does not make their writes need one).
func (e *Engine) Internal() *Engine {
	v := *e
	v.internal = true
	return &v
}

// checkPath checks a path for the view: a user's, or an internal record's.
func (e *Engine) checkPath(path string) error {
	if e.internal {
		return validInternal(path)
	}
	return ValidPath(path)
}

// mountConfig is the mount configuration that applies in the view.
func (e *Engine) mountConfig(ctx context.Context, tenant string) (MountConfig, error) {
	if e.internal {
		return MountConfig{}, nil
	}
	return e.writeConfig(ctx, tenant)
}

var _ Service = (*Engine)(nil)

// New makes an engine.
func New(o Options) (*Engine, error) {
	if o.Store == nil || o.Keys == nil {
		return nil, errors.New("a secrets engine needs a store and the tenants' keys")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retries <= 0 {
		o.Retries = DefaultRetries
	}
	e := &Engine{st: o.Store, keys: o.Keys, now: o.Now, log: o.Logger, retries: o.Retries, notices: o.Notices}
	if o.CacheBytes >= 0 {
		if o.CacheBytes == 0 {
			o.CacheBytes = DefaultCacheBytes
		}
		if o.CacheMaxAge <= 0 {
			o.CacheMaxAge = DefaultCacheMaxAge
		}
		e.cache = newReadCache(o.CacheBytes, o.CacheMaxAge)
		e.configs = newConfigCache(o.CacheMaxAge)
		if o.Notices != nil {
			e.listen(context.Background(), o.Notices)
		}
	}
	// Without a cache of its own it still announces its changes (changed).
	return e, nil
}

// clock is now at the stores' precision.
func (e *Engine) clock() int64 { return e.now().UnixMicro() }

// key returns the tenant's data key: held (fresh false), or as its row
// holds it now (fresh), which new values are sealed under. A sealed
// node is ErrSealed; a tenant that does not exist ErrNotFound.
func (e *Engine) key(ctx context.Context, tenant string, fresh bool) (*tenantkey.Key, error) {
	if e.keys.Sealed() {
		return nil, fmt.Errorf("%w: %w", ErrSealed, rootkey.ErrSealed)
	}
	get := e.keys.Get
	if fresh {
		get = e.keys.Fresh
	}
	k, err := get(ctx, tenant)
	switch {
	case errors.Is(err, rootkey.ErrSealed):
		return nil, fmt.Errorf("%w: %w", ErrSealed, err)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
		return nil, fmt.Errorf("%w: tenant %q", ErrNotFound, tenant)
	}
	return k, err
}

// state is a path as read for a change: its metadata (nil: no such path),
// the revision read and the key that opened it.
type state struct {
	meta   *pathMeta
	rev    int64
	dk     *tenantkey.Key
	sealed []byte // the metadata as the store holds it
}

// load reads the path's metadata and opens it. A blob that does not open
// under the held data key is tried once more under the row's current
// one: the held key may be a deleted tenant's of the same name.
func (e *Engine) load(ctx context.Context, tenant, path string) (*state, error) {
	dk, err := e.key(ctx, tenant, false)
	if err != nil {
		return nil, err
	}
	row, err := e.st.GetSecret(ctx, tenant, path)
	if errors.Is(err, store.ErrNotFound) {
		return &state{dk: dk}, nil
	} else if err != nil {
		return nil, err
	}
	raw, dk, err := e.open(ctx, dk, tenant, row.Sealed, metaAD(tenant, path))
	if err != nil {
		return nil, fmt.Errorf("%w: %s metadata: %w", ErrCorrupt, path, err)
	}
	m, err := unmarshalMeta(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s metadata: %w", ErrCorrupt, path, err)
	}
	return &state{meta: m, rev: row.Revision, dk: dk, sealed: row.Sealed}, nil
}

// open opens sealed under dk, else under the tenant's key as its row
// holds it now; it returns the key that opened it.
func (e *Engine) open(ctx context.Context, dk *tenantkey.Key, tenant string, sealed, ad []byte) ([]byte, *tenantkey.Key, error) {
	pt, err := dk.Open(sealed, ad)
	if !errors.Is(err, tenantkey.ErrOpen) {
		return pt, dk, err
	}
	fresh, ferr := e.key(ctx, tenant, true)
	if ferr != nil {
		return nil, nil, ferr
	}
	if fresh == dk {
		return nil, nil, err
	}
	pt, err = fresh.Open(sealed, ad)
	return pt, fresh, err
}

// value reads and opens version v of the path.
func (e *Engine) value(ctx context.Context, s *state, tenant, path string, v int) ([]byte, error) {
	pt, _, err := e.sealedValue(ctx, s, tenant, path, v)
	return pt, err
}

// sealedValue reads and opens version v of the path, and returns it also
// as the store holds it, with its additional data.
func (e *Engine) sealedValue(ctx context.Context, s *state, tenant, path string, v int) ([]byte, sealedValue, error) {
	row, err := e.st.GetSecretValue(ctx, tenant, path, v)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sealedValue{}, fmt.Errorf("%w: %s version %d", ErrNotFound, path, v)
	} else if err != nil {
		return nil, sealedValue{}, err
	}
	ad := valueAD(tenant, path, v)
	pt, _, err := e.open(ctx, s.dk, tenant, row.Sealed, ad)
	if err == nil {
		pt, err = unwrapValue(s.meta.Gen, pt)
	}
	if err != nil {
		return nil, sealedValue{}, fmt.Errorf("%w: %s version %d: %w", ErrCorrupt, path, v, err)
	}
	return pt, sealedValue{sealed: row.Sealed, bound: s.dk.Bind(ad)}, nil
}

// config reads the tenant's mount configuration (none set: zeros).
func (e *Engine) config(ctx context.Context, tenant string) (MountConfig, error) {
	raw, err := e.st.GetSecretConfig(ctx, tenant)
	if errors.Is(err, store.ErrNotFound) {
		return MountConfig{}, nil
	} else if err != nil {
		return MountConfig{}, err
	}
	var c mountConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return MountConfig{}, fmt.Errorf("%w: mount configuration: %w", ErrCorrupt, err)
	}
	return MountConfig(c), nil
}

// change is what a step of update decides: the path's metadata as it is
// to be stored (nil: nothing to write), a new version's data, and the
// versions whose values to erase.
type change struct {
	meta  *pathMeta
	add   []byte // data of version meta.Current; nil: none
	erase []int
}

// update reads the path, lets decide what to change, and stores that
// against the revision read; when another writer got there first, it
// reads again and decides again (decide's checks, cas among them, see
// the path as it is then), up to e.retries times.
func (e *Engine) update(ctx context.Context, tenant, path string, decide func(s *state, cfg MountConfig) (change, error)) error {
	if err := e.checkPath(path); err != nil {
		return err
	}
	for range e.retries {
		s, err := e.load(ctx, tenant, path)
		if err != nil {
			return err
		}
		cfg, err := e.mountConfig(ctx, tenant)
		if err != nil {
			return err
		}
		c, err := decide(s, cfg)
		if err != nil || c.meta == nil {
			return err
		}
		err = e.store(ctx, tenant, path, s, c)
		e.changed(ctx, tenant, path)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	// The path is no secret (the store shows it); its data is not logged.
	e.log.Warn("secret write gave up: other writers of the path got there first", "tenant", tenant, "path", path, "attempts", e.retries)
	return fmt.Errorf("secret %q: gave up after %d writers got there first: %w", path, e.retries, store.ErrConflict)
}

// store seals c under the tenant's data key as its row holds it now and
// writes it from s's revision.
func (e *Engine) store(ctx context.Context, tenant, path string, s *state, c change) error {
	dk, err := e.key(ctx, tenant, true)
	if err != nil {
		return err
	}
	raw, err := c.meta.marshal()
	if err != nil {
		return err
	}
	sealed, err := dk.Seal(raw, metaAD(tenant, path))
	if err != nil {
		return err
	}
	row := store.SecretMeta{Tenant: tenant, Path: path, Sealed: sealed, CurrentVersion: c.meta.Current,
		OldestVersion: c.meta.oldest(), Revision: s.rev,
		CreatedAt: fromMicros(c.meta.Created), UpdatedAt: fromMicros(c.meta.Updated)}
	var add *store.SecretValue
	if c.add != nil {
		v := c.meta.Current
		sv, err := dk.Seal(wrapValue(c.meta.Gen, c.add), valueAD(tenant, path, v))
		if err != nil {
			return err
		}
		add = &store.SecretValue{Version: v, Sealed: sv, CreatedAt: fromMicros(c.meta.version(v).Created)}
	}
	_, err = e.st.PutSecret(ctx, row, add, c.erase)
	return err
}
