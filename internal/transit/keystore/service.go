package keystore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/transit"
)

// Errors callers branch on with errors.Is. Store failures come wrapped as
// they are (store.ErrUnavailable, ...), and a sealed node is
// rootkey.ErrSealed.
var (
	// ErrNotFound: the tenant has no key of that name (or the tenant does
	// not exist).
	ErrNotFound = errors.New("transit key not found")
	// ErrExists: import names a key the tenant has already.
	ErrExists = errors.New("transit key already exists")
	// ErrDeletionNotAllowed: the key's deletion_allowed is not set.
	ErrDeletionNotAllowed = errors.New("deletion is not allowed for this key")
	// ErrInvalidName: the name is outside Vault's key name grammar (see
	// ValidName).
	ErrInvalidName = errors.New("invalid transit key name")
	// ErrCorrupt: what the store holds for the key does not load: its
	// configuration or a version does not parse or open under the
	// tenant's data key. The store or its sealing is broken (a 500).
	ErrCorrupt = errors.New("stored transit key does not load")
)

// Channel is the node notice channel on which changes are announced.
const Channel = "transit"

// RotationPrincipal is whom automatic rotations generate their keys as, in
// their tenant's turn for the engine's workers: a queue of their own, apart
// from the tenant's clients and users.
const RotationPrincipal = "keygate:auto-rotation"

// MaxNameBytes bounds a key name: what an audit record holds of a key's
// name (audit.MaxIDLen), so that every record of a key names it. Vault
// has no such bound.
const MaxNameBytes = 128

// ValidName reports whether name can name a key: Vault's key name grammar
// (`\w(([\w-.@]+)?\w)?`: a word character, then word characters, '-',
// '.' or '@', ending with a word character; word characters are ASCII
// letters, digits and '_'), at most MaxNameBytes.
func ValidName(name string) bool { return len(name) <= MaxNameBytes && vaultName(name) }

// LongName reports whether name is one Vault's grammar takes but longer
// than MaxNameBytes: a name to refuse saying why where a key is made,
// rather than as a path that names no key.
func LongName(name string) bool { return len(name) > MaxNameBytes && vaultName(name) }

// vaultName reports whether name follows Vault's key name grammar.
func vaultName(name string) bool {
	n := len(name)
	if n == 0 || !isWord(name[0]) || !isWord(name[n-1]) {
		return false
	}
	for i := 1; i < n-1; i++ {
		if c := name[i]; !isWord(c) && c != '-' && c != '.' && c != '@' {
			return false
		}
	}
	return true
}

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// Store is what the service reads and writes of the store: the tenants'
// transit keys, and the tenants whose keys the automatic rotations scan
// (store.Store is one).
type Store interface {
	ListTenants(ctx context.Context) ([]store.Tenant, error)
	CreateTransitKey(ctx context.Context, k store.TransitKey, first store.TransitKeyVersion) error
	RestoreTransitKey(ctx context.Context, k store.TransitKey, versions []store.TransitKeyVersion) error
	GetTransitKey(ctx context.Context, tenant, name string) (store.TransitKey, []store.TransitKeyVersion, error)
	GetTransitKeyVersion(ctx context.Context, tenant, name string, version int) (store.TransitKeyVersion, error)
	ListTransitKeys(ctx context.Context, tenant string) ([]string, error)
	UpdateTransitKey(ctx context.Context, k store.TransitKey) error
	AddTransitKeyVersion(ctx context.Context, v store.TransitKeyVersion) error
	TrimTransitKey(ctx context.Context, tenant, name string, minAvailable int) error
	DeleteTransitKey(ctx context.Context, tenant, name string, revision int64) error
}

// Node is what the service needs of the node it runs on (*node.Node is
// one): the fleet's notices, on which it announces its changes and hears
// the other nodes', and the node's events at which it forgets what it
// holds (a seal, a tenant's deletion) or rotates keys (a tick).
type Node interface {
	Subscribe(ctx context.Context, channel string, handle func(ctx context.Context, payload string)) error
	Publish(ctx context.Context, channel, payload string) error
	OnSeal(f func())
	OnTenantDeleted(f func(tenant string))
	OnTick(f func(ctx context.Context))
}

