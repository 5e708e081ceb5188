package secrets

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/rootkey/tenantkey"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/postgres"
	"github.com/keygate/keygate/internal/testnet"
)

// replaceValue puts sealed in place of the value of version v of path,
// through the store, keeping the path's row as it is.
func (k *kit) replaceValue(t *testing.T, tenant, path string, v int, sealed []byte) {
	t.Helper()
	row, err := k.st.GetSecret(ctx, tenant, path)
	must(t, "GetSecret", err)
	_, err = k.st.PutSecret(ctx, row, &store.SecretValue{Version: v, Sealed: sealed, CreatedAt: t0}, []int{v})
	must(t, "PutSecret(moved value)", err)
}

func (k *kit) sealedValue(t *testing.T, tenant, path string, v int) []byte {
	t.Helper()
	row, err := k.st.GetSecretValue(ctx, tenant, path, v)
	must(t, "GetSecretValue", err)
	return row.Sealed
}

// TestMovedCiphertext: a value or metadata moved to another version,
// path or tenant does not open there.
func TestMovedCiphertext(t *testing.T) {
	for _, tc := range []struct {
		name              string
		tenant, path      string
		version           int
		fromTenant, fromP string
		fromV             int
	}{
		{"another version", def, "a", 2, def, "a", 1},
		{"another path", def, "b", 1, def, "a", 1},
		{"another tenant", "acme", "a", 1, def, "a", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKit(t)
			k.tenant(t, "acme")
			k.write(t, def, "a", `{"v":"a1"}`)
			k.write(t, def, "a", `{"v":"a2"}`)
			k.write(t, def, "b", `{"v":"b1"}`)
			k.write(t, "acme", "a", `{"v":"acme-a1"}`)
			k.replaceValue(t, tc.tenant, tc.path, tc.version, k.sealedValue(t, tc.fromTenant, tc.fromP, tc.fromV))
			_, err := k.e.Read(ctx, tc.tenant, tc.path, tc.version)
			wantErr(t, "Read(moved value)", err, ErrCorrupt)
			_, err = k.e.Patch(ctx, tc.tenant, tc.path, json.RawMessage(`{}`), nil)
			wantErr(t, "Patch(over a moved value)", err, ErrCorrupt)
		})
	}
	t.Run("metadata", func(t *testing.T) {
		k := newKit(t)
		k.tenant(t, "acme")
		k.write(t, def, "a", `{"v":"a1"}`)
		k.write(t, def, "b", `{"v":"b1"}`)
		k.write(t, "acme", "a", `{"v":"acme"}`)
		for _, to := range []struct{ tenant, path string }{{def, "b"}, {"acme", "a"}} {
			src, err := k.st.GetSecret(ctx, def, "a")
			must(t, "GetSecret", err)
			dst, err := k.st.GetSecret(ctx, to.tenant, to.path)
			must(t, "GetSecret", err)
			dst.Sealed = src.Sealed
			_, err = k.st.PutSecret(ctx, dst, nil, nil)
			must(t, "PutSecret(moved metadata)", err)
			_, err = k.e.Read(ctx, to.tenant, to.path, 0)
			wantErr(t, fmt.Sprintf("Read(%s/%s, moved metadata)", to.tenant, to.path), err, ErrCorrupt)
			_, err = k.e.Metadata(ctx, to.tenant, to.path)
			wantErr(t, "Metadata(moved)", err, ErrCorrupt)
		}
	})
}

// TestSealed: a sealed node refuses everything with ErrSealed.
func TestSealed(t *testing.T) {
	k := newKit(t)
	k.write(t, def, "a", `{"v":1}`)
	k.ring.Seal()
	k.keys.Forget()
	e := k.e
	for _, c := range serviceCalls(e, "a") {
		wantErr(t, c.name+" while sealed", c.f(), ErrSealed)
	}
}

type call struct {
	name string
	f    func() error
}

// serviceCalls is one call of each Service method, on path.
func serviceCalls(e *Engine, path string) []call {
	return []call{
		{"Read", func() error { _, err := e.Read(ctx, def, path, 0); return err }},
		{"Write", func() error { _, err := e.Write(ctx, def, path, json.RawMessage(`{}`), nil); return err }},
		{"Patch", func() error { _, err := e.Patch(ctx, def, path, json.RawMessage(`{}`), nil); return err }},
		{"Subkeys", func() error { _, _, err := e.Subkeys(ctx, def, path, 0, 0); return err }},
		{"Metadata", func() error { _, err := e.Metadata(ctx, def, path); return err }},
		{"SetMetadata", func() error { return e.SetMetadata(ctx, def, path, MetadataUpdate{}) }},
		{"PatchMetadata", func() error { return e.PatchMetadata(ctx, def, path, MetadataUpdate{}) }},
		{"DeleteMetadata", func() error { return e.DeleteMetadata(ctx, def, path) }},
		{"Delete", func() error { return e.Delete(ctx, def, path, nil) }},
		{"Undelete", func() error { return e.Undelete(ctx, def, path, []int{1}) }},
		{"Destroy", func() error { return e.Destroy(ctx, def, path, []int{1}) }},
		{"List", func() error { _, err := e.List(ctx, def, ""); return err }},
		{"Config", func() error { _, err := e.Config(ctx, def); return err }},
		{"SetConfig", func() error { return e.SetConfig(ctx, def, MountConfig{}) }},
	}
}

