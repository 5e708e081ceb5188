package snapshot_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/postgres"
	"github.com/keygate/keygate/internal/store/snapshot"
	"github.com/keygate/keygate/internal/store/sqlite"
	"github.com/keygate/keygate/internal/testnet"
)

// snapStore is a backend: a store that takes and restores snapshots.
type snapStore interface {
	store.Store
	Snapshot(ctx context.Context, w io.Writer) error
	Restore(ctx context.Context, s *snapshot.Snapshot) error
}

type opener struct {
	name string
	open func(t *testing.T) snapStore
}

func openers() []opener {
	return []opener{
		{"sqlite", func(t *testing.T) snapStore {
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "keygate.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"postgres", func(t *testing.T) snapStore {
			u := os.Getenv("DATABASE_URL")
			if u == "" {
				t.Skip("PostgreSQL tests need a server: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
			}
			s, err := postgres.Open(t.Context(), testnet.PostgresSchema(t, u, "snapshot"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
}

func take(t *testing.T, s snapStore) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Snapshot(t.Context(), &buf); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return buf.Bytes()
}

// fill writes one of everything the store keeps, with values that differ
// between the backends' encodings: NULL and set times, booleans, empty and
// non-empty scopes, sealed bytes with every byte value.
func fill(t *testing.T, s store.Store) { fillUpTo(t, s, 6) }

// fillUpTo is fill for a store of an older schema version: from version
// 6 only, the secrets.
func fillUpTo(t *testing.T, s store.Store, schema int) {
	t.Helper()
	ctx := t.Context()
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("tenant", s.CreateTenant(ctx, store.Tenant{Name: "acme", CreatedAt: at}))
	must("data key", s.SetTenantDataKey(ctx, "acme", all))
	must("data key", s.SetTenantDataKey(ctx, store.DefaultTenant, []byte("sealed default key")))
	must("client", s.CreateClient(ctx, store.Client{ID: "kgc_1", Tenant: "acme", Name: "one", SecretDigest: all[:32], Scopes: []string{"a", "b:c"}, CreatedAt: at, UpdatedAt: at.Add(time.Second)}))
	must("client", s.CreateClient(ctx, store.Client{ID: "kgc_2", Name: "two", SecretDigest: all[32:64], CreatedAt: at, UpdatedAt: at}))
	must("user", s.CreateUser(ctx, store.User{ID: "kgu_1", Tenant: "acme", Username: "ana", PasswordHash: "$argon2id$v=19$x", Scopes: []string{"read"}, Disabled: true, CreatedAt: at, UpdatedAt: at}))
	must("user", s.CreateUser(ctx, store.User{ID: "kgu_2", Username: "bo", PasswordHash: "$argon2id$v=19$y", CreatedAt: at, UpdatedAt: at}))
	must("signing key", s.PutSigningKey(ctx, store.SigningKey{KID: "k1", Alg: "EdDSA", Sealed: all, PublicJWK: []byte(`{"kty":"OKP"}`), PublishAt: at, ActiveAt: at, RetireAt: at.Add(time.Hour), CreatedAt: at}))
	must("signing key", s.PutSigningKey(ctx, store.SigningKey{KID: "k2", Alg: "EdDSA", Sealed: all[1:], PublicJWK: []byte(`{"kty":"OKP","x":"y"}`), PublishAt: at, ActiveAt: at, CreatedAt: at}))
	must("refresh", s.CreateRefreshToken(ctx, store.RefreshToken{Digest: all[:32], FamilyID: "f1", ClientID: "kgc_1", Subject: "ana", Scopes: []string{"x"},
		IssuedAt: at, OriginAt: at, ExpiresAt: at.Add(48 * time.Hour)}))
	must("revoke jti", s.AddRevocation(ctx, store.Revocation{Issuer: "https://i", JTI: "j1", Until: at.Add(24 * time.Hour), CreatedAt: at}))
	must("revoke subject", s.AddRevocation(ctx, store.Revocation{Issuer: "https://i", Subject: "bo", Before: at, CreatedAt: at}))
	must("transit key", s.CreateTransitKey(ctx, store.TransitKey{Tenant: "acme", Name: "orders", Type: "aes256-gcm96", Config: []byte(`{"exportable":false}`),
		Latest: 1, MinAvailable: 1, Revision: 1, CreatedAt: at, UpdatedAt: at}, store.TransitKeyVersion{Tenant: "acme", Name: "orders", Version: 1, Sealed: all, CreatedAt: at}))
	must("transit version", s.AddTransitKeyVersion(ctx, store.TransitKeyVersion{Tenant: "acme", Name: "orders", Version: 2, Sealed: all[:50], CreatedAt: at.Add(time.Minute)}))
	must("audit", s.AppendAudit(ctx, []store.AuditEntry{{Node: "n1", Seq: 0, Line: []byte(`{"seq":0}`)}, {Node: "n1", Seq: 1, Line: []byte(`{"seq":1}`)}, {Node: "n2", Seq: 7, Line: []byte(`{"seq":7}`)}}))
	if schema < 6 {
		return
	}
	m := store.SecretMeta{Tenant: "acme", Path: "app/db", Sealed: []byte("meta1"), CurrentVersion: 1, OldestVersion: 1, CreatedAt: at, UpdatedAt: at}
	rev, err := s.PutSecret(ctx, m, &store.SecretValue{Tenant: "acme", Path: "app/db", Version: 1, Sealed: []byte("v1"), CreatedAt: at}, nil)
	must("secret", err)
	m.Revision, m.Sealed, m.CurrentVersion = rev, []byte("meta2"), 2
	_, err = s.PutSecret(ctx, m, &store.SecretValue{Tenant: "acme", Path: "app/db", Version: 2, Sealed: []byte("v2"), CreatedAt: at}, nil)
	must("secret", err)
	must("secret config", s.SetSecretConfig(ctx, "acme", []byte(`{"max_versions":3}`)))
}

// reads is what the store's own reads return of everything fill wrote.
func reads(t *testing.T, s store.Store) map[string]any { return readsOf(t, s, true) }

// readsOf is reads, with or without the secrets.
func readsOf(t *testing.T, s store.Store, withSecrets bool) map[string]any {
	t.Helper()
	ctx := t.Context()
	out := map[string]any{}
	get := func(name string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = v
	}
	tenants, err := s.ListTenants(ctx)
	get("tenants", tenants, err)
	clients, err := s.ListClients(ctx)
	get("clients", clients, err)
	users, err := s.ListUsers(ctx)
	get("users", users, err)
	keys, err := s.ListSigningKeys(ctx)
	get("signing keys", keys, err)
	rt, err := s.GetRefreshToken(ctx, make256()[:32])
	get("refresh", rt, err)
	revs, err := s.Revocations(ctx, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	get("revocations", revs, err)
	tk, tvs, err := s.GetTransitKey(ctx, "acme", "orders")
	get("transit key", tk, err)
	out["transit versions"] = tvs
	nodes, err := s.AuditNodes(ctx)
	get("audit nodes", nodes, err)
	for _, n := range nodes {
		e, err := s.AuditEntries(ctx, n, 0, 100)
		get("audit "+n, e, err)
	}
	if !withSecrets {
		return out
	}
	sm, err := s.GetSecret(ctx, "acme", "app/db")
	get("secret", sm, err)
	for v := 1; v <= 2; v++ {
		sv, err := s.GetSecretValue(ctx, "acme", "app/db", v)
		get(fmt.Sprint("secret v", v), sv, err)
	}
	sc, err := s.GetSecretConfig(ctx, "acme")
	get("secret config", sc, err)
	return out
}

func make256() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// TestRoundTrip: a snapshot of each backend restores into each backend,
// and the store's reads of the restored store return what they returned of
// the source; the restored store's own snapshot has the same rows; and
// the restored store takes writes after (a new revision, a new audit seq).
func TestRoundTrip(t *testing.T) {
	for _, from := range openers() {
		for _, to := range openers() {
			t.Run(from.name+"_to_"+to.name, func(t *testing.T) {
				src := from.open(t)
				fill(t, src)
				raw := take(t, src)
				snap, err := snapshot.Read(bytes.NewReader(raw))
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if snap.Header.Backend != from.name || snap.Header.Schema < 6 {
					t.Errorf("header: %+v", snap.Header)
				}
				dst := to.open(t)
				if err := dst.Restore(t.Context(), snap); err != nil {
					t.Fatalf("Restore: %v", err)
				}
				want, got := reads(t, src), reads(t, dst)
				for k := range want {
					if !reflect.DeepEqual(want[k], got[k]) {
						t.Errorf("%s after restore:\n got %+v\nwant %+v", k, got[k], want[k])
					}
				}
				again, err := snapshot.Read(bytes.NewReader(take(t, dst)))
				if err != nil {
					t.Fatal(err)
				}
				if a, b := rowCounts(snap), rowCounts(again); !reflect.DeepEqual(a, b) {
					t.Errorf("rows: source %v, restored %v", a, b)
				}
				// It is a store like any other after.
				if err := dst.AppendAudit(t.Context(), []store.AuditEntry{{Node: "n1", Seq: 1, Line: []byte("x")}}); !errors.Is(err, store.ErrConflict) {
					t.Errorf("audit seq 1 again: %v, want a conflict", err)
				}
				if err := dst.AppendAudit(t.Context(), []store.AuditEntry{{Node: "n1", Seq: 2, Line: []byte("x")}}); err != nil {
					t.Errorf("audit seq 2: %v", err)
				}
				if err := dst.Restore(t.Context(), snap); !errors.Is(err, snapshot.ErrNotEmpty) {
					t.Errorf("restore into the restored store: %v, want ErrNotEmpty", err)
				}
			})
		}
	}
}

func rowCounts(s *snapshot.Snapshot) map[string]int {
	m := map[string]int{}
	for _, t := range s.Tables {
		m[t.Name] = len(t.Rows)
	}
	return m
}

// TestRestoreRefusals: a store with rows, a snapshot of another schema
// version and one with a table the store does not have are refused, and
// the store is left as it was (still empty, restorable).
func TestRestoreRefusals(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			src := o.open(t)
			fill(t, src)
			good, err := snapshot.Read(bytes.NewReader(take(t, src)))
			if err != nil {
				t.Fatal(err)
			}
			newer := *good
			newer.Header.Schema++
			older := *good
			older.Header.Schema--
			extra := *good
			extra.Tables = append(append([]snapshot.Table(nil), good.Tables...), snapshot.Table{Name: "zz_unknown", Columns: []snapshot.Column{{Name: "a", Kind: snapshot.KindInt}}})
			badValue := *good
			badValue.Tables = append([]snapshot.Table(nil), good.Tables...)
			for i, tb := range badValue.Tables {
				if tb.Name == "users" {
					rows := append([][]any(nil), tb.Rows...)
					last := append([]any(nil), rows[len(rows)-1]...)
					for c, col := range tb.Columns {
						if col.Name == "username" {
							last[c] = "" // breaks the column's CHECK, after other rows went in
						}
					}
					rows[len(rows)-1] = last
					badValue.Tables[i].Rows = rows
				}
			}
			dst := o.open(t)
			for _, c := range []struct {
				name string
				snap *snapshot.Snapshot
				want error
			}{
				{"newer schema", &newer, snapshot.ErrSchema},
				{"older schema", &older, snapshot.ErrSchema},
				{"unknown table", &extra, snapshot.ErrSchema},
				{"a value the target refuses", &badValue, nil},
			} {
				err := dst.Restore(t.Context(), c.snap)
				if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
					t.Errorf("%s: %v, want %v", c.name, err, c.want)
				}
				if n, _ := dst.ListClients(t.Context()); len(n) != 0 {
					t.Fatalf("%s: %d clients written", c.name, len(n))
				}
				if tn, _ := dst.ListTenants(t.Context()); len(tn) != 1 || tn[0].Name != store.DefaultTenant || tn[0].DataKey != nil {
					t.Fatalf("%s: tenants %+v after a refused restore", c.name, tn)
				}
			}
			if err := dst.Restore(t.Context(), good); err != nil {
				t.Fatalf("the good snapshot after the refusals: %v", err)
			}
			if err := src.Restore(t.Context(), good); !errors.Is(err, snapshot.ErrNotEmpty) {
				t.Errorf("restore into a store with rows: %v, want ErrNotEmpty", err)
			}
		})
	}
}

// extraTable is a table no keygate code knows, as a later migration would
// add, with each type a column can have on each backend and an
// auto-numbered key.
var extraTable = map[string]string{
	"sqlite": `CREATE TABLE zz_extra (
		id   INTEGER PRIMARY KEY AUTOINCREMENT,
		flag INTEGER NOT NULL CHECK (flag IN (0, 1)),
		at   INTEGER,
		doc  TEXT    NOT NULL CHECK (json_type(doc) = 'object'),
		raw  BLOB,
		note TEXT
	) STRICT`,
	"postgres": `CREATE TABLE zz_extra (
		id   bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
		flag boolean NOT NULL,
		at   timestamptz,
		doc  jsonb NOT NULL CHECK (jsonb_typeof(doc) = 'object'),
		raw  bytea,
		note varchar(32)
	)`,
}

// TestUnknownTable: a table the snapshot code does not know is copied
// with the rest, its values converted between the backends' types, and
// its auto-numbered key continues after the rows restored.
func TestUnknownTable(t *testing.T) {
	for _, from := range openers() {
		for _, to := range openers() {
			t.Run(from.name+"_to_"+to.name, func(t *testing.T) {
				src, srcExec := openRaw(t, from)
				srcExec(extraTable[from.name])
				srcExec(`INSERT INTO zz_extra (flag, at, doc, raw, note) VALUES (` + boolLit(from.name, true) + `, ` + timeLit(from.name) + `, '{"a": [1, "x"]}', NULL, 'é')`)
				srcExec(`INSERT INTO zz_extra (flag, at, doc, raw, note) VALUES (` + boolLit(from.name, false) + `, NULL, '{}', ` + blobLit(from.name) + `, NULL)`)
				snap, err := snapshot.Read(bytes.NewReader(take(t, src)))
				if err != nil {
					t.Fatal(err)
				}
				dst, dstExec := openRaw(t, to)
				dstExec(extraTable[to.name])
				if err := dst.Restore(t.Context(), snap); err != nil {
					t.Fatalf("Restore: %v", err)
				}
				dstExec(`INSERT INTO zz_extra (flag, doc) VALUES (` + boolLit(to.name, true) + `, '{}')`)
				again, err := snapshot.Read(bytes.NewReader(take(t, dst)))
				if err != nil {
					t.Fatal(err)
				}
				var rows [][]any
				for _, tb := range again.Tables {
					if tb.Name == "zz_extra" {
						rows = tb.Rows
					}
				}
				if len(rows) != 3 {
					t.Fatalf("zz_extra after the restore: %v", rows)
				}
				at := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)
				flag := func(b bool) any {
					if to.name == "sqlite" {
						if b {
							return int64(1)
						}
						return int64(0)
					}
					return b
				}
				atv := any(at)
				if to.name == "sqlite" {
					atv = at.UnixMicro()
				}
				const doc = `{"a": [1, "x"]}` // jsonb's own spacing, kept as written in SQLite
				want := [][]any{
					{int64(1), flag(true), atv, doc, nil, "é"},
					{int64(2), flag(false), nil, "{}", []byte{0, 1, 254, 255}, nil},
					{int64(3), flag(true), nil, "{}", nil, nil},
				}
				if !reflect.DeepEqual(rows, want) {
					t.Errorf("zz_extra rows:\n got %#v\nwant %#v", rows, want)
				}
			})
		}
	}
}

func boolLit(backend string, b bool) string {
	switch {
	case backend == "sqlite" && b:
		return "1"
	case backend == "sqlite":
		return "0"
	}
	return fmt.Sprint(b)
}

func timeLit(backend string) string {
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC)
	if backend == "sqlite" {
		return fmt.Sprint(at.UnixMicro())
	}
	return "'" + at.Format(time.RFC3339Nano) + "'"
}