// Options configure a Service. The zero value is ready for use.
type Options struct {
	Logger *slog.Logger     // nil discards logs
	Now    func() time.Time // nil means time.Now
	// Engine runs the key operations (nil: transit.New with Now).
	Engine *transit.Engine
	// CacheEntries bounds the keys held opened in memory (default 10,000).
	CacheEntries int
	// RefreshAfter is how old a cached key may be when it is served
	// (default 30 s): a use after that reads it again first, and a use
	// from 3/4 of it on re-reads it in the background. It bounds how stale
	// a node that missed a notice can be.
	RefreshAfter time.Duration
	// RotateCheckEvery is how often the node's schedule looks for keys whose
	// auto_rotate_period has passed (default 10 minutes; the node ticks once
	// a minute).
	RotateCheckEvery time.Duration
	// Attempts bounds how often a change is tried again after another node
	// changed the key first (default 8).
	Attempts int
}

// Service keeps a node's transit keys. Create it with New; it is safe for
// concurrent use.
type Service struct {
	n     Node
	st    Store
	keys  *tenantkey.Keys
	eng   *transit.Engine
	log   *slog.Logger
	now   func() time.Time
	opts  Options
	cache *cache

	fmu     sync.Mutex
	flights map[keyID]*flight // reads in progress, one per key
	closed  bool              // Close was called: no more background reads

	wmu   sync.Mutex
	wrap  map[string]*transit.WrappingKey // by tenant
	wgen  sync.Mutex                      // one wrapping key read or made at a time
	wepch uint64                          // one more at each seal

	rmu       sync.Mutex
	nextCheck time.Time // of the automatic rotations
	scanning  bool      // a scan for them runs: one at a time

	ctx    context.Context // background reads; cancelled by Close
	cancel context.CancelFunc
	bg     sync.WaitGroup
}

// flight is a read of a key from the store that other callers wait for.
type flight struct {
	done  chan struct{}
	e     *entry
	err   error
	again bool // a change was announced during the read: read once more after it (under fmu)
}