// downStore is a store whose secrets calls all fail as an unreachable
// one's do.
type downStore struct{ store.Store }

var errDown = fmt.Errorf("get secret: %w: connection refused", store.ErrUnavailable)

func (downStore) GetSecret(context.Context, string, string) (store.SecretMeta, error) {
	return store.SecretMeta{}, errDown
}
func (downStore) ListSecrets(context.Context, string, string, string, int) ([]string, error) {
	return nil, errDown
}
func (downStore) GetSecretConfig(context.Context, string) ([]byte, error) { return nil, errDown }
func (downStore) SetSecretConfig(context.Context, string, []byte) error   { return errDown }
func (downStore) DeleteSecret(context.Context, string, string) error      { return errDown }

// TestStoreUnavailable: a store that cannot be reached is
// store.ErrUnavailable to the caller, not a missing secret.
func TestStoreUnavailable(t *testing.T) {
	k := newKit(t)
	k.write(t, def, "a", `{}`)
	down, err := New(Options{Store: downStore{k.st}, Keys: k.keys, Now: k.clock.now})
	must(t, "New", err)
	for _, c := range serviceCalls(down, "a") {
		err := c.f()
		wantErr(t, c.name+" with the store down", err, store.ErrUnavailable)
		if errors.Is(err, ErrNotFound) {
			t.Errorf("%s with the store down: %v is ErrNotFound", c.name, err)
		}
	}
}

// TestConcurrentWriters: writers racing on one path without cas all
// land, one version each; with the same cas, one wins and the others get
// ErrCASMismatch.
func TestConcurrentWriters(t *testing.T) {
	k := newKit(t)
	must(t, "SetConfig", k.e.SetConfig(ctx, def, MountConfig{MaxVersions: 100}))
	k.e.retries = 100 // 20 writers on a loaded machine: each must land
	const n = 20
	run := func(f func(i int) error) []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
		return errs
	}
	versions := make([]int, n)
	for i, err := range run(func(i int) error {
		vm, err := k.e.Write(ctx, def, "p", json.RawMessage(fmt.Sprintf(`{"writer":%d}`, i)), nil)
		versions[i] = vm.Version
		return err
	}) {
		must(t, fmt.Sprintf("writer %d", i), err)
	}
	seen := map[int]bool{}
	for _, v := range versions {
		seen[v] = true
	}
	if m := k.meta(t, def, "p"); m.CurrentVersion != n || len(seen) != n {
		t.Errorf("after %d writers: current version %d, versions %v", n, m.CurrentVersion, versions)
	}
	for i, v := range versions {
		if s := k.read(t, def, "p", v); string(s.Data) != fmt.Sprintf(`{"writer":%d}`, i) {
			t.Errorf("version %d holds %s, want writer %d's", v, s.Data, i)
		}
	}
	winners := 0
	for i, err := range run(func(i int) error {
		_, err := k.e.Write(ctx, def, "p", json.RawMessage(`{}`), ptr(n))
		return err
	}) {
		switch {
		case err == nil:
			winners++
		case !errors.Is(err, ErrCASMismatch):
			t.Errorf("cas writer %d: %v, want ErrCASMismatch", i, err)
		}
	}
	if winners != 1 {
		t.Errorf("%d cas writers won, want 1", winners)
	}
}

// distinctive values and custom metadata, for the dump tests.
var (
	dumpValue  = "correct-horse-battery-staple-7f3a9c"
	dumpPatch  = "patched-tr0ub4dor-e1d2"
	dumpCustom = "custom-meta-owner-9b8e"
	dumpKey    = "custom-key-x4q2"
)

func writeDistinctive(t *testing.T, k *kit) {
	t.Helper()
	k.write(t, def, "dump/a", `{"password":"`+dumpValue+`"}`)
	_, err := k.e.Patch(ctx, def, "dump/a", json.RawMessage(`{"more":"`+dumpPatch+`"}`), nil)
	must(t, "Patch", err)
	must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "dump/a", MetadataUpdate{CustomMetadata: map[string]string{dumpKey: dumpCustom}}))
	k.write(t, def, "dump/b", `{"again":"`+dumpValue+`"}`)
	must(t, "Delete", k.e.Delete(ctx, def, "dump/b", nil))
	if s := k.read(t, def, "dump/a", 0); !strings.Contains(string(s.Data), dumpPatch) {
		t.Fatalf("read back %s", s.Data)
	}
}

