package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/codec"
	"github.com/keygate/keygate/internal/store/internal/migration"
	"github.com/keygate/keygate/internal/store/storetest"
)

func open(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "keygate.db"))
	})
}

const durabilityPathEnv = "KEYGATE_SQLITE_DURABILITY_PATH"

func TestDurability(t *testing.T) {
	if os.Getenv(storetest.DurabilityChildEnv) != "" {
		s := open(t, os.Getenv(durabilityPathEnv))
		if err := storetest.DurabilityChild(context.Background(), s, os.Stdout); err != nil {
			t.Fatal(err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "keygate.db")
	open(t, path).Close() // migrate before the burst
	storetest.Durability(t, "TestDurability", []string{durabilityPathEnv + "=" + path}, func(t *testing.T) store.Store {
		return open(t, path)
	})
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "keygate.db")
	s := open(t, path)
	defer s.Close()
	if err := s.CreateClient(t.Context(), store.Client{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{
		dir:           0o700 | os.ModeDir,
		path:          0o600,
		path + "-wal": 0o600,
		path + "-shm": 0o600,
	} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(name), fi.Mode(), want)
		}
	}
}

func TestPragmas(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "keygate.db"))
	defer s.Close()
	ctx := t.Context()
	for _, db := range []struct {
		name string
		db   *sql.DB
		ro   int
	}{{"writer", s.w, 0}, {"reader", s.r, 1}} {
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"synchronous":  "2", // FULL
			"foreign_keys": "1",
			"busy_timeout": fmt.Sprint(busyTimeout.Milliseconds()),
			"query_only":   fmt.Sprint(db.ro),
		} {
			var got string
			if err := db.db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatalf("%s: PRAGMA %s: %v", db.name, pragma, err)
			}
			if got != want {
				t.Errorf("%s: PRAGMA %s = %s, want %s", db.name, pragma, got, want)
			}
		}
	}
	if _, err := s.r.ExecContext(ctx, `DELETE FROM clients`); err == nil {
		t.Error("a reader connection wrote")
	}
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	s := open(t, path)
	c := store.Client{ID: "c1", Name: "one", SecretDigest: []byte{1}, CreatedAt: time.Unix(1, 0).UTC(), UpdatedAt: time.Unix(2, 0).UTC()}
	if err := s.CreateClient(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	got, err := s.GetClient(t.Context(), "c1")
	if err != nil || got.Name != "one" || !got.UpdatedAt.Equal(c.UpdatedAt) {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.w.QueryRowContext(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(ms) {
		t.Errorf("schema_migrations: %d rows, %v; want %d", n, err, len(ms))
	}
}

// createAt creates the database at path with the schema of version (the
// first version migrations), as a keygate of that version left it, and
// returns it open without the store.
func createAt(t *testing.T, path string, version int) *sql.DB {
	t.Helper()
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", dsn(path, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:version] {
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// exec runs each statement on db with its arguments.
func exec(t *testing.T, db *sql.DB, stmts ...[]any) {
	t.Helper()
	for _, st := range stmts {
		if _, err := db.ExecContext(t.Context(), st[0].(string), st[1:]...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrateRefreshOrigin: refresh tokens written by schema 1 get their
// family's earliest IssuedAt as OriginAt when the database is opened.
func TestMigrateRefreshOrigin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	db := createAt(t, path, 1)
	for _, l := range storetest.LegacyRefreshTokens() {
		tok := l.Token
		exec(t, db, []any{`INSERT INTO refresh_tokens
			(digest, family_id, generation, client_id, subject, scopes, issued_at, expires_at, used_at, revoked)
			VALUES (?, ?, ?, ?, ?, '[]', ?, ?, ?, 0)`,
			tok.Digest, tok.FamilyID, l.Generation, tok.ClientID, tok.Subject, micros(tok.IssuedAt), micros(tok.ExpiresAt), nullMicros(tok.UsedAt)})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, path)
	defer s.Close()
	storetest.CheckLegacyOrigins(t, s)
}

// TestMigrateTenants: the clients and users of a schema-2 database (before
// tenants) are the default tenant's once it is opened.
func TestMigrateTenants(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	db := createAt(t, path, 2)
	for _, c := range storetest.LegacyClients() {
		scopes, _ := codec.EncodeScopes(c.Scopes)
		exec(t, db, []any{`INSERT INTO clients (id, name, secret_digest, scopes, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			c.ID, c.Name, c.SecretDigest, scopes, micros(c.CreatedAt), micros(c.UpdatedAt)})
	}
	for _, u := range storetest.LegacyUsers() {
		scopes, _ := codec.EncodeScopes(u.Scopes)
		exec(t, db, []any{`INSERT INTO users (id, username, password_hash, scopes, disabled, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			u.ID, u.Username, u.PasswordHash, scopes, boolInt(u.Disabled), micros(u.CreatedAt), micros(u.UpdatedAt)})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, path)
	defer s.Close()
	storetest.CheckLegacyTenants(t, s)
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	s := open(t, path)
	if _, err := s.w.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(t.Context(), path); err == nil {
		s.Close()
		t.Fatal("Open accepted a database from a newer keygate")
	}
}

// Two stores on one file (as two keygate processes would be) write at the
// same time: BEGIN IMMEDIATE and the busy timeout make them take turns.
func TestTwoWritersOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keygate.db")
	stores := []*Store{open(t, path), open(t, path)}
	defer stores[0].Close()
	defer stores[1].Close()
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i, s := range stores {
		for g := range 2 {
			wg.Go(func() {
				for j := range 25 {
					fam := fmt.Sprintf("s%d-g%d-%d", i, g, j)
					tok := store.RefreshToken{Digest: storetest.Digest(fam), FamilyID: fam, ExpiresAt: time.Now().Add(time.Hour)}
					if err := s.CreateRefreshToken(ctx, tok); err != nil {
						errs <- err
						continue
					}
					next := store.RefreshToken{Digest: storetest.Digest(fam + "/1"), ExpiresAt: time.Now().Add(time.Hour)}
					if _, err := s.RotateRefreshToken(ctx, "iss", tok.Digest, next, time.Now()); err != nil {
						errs <- err
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(t.Context(), dir); err == nil { // a directory, not a file
		t.Error("Open(directory) succeeded")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Open(ctx, filepath.Join(dir, "x.db")); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a canceled context: %v", err)
	}
}

func BenchmarkGetClient(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "keygate.db"))
	defer s.Close()
	storetest.BenchGetClient(b, s)
}

func BenchmarkRotateRefreshToken(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "keygate.db"))
	defer s.Close()
	storetest.BenchRotateRefreshToken(b, s)
}

func BenchmarkGetTransitKeyVersion(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "keygate.db"))
	defer s.Close()
	storetest.BenchGetTransitKeyVersion(b, s)
}

func BenchmarkPutSecret(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "keygate.db"))
	defer s.Close()
	storetest.BenchPutSecret(b, s)
}

func BenchmarkAppendAudit(b *testing.B) {
	storetest.BenchAppendAudit(b, func(b *testing.B) store.Store { return open(b, filepath.Join(b.TempDir(), "keygate.db")) })
}