// New returns the service of the transit keys in st, sealed under the
// tenants' data keys, and subscribes it to the fleet's notices and the
// node's seal, tenant deletions and schedule through n. Close stops its
// background reads.
func New(st Store, keys *tenantkey.Keys, n Node, o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Engine == nil {
		o.Engine = transit.New(transit.Options{Now: o.Now})
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = 10_000
	}
	if o.RefreshAfter <= 0 {
		o.RefreshAfter = 30 * time.Second
	}
	if o.RotateCheckEvery <= 0 {
		o.RotateCheckEvery = 10 * time.Minute
	}
	if o.Attempts <= 0 {
		o.Attempts = 8
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{n: n, st: st, keys: keys, eng: o.Engine, log: o.Logger, now: o.Now, opts: o, cache: newCache(o.CacheEntries),
		flights: map[keyID]*flight{}, wrap: map[string]*transit.WrappingKey{}, ctx: ctx, cancel: cancel}
	if err := n.Subscribe(ctx, Channel, s.notice); err != nil {
		// Redis is down: the subscription is made when it is back, and
		// until then no cached key older than RefreshAfter is served.
		o.Logger.Warn("transit notices: subscribing failed; retrying in the background", "err", err)
	}
	n.OnSeal(s.forget)
	n.OnTenantDeleted(s.forgetTenant)
	n.OnTick(s.tick)
	return s, nil
}

// Close stops the background reads and waits for them.
func (s *Service) Close() {
	s.fmu.Lock()
	s.closed = true
	s.fmu.Unlock()
	s.cancel()
	s.bg.Wait()
}

// Engine is the engine that runs operations on the service's keys.
func (s *Service) Engine() *transit.Engine { return s.eng }

// Sealed reports whether the node is sealed (its root key, and so the
// tenants' data keys): every operation then fails.
func (s *Service) Sealed() bool { return s.keys.Sealed() }

// forget drops every opened key, and every key derived from one, when the
// node seals.
func (s *Service) forget() {
	s.cache.clear()
	s.eng.ForgetDerived()
	s.wmu.Lock()
	s.wepch++
	clear(s.wrap)
	s.wmu.Unlock()
}

// forgetTenant drops what the service holds of a deleted tenant: its
// opened keys and its wrapping key, which a tenant made again under its
// name does not have.
func (s *Service) forgetTenant(tenant string) {
	for _, e := range s.cache.dropTenant(tenant) {
		s.eng.ForgetKey(e.key)
	}
	s.wmu.Lock()
	s.wepch++
	delete(s.wrap, tenant)
	s.wmu.Unlock()
}

// Get returns the tenant's key: the cached snapshot, or the key read from
// the store. No snapshot read more than RefreshAfter ago is served: it is
// read again first (one read, however many ask). A snapshot in use is
// re-read in the background once it is 3/4 of RefreshAfter old, while it
// goes on serving, so that a key in steady use rarely waits.
func (s *Service) Get(ctx context.Context, tenant, name string) (*transit.Key, error) {
	id := keyID{tenant, name}
	e := s.cache.get(id)
	if e != nil {
		age := s.now().Sub(e.loaded)
		if age <= s.opts.RefreshAfter-s.opts.RefreshAfter/4 {
			return e.key, nil
		}
		if age <= s.opts.RefreshAfter {
			s.refresh(id)
			return e.key, nil
		}
	} else if !ValidName(name) {
		return nil, ErrNotFound
	}
	e, err := s.fetch(ctx, id, e)
	if err != nil {
		return nil, err
	}
	return e.key, nil
}

// Newer returns the key as it is once it has version, which a text
// (ciphertext, signature, HMAC) names and the snapshot the caller used
// does not have yet: another node rotated the key. It reads that version's
// row first (one indexed read), and the whole key only if the row exists;
// otherwise it returns the key as cached, and the caller's retry fails as
// before.
func (s *Service) Newer(ctx context.Context, tenant, name string, version int) (*transit.Key, error) {
	id := keyID{tenant, name}
	cur := s.cache.get(id)
	if cur != nil && cur.key.LatestVersion() >= version {
		return cur.key, nil
	}
	if _, err := s.st.GetTransitKeyVersion(ctx, tenant, name, version); errors.Is(err, store.ErrNotFound) {
		if cur != nil {
			return cur.key, nil
		}
		return s.Get(ctx, tenant, name)
	} else if err != nil {
		return nil, err
	}
	e, err := s.fetch(ctx, id, cur)
	if err != nil {
		return nil, err
	}
	return e.key, nil
}

// readTimeout bounds a read of a key from the store, which every caller
// waiting for it shares (the stores bound each statement themselves, by
// less).
const readTimeout = 10 * time.Second

// List returns the names of the tenant's keys, sorted.
func (s *Service) List(ctx context.Context, tenant string) ([]string, error) {
	names, err := s.st.ListTransitKeys(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if ValidName(n) { // the tenant's wrapping key is stored under a name outside the grammar
			out = append(out, n)
		}
	}
	return out, nil
}

// fetch reads the key from the store and caches it; callers asking for
// the same key meanwhile share the read. reuse is a previous entry whose
// opened versions are kept where their rows have not changed.
func (s *Service) fetch(ctx context.Context, id keyID, reuse *entry) (*entry, error) {
	s.fmu.Lock()
	if f := s.flights[id]; f != nil {
		s.fmu.Unlock()
		select {
		case <-f.done:
			return f.e, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	s.flights[id] = f
	s.fmu.Unlock()
	mark := s.cache.mark(id)
	// The read serves every waiter: the caller's cancellation does not cut
	// it short.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	f.e, f.err = s.read(rctx, id, reuse)
	cancel()
	switch {
	case f.err == nil:
		s.cache.put(id, f.e, mark) // not if the key was dropped meanwhile (a deletion's notice)
	case errors.Is(f.err, ErrNotFound):
		s.cache.drop(id)
	}
	s.fmu.Lock()
	delete(s.flights, id)
	again := f.again
	s.fmu.Unlock()
	close(f.done)
	if again {
		s.refresh(id)
	}
	return f.e, f.err
}

// refresh re-reads the key in the background; when a read is on already,
// once more after it, since it may have begun before what made the key
// be re-read.
func (s *Service) refresh(id keyID) {
	s.fmu.Lock()
	f := s.flights[id]
	if f != nil {
		f.again = true
	}
	start := f == nil && !s.closed
	if start {
		s.bg.Add(1) // under fmu: never after Close has begun to wait
	}
	s.fmu.Unlock()
	if !start {
		return
	}
	go func() {
		defer s.bg.Done()
		if _, err := s.fetch(s.ctx, id, s.cache.get(id)); err != nil && !errors.Is(err, ErrNotFound) {
			// Serving a snapshot that cannot be checked is what a missed
			// notice would do; dropping it makes the next use read again.
			s.cache.drop(id)
			if s.ctx.Err() == nil {
				s.log.Warn("re-reading a transit key failed", "tenant", id.tenant, "key", id.name, "err", err)
			}
		}
	}()
}

// read reads the key and opens its versions. A version that does not open
// under the data key this node holds is tried once more under the one the
// tenant's row holds now: the node's may be that of a tenant deleted
// before this one was made under its name.
func (s *Service) read(ctx context.Context, id keyID, reuse *entry) (*entry, error) {
	dk, err := s.dataKey(ctx, id.tenant)
	if err != nil {
		return nil, err
	}
	tk, rows, err := s.st.GetTransitKey(ctx, id.tenant, id.name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	} else if err != nil {
		return nil, err
	}
	e, err := s.open(dk, tk, rows, reuse)
	if errors.Is(err, tenantkey.ErrOpen) {
		fresh, ferr := s.sealingKey(ctx, id.tenant)
		if ferr != nil {
			return nil, ferr
		}
		if fresh != dk {
			e, err = s.open(fresh, tk, rows, reuse)
		}
	}
	return e, err
}

// dataKey is the tenant's data key to open its keys' versions with (see
// tenantkey.Keys.Get); a tenant that does not exist has no keys.
func (s *Service) dataKey(ctx context.Context, tenant string) (*tenantkey.Key, error) {
	return tenantKey(s.keys.Get(ctx, tenant))
}

// sealingKey is the tenant's data key as its row holds it now, read
// afresh: the one new key material is sealed under (see
// tenantkey.Keys.Fresh).
func (s *Service) sealingKey(ctx context.Context, tenant string) (*tenantkey.Key, error) {
	return tenantKey(s.keys.Fresh(ctx, tenant))
}

func tenantKey(dk *tenantkey.Key, err error) (*tenantkey.Key, error) {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
		return nil, ErrNotFound
	}
	return dk, err
}

// open assembles the snapshot of a key read from the store: its
// configuration, with the latest version and the oldest one kept as the
// store's columns say, and its versions from min_decryption_version up
// (older ones are opened only when a configuration change needs them).
func (s *Service) open(dk *tenantkey.Key, tk store.TransitKey, rows []store.TransitKeyVersion, reuse *entry) (*entry, error) {
	corrupt := func(what string, err error) error {
		return fmt.Errorf("%w: %s/%s: %s: %w", ErrCorrupt, tk.Tenant, tk.Name, what, err)
	}
	cfg, err := transit.UnmarshalConfig(tk.Config)
	if err != nil {
		return nil, corrupt("configuration", err)
	}
	if cfg.Name != tk.Name || cfg.Type.String() != tk.Type {
		return nil, corrupt("configuration", errors.New("names another key"))
	}
	cfg.LatestVersion = tk.Latest
	if tk.MinAvailable > 1 && tk.MinAvailable > cfg.MinAvailableVersion {
		cfg.MinAvailableVersion = tk.MinAvailable
	}
	e := &entry{revision: tk.Revision, created: tk.CreatedAt, loaded: s.now(), sealed: make(map[int][]byte, len(rows))}
	var vs []*transit.Version
	for _, r := range rows {
		if r.Version < cfg.MinDecryptionVersion {
			continue
		}
		v, err := s.openVersion(dk, r, reuse)
		if err != nil {
			return nil, corrupt("version "+strconv.Itoa(r.Version), err)
		}
		vs = append(vs, v)
		e.sealed[r.Version] = r.Sealed
	}
	if e.key, err = transit.LoadKey(cfg, vs...); err != nil {
		return nil, corrupt("versions", err)
	}
	return e, nil
}

// openVersion opens a version's row, or takes it from reuse when reuse
// holds the same row.
func (s *Service) openVersion(dk *tenantkey.Key, r store.TransitKeyVersion, reuse *entry) (*transit.Version, error) {
	if reuse != nil && string(reuse.sealed[r.Version]) == string(r.Sealed) {
		if v, ok := reuse.key.Version(r.Version); ok {
			return v, nil
		}
	}
	pt, err := dk.Open(r.Sealed, versionAD(r.Name, r.Version))
	if err != nil {
		return nil, err
	}
	defer clear(pt)
	v, err := transit.UnmarshalVersion(pt)
	if err != nil {
		return nil, err
	}
	if v.Number() != r.Version {
		return nil, errors.New("the row holds another version")
	}
	return v, nil
}

// sealVersion seals a version for its row.
func sealVersion(dk *tenantkey.Key, name string, v *transit.Version) ([]byte, error) {
	b, err := transit.MarshalVersion(v)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	return dk.Seal(b, versionAD(name, v.Number()))
}

// versionAD binds a sealed version to its key and number (the data key
// binds the tenant).
func versionAD(name string, version int) []byte {
	return tenantkey.RecordAD("", store.SealedRef{Kind: store.SealedTransitVersion, Name: name, Version: version})
}

// notice is a change another node (or this one) announced:
// "tenant name created revision", revision 0 for a deletion.
func (s *Service) notice(_ context.Context, payload string) {
	f := strings.Fields(payload)
	if len(f) != 4 {
		s.log.Warn("malformed transit notice ignored")
		return
	}
	created, err1 := strconv.ParseInt(f[2], 10, 64)
	rev, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		s.log.Warn("malformed transit notice ignored")
		return
	}
	id := keyID{f[0], f[1]}
	if rev == 0 {
		s.forgetKey(id) // and a read in progress does not cache the key
		return
	}
	e := s.cache.get(id)
	switch {
	case e == nil:
		s.rereadInFlight(id)
	case e.created.UnixNano() == created && e.revision >= rev:
		// this node's own change, or one it has read already
	default:
		s.refresh(id)
	}
}

// rereadInFlight makes a read of the key in progress, which may have begun
// before the change just announced, be followed by another.
func (s *Service) rereadInFlight(id keyID) {
	s.fmu.Lock()
	if f := s.flights[id]; f != nil {
		f.again = true
	}
	s.fmu.Unlock()
}

// forgetKey drops a deleted key: its entry and the keys derived from its
// versions.
func (s *Service) forgetKey(id keyID) {
	if e := s.cache.drop(id); e != nil {
		s.eng.ForgetKey(e.key)
	}
}

// announce tells the fleet that the key changed (e nil: deleted). A notice
// that cannot be sent is logged: other nodes see the change within
// RefreshAfter.
func (s *Service) announce(ctx context.Context, id keyID, e *entry) {
	payload := id.tenant + " " + id.name + " 0 0"
	if e != nil {
		payload = id.tenant + " " + id.name + " " + strconv.FormatInt(e.created.UnixNano(), 10) + " " + strconv.FormatInt(e.revision, 10)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.n.Publish(ctx, Channel, payload); err != nil {
		s.log.Warn("announcing a transit key change failed; other nodes re-read the key within refresh_after",
			"tenant", id.tenant, "key", id.name, "err", err)
	}
}
