package keystore

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/testnet"
	"github.com/keygate/keygate/internal/transit"
)

// clock is a settable clock for the services of a test.
type clock struct{ t atomic.Pointer[time.Time] }

func newClock() *clock {
	c := &clock{}
	now := time.Now()
	c.t.Store(&now)
	return c
}

func (c *clock) now() time.Time      { return *c.t.Load() }
func (c *clock) add(d time.Duration) { t := c.now().Add(d); c.t.Store(&t) }
func (c *clock) opts() Options       { return Options{Now: c.now} }

// fleet opens count nodes on one store (SQLite in one data directory, or
// PostgreSQL when pg is set) with one root key, and a service on each.
func fleet(t *testing.T, count int, pg bool, o Options) []*Service {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root.key")
	if err := rootkey.GenerateKeyFile(root, rand.Reader); err != nil {
		t.Fatal(err)
	}
	ts := config.TokenService{RootKeyFile: root}
	if pg {
		base := os.Getenv("DATABASE_URL")
		if base == "" {
			t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		}
		ts.DatabaseURL = testnet.PostgresSchema(t, base, "kg_transitkeys")
	}
	var out []*Service
	for i := range count {
		dataDir := filepath.Join(dir, "data")
		if pg {
			dataDir = filepath.Join(dir, "node"+string(rune('a'+i)))
		}
		n, err := node.Open(context.Background(), node.Config{DataDir: dataDir, Issuer: "https://kg.test", Audience: "api", TokenService: ts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		s, err := New(n.Store(), n.TenantKeys(), n, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		out = append(out, s)
	}
	return out
}

var ctx = context.Background()

// nodeOf is the node s runs on: the tests open real nodes.
func nodeOf(s *Service) *node.Node { return s.n.(*node.Node) }

// TestKeyTypes: a key of every type is stored and read back by another
// node, which decrypts, verifies and checks HMACs made by the first.
func TestKeyTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: a key of every type, RSA up to 4096 bits, made at one node and used at another; run without -short")
	}
	svcs := fleet(t, 2, false, Options{})
	a, b := svcs[0], svcs[1]
	for _, typ := range transit.KeyTypes() {
		name := "k-" + typ.String()
		k, created, err := a.Create(ctx, store.DefaultTenant, name, transit.CreateOptions{Type: typ})
		if err != nil || !created {
			t.Fatalf("%s: create: %v %v", typ, created, err)
		}
		kb, err := b.Get(ctx, store.DefaultTenant, name)
		if err != nil {
			t.Fatalf("%s: get at b: %v", typ, err)
		}
		if kb.Config() != k.Config() {
			t.Errorf("%s: b reads %+v, a made %+v", typ, kb.Config(), k.Config())
		}
		eng := a.Engine()
		caps := typ.Capabilities()
		if caps.Encryption {
			ct, err := eng.Encrypt(ctx, k, []byte("hello"), transit.EncryptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pt, err := b.Engine().Decrypt(ctx, kb, ct.Text, transit.DecryptOptions{})
			if err != nil || string(pt.Plaintext) != "hello" {
				t.Errorf("%s: decrypt at b: %q %v", typ, pt.Plaintext, err)
			}
		}
		if caps.Signing {
			sig, err := eng.Sign(ctx, k, []byte("msg"), transit.SignOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r, err := b.Engine().Verify(ctx, kb, []byte("msg"), sig.Signature, transit.SignOptions{}); err != nil || !r.Valid {
				t.Errorf("%s: verify at b: %v %v", typ, r, err)
			}
		}
		mac, err := eng.HMAC(k, []byte("msg"), transit.HMACOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := b.Engine().VerifyHMAC(kb, []byte("msg"), mac.Text, transit.HMACOptions{}); err != nil || !r.Valid {
			t.Errorf("%s: verify hmac at b: %v %v", typ, r, err)
		}
		if _, created, err := b.Create(ctx, store.DefaultTenant, name, transit.CreateOptions{Type: transit.AES128GCM96}); err != nil || created {
			t.Errorf("%s: create again: created %v, %v", typ, created, err)
		}
	}
	names, err := b.List(ctx, store.DefaultTenant)
	if err != nil || len(names) != len(transit.KeyTypes()) {
		t.Errorf("list: %v %v", names, err)
	}
}

// TestLifecycle: rotate, configure (including lowering
// min_decryption_version below the versions a fresh node holds), trim and
// delete, each seen by another node.
func TestLifecycle(t *testing.T) {
	svcs := fleet(t, 2, false, Options{})
	a, b := svcs[0], svcs[1]
	const tn, name = store.DefaultTenant, "orders"
	if _, _, err := a.Create(ctx, tn, name, transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := a.Rotate(ctx, tn, name, ""); err != nil {
			t.Fatal(err)
		}
	}
	three, four := 3, 4
	k, _, err := a.Configure(ctx, tn, name, transit.ConfigUpdate{MinDecryptionVersion: &four, MinEncryptionVersion: &four})
	if err != nil || k.Config().MinDecryptionVersion != 4 {
		t.Fatalf("configure: %v %v", k, err)
	}
	// c is a fresh node: it opens versions 4 and up only; lowering the
	// minimum makes it open 3.
	c := fleet2(t, a)
	k, _, err = c.Configure(ctx, tn, name, transit.ConfigUpdate{MinDecryptionVersion: &three})
	if err != nil || k.Config().MinDecryptionVersion != 3 {
		t.Fatalf("lower min_decryption_version: %v %v", k, err)
	}
	if _, ok := k.Version(3); !ok {
		t.Error("version 3 not opened")
	}
	if _, err := b.Trim(ctx, tn, name, 3); err != nil {
		t.Fatal(err)
	}
	one := 1
	if _, _, err := a.Configure(ctx, tn, name, transit.ConfigUpdate{MinDecryptionVersion: &one}); err == nil {
		t.Error("lowering min_decryption_version below a trimmed version succeeded")
	}
	kb, err := b.Get(ctx, tn, name)
	if err != nil || kb.Config().MinAvailableVersion != 3 || kb.LatestVersion() != 4 {
		t.Fatalf("after trim: %+v %v", kb.Config(), err)
	}
	if _, err := a.st.GetTransitKeyVersion(ctx, tn, name, 2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("version 2 after trim: %v", err)
	}
	if err := a.Delete(ctx, tn, name); !errors.Is(err, ErrDeletionNotAllowed) {
		t.Errorf("delete without deletion_allowed: %v", err)
	}
	yes := true
	if _, _, err := b.Configure(ctx, tn, name, transit.ConfigUpdate{DeletionAllowed: &yes}); err != nil {
		t.Fatal(err)
	}
	// a's cached snapshot says deletion is not allowed; Delete reads afresh.
	if err := a.Delete(ctx, tn, name); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := a.Get(ctx, tn, name); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if err := a.Delete(ctx, tn, name); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete again: %v", err)
	}
}

// fleet2 opens one more service on a's store and root key.
func fleet2(t *testing.T, a *Service) *Service {
	t.Helper()
	s, err := New(a.st, a.keys, a.n, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestConcurrentRotate: nodes rotating one key at once all succeed, and
// the key ends with one version per rotation, contiguous; on PostgreSQL
// too when DATABASE_URL is set.
func TestConcurrentRotate(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			// Each rotation must land once, whoever wins each race. A node
			// that loses the default 8 races in a row (descheduled between
			// reading the key and writing, on a loaded machine) gives up with
			// a conflict, as it should; that bound is not what this tests.
			svcs := fleet(t, 3, pg, Options{Attempts: 100})
			const tn, name = store.DefaultTenant, "race"
			if _, _, err := svcs[0].Create(ctx, tn, name, transit.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			const each = 5
			var wg sync.WaitGroup
			for _, s := range svcs {
				wg.Go(func() {
					for range each {
						if _, err := s.Rotate(ctx, tn, name, ""); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			k, err := fleet2(t, svcs[1]).Get(ctx, tn, name)
			if err != nil || k.LatestVersion() != 1+len(svcs)*each {
				t.Fatalf("latest %d, want %d: %v", k.LatestVersion(), 1+len(svcs)*each, err)
			}
		})
	}
}

// TestNewer: a node whose snapshot predates another node's rotation
// decrypts a ciphertext of the new version after Newer.
func TestNewer(t *testing.T) {
	svcs := fleet(t, 2, false, Options{})
	a, b := svcs[0], svcs[1]
	const tn, name = store.DefaultTenant, "n"
	if _, _, err := a.Create(ctx, tn, name, transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old, err := b.Get(ctx, tn, name)
	if err != nil {
		t.Fatal(err)
	}
	k, err := a.Rotate(ctx, tn, name, "")
	if err != nil {
		t.Fatal(err)
	}
	ct, err := a.Engine().Encrypt(ctx, k, []byte("x"), transit.EncryptOptions{})
	if err != nil || ct.KeyVersion != 2 {
		t.Fatal(ct, err)
	}
	if _, err := b.Engine().Decrypt(ctx, old, ct.Text, transit.DecryptOptions{}); !errors.Is(err, transit.ErrUnknownVersion) {
		t.Fatalf("stale snapshot: %v", err)
	}
	nk, err := b.Newer(ctx, tn, name, 2)
	if err != nil || nk.LatestVersion() != 2 {
		t.Fatalf("Newer: %v %v", nk, err)
	}
	if _, err := b.Engine().Decrypt(ctx, nk, ct.Text, transit.DecryptOptions{}); err != nil {
		t.Errorf("decrypt after Newer: %v", err)
	}
	// A version nobody made costs a row read and changes nothing.
	if nk2, err := b.Newer(ctx, tn, name, 99); err != nil || nk2 != nk {
		t.Errorf("Newer(99): %v %v", nk2, err)
	}
	if _, err := b.Newer(ctx, tn, "absent", 2); !errors.Is(err, ErrNotFound) {
		t.Errorf("Newer of an absent key: %v", err)
	}
}

// TestTenantIsolation: a tenant's keys are not found, listed, changed or
// deleted under another tenant's name, and a version row does not open
// under another key's or tenant's name.
func TestTenantIsolation(t *testing.T) {
	s := fleet(t, 1, false, Options{})[0]
	if err := nodeOf(s).Store().CreateTenant(ctx, store.Tenant{Name: "acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, "acme", "secret", transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, store.DefaultTenant, "other", transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, store.DefaultTenant, "secret"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get: %v", err)
	}
	if _, err := s.Rotate(ctx, store.DefaultTenant, "secret", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("rotate: %v", err)
	}
	if err := s.Delete(ctx, store.DefaultTenant, "secret"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete: %v", err)
	}
	if names, err := s.List(ctx, store.DefaultTenant); err != nil || len(names) != 1 || names[0] != "other" {
		t.Errorf("list: %v %v", names, err)
	}
	if _, err := s.Get(ctx, "nosuchtenant", "secret"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a tenant that does not exist: %v", err)
	}
	_, rows, err := s.st.GetTransitKey(ctx, "acme", "secret")
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := s.keys.Get(ctx, "acme")
	def, _ := s.keys.Get(ctx, store.DefaultTenant)
	moved := rows[0]
	moved.Name = "other"
	if _, err := s.openVersion(acme, moved, nil); err == nil {
		t.Error("a version row opened under another key's name")
	}
	moved = rows[0]
	moved.Version = 2
	if _, err := s.openVersion(acme, moved, nil); err == nil {
		t.Error("a version row opened as another version")
	}
	if _, err := s.openVersion(def, rows[0], nil); err == nil {
		t.Error("a version row opened under another tenant's data key")
	}
	if _, err := s.openVersion(acme, rows[0], nil); err != nil {
		t.Errorf("the row itself: %v", err)
	}
}

// TestSealForgets: sealing the node drops every opened key and wrapping
// key, and every operation then fails with keyring.ErrSealed.
func TestSealForgets(t *testing.T) {
	s := fleet(t, 1, false, Options{})[0]
	if _, _, err := s.Create(ctx, store.DefaultTenant, "k", transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WrappingKey(ctx, store.DefaultTenant); err != nil {
		t.Fatal(err)
	}
	nodeOf(s).Seal()
	if n := s.cache.len(); n != 0 || len(s.wrap) != 0 {
		t.Errorf("after Seal: %d keys, %d wrapping keys cached", n, len(s.wrap))
	}
	if _, err := s.Get(ctx, store.DefaultTenant, "k"); !errors.Is(err, rootkey.ErrSealed) {
		t.Errorf("get while sealed: %v", err)
	}
	if _, err := s.Rotate(ctx, store.DefaultTenant, "k", ""); !errors.Is(err, rootkey.ErrSealed) {
		t.Errorf("rotate while sealed: %v", err)
	}
}

// TestAutoRotate: a key whose auto_rotate_period has passed is rotated
// once, however many nodes check at once, and its new version is
// generated once: the node that claims the rotation first generates it and
// the others leave the key alone. A key not due is not rotated. On
// PostgreSQL too when DATABASE_URL is set.
func TestAutoRotate(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) { testAutoRotate(t, pg) })
	}
}

func testAutoRotate(t *testing.T, pg bool) {
	c := newClock()
	svcs := fleet(t, 3, pg, c.opts())
	const tn = store.DefaultTenant
	if _, _, err := svcs[0].Create(ctx, tn, "auto", transit.CreateOptions{Type: transit.Ed25519, AutoRotatePeriod: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svcs[0].Create(ctx, tn, "manual", transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An ed25519 key is generated on its engine's workers: their count of
	// operations is the nodes' count of keys generated.
	generated := func() (n uint64) {
		for _, s := range svcs {
			n += s.Engine().PrivateKeyStats().Started
		}
		return n
	}
	if n, err := svcs[1].RotateDue(ctx); n != 0 || err != nil {
		t.Fatalf("before the period: %d %v", n, err)
	}
	c.add(61 * time.Minute)
	before := generated()
	var total atomic.Int32
	var wg sync.WaitGroup
	for _, s := range svcs {
		wg.Go(func() {
			n, err := s.RotateDue(ctx)
			if err != nil {
				t.Error(err)
			}
			total.Add(int32(n))
		})
	}
	wg.Wait()
	if total.Load() != 1 {
		t.Errorf("%d rotations, want 1", total.Load())
	}
	if n := generated() - before; n != 1 {
		t.Errorf("%d versions generated for one rotation", n)
	}
	k, _ := fleet2(t, svcs[0]).Get(ctx, tn, "auto")
	m, _ := svcs[0].Get(ctx, tn, "manual")
	if k.LatestVersion() != 2 || m.LatestVersion() != 1 {
		t.Errorf("auto at %d, manual at %d", k.LatestVersion(), m.LatestVersion())
	}
	// The node's schedule runs it (on a goroutine of its own).
	c.add(61 * time.Minute)
	nodeOf(svcs[2]).Tick(ctx)
	eventually(t, "a tick rotates the key", func() bool {
		tk, _, err := svcs[0].st.GetTransitKey(ctx, tn, "auto")
		return err == nil && tk.Latest == 3
	})
}

// TestAutoRotateClaimLapses: a node that claimed a key's rotation and
// stopped before storing it holds the key up for rotationClaim, no longer;
// a configuration change likewise defers a rotation it makes due.
func TestAutoRotateClaimLapses(t *testing.T) {
	c := newClock()
	s := fleet(t, 1, false, c.opts())[0]
	const tn = store.DefaultTenant
	if _, _, err := s.Create(ctx, tn, "k", transit.CreateOptions{AutoRotatePeriod: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c.add(61 * time.Minute)
	tk, _, err := s.st.GetTransitKey(ctx, tn, "k")
	if err != nil {
		t.Fatal(err)
	}
	tk.UpdatedAt = s.stamp() // another node's claim, as rotateDue writes it
	if err := s.st.UpdateTransitKey(ctx, tk); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		after time.Duration
		want  int
	}{{0, 0}, {rotationClaim - time.Second, 0}, {time.Second, 1}} {
		c.add(step.after)
		if n, err := s.RotateDue(ctx); n != step.want || err != nil {
			t.Fatalf("%v after the claim: %d rotations (%v), want %d", step.after, n, err, step.want)
		}
	}
	// auto_rotate_period shortened so that the key is due at once.
	configure := func(p time.Duration) {
		t.Helper()
		if _, _, err := s.Configure(ctx, tn, "k", transit.ConfigUpdate{AutoRotatePeriod: &p}); err != nil {
			t.Fatal(err)
		}
	}
	configure(2 * time.Hour) // just after the rotation
	c.add(70 * time.Minute)
	configure(time.Hour)
	if n, err := s.RotateDue(ctx); n != 0 || err != nil {
		t.Fatalf("just configured: %d rotations (%v)", n, err)
	}
	c.add(rotationClaim)
	if n, err := s.RotateDue(ctx); n != 1 || err != nil {
		t.Fatalf("%v after the change: %d rotations (%v)", rotationClaim, n, err)
	}
}

// gatedStore holds each AddTransitKeyVersion until release is closed,
// telling entered first, and counts ListTenants (once per scan).
type gatedStore struct {
	Store
	entered chan struct{}
	release chan struct{}
	adds    atomic.Int32
	scans   atomic.Int32
}

func (g *gatedStore) AddTransitKeyVersion(ctx context.Context, v store.TransitKeyVersion) error {
	g.adds.Add(1)
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.AddTransitKeyVersion(ctx, v)
}

func (g *gatedStore) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	g.scans.Add(1)
	return g.Store.ListTenants(ctx)
}

// TestAutoRotateOffTick: the node's schedule starts the automatic
// rotations and goes on without waiting for them (an rsa-4096 key takes
// about a second of a core to generate, and a tenant may have many); a
// tick while they still run starts no second scan.
func TestAutoRotateOffTick(t *testing.T) {
	c := newClock()
	s := fleet(t, 1, false, Options{Now: c.now, RotateCheckEvery: time.Minute})[0]
	g := &gatedStore{Store: s.st, entered: make(chan struct{}, 4), release: make(chan struct{})}
	s.st = g
	const tn = store.DefaultTenant
	for _, name := range []string{"a", "b"} {
		if _, _, err := s.Create(ctx, tn, name, transit.CreateOptions{AutoRotatePeriod: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	c.add(61 * time.Minute)
	ticked := make(chan struct{})
	go func() { nodeOf(s).Tick(ctx); close(ticked) }()
	<-g.entered // the scan is storing a's new version, held there
	select {
	case <-ticked:
	case <-time.After(30 * time.Second):
		close(g.release)
		t.Fatal("the node's tick waits for the automatic rotation")
	}
	c.add(2 * time.Minute) // another check is due, the first scan still on
	nodeOf(s).Tick(ctx)
	close(g.release)
	for _, name := range []string{"a", "b"} {
		eventually(t, name+" rotated", func() bool {
			tk, _, err := g.Store.GetTransitKey(ctx, tn, name)
			return err == nil && tk.Latest == 2
		})
	}
	s.Close() // waits for the scan
	if n, a := g.scans.Load(), g.adds.Load(); n != 1 || a != 2 {
		t.Errorf("%d scans storing %d versions, want 1 storing 2", n, a)
	}
}

// TestWrappingKey: a tenant's wrapping key is made once and read by every
// node; tenants have different ones; it is not listed.
func TestWrappingKey(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: makes tenants' RSA-4096 wrapping keys; run without -short")
	}
	svcs := fleet(t, 2, false, Options{})
	a, b := svcs[0], svcs[1]
	if err := nodeOf(a).Store().CreateTenant(ctx, store.Tenant{Name: "acme", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var wa, wb *transit.WrappingKey
	var wg sync.WaitGroup
	wg.Go(func() { wa, _ = a.WrappingKey(ctx, store.DefaultTenant) })
	wg.Go(func() { wb, _ = b.WrappingKey(ctx, store.DefaultTenant) })
	wg.Wait()
	if wa == nil || wb == nil || wa.PublicKeyPEM() != wb.PublicKeyPEM() {
		t.Fatal("nodes disagree on the wrapping key")
	}
	wacme, err := a.WrappingKey(ctx, "acme")
	if err != nil || wacme.PublicKeyPEM() == wa.PublicKeyPEM() {
		t.Errorf("acme's wrapping key: %v", err)
	}
	if names, _ := a.List(ctx, store.DefaultTenant); len(names) != 0 {
		t.Errorf("listed: %v", names)
	}
	if _, err := a.Get(ctx, store.DefaultTenant, wrappingName); !errors.Is(err, ErrNotFound) {
		t.Errorf("the wrapping key by name: %v", err)
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "orders": true, "my-key.v2@prod": true, "a_b": true, "_": true, "9": true,
		"": false, "-a": false, "a-": false, "a b": false, "a/b": false, "@wrapping_key": false, "é": false,
		"a*": false, string(make([]byte, MaxNameBytes+1)): false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v", name, got)
		}
	}
}

// TestStaleness: a node that missed a change (no Redis: no notice) re-reads
// a key it uses once the key is RefreshAfter old; a notice makes it re-read
// at once, and a deletion notice drops the key.
func TestStaleness(t *testing.T) {
	c := newClock()
	svcs := fleet(t, 2, false, Options{Now: c.now, RefreshAfter: time.Minute})
	a, b := svcs[0], svcs[1]
	const tn = store.DefaultTenant
	if _, _, err := a.Create(ctx, tn, "k", transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Get(ctx, tn, "k")
	a.Rotate(ctx, tn, "k", "")
	if k, _ := b.Get(ctx, tn, "k"); k.LatestVersion() != 1 {
		t.Fatalf("b read the rotation without a notice: %d", k.LatestVersion())
	}
	c.add(2 * time.Minute)
	eventually(t, "b re-reads the key", func() bool { k, _ := b.Get(ctx, tn, "k"); return k.LatestVersion() == 2 })

	k, _ := a.Rotate(ctx, tn, "k", "")
	e := a.cache.get(keyID{tn, "k"})
	b.notice(ctx, tn+" k "+strconv.FormatInt(e.created.UnixNano(), 10)+" "+strconv.FormatInt(e.revision, 10))
	eventually(t, "b re-reads the key after a notice", func() bool {
		kb, _ := b.Get(ctx, tn, "k")
		return kb.LatestVersion() == k.LatestVersion()
	})
	b.notice(ctx, tn+" k 0 0")
	if b.cache.get(keyID{tn, "k"}) != nil {
		t.Error("a deletion notice left the key cached")
	}
	b.notice(ctx, "garbage")
}

// TestCacheBound: the cache holds at most CacheEntries keys.
func TestCacheBound(t *testing.T) {
	s := fleet(t, 1, false, Options{CacheEntries: cacheShards})[0]
	for i := range 3 * cacheShards {
		if _, _, err := s.Create(ctx, store.DefaultTenant, "k"+strconv.Itoa(i), transit.CreateOptions{Type: transit.HMAC}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.cache.len(); n > cacheShards {
		t.Errorf("%d keys cached, bound %d", n, cacheShards)
	}
	for i := range 3 * cacheShards { // evicted keys are read again
		if _, err := s.Get(ctx, store.DefaultTenant, "k"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTenantRecreated: nodes that did not hear of a tenant's deletion (no
// Redis) still hold its data key when it is made again under its name:
// a key made or rotated in the new tenant is sealed under the new
// tenant's own data key, stored in its row (a third node, which never
// held the old key, opens every version), and a node takes it up when a
// version does not open under the one it held.
func TestTenantRecreated(t *testing.T) {
	svcs := fleet(t, 3, false, Options{})
	a, b, c := svcs[0], svcs[1], svcs[2]
	mk := func() {
		t.Helper()
		if err := nodeOf(a).Store().CreateTenant(ctx, store.Tenant{Name: "acme", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	mk()
	for _, s := range svcs[:2] {
		if _, err := s.keys.Get(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodeOf(a).Store().DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	mk()
	k, _, err := a.Create(ctx, "acme", "k", transit.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ct, err := a.Engine().Encrypt(ctx, k, []byte("hello"), transit.EncryptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kb, err := b.Get(ctx, "acme", "k")
	if err != nil {
		t.Fatalf("b reads the new tenant's key: %v", err)
	}
	if pt, err := b.Engine().Decrypt(ctx, kb, ct.Text, transit.DecryptOptions{}); err != nil || string(pt.Plaintext) != "hello" {
		t.Errorf("decrypt at b: %q %v", pt.Plaintext, err)
	}
	if k, err := b.Rotate(ctx, "acme", "k", ""); err != nil || k.LatestVersion() != 2 {
		t.Fatalf("rotate at b: %v", err)
	}
	if k, err := c.Get(ctx, "acme", "k"); err != nil || k.LatestVersion() != 2 {
		t.Errorf("a node that never held the old data key reads the key: %v", err)
	}
}

// afterRead is a store that calls hook once, after the first
// GetTransitKey of a key named name returns.
type afterRead struct {
	Store
	name string
	once sync.Once
	hook func()
}

func (s *afterRead) GetTransitKey(ctx context.Context, tenant, name string) (store.TransitKey, []store.TransitKeyVersion, error) {
	k, vs, err := s.Store.GetTransitKey(ctx, tenant, name)
	if name == s.name {
		s.once.Do(s.hook)
	}
	return k, vs, err
}

// deletable makes a key of the default tenant at s, with deletion_allowed
// set.
func deletable(t *testing.T, s *Service, name string, o transit.CreateOptions) {
	t.Helper()
	if _, _, err := s.Create(ctx, store.DefaultTenant, name, o); err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, _, err := s.Configure(ctx, store.DefaultTenant, name, transit.ConfigUpdate{DeletionAllowed: &yes}); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteRace: a key whose deletion_allowed another node turns off
// between the read Delete decides on and the deletion is not deleted:
// the deletion is conditional on the revision read, and Delete decides
// again on the key read afresh.
func TestDeleteRace(t *testing.T) {
	svcs := fleet(t, 2, false, Options{})
	a, b := svcs[0], svcs[1]
	const tn = store.DefaultTenant
	deletable(t, a, "k", transit.CreateOptions{})
	no := false
	a.st = &afterRead{Store: a.st, name: "k", hook: func() {
		if _, _, err := b.Configure(ctx, tn, "k", transit.ConfigUpdate{DeletionAllowed: &no}); err != nil {
			t.Error(err)
		}
	}}
	if err := a.Delete(ctx, tn, "k"); !errors.Is(err, ErrDeletionNotAllowed) {
		t.Errorf("delete after another node turned deletion_allowed off: %v", err)
	}
	if _, err := b.Get(ctx, tn, "k"); err != nil {
		t.Errorf("the key after the refused delete: %v", err)
	}
}

// TestDerivedForgotten: the keys the engine derived from a key's versions
// for a context are forgotten when the node seals, and a key's when it is
// deleted (at this node or, told by a notice, at another), as its opened
// versions are.
func TestDerivedForgotten(t *testing.T) {
	svcs := fleet(t, 2, false, Options{})
	a, b := svcs[0], svcs[1]
	const tn = store.DefaultTenant
	use := func(s *Service, name string) {
		t.Helper()
		k, err := s.Get(ctx, tn, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Engine().Encrypt(ctx, k, []byte("x"), transit.EncryptOptions{Context: []byte("ctx-" + name)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"d1", "d2", "gone"} {
		deletable(t, a, name, transit.CreateOptions{Derived: true})
		use(a, name)
		use(b, name)
	}
	if n := a.Engine().DerivedCached(); n != 3 {
		t.Fatalf("%d derived keys cached, want 3", n)
	}
	if err := a.Delete(ctx, tn, "gone"); err != nil {
		t.Fatal(err)
	}
	if n := a.Engine().DerivedCached(); n != 2 {
		t.Errorf("after a deletion: %d derived keys cached, want 2", n)
	}
	b.notice(ctx, tn+" gone 0 0") // the deletion's notice
	if n := b.Engine().DerivedCached(); n != 2 {
		t.Errorf("after a deletion notice: %d derived keys cached, want 2", n)
	}
	nodeOf(a).Seal()
	if n := a.Engine().DerivedCached(); n != 0 {
		t.Errorf("after Seal: %d derived keys cached", n)
	}
}

// TestStaleBound: a key cached longer than RefreshAfter is re-read before
// it is served, not after: a node that missed a rotation (no notice)
// serves it at the first use past the bound. Before the bound a use
// re-reads it in the background, from 3/4 of RefreshAfter on.
func TestStaleBound(t *testing.T) {
	c := newClock()
	svcs := fleet(t, 2, false, Options{Now: c.now, RefreshAfter: time.Minute})
	a, b := svcs[0], svcs[1]
	const tn = store.DefaultTenant
	if _, _, err := a.Create(ctx, tn, "k", transit.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Get(ctx, tn, "k")
	a.Rotate(ctx, tn, "k", "")
	c.add(time.Minute + time.Second)
	if k, err := b.Get(ctx, tn, "k"); err != nil || k.LatestVersion() != 2 {
		t.Fatalf("the first use past RefreshAfter: version %d, %v", k.LatestVersion(), err)
	}
	a.Rotate(ctx, tn, "k", "")
	c.add(50 * time.Second)
	if k, _ := b.Get(ctx, tn, "k"); k.LatestVersion() != 2 {
		t.Fatalf("a use before 3/4 of RefreshAfter re-read the key: version %d", k.LatestVersion())
	}
	eventually(t, "b re-reads the key in the background", func() bool { k, _ := b.Get(ctx, tn, "k"); return k.LatestVersion() == 3 })

	// A key deleted meanwhile is not found at the first use past the bound.
	yes := true
	a.Configure(ctx, tn, "k", transit.ConfigUpdate{DeletionAllowed: &yes})
	b.Get(ctx, tn, "k")
	if err := a.Delete(ctx, tn, "k"); err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute + time.Second)
	if _, err := b.Get(ctx, tn, "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted key past RefreshAfter: %v", err)
	}
}

// TestNoticeDuringRead: a notice that arrives while the key is being read
// wins over that read: a deletion's keeps the read from caching the key,
// a change's makes the key be read again once the read is done.
func TestNoticeDuringRead(t *testing.T) {
	svcs := fleet(t, 2, false, Options{})
	a, b := svcs[0], svcs[1]
	const tn = store.DefaultTenant
	for _, name := range []string{"deleted", "rotated"} {
		deletable(t, b, name, transit.CreateOptions{})
	}
	st := a.st
	a.st = &afterRead{Store: st, name: "deleted", hook: func() {
		if err := b.Delete(ctx, tn, "deleted"); err != nil {
			t.Error(err)
		}
		a.notice(ctx, tn+" deleted 0 0")
	}}
	if _, err := a.Get(ctx, tn, "deleted"); err != nil {
		t.Fatalf("the read in progress: %v", err)
	}
	if _, err := a.Get(ctx, tn, "deleted"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after the deletion's notice: %v", err)
	}

	a.st = &afterRead{Store: st, name: "rotated", hook: func() {
		if _, err := b.Rotate(ctx, tn, "rotated", ""); err != nil {
			t.Error(err)
			return
		}
		e := b.cache.get(keyID{tn, "rotated"})
		a.notice(ctx, tn+" rotated "+strconv.FormatInt(e.created.UnixNano(), 10)+" "+strconv.FormatInt(e.revision, 10))
	}}
	if k, err := a.Get(ctx, tn, "rotated"); err != nil || k.LatestVersion() != 1 {
		t.Fatalf("the read in progress: %v", err)
	}
	eventually(t, "a reads the rotation announced during its read", func() bool {
		k, _ := a.Get(ctx, tn, "rotated")
		return k.LatestVersion() == 2
	})
}

// rotatingStore rotates the tenant's data key at the first GetTransitKey
// after armed is set: between the moment a change began and the moment it
// seals what it made.
type rotatingStore struct {
	Store
	keys  *tenantkey.Keys
	armed atomic.Bool
}

func (r *rotatingStore) GetTransitKey(ctx context.Context, tenant, name string) (store.TransitKey, []store.TransitKeyVersion, error) {
	if r.armed.CompareAndSwap(true, false) {
		if _, err := r.keys.Rotate(ctx, tenant); err != nil {
			return store.TransitKey{}, nil, err
		}
	}
	return r.Store.GetTransitKey(ctx, tenant, name)
}

// TestSealsUnderDataKeyAfterGeneration: a version is sealed under the
// tenant's data key as it is once the version is made, not as it was when
// the change began — generating a key can take seconds, and a data key
// rotated meanwhile may have its older version retired by then.
func TestSealsUnderDataKeyAfterGeneration(t *testing.T) {
	a := fleet(t, 1, false, Options{})[0]
	if _, _, err := a.Create(ctx, store.DefaultTenant, "k", transit.CreateOptions{Type: transit.ECDSAP256}); err != nil {
		t.Fatal(err)
	}
	n := nodeOf(a)
	rs := &rotatingStore{Store: n.Store(), keys: n.TenantKeys()}
	s, err := New(rs, n.TenantKeys(), n, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	rs.armed.Store(true)
	if _, err := s.Rotate(ctx, store.DefaultTenant, "k", "test"); err != nil {
		t.Fatal(err)
	}
	if rs.armed.Load() {
		t.Fatal("the data key was not rotated during the change")
	}
	v, err := n.Store().GetTransitKeyVersion(ctx, store.DefaultTenant, "k", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tenantkey.SealedVersion(v.Sealed); got != 2 {
		t.Errorf("the new version is sealed under data key version %d, want 2 (the one current when it was sealed)", got)
	}
}
