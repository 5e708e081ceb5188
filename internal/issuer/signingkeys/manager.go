// Package signingkeys manages the token service's signing keys: it creates
// them, seals them under the keyring for the store, schedules their
// rotation and retirement, and hands out the signer in force and the JWKS
// to publish. Private keys exist in the clear only in memory.
package signingkeys

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/jose"
)

// Sealer encrypts private keys for the store; the keyring (rootkey.Keyring) implements it.
// aad binds a ciphertext to its record, so a sealed key cannot be moved.
// While Sealed reports true the manager publishes the stored public keys
// but holds no private key, creates none and signs nothing.
type Sealer interface {
	Encrypt(plaintext, aad []byte) ([]byte, error)
	Decrypt(ciphertext, aad []byte) ([]byte, error)
	Sealed() bool
}

// Store is what the manager needs of the store: the signing keys, each
// sealed. The methods are store.Store's, with the contracts written there
// (a kid stored twice is store.ErrConflict, an unknown one
// store.ErrNotFound), and every backend implements them.
type Store interface {
	ListSigningKeys(ctx context.Context) ([]store.SigningKey, error)
	PutSigningKey(ctx context.Context, k store.SigningKey) error
	RetireSigningKey(ctx context.Context, kid string, at time.Time) error
	DeleteSigningKey(ctx context.Context, kid string) error
}

var _ Store = store.Store(nil) // the whole store, and so each backend, is one

// Policy schedules signing keys.
type Policy struct {
	Alg jose.Alg // ES256 by default; RS256, PS256 and EdDSA by configuration
	// RotateEvery is how long a key signs before its successor takes
	// over; 0 is manual rotation only (Rotate), never by the schedule.
	RotateEvery time.Duration
	// PrePublish is how long a new key sits in the JWKS before it signs
	// anything, so that every gateway's cache has it first (default 1 h;
	// keep it above the gateways' JWKS refresh interval).
	PrePublish time.Duration
	// MaxTokenTTL is the longest lifetime of a token the key signs; a
	// retired key stays in the JWKS this long after it stops signing, plus
	// RetireSlack for clock skew (default 1 h and 5 min).
	MaxTokenTTL time.Duration
	RetireSlack time.Duration
}

func (p *Policy) defaults() {
	if p.Alg == 0 {
		p.Alg = jose.ES256
	}
	if p.PrePublish == 0 {
		p.PrePublish = time.Hour
	}
	if p.MaxTokenTTL == 0 {
		p.MaxTokenTTL = time.Hour
	}
	if p.RetireSlack == 0 {
		p.RetireSlack = 5 * time.Minute
	}
}

// Manager owns the signing keys: it creates, seals, stores, schedules and
// retires them, and hands out the signer in force and the JWKS to publish as
// one immutable snapshot.
type Manager struct {
	store  Store
	sealer Sealer
	policy Policy
	now    func() time.Time

	mu    sync.Mutex // one rotation or reload at a time
	state atomic.Pointer[keyState]
}

type keyState struct {
	signer   *jose.Signer // the key in force
	access   *jose.Signer // the same, writing "typ":"at+jwt" (RFC 9068)
	jwks     []byte       // the published public keys
	set      *jose.KeySet // the same, parsed, for verifying own tokens
	activeAt time.Time    // when the key in force became active
}

// Status is the key schedule's state, for metrics.
type Status struct {
	Published   int       // keys in the JWKS
	ActiveSince time.Time // when the key in force became active; zero before Load
}

// Status reports the key schedule's state. It reads one snapshot and
// takes no lock.
func (m *Manager) Status() Status {
	s := m.state.Load()
	if s == nil {
		return Status{}
	}
	return Status{Published: s.set.Len(), ActiveSince: s.activeAt}
}

// ErrNoActiveKey means no stored key is active yet (all pre-published).
var ErrNoActiveKey = errors.New("no signing key is active")

// ErrSealed means the root key is not loaded: private keys cannot be
// unsealed or created until an operator unseals the node. HTTP answers it
// with 503.
var ErrSealed = errors.New("sealed: the signing key is not loaded")

// New returns a manager; call Load before use.
func New(st Store, sealer Sealer, policy Policy, now func() time.Time) *Manager {
	policy.defaults()
	if now == nil {
		now = time.Now
	}
	return &Manager{store: st, sealer: sealer, policy: policy, now: now}
}

