package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/codec"
	"github.com/keygate/keygate/internal/store/internal/migration"
	"github.com/keygate/keygate/internal/store/storetest"
)

// databaseURL returns DATABASE_URL or skips the test. With DATABASE_URL
// set, the tests never skip.
func databaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("DATABASE_URL")
	if u == "" {
		t.Skip("PostgreSQL tests need a server: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable go test ./internal/store/postgres/")
	}
	return u
}

// withSearchPath adds a search_path run-time parameter to a URL or a
// key=value connection string.
func withSearchPath(t testing.TB, conn, schema string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			t.Fatalf("DATABASE_URL: %v", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return conn + " search_path=" + schema
}

// newSchema creates an empty schema of its own for t on the shared
// database, drops it when t ends, and returns a connection URL that uses it.
func newSchema(t testing.TB) string {
	t.Helper()
	base := databaseURL(t)
	var b [6]byte
	rand.Read(b[:])
	schema := "kg_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withSearchPath(t, base, schema)
}

func open(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: the shared store suite on PostgreSQL; run without -short")
	}
	databaseURL(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, newSchema(t)) })
}

const durabilityURLEnv = "KEYGATE_POSTGRES_DURABILITY_URL"

func TestDurability(t *testing.T) {
	if os.Getenv(storetest.DurabilityChildEnv) != "" {
		s := open(t, os.Getenv(durabilityURLEnv))
		if err := storetest.DurabilityChild(context.Background(), s, os.Stdout); err != nil {
			t.Fatal(err)
		}
		return
	}
	u := newSchema(t)
	open(t, u).Close() // migrate before the burst
	storetest.Durability(t, "TestDurability", []string{durabilityURLEnv + "=" + u}, func(t *testing.T) store.Store {
		return open(t, u)
	})
}

