package secrets

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
)

// clock is a settable clock.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time      { return time.UnixMicro(c.t.Load()).UTC() }
func (c *clock) add(d time.Duration) { c.t.Add(d.Microseconds()) }

// kit is an engine on a SQLite store in a directory of its own, with the
// pieces a test reaches into.
type kit struct {
	e     *Engine
	st    store.Store
	dir   string
	ring  *rootkey.Keyring
	keys  *tenantkey.Keys
	clock *clock
}

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func newKit(t testing.TB) *kit {
	t.Helper()
	return newKitWith(t, Options{})
}

// newKitWith is newKit with the engine's options o (its store, keys and
// clock set by the kit).
func newKitWith(t testing.TB, o Options) *kit {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "keygate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return kitOnWith(t, st, dir, o)
}

// kitOn makes the engine of a kit on st.
func kitOn(t testing.TB, st store.Store, dir string) *kit {
	t.Helper()
	return kitOnWith(t, st, dir, Options{})
}

func kitOnWith(t testing.TB, st store.Store, dir string, o Options) *kit {
	t.Helper()
	root, err := rootkey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := rootkey.New(rootkey.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	keys := tenantkey.New(tenantkey.Config{Store: st, Root: ring})
	c := &clock{}
	c.t.Store(t0.UnixMicro())
	o.Store, o.Keys, o.Now = st, keys, c.now
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &kit{e: e, st: st, dir: dir, ring: ring, keys: keys, clock: c}
}

const def = store.DefaultTenant

func (k *kit) tenant(t testing.TB, name string) {
	t.Helper()
	if err := k.st.CreateTenant(context.Background(), store.Tenant{Name: name, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
}

// write writes data at path without cas, failing t on an error.
func (k *kit) write(t testing.TB, tenant, path, data string) VersionMeta {
	t.Helper()
	vm, err := k.e.Write(context.Background(), tenant, path, json.RawMessage(data), nil)
	if err != nil {
		t.Fatalf("Write(%s, %s): %v", tenant, path, err)
	}
	return vm.VersionMeta
}

// read reads version of path, failing t on an error.
func (k *kit) read(t testing.TB, tenant, path string, version int) *Secret {
	t.Helper()
	s, err := k.e.Read(context.Background(), tenant, path, version)
	if err != nil {
		t.Fatalf("Read(%s, %s, %d): %v", tenant, path, version, err)
	}
	return s
}

func (k *kit) meta(t testing.TB, tenant, path string) *Metadata {
	t.Helper()
	m, err := k.e.Metadata(context.Background(), tenant, path)
	if err != nil {
		t.Fatalf("Metadata(%s, %s): %v", tenant, path, err)
	}
	return m
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// gone checks that err is a *GoneError for version, destroyed or not.
func gone(t testing.TB, what string, err error, version int, destroyed bool) *GoneError {
	t.Helper()
	var g *GoneError
	if !errors.As(err, &g) {
		t.Fatalf("%s: error %v, want a GoneError", what, err)
	}
	if g.Meta.Version != version || g.Meta.Destroyed != destroyed {
		t.Errorf("%s: gone %+v, want version %d destroyed %v", what, g.Meta, version, destroyed)
	}
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("%s: a GoneError is not ErrNotFound", what)
	}
	return g
}

func ptr[T any](v T) *T { return &v }