func blobLit(backend string) string {
	if backend == "sqlite" {
		return "x'0001feff'"
	}
	return `'\x0001feff'::bytea`
}

// openRaw opens a new store of o's backend, and a function that runs SQL
// on its database directly.
func openRaw(t *testing.T, o opener) (snapStore, func(string)) {
	t.Helper()
	switch o.name {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "keygate.db")
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return s, func(q string) {
			t.Helper()
			if _, err := db.ExecContext(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	default:
		u := os.Getenv("DATABASE_URL")
		if u == "" {
			t.Skip("PostgreSQL tests need a server: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		}
		u = testnet.PostgresSchema(t, u, "snapshot")
		s, err := postgres.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		conn, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return s, func(q string) {
			t.Helper()
			if _, err := conn.Exec(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
}

// TestSnapshotOffline: a snapshot read from the database directly, with no
// store open on it (SQLite: a closed file; PostgreSQL: a new connection),
// has the rows of the store's own; and the SQLite file is not written.
func TestSnapshotOffline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s)
	online := take(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sqlite.SnapshotFile(t.Context(), path, &buf); err != nil {
		t.Fatalf("SnapshotFile: %v", err)
	}
	sameRows(t, online, buf.Bytes())
	if after, err := os.Stat(path); err != nil || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("the database changed: %v, %v -> %v", err, before, after)
	}
	if err := sqlite.SnapshotFile(t.Context(), filepath.Join(t.TempDir(), "none.db"), &buf); err == nil {
		t.Error("SnapshotFile of a missing file: no error")
	}

	u := os.Getenv("DATABASE_URL")
	if u == "" {
		t.Skip("PostgreSQL tests need a server: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	u = testnet.PostgresSchema(t, u, "snapshot")
	p, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fill(t, p)
	buf.Reset()
	if err := postgres.SnapshotURL(t.Context(), u, &buf); err != nil {
		t.Fatalf("SnapshotURL: %v", err)
	}
	sameRows(t, take(t, p), buf.Bytes())
}

// sameRows fails unless two snapshots hold the same tables and rows.
func sameRows(t *testing.T, a, b []byte) {
	t.Helper()
	sa, err := snapshot.Read(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := snapshot.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa.Tables, sb.Tables) || sa.Header.Schema != sb.Header.Schema {
		t.Errorf("the snapshots differ")
	}
}

// TestRestoreOlderSchema: a snapshot of a store at an older schema version
// restores into a new store of this keygate (RestoreFile, RestoreURL): the
// store is migrated to the snapshot's version, restored, then migrated the
// rest of the way, and reads back what the source held; the tables the
// later migrations added are there and empty. A snapshot of a newer
// schema is refused before anything is created.
func TestRestoreOlderSchema(t *testing.T) {
	const old = 5 // before the secrets
	type target struct {
		name    string
		restore func(t *testing.T, snap *snapshot.Snapshot) (store.Store, error)
	}
	pgURL := func(t *testing.T) string {
		u := os.Getenv("DATABASE_URL")
		if u == "" {
			t.Skip("PostgreSQL tests need a server: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
		}
		return testnet.PostgresSchema(t, u, "snapshot")
	}
	sources := []opener{
		{"sqlite", func(t *testing.T) snapStore {
			// A store of this keygate, made one of version 5 by undoing
			// migrations 6 to 8 (which only add tables) once it is filled.
			path := filepath.Join(t.TempDir(), "keygate.db")
			s, err := sqlite.Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			fillUpTo(t, s, old)
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, q := range []string{`DROP TABLE secret_values`, `DROP TABLE secret_configs`, `DROP TABLE secrets`, `DROP TABLE rekey`, `DROP TABLE tenant_rekeys`, `DELETE FROM schema_migrations WHERE version >= 6`} {
				if _, err := db.ExecContext(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			return s
		}},
		{"postgres", func(t *testing.T) snapStore {
			s, err := postgres.Open(t.Context(), pgURL(t), postgres.WithSchemaVersion(old))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			fillUpTo(t, s, old)
			return s
		}},
	}
	targets := []target{
		{"sqlite", func(t *testing.T, snap *snapshot.Snapshot) (store.Store, error) {
			path := filepath.Join(t.TempDir(), "keygate.db")
			if err := sqlite.RestoreFile(t.Context(), path, snap); err != nil {
				if _, serr := os.Stat(path); serr == nil && snap.Header.Schema > 6 {
					t.Errorf("a refused restore created %s", path)
				}
				return nil, err
			}
			s, err := sqlite.Open(t.Context(), path)
			if err == nil {
				t.Cleanup(func() { s.Close() })
			}
			return s, err
		}},
		{"postgres", func(t *testing.T, snap *snapshot.Snapshot) (store.Store, error) {
			u := pgURL(t)
			if err := postgres.RestoreURL(t.Context(), u, snap); err != nil {
				return nil, err
			}
			s, err := postgres.Open(t.Context(), u)
			if err == nil {
				t.Cleanup(func() { s.Close() })
			}
			return s, err
		}},
	}
	for _, from := range sources {
		for _, to := range targets {
			t.Run(from.name+"_to_"+to.name, func(t *testing.T) {
				src := from.open(t)
				snap, err := snapshot.Read(bytes.NewReader(take(t, src)))
				if err != nil {
					t.Fatal(err)
				}
				if snap.Header.Schema != old {
					t.Fatalf("the source's schema version: %d", snap.Header.Schema)
				}
				newer := *snap
				newer.Header.Schema = 99
				if _, err := to.restore(t, &newer); !errors.Is(err, snapshot.ErrSchema) {
					t.Errorf("a snapshot of a newer schema: %v, want ErrSchema", err)
				}
				dst, err := to.restore(t, snap)
				if err != nil {
					t.Fatalf("restore: %v", err)
				}
				want, got := readsOf(t, src, false), readsOf(t, dst, false)
				for k := range want {
					if !reflect.DeepEqual(want[k], got[k]) {
						t.Errorf("%s after restore:\n got %+v\nwant %+v", k, got[k], want[k])
					}
				}
				// The secrets' tables, which version 6 added, work.
				m := store.SecretMeta{Tenant: "acme", Path: "new", Sealed: []byte("m"), CurrentVersion: 1, OldestVersion: 1,
					CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
				if _, err := dst.PutSecret(t.Context(), m, &store.SecretValue{Tenant: "acme", Path: "new", Version: 1, Sealed: []byte("v"), CreatedAt: m.CreatedAt}, nil); err != nil {
					t.Errorf("a secret in the restored, migrated store: %v", err)
				}
			})
		}
	}
}