// leaks returns the distinctive strings b holds.
func leaks(b []byte) []string {
	var out []string
	for _, s := range []string{dumpValue, dumpPatch, dumpCustom, dumpKey} {
		if bytes.Contains(b, []byte(s)) {
			out = append(out, s)
		}
	}
	return out
}

func checkNoSecret(t *testing.T, where string, b []byte) {
	t.Helper()
	if l := leaks(b); l != nil {
		t.Errorf("%s holds %q in the clear", where, l)
	}
}

// TestDumpSQLite: the database file and its WAL hold no value and no
// custom metadata in the clear.
func TestDumpSQLite(t *testing.T) {
	k := newKit(t)
	writeDistinctive(t, k)
	must(t, "Close", k.st.Close())
	files, err := filepath.Glob(filepath.Join(k.dir, "*"))
	must(t, "Glob", err)
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, "ReadFile", err)
		all = append(all, b...)
		checkNoSecret(t, filepath.Base(f), b)
	}
	// The bytes read are the secrets' rows: their paths are in the clear.
	if !bytes.Contains(all, []byte("dump/a")) || leaks([]byte(`{"password":"`+dumpValue+`"}`)) == nil {
		t.Fatal("the dump does not see what it looks for")
	}
}

// TestDumpPostgres: every column of the secrets tables, as text, holds no
// value and no custom metadata.
func TestDumpPostgres(t *testing.T) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	url := testnet.PostgresSchema(t, base, "kg_secrets")
	st, err := postgres.Open(ctx, url)
	must(t, "postgres.Open", err)
	t.Cleanup(func() { st.Close() })
	k := kitOn(t, st, t.TempDir())
	writeDistinctive(t, k)
	conn, err := pgx.Connect(ctx, url)
	must(t, "connect", err)
	defer conn.Close(ctx)
	rows, paths := 0, 0
	for _, table := range []string{"secrets", "secret_values", "secret_configs"} {
		r, err := conn.Query(ctx, `SELECT t::text FROM `+table+` AS t`)
		must(t, "SELECT "+table, err)
		for r.Next() {
			var text string
			must(t, "Scan", r.Scan(&text))
			checkNoSecret(t, table, []byte(text))
			rows++
			if strings.Contains(text, "dump/a") {
				paths++
			}
		}
		must(t, table, r.Err())
	}
	if rows < 5 || paths < 3 {
		t.Fatalf("%d rows dumped, %d naming dump/a: want the paths' and versions'", rows, paths)
	}
}

// TestTenantMadeAgain: a node holding the data key of a tenant that was
// deleted and made again under its name (by another node) reads the new
// tenant's secrets under the new key, and writes under it.
func TestTenantMadeAgain(t *testing.T) {
	// The two engines are nodes of one fleet: each hears the other's
	// change notices (what a node that missed one serves is bounded by the
	// cache's max age: TestCacheMissedNotice).
	bus := &bus{}
	a := newKitWith(t, Options{Notices: bus})
	b, err := New(Options{Store: a.st, Keys: tenantkey.New(tenantkey.Config{Store: a.st, Root: a.ring}), Now: a.clock.now, Notices: bus})
	must(t, "New(b)", err)
	a.tenant(t, "acme")
	a.write(t, "acme", "p", `{"v":"old"}`)
	a.read(t, "acme", "p", 0) // a holds acme's key
	must(t, "DeleteMetadata", b.DeleteMetadata(ctx, "acme", "p"))
	must(t, "DeleteTenant", a.st.DeleteTenant(ctx, "acme"))
	a.tenant(t, "acme")
	_, err = b.Write(ctx, "acme", "p", json.RawMessage(`{"v":"new"}`), nil)
	must(t, "b.Write", err)
	if s := a.read(t, "acme", "p", 0); string(s.Data) != `{"v":"new"}` {
		t.Errorf("a reads %s", s.Data)
	}
	a.write(t, "acme", "p", `{"v":"newer"}`)
	s, err := b.Read(ctx, "acme", "p", 0)
	if err != nil || string(s.Data) != `{"v":"newer"}` {
		t.Errorf("b reads a's write: %v %v", s, err)
	}
}