// Signer returns the signer in force, or nil before Load and while sealed.
func (m *Manager) Signer() *jose.Signer {
	if s := m.state.Load(); s != nil {
		return s.signer
	}
	return nil
}

// Sealed reports whether the sealer is sealed: nothing can be signed until
// an operator unseals it and Load runs again.
func (m *Manager) Sealed() bool { return m.sealer.Sealed() }

// DropSigner forgets the private key in force, keeping the published set,
// after the sealer has been sealed. It touches no store, so sealing takes
// effect at once even when the store is unreachable.
func (m *Manager) DropSigner() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.state.Load(); cur != nil {
		next := *cur
		next.signer, next.access = nil, nil
		m.state.Store(&next)
	}
}

// AccessSigner returns the signer in force for RFC 9068 access tokens, whose
// header says "typ":"at+jwt", or nil before Load.
func (m *Manager) AccessSigner() *jose.Signer {
	if s := m.state.Load(); s != nil {
		return s.access
	}
	return nil
}

// JWKS returns the published key set document.
func (m *Manager) JWKS() []byte {
	if s := m.state.Load(); s != nil {
		return s.jwks
	}
	return []byte(`{"keys":[]}`)
}

// KeySet returns the published keys, parsed.
func (m *Manager) KeySet() *jose.KeySet {
	if s := m.state.Load(); s != nil {
		return s.set
	}
	return jose.NewKeySet()
}

// Load reads the keys from the store, creating the first one if there is
// none, and builds the snapshot for now.
func (m *Manager) Load(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("list signing keys: %w", err)
	}
	if len(keys) == 0 {
		if m.sealer.Sealed() {
			return ErrSealed
		}
		now := m.now()
		if _, err := m.create(ctx, now, now); err != nil {
			return err
		}
		// Read back rather than use the key just made: nodes of a fleet
		// starting together on an empty store may each have made one, and
		// building from the full list makes them all pick the same signer
		// (the ordering of build is deterministic) and publish every key.
		if keys, err = m.store.ListSigningKeys(ctx); err != nil {
			return fmt.Errorf("list signing keys: %w", err)
		}
	}
	return m.build(keys, m.now())
}

// ErrInitialized means Init found signing keys in the store: it is
// initialized already, and Init changed nothing.
var ErrInitialized = errors.New("the store already holds signing keys")

// Init creates the first signing key of an empty store, sealed under the
// manager's sealer, and returns its kid: the explicit first step of a
// fleet whose nodes start sealed (an unseal then accepts only the root key
// that opens this key). A store that holds any signing key is
// ErrInitialized and is left alone. Two Inits racing on one empty store
// each store a key; one that then finds a key its sealer does not open
// deletes its own and returns ErrInitialized, so the store never keeps
// keys under two root keys (if both withdraw, it is empty again).
func (m *Manager) Init(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sealer.Sealed() {
		return "", ErrSealed
	}
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return "", fmt.Errorf("list signing keys: %w", err)
	}
	if len(keys) > 0 {
		return "", ErrInitialized
	}
	now := m.now()
	k, err := m.create(ctx, now, now)
	if err != nil {
		return "", err
	}
	if keys, err = m.store.ListSigningKeys(ctx); err != nil {
		return "", fmt.Errorf("list signing keys: %w (key %s was stored)", err, k.KID)
	}
	others := slices.DeleteFunc(keys, func(o store.SigningKey) bool { return o.KID == k.KID })
	o, err := unopened(m.sealer, others)
	if err == nil {
		return k.KID, nil
	}
	if err := m.store.DeleteSigningKey(ctx, k.KID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("another init stored key %s meanwhile, and withdrawing key %s failed: %w", o.KID, k.KID, err)
	}
	return "", fmt.Errorf("%w: another init stored key %s meanwhile; this one withdrew its key", ErrInitialized, o.KID)
}

