package signingkeys

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/issuer/signingkeys/signingkeystest"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/jose"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func published(t *testing.T, m *Manager) []string {
	t.Helper()
	set, err := jose.ParseKeySet(m.JWKS(), jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys() {
		kids = append(kids, k.KeyID())
	}
	slices.Sort(kids)
	return kids
}

// signsVerifiably checks that the signer's tokens verify against the JWKS.
func signsVerifiably(t *testing.T, m *Manager) {
	t.Helper()
	tok, err := m.Signer().Sign([]byte(`{"sub":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := jose.ParseKeySet(m.JWKS(), jose.ES256)
	parsed, err := jose.ParseJWS(tok, 0)
	if err != nil {
		t.Fatal(err)
	}
	k, err := set.ResolveKey(parsed.Header.KeyID, parsed.Header.Alg)
	if err != nil {
		t.Fatalf("signer's kid not in the JWKS: %v", err)
	}
	if err := k.Verify(parsed); err != nil {
		t.Fatal(err)
	}
}

func TestManagerManualRotation(t *testing.T) {
	st, c := signingkeystest.NewStore(), &clock{time.Unix(1_800_000_000, 0).UTC()}
	// RotateEvery 0: manual rotation only.
	m := New(st, signingkeystest.NewSealer(t), Policy{PrePublish: time.Hour, MaxTokenTTL: 30 * time.Minute,
		RetireSlack: time.Minute}, c.now)
	ctx := context.Background()
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.Signer().KeyID()
	if got := published(t, m); len(got) != 1 || got[0] != first {
		t.Fatalf("after first load: %v", got)
	}
	if st := m.Status(); st.Published != 1 || !st.ActiveSince.Equal(c.t) {
		t.Errorf("Status after first load: %+v, want 1 published, active since %v", st, c.t)
	}
	signsVerifiably(t, m)
	start := c.t

	second, err := m.Rotate(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if m.Signer().KeyID() != first || len(published(t, m)) != 2 {
		t.Fatalf("pre-publication: signer %s, published %v", m.Signer().KeyID(), published(t, m))
	}
	c.t = c.t.Add(time.Hour) // the new key's term begins
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if m.Signer().KeyID() != second || len(published(t, m)) != 2 {
		t.Fatalf("after activation: signer %s, published %v", m.Signer().KeyID(), published(t, m))
	}
	if st := m.Status(); st.Published != 2 || !st.ActiveSince.Equal(start.Add(time.Hour)) {
		t.Errorf("Status after activation: %+v, want 2 published, active since %v", st, start.Add(time.Hour))
	}
	signsVerifiably(t, m)
	c.t = c.t.Add(30*time.Minute + time.Minute - time.Second) // old tokens may still be alive
	m.Tick(ctx)
	if len(published(t, m)) != 2 {
		t.Fatal("old key dropped while its tokens can still be alive")
	}
	c.t = c.t.Add(time.Second)
	if err := m.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got := published(t, m); len(got) != 1 || got[0] != second {
		t.Fatalf("after retirement: %v", got)
	}
	if _, ok := st.Keys()[first]; ok {
		t.Error("retired key not deleted from the store")
	}

	// A restart loads the same key in force.
	again := New(st, m.sealer, m.policy, c.now)
	if err := again.Load(ctx); err != nil || again.Signer().KeyID() != second {
		t.Fatalf("reload: %v, signer %v", err, again.Signer())
	}
}

func TestManagerScheduledRotation(t *testing.T) {
	st, c := signingkeystest.NewStore(), &clock{time.Unix(1_800_000_000, 0).UTC()}
	m := New(st, signingkeystest.NewSealer(t), Policy{RotateEvery: 10 * time.Hour, PrePublish: time.Hour}, c.now)
	ctx := context.Background()
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.Signer().KeyID()
	steps := []struct {
		at        time.Duration
		published int
		newSigner bool
	}{
		{8 * time.Hour, 1, false},
		{9 * time.Hour, 2, false}, // next key pre-published an hour before its term
		{9*time.Hour + 59*time.Minute, 2, false},
		{10 * time.Hour, 2, true}, // it signs; the old one stays for its tokens
		{11*time.Hour + 5*time.Minute, 1, true},
	}
	start := c.t
	for _, s := range steps {
		c.t = start.Add(s.at)
		if err := m.Tick(ctx); err != nil {
			t.Fatalf("at +%v: %v", s.at, err)
		}
		if n := len(published(t, m)); n != s.published || (m.Signer().KeyID() != first) != s.newSigner {
			t.Fatalf("at +%v: %d published, signer changed %v; want %d, %v", s.at, n, m.Signer().KeyID() != first, s.published, s.newSigner)
		}
		signsVerifiably(t, m)
	}
}

func TestManagerSealing(t *testing.T) {
	st, c := signingkeystest.NewStore(), &clock{time.Now()}
	seal := signingkeystest.NewSealer(t)
	m := New(st, seal, Policy{Alg: jose.EdDSA}, c.now)
	ctx := context.Background()
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	kid := m.Signer().KeyID()
	k := st.Keys()[kid]
	if bytes.Contains(k.Sealed, []byte("PRIVATE")) || len(k.Sealed) < 48 {
		t.Fatal("stored key does not look sealed")
	}
	if !strings.Contains(string(k.PublicJWK), `"crv":"Ed25519"`) || strings.Contains(string(k.PublicJWK), `"d"`) {
		t.Fatalf("public JWK: %s", k.PublicJWK)
	}
	// A sealed key moved to another record does not unseal.
	moved := k
	moved.KID = "other"
	elsewhere := signingkeystest.NewStore()
	if err := elsewhere.PutSigningKey(ctx, moved); err != nil {
		t.Fatal(err)
	}
	fresh := New(elsewhere, seal, Policy{Alg: jose.EdDSA}, c.now)
	if err := fresh.Load(ctx); err == nil {
		t.Fatal("a sealed key unsealed under another kid")
	}
}

// TestManagerCheckSealer: CheckSealer tells whether a sealer opens
// every stored key (the check an unseal runs on a candidate root key)
// without touching the manager, which keeps signing with what it had.
func TestManagerCheckSealer(t *testing.T) {
	st, c := signingkeystest.NewStore(), &clock{time.Now()}
	seal := signingkeystest.NewSealer(t)
	m := New(st, seal, Policy{Alg: jose.EdDSA}, c.now)
	ctx := context.Background()
	if n, err := m.CheckSealer(ctx, signingkeystest.NewSealer(t)); n != 0 || err != nil {
		t.Errorf("an empty store: %d, %v", n, err)
	}
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Rotate(ctx, false); err != nil {
		t.Fatal(err)
	}
	kid := m.Signer().KeyID()
	if n, err := m.CheckSealer(ctx, seal); n != 2 || err != nil {
		t.Errorf("the sealer of both keys: %d, %v", n, err)
	}
	if n, err := m.CheckSealer(ctx, signingkeystest.NewSealer(t)); err == nil || n != 0 {
		t.Errorf("another sealer: %d, %v", n, err)
	}
	// One key sealed under another sealer is enough to refuse.
	other := New(st, signingkeystest.NewSealer(t), Policy{Alg: jose.EdDSA}, c.now)
	other.Rotate(ctx, false) //nolint:errcheck // stores its key, then cannot open the one in force
	if len(st.Keys()) != 3 {
		t.Fatalf("%d stored keys, want 3", len(st.Keys()))
	}
	if _, err := m.CheckSealer(ctx, seal); err == nil || !strings.Contains(err.Error(), "signing key") {
		t.Errorf("a store with a key sealed under another sealer: %v", err)
	}
	if m.Signer().KeyID() != kid {
		t.Error("CheckSealer changed the signer in force")
	}
}

// hidingStore hides its keys from the first listing, as if another Init
// had stored them just after this one looked.
type hidingStore struct {
	*signingkeystest.Store
	listed atomic.Bool
}

func (s *hidingStore) ListSigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	if !s.listed.Swap(true) {
		return nil, nil
	}
	return s.Store.ListSigningKeys(ctx)
}

// TestManagerInit: Init stores the first key of an empty store and
// refuses a store with keys; an Init that finds another one's key after
// storing its own withdraws it, so the store never holds keys under two
// sealers.
func TestManagerInit(t *testing.T) {
	ctx := context.Background()
	c := &clock{time.Now()}
	st, seal := signingkeystest.NewStore(), signingkeystest.NewSealer(t)
	m := New(st, seal, Policy{Alg: jose.EdDSA}, c.now)
	kid, err := m.Init(ctx)
	if err != nil || kid == "" {
		t.Fatalf("Init on an empty store: %q, %v", kid, err)
	}
	if n, err := m.CheckSealer(ctx, seal); n != 1 || err != nil {
		t.Fatalf("after Init: %d keys, %v", n, err)
	}
	if err := m.Load(ctx); err != nil || m.Signer().KeyID() != kid {
		t.Fatalf("Load after Init: %v, signer %v", err, m.Signer())
	}
	if _, err := New(st, signingkeystest.NewSealer(t), Policy{}, c.now).Init(ctx); !errors.Is(err, ErrInitialized) || len(st.Keys()) != 1 {
		t.Errorf("Init on an initialized store: %v, %d keys", err, len(st.Keys()))
	}
	sealed := signingkeystest.NewSealer(t)
	sealed.SetSealed(true)
	if _, err := New(signingkeystest.NewStore(), sealed, Policy{}, c.now).Init(ctx); !errors.Is(err, ErrSealed) {
		t.Errorf("Init with a sealed sealer: %v", err)
	}

	// The race: the first listing misses the other Init's key.
	race := &hidingStore{Store: st}
	if _, err := New(race, signingkeystest.NewSealer(t), Policy{Alg: jose.EdDSA}, c.now).Init(ctx); !errors.Is(err, ErrInitialized) {
		t.Fatalf("Init that lost a race: %v", err)
	}
	if _, ok := st.Keys()[kid]; !ok || len(st.Keys()) != 1 {
		t.Errorf("after a lost race the store holds %d keys; want only %s", len(st.Keys()), kid)
	}
}

// TestManagerImmediateRotationFrozenClock: an immediate rotation signs
// with the new key at once even when the clock has not moved since the
// previous key was made (the keys must not tie).
// TestManagerSealed: a sealed manager publishes the stored keys but
// signs, creates and rotates nothing; unsealed again, it signs with the
// same key as before.
func TestManagerSealed(t *testing.T) {
	st, c := signingkeystest.NewStore(), &clock{time.Now()}
	seal := signingkeystest.NewSealer(t)
	ctx := context.Background()

	seal.SetSealed(true)
	empty := New(st, seal, Policy{}, c.now)
	if err := empty.Load(ctx); !errors.Is(err, ErrSealed) {
		t.Fatalf("sealed Load on an empty store: %v, want ErrSealed", err)
	}
	if len(st.Keys()) != 0 || empty.KeySet().Len() != 0 {
		t.Fatal("a sealed manager created a key")
	}

	seal.SetSealed(false)
	m := New(st, seal, Policy{}, c.now)
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	kid := m.Signer().KeyID()

	seal.SetSealed(true)
	m.DropSigner()
	if m.Signer() != nil || m.AccessSigner() != nil || !m.Sealed() {
		t.Fatal("the signer survived sealing")
	}
	if _, err := m.Rotate(ctx, true); !errors.Is(err, ErrSealed) {
		t.Fatalf("Rotate while sealed: %v, want ErrSealed", err)
	}
	c.t = c.t.Add(40 * 24 * time.Hour) // past the rotation schedule
	cold := New(st, seal, Policy{}, c.now)
	for name, fn := range map[string]func(context.Context) error{"Load": cold.Load, "Tick": cold.Tick} {
		if err := fn(ctx); err != nil {
			t.Fatalf("sealed %s with keys stored: %v", name, err)
		}
		if cold.Signer() != nil || !slices.Equal(published(t, cold), []string{kid}) || len(st.Keys()) != 1 {
			t.Fatalf("sealed %s: signer %v, published %v, stored %d; want none, [%s], 1", name, cold.Signer(), published(t, cold), len(st.Keys()), kid)
		}
	}

	seal.SetSealed(false)
	c.t = c.t.Add(-40 * 24 * time.Hour)
	if err := cold.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if cold.Signer() == nil || cold.Signer().KeyID() != kid {
		t.Fatal("unsealed again, the manager does not sign with the stored key")
	}
	signsVerifiably(t, cold)
}

// TestManagerReload: Reload picks up keys another node made and never
// creates one itself, not even on an empty store.
func TestManagerReload(t *testing.T) {
	st, c := signingkeystest.NewStore(), &clock{time.Now()}
	seal := signingkeystest.NewSealer(t)
	ctx := context.Background()
	b := New(st, seal, Policy{}, c.now)
	if err := b.Reload(ctx); !errors.Is(err, ErrNoActiveKey) || len(st.Keys()) != 0 {
		t.Fatalf("Reload on an empty store: %v, %d keys stored; want ErrNoActiveKey and none", err, len(st.Keys()))
	}
	a := New(st, seal, Policy{}, c.now)
	if err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	kid, err := a.Rotate(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Second) // the frozen clock: the new key is active a millisecond ahead
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Signer().KeyID() != kid || len(st.Keys()) != 2 {
		t.Fatalf("after Reload B signs with %s (want %s), %d keys stored (want 2)", b.Signer().KeyID(), kid, len(st.Keys()))
	}
}

func TestManagerImmediateRotationFrozenClock(t *testing.T) {
	st, c := signingkeystest.NewStore(), &clock{time.Unix(1_800_000_000, 0).UTC()}
	m := New(st, signingkeystest.NewSealer(t), Policy{}, c.now) // manual rotation only
	ctx := context.Background()
	if err := m.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		kid, err := m.Rotate(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if m.Signer().KeyID() != kid {
			t.Fatalf("rotation %d: signer %s, want the new key %s", i, m.Signer().KeyID(), kid)
		}
	}
}

// TestManagerConcurrentFirstLoad: nodes that start together on an empty
// store agree on the signer and publish every key any of them made.
func TestManagerConcurrentFirstLoad(t *testing.T) {
	st, c := signingkeystest.NewStore(), &clock{time.Unix(1_800_000_000, 0).UTC()}
	seal := signingkeystest.NewSealer(t)
	ms := make([]*Manager, 4)
	var wg sync.WaitGroup
	for i := range ms {
		ms[i] = New(st, seal, Policy{}, c.now) // manual rotation only
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ms[i].Load(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Each sees the keys that existed when it listed; after a Tick all agree.
	for _, m := range ms {
		if err := m.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms[1:] {
		if m.Signer().KeyID() != ms[0].Signer().KeyID() || len(published(t, m)) != len(st.Keys()) {
			t.Fatalf("nodes disagree: %s vs %s, %d published of %d", m.Signer().KeyID(), ms[0].Signer().KeyID(), len(published(t, m)), len(st.Keys()))
		}
	}
}