// TestPostgresGoesAway: PostgreSQL stops answering in the middle of
// writes. Each write either fails with store.ErrUnavailable or lands
// whole; once PostgreSQL answers again every path reads as one of the
// versions written, its value opening, and an acknowledged write is never
// lost.
func TestPostgresGoesAway(t *testing.T) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	if testing.Short() {
		t.Skip("integration: PostgreSQL behind a proxy that stops answering; run without -short")
	}
	u, err := neturl.Parse(testnet.PostgresSchema(t, base, "kg_secrets_outage"))
	must(t, "parse", err)
	proxy := testnet.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	st, err := postgres.Open(ctx, u.String(), postgres.WithTimeout(300*time.Millisecond))
	must(t, "postgres.Open", err)
	t.Cleanup(func() { st.Close() })
	k := kitOn(t, st, t.TempDir())
	acked := map[string]int{} // path → the last acknowledged value
	failed := 0
	for round := range 20 {
		path := fmt.Sprint("p", round%4)
		if round%5 == 2 {
			proxy.Blackhole()
		}
		if round%5 == 3 {
			proxy.Down()
		}
		_, err := k.e.Write(ctx, def, path, json.RawMessage(fmt.Sprintf(`{"n":%d}`, round)), nil)
		switch {
		case err == nil:
			acked[path] = round
		case !errors.Is(err, store.ErrUnavailable):
			t.Fatalf("round %d: %v, want success or store.ErrUnavailable", round, err)
		default:
			failed++
		}
		proxy.Up()
	}
	for path, n := range acked {
		var s *Secret
		for range 10 { // the store's 300 ms bound can pass on a loaded machine: try again, as a client would
			if s, err = k.e.Read(ctx, def, path, 0); !errors.Is(err, store.ErrUnavailable) {
				break
			}
		}
		must(t, "Read "+path, err)
		var v struct{ N int }
		must(t, "decode", json.Unmarshal(s.Data, &v))
		if v.N < n {
			t.Errorf("%s reads %d, but %d was acknowledged after it", path, v.N, n)
		}
		var m *Metadata
		for range 10 {
			if m, err = k.e.Metadata(ctx, def, path); !errors.Is(err, store.ErrUnavailable) {
				break
			}
		}
		must(t, "Metadata "+path, err)
		if m.CurrentVersion != s.Meta.Version {
			t.Errorf("%s: metadata says version %d, the read %d", path, m.CurrentVersion, s.Meta.Version)
		}
	}
	if len(acked) == 0 || failed == 0 {
		t.Fatalf("%d paths acknowledged, %d writes failed: the test saw no outage to survive", len(acked), failed)
	}
	t.Logf("%d writes failed while PostgreSQL was away", failed)
}

// TestDataKeyTampered: the tenant's data key in its row is replaced or
// removed behind the node's back. A node that has not yet opened it cannot
// read the tenant's secrets: it gets an error (ErrCorrupt for a key that
// does not open, never a secret and never a panic), and writes nothing
// under a key it could not open.
func TestDataKeyTampered(t *testing.T) {
	for _, c := range []struct {
		name string
		key  any // what the row's data_key becomes
	}{
		{"garbage", []byte("not a sealed key, but bytes of some length")},
		{"another tenant's", nil}, // filled in below
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newKit(t)
			a.tenant(t, "acme")
			a.tenant(t, "other")
			a.write(t, "acme", "p", `{"v":"x"}`)
			a.write(t, "other", "q", `{"v":"y"}`)
			db, err := sql.Open("sqlite", filepath.Join(a.dir, "keygate.db"))
			must(t, "open", err)
			defer db.Close()
			key := c.key
			if key == nil {
				must(t, "select", db.QueryRow(`SELECT data_key FROM tenants WHERE name = 'other'`).Scan(&key))
			}
			_, err = db.Exec(`UPDATE tenants SET data_key = ? WHERE name = 'acme'`, key)
			must(t, "update", err)
			b, err := New(Options{Store: a.st, Keys: tenantkey.New(tenantkey.Config{Store: a.st, Root: a.ring}), Now: a.clock.now})
			must(t, "New(b)", err)
			if s, err := b.Read(ctx, "acme", "p", 0); err == nil {
				t.Fatalf("read under a tampered data key: %s", s.Data)
			} else if errors.Is(err, ErrNotFound) {
				t.Errorf("read under a tampered data key: %v, a missing secret", err)
			}
			_, rerr := b.Read(ctx, "acme", "p", 0)
			t.Logf("read: %v", rerr)
			if _, err := b.Write(ctx, "acme", "p", json.RawMessage(`{"v":"z"}`), nil); err == nil {
				t.Error("a write under a data key that does not open succeeded")
			}
			if s := a.read(t, "acme", "p", 0); string(s.Data) != `{"v":"x"}` {
				t.Errorf("the node that held the key reads %s", s.Data)
			}
		})
	}
}