// CheckSealer reports whether s opens every stored signing key, and how
// many keys there are, without changing the manager: what an unseal asks
// of a candidate root key before installing it (see rootkey.Verifier). A
// key s does not open is an error naming its kid and wrapping s's error
// (rootkey.ErrUnknownKey or rootkey.ErrDecrypt for the keyring); a store
// failure wraps the store's error.
func (m *Manager) CheckSealer(ctx context.Context, s Sealer) (int, error) {
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("list signing keys: %w", err)
	}
	if k, err := unopened(s, keys); err != nil {
		return 0, fmt.Errorf("signing key %s: %w", k.KID, err)
	}
	return len(keys), nil
}

// unopened returns the first of keys that s does not open, with s's error,
// or a nil error if s opens them all; what it opens it clears at once.
func unopened(s Sealer, keys []store.SigningKey) (store.SigningKey, error) {
	for _, k := range keys {
		der, err := s.Decrypt(k.Sealed, aad(k.KID))
		if err != nil {
			return k, err
		}
		clear(der)
	}
	return store.SigningKey{}, nil
}

// Reload re-reads the keys from the store and rebuilds the snapshot,
// creating, retiring and deleting nothing: what a node does when another
// node has changed the keys, and on the request path when a token names a
// kid it does not know.
func (m *Manager) Reload(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("list signing keys: %w", err)
	}
	return m.build(keys, m.now())
}

// Tick runs the schedule at now: it creates the next key PrePublish before
// the current one's term ends, retires the key it replaces, deletes keys
// whose retirement has passed, and rebuilds the snapshot. Run it
// periodically (every minute is plenty) and after another node's rotation
// notice.
func (m *Manager) Tick(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("list signing keys: %w", err)
	}
	if m.policy.RotateEvery > 0 && len(keys) > 0 && !m.sealer.Sealed() {
		newest := newestKey(keys)
		if !newest.ActiveAt.Add(m.policy.RotateEvery).After(now.Add(m.policy.PrePublish)) {
			next, err := m.create(ctx, now, newest.ActiveAt.Add(m.policy.RotateEvery))
			if err != nil {
				return err
			}
			keys = append(keys, next)
		}
	}
	if keys, err = m.retire(ctx, keys, now); err != nil {
		return err
	}
	return m.build(keys, now)
}

// Rotate creates a new key now, published at once and signing after
// PrePublish (or at once with immediate set, for a compromised key), and
// schedules the retirement of the keys it replaces. It returns the new kid.
func (m *Manager) Rotate(ctx context.Context, immediate bool) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sealer.Sealed() {
		return "", ErrSealed
	}
	now := m.now()
	keys, err := m.store.ListSigningKeys(ctx)
	if err != nil {
		return "", fmt.Errorf("list signing keys: %w", err)
	}
	active := now.Add(m.policy.PrePublish)
	if immediate {
		active = now
	}
	// The new key must be strictly newer than every other, or two keys
	// would tie for "in force" (the store keeps microseconds).
	if len(keys) > 0 {
		if newest := newestKey(keys).ActiveAt; !active.After(newest) {
			active = newest.Add(time.Millisecond)
		}
	}
	k, err := m.create(ctx, now, active)
	if err != nil {
		return "", err
	}
	keys = append(keys, k)
	if keys, err = m.retire(ctx, keys, now); err != nil {
		return "", err
	}
	at := now
	if immediate && active.After(now) {
		at = active // at most a millisecond ahead: the new key signs at once
	}
	return k.KID, m.build(keys, at)
}

// retire schedules retirement for every key superseded by a newer active
// one, and deletes keys whose retirement has passed.
func (m *Manager) retire(ctx context.Context, keys []store.SigningKey, now time.Time) ([]store.SigningKey, error) {
	var kept []store.SigningKey
	for _, k := range keys {
		if succ, ok := successor(keys, k); ok && k.RetireAt.IsZero() {
			k.RetireAt = succ.ActiveAt.Add(m.policy.MaxTokenTTL + m.policy.RetireSlack)
			if err := m.store.RetireSigningKey(ctx, k.KID, k.RetireAt); err != nil {
				return nil, fmt.Errorf("retire %s: %w", k.KID, err)
			}
		}
		if !k.RetireAt.IsZero() && !now.Before(k.RetireAt) {
			if err := m.store.DeleteSigningKey(ctx, k.KID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("delete %s: %w", k.KID, err)
			}
			continue
		}
		kept = append(kept, k)
	}
	return kept, nil
}

