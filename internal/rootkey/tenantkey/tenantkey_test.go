package tenantkey

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
)

var ctx = context.Background()

// openStore opens the SQLite store at path, closed when the test ends.
func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newRootKey returns a new root key.
func newRootKey(t *testing.T) rootkey.Key {
	t.Helper()
	key, err := rootkey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// keyring returns a keyring unsealed with key, as a node's.
func keyring(t *testing.T, key rootkey.Key) *rootkey.Keyring {
	t.Helper()
	kr, err := rootkey.New(rootkey.Options{Root: key})
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func createTenant(t *testing.T, st *sqlite.Store, name string) {
	t.Helper()
	if err := st.CreateTenant(ctx, store.Tenant{Name: name, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// TestKeys: a tenant's data key is made on first use, stored sealed
// under the root key (never in the clear), the same after a restart,
// binds what it seals to the tenant and the caller's associated data, is
// forgotten by Forget, refused while the root key is sealed, and refused
// for a tenant that does not exist.
func TestKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	st := openStore(t, path)
	rootKey := newRootKey(t)
	root := keyring(t, rootKey)
	keys := New(Config{Store: st, Root: root})
	createTenant(t, st, "acme")
	def, err := keys.Get(ctx, store.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	acme, err := keys.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := keys.Get(ctx, "acme"); again != acme {
		t.Error("a second call made another key")
	}
	sealed, err := def.Seal([]byte("key material"), []byte("row 1"))
	if err != nil || len(sealed) != len("key material")+overhead1 || sealed[0] != keyFormat {
		t.Fatalf("Seal: %d bytes, %v", len(sealed), err)
	}
	if pt, err := def.Open(sealed, []byte("row 1")); err != nil || string(pt) != "key material" {
		t.Fatalf("Open: %q %v", pt, err)
	}
	if pt, err := def.OpenBound(sealed, def.Bind([]byte("row 1"))); err != nil || string(pt) != "key material" {
		t.Fatalf("OpenBound: %q %v", pt, err)
	}
	for name, try := range map[string]func() ([]byte, error){
		"another record": func() ([]byte, error) { return def.Open(sealed, []byte("row 2")) },
		"bound to another record": func() ([]byte, error) {
			return def.OpenBound(sealed, def.Bind([]byte("row 2")))
		},
		"bound to another tenant": func() ([]byte, error) { return def.OpenBound(sealed, acme.Bind([]byte("row 1"))) },
		"bound, truncated":        func() ([]byte, error) { return def.OpenBound(sealed[:Overhead-1], def.Bind([]byte("row 1"))) },
		"another tenant":          func() ([]byte, error) { return acme.Open(sealed, []byte("row 1")) },
		"truncated":               func() ([]byte, error) { return def.Open(sealed[:Overhead-1], []byte("row 1")) },
		"altered": func() ([]byte, error) {
			b := bytes.Clone(sealed)
			b[len(b)-1] ^= 1
			return def.Open(b, []byte("row 1"))
		},
	} {
		if _, err := try(); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", name, err)
		}
	}
	tn, err := st.GetTenant(ctx, "acme")
	if err != nil || len(tn.DataKey) != rootkey.KeySize+rootkey.Overhead {
		t.Fatalf("stored data key: %d bytes, %v", len(tn.DataKey), err)
	}
	if _, err := keys.Get(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a tenant that does not exist: %v", err)
	}
	if def.String() != "DataKey(default)" || def.Tenant() != store.DefaultTenant {
		t.Errorf("String: %q, Tenant: %q", def.String(), def.Tenant())
	}

	keys.Forget()
	if k, err := keys.Get(ctx, "acme"); err != nil || k == acme {
		t.Errorf("after Forget, Get returned the key held before (%v)", err)
	}
	root.Seal()
	keys.Forget()
	if !keys.Sealed() {
		t.Error("Sealed is false with the root key sealed")
	}
	if _, err := keys.Get(ctx, "acme"); !errors.Is(err, rootkey.ErrSealed) {
		t.Errorf("sealed: %v", err)
	}

	// After a restart, the stored key opens what the first one sealed.
	keys2 := New(Config{Store: openStore(t, path), Root: keyring(t, rootKey)})
	def2, err := keys2.Get(ctx, store.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := def2.Open(sealed, []byte("row 1")); err != nil || string(pt) != "key material" {
		t.Fatalf("after a restart: %q %v", pt, err)
	}
}

// TestKeysRace: nodes making a tenant's first data key at once end up
// with the same key: one stores it, the others read it.
func TestKeysRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	rootKey := newRootKey(t)
	var nodes []*Keys
	for range 3 {
		nodes = append(nodes, New(Config{Store: openStore(t, path), Root: keyring(t, rootKey)}))
	}
	createTenant(t, openStore(t, path), "race")
	keys := make([]*Key, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			k, err := n.Get(ctx, "race")
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sealed, err := keys[0].Seal([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys[1:] {
		if _, err := k.Open(sealed, nil); err != nil {
			t.Errorf("node %d's key does not open node 0's value: %v", i+1, err)
		}
	}
}

// TestRecreatedTenant: a tenant deleted and made again under its name
// gets a data key of its own, stored in its row: Fresh reads the row and
// replaces the key held (Get then returns it), and Drop forgets it.
func TestRecreatedTenant(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "keygate.db"))
	root := keyring(t, newRootKey(t))
	keys := New(Config{Store: st, Root: root})
	createTenant(t, st, "acme")
	old, err := keys.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := keys.Fresh(ctx, "acme"); k != old || err != nil {
		t.Errorf("Fresh of an unchanged row: another key (%v)", err)
	}
	if err := st.DeleteTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	createTenant(t, st, "acme")
	fresh, err := keys.Fresh(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	tn, err := st.GetTenant(ctx, "acme")
	if err != nil || tn.DataKey == nil {
		t.Fatalf("the new row's data key: %v", err)
	}
	sealed, _ := fresh.Seal([]byte("x"), nil)
	if _, err := old.Open(sealed, nil); err == nil {
		t.Error("the new tenant's data key is the deleted one's")
	}
	if k, _ := keys.Get(ctx, "acme"); k != fresh {
		t.Error("Get still returns the deleted tenant's key")
	}
	keys.Drop("acme")
	if keys.held("acme") != nil {
		t.Error("the dropped tenant's data key is still held")
	}
}

// interrupting is a store whose first GetTenant runs during before it
// answers: a seal or a deletion landing while a data key is read.
type interrupting struct {
	Store
	once   sync.Once
	during func()
	reads  int
}

func (s *interrupting) GetTenant(ctx context.Context, name string) (store.Tenant, error) {
	s.reads++
	s.once.Do(s.during)
	return s.Store.GetTenant(ctx, name)
}

// TestFreshInterrupted: a key read while the keys are forgotten (the
// root key sealed) is not kept and the read fails with ErrSealed; a key
// read while a tenant is dropped is read again, since the deletion may
// be this tenant's.
func TestFreshInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		during    func(*Keys)
		wantErr   error
		wantReads int
	}{
		{"forgotten", (*Keys).Forget, rootkey.ErrSealed, 1},
		{"dropped", func(k *Keys) { k.Drop("other") }, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := keyring(t, newRootKey(t))
			st := &interrupting{Store: openStore(t, filepath.Join(t.TempDir(), "keygate.db"))}
			keys := New(Config{Store: st, Root: root})
			st.during = func() { tc.during(keys) }
			k, err := keys.Fresh(ctx, store.DefaultTenant)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (k != nil) {
				t.Fatalf("Fresh: %v, %v; want error %v", k, err, tc.wantErr)
			}
			if held := keys.held(store.DefaultTenant); held != k {
				t.Errorf("held %v, want %v", held, k)
			}
			if st.reads != tc.wantReads {
				t.Errorf("%d reads of the tenant's row, want %d", st.reads, tc.wantReads)
			}
		})
	}
}

// held is the tenant's data key the keys hold, if any.
func (t *Keys) held(tenant string) *Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.keys[tenant]
}