// Nodes starting together: every Open succeeds and each migration is
// applied once.
func TestConcurrentMigrate(t *testing.T) {
	u := newSchema(t)
	const n = 6
	var wg sync.WaitGroup
	stores := make([]*Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), u) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		} else {
			defer stores[i].Close()
		}
	}
	if t.Failed() {
		return
	}
	var rows, version int
	if err := stores[0].pool.QueryRow(t.Context(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != version || rows < 1 {
		t.Errorf("schema_migrations: %d rows, version %d", rows, version)
	}
}

// createAt creates, in a schema of its own, the tables of version (the
// first version migrations), as a keygate of that version left them, and
// returns a connection to it and its URL.
func createAt(t *testing.T, version int) (*pgx.Conn, string) {
	t.Helper()
	u := newSchema(t)
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:version] {
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return conn, u
}

// exec runs each statement on conn with its arguments.
func exec(t *testing.T, conn *pgx.Conn, stmts ...[]any) {
	t.Helper()
	for _, st := range stmts {
		if _, err := conn.Exec(t.Context(), st[0].(string), st[1:]...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrateRefreshOrigin: refresh tokens written by schema 1 get their
// family's earliest IssuedAt as OriginAt when the schema is migrated.
func TestMigrateRefreshOrigin(t *testing.T) {
	conn, u := createAt(t, 1)
	for _, l := range storetest.LegacyRefreshTokens() {
		tok := l.Token
		exec(t, conn, []any{`INSERT INTO refresh_tokens
			(digest, family_id, generation, client_id, subject, scopes, issued_at, expires_at, used_at, revoked)
			VALUES ($1, $2, $3, $4, $5, '[]', $6, $7, $8, false)`,
			tok.Digest, tok.FamilyID, l.Generation, tok.ClientID, tok.Subject, tok.IssuedAt, tok.ExpiresAt, nullTS(tok.UsedAt)})
	}
	s := open(t, u)
	defer s.Close()
	storetest.CheckLegacyOrigins(t, s)
}

// TestMigrateTenants: the clients and users of a schema-2 database (before
// tenants) are the default tenant's once it is migrated.
func TestMigrateTenants(t *testing.T) {
	conn, u := createAt(t, 2)
	for _, c := range storetest.LegacyClients() {
		scopes, _ := codec.EncodeScopes(c.Scopes)
		exec(t, conn, []any{`INSERT INTO clients (id, name, secret_digest, scopes, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			c.ID, c.Name, c.SecretDigest, scopes, c.CreatedAt, c.UpdatedAt})
	}
	for _, usr := range storetest.LegacyUsers() {
		scopes, _ := codec.EncodeScopes(usr.Scopes)
		exec(t, conn, []any{`INSERT INTO users (id, username, password_hash, scopes, disabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			usr.ID, usr.Username, usr.PasswordHash, scopes, usr.Disabled, usr.CreatedAt, usr.UpdatedAt})
	}
	s := open(t, u)
	defer s.Close()
	storetest.CheckLegacyTenants(t, s)
}

// TestNamesSortByteWise: the names that lists are sorted by (tenants,
// transit key names, audit nodes) sort byte by byte, as in SQLite, also on
// a database whose default collation is a language's (where "B" follows
// "a").
func TestNamesSortByteWise(t *testing.T) {
	s := open(t, newSchema(t))
	defer s.Close()
	rows, err := s.pool.Query(t.Context(), `SELECT table_name || '.' || column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND collation_name IS DISTINCT FROM 'C' AND (table_name, column_name) IN
			(('tenants', 'name'), ('clients', 'tenant'), ('users', 'tenant'), ('transit_keys', 'tenant'), ('transit_keys', 'name'),
			 ('transit_key_versions', 'tenant'), ('transit_key_versions', 'name'), ('audit_log', 'node'))`)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(other) != 0 {
		t.Errorf("columns not in the C collation: %v", other)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	u := newSchema(t)
	s := open(t, u)
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES (99, 'future')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(t.Context(), u); err == nil {
		s.Close()
		t.Fatal("Open accepted a schema from a newer keygate")
	}
}

func TestOpenErrors(t *testing.T) {
	u := newSchema(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Open(ctx, u); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a canceled context: %v", err)
	}
	if _, err := Open(t.Context(), "postgres://%zz"); err == nil {
		t.Error("Open accepted a malformed URL")
	}
}

// A revocation racing rotations of the same family never leaves a token
// of the family unrevoked.
func TestRevokeRacesRotation(t *testing.T) {
	s := open(t, newSchema(t))
	defer s.Close()
	ctx := t.Context()
	for round := range 20 {
		fam := fmt.Sprintf("fam-%d", round)
		name := func(gen int) string { return fmt.Sprintf("%s/%d", fam, gen) }
		first := store.RefreshToken{Digest: storetest.Digest(name(0)), FamilyID: fam, ExpiresAt: time.Now().Add(time.Hour)}
		if err := s.CreateRefreshToken(ctx, first); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for gen := 1; gen <= 10; gen++ {
				next := store.RefreshToken{Digest: storetest.Digest(name(gen)), ExpiresAt: time.Now().Add(time.Hour)}
				if _, err := s.RotateRefreshToken(ctx, "iss", storetest.Digest(name(gen-1)), next, time.Now()); err != nil {
					if !errors.Is(err, store.ErrRevoked) {
						t.Errorf("rotate: %v", err)
					}
					return
				}
			}
		})
		wg.Go(func() {
			time.Sleep(time.Duration(round%5) * time.Millisecond)
			if err := s.RevokeRefreshFamily(ctx, first.Digest); err != nil {
				t.Errorf("revoke: %v", err)
			}
		})
		wg.Wait()
		var unrevoked int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM refresh_tokens WHERE family_id = $1 AND NOT revoked`, fam).Scan(&unrevoked); err != nil {
			t.Fatal(err)
		}
		if unrevoked != 0 {
			t.Fatalf("round %d: %d tokens of a revoked family are not revoked", round, unrevoked)
		}
	}
}

func BenchmarkGetClient(b *testing.B) {
	s := open(b, newSchema(b))
	defer s.Close()
	storetest.BenchGetClient(b, s)
}

func BenchmarkRotateRefreshToken(b *testing.B) {
	s := open(b, newSchema(b))
	defer s.Close()
	storetest.BenchRotateRefreshToken(b, s)
}

func BenchmarkGetTransitKeyVersion(b *testing.B) {
	s := open(b, newSchema(b))
	defer s.Close()
	storetest.BenchGetTransitKeyVersion(b, s)
}

func BenchmarkPutSecret(b *testing.B) {
	s := open(b, newSchema(b))
	defer s.Close()
	storetest.BenchPutSecret(b, s)
}

func BenchmarkAppendAudit(b *testing.B) {
	storetest.BenchAppendAudit(b, func(b *testing.B) store.Store { return open(b, newSchema(b)) })
}