// successor is the key that activates next after k, if any.
func successor(keys []store.SigningKey, k store.SigningKey) (store.SigningKey, bool) {
	var best store.SigningKey
	found := false
	for _, o := range keys {
		if o.ActiveAt.After(k.ActiveAt) && (!found || o.ActiveAt.Before(best.ActiveAt)) {
			best, found = o, true
		}
	}
	return best, found
}

func newestKey(keys []store.SigningKey) store.SigningKey {
	n := keys[0]
	for _, k := range keys[1:] {
		if k.ActiveAt.After(n.ActiveAt) {
			n = k
		}
	}
	return n
}

// create generates, seals and stores a key published at publish and
// active from active.
func (m *Manager) create(ctx context.Context, publish, active time.Time) (store.SigningKey, error) {
	priv, err := keyfile.Generate(m.policy.Alg, 0)
	if err != nil {
		return store.SigningKey{}, err
	}
	pk, err := jose.NewKey(m.policy.Alg, "", priv.Public())
	if err != nil {
		return store.SigningKey{}, err
	}
	kid := pk.Thumbprint()
	pub, err := pk.WithKeyID(kid).MarshalJSON()
	if err != nil {
		return store.SigningKey{}, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return store.SigningKey{}, err
	}
	sealed, err := m.sealer.Encrypt(der, aad(kid))
	clear(der)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("seal signing key: %w", err)
	}
	k := store.SigningKey{KID: kid, Alg: m.policy.Alg.String(), Sealed: sealed, PublicJWK: pub,
		PublishAt: publish.UTC(), ActiveAt: active.UTC(), CreatedAt: publish.UTC()}
	if err := m.store.PutSigningKey(ctx, k); err != nil {
		return store.SigningKey{}, fmt.Errorf("store signing key: %w", err)
	}
	return k, nil
}

func aad(kid string) []byte { return []byte("keygate signing-key " + kid) }

// build unseals the key in force and assembles the published set: every
// key whose PublishAt has come and whose RetireAt has not. While the
// sealer is sealed it builds the published set alone, with no signer, so
// that a sealed node still serves its JWKS and verifies its own tokens.
func (m *Manager) build(keys []store.SigningKey, now time.Time) error {
	slices.SortFunc(keys, func(a, b store.SigningKey) int {
		if c := a.ActiveAt.Compare(b.ActiveAt); c != 0 {
			return c
		}
		return strings.Compare(a.KID, b.KID) // a deterministic order for ties
	})
	var active *store.SigningKey
	var pubs [][]byte
	for i := range keys {
		k := &keys[i]
		if now.Before(k.PublishAt) || (!k.RetireAt.IsZero() && !now.Before(k.RetireAt)) {
			continue
		}
		pubs = append(pubs, k.PublicJWK)
		if !now.Before(k.ActiveAt) {
			active = k // the latest active wins
		}
	}
	if active == nil {
		return ErrNoActiveKey
	}
	var signer, access *jose.Signer
	if !m.sealer.Sealed() {
		var err error
		if signer, err = m.unseal(active); err != nil {
			return err
		}
		access = signer.WithType("at+jwt")
	}
	jwks := []byte(`{"keys":[`)
	for i, p := range pubs {
		if i > 0 {
			jwks = append(jwks, ',')
		}
		jwks = append(jwks, p...)
	}
	jwks = append(jwks, "]}"...)
	set, err := jose.ParseKeySet(jwks)
	if err != nil {
		return fmt.Errorf("published key set: %w", err)
	}
	m.state.Store(&keyState{signer: signer, access: access, jwks: jwks, set: set, activeAt: active.ActiveAt})
	return nil
}

func (m *Manager) unseal(k *store.SigningKey) (*jose.Signer, error) {
	if cur := m.state.Load(); cur != nil && cur.signer != nil && cur.signer.KeyID() == k.KID {
		return cur.signer, nil // already unsealed
	}
	der, err := m.sealer.Decrypt(k.Sealed, aad(k.KID))
	if err != nil {
		return nil, fmt.Errorf("unseal signing key %s: %w", k.KID, err)
	}
	defer clear(der)
	priv, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", k.KID, err)
	}
	alg, err := jose.ParseAlg(k.Alg)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", k.KID, err)
	}
	return jose.NewSigner(alg, k.KID, priv)
}
