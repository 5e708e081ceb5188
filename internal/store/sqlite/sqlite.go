// Package sqlite is keygate's embedded store: one SQLite database file
// (modernc.org/sqlite, pure Go) implementing [store.Store]. The file is
// created 0600 and kept in WAL mode with synchronous=FULL, so a write that
// returned nil survives kill -9 and power loss; writes go one at a time
// through a single connection in BEGIN IMMEDIATE transactions, so they
// queue rather than fail with SQLITE_BUSY, while reads run concurrently.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/migration"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// busyTimeout is how long a connection waits for another process's lock
// (another keygate process on the same file) before SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// Store is the SQLite implementation of [store.Store]. It is safe for
// concurrent use.
//
// Times are kept as UTC microseconds: a time.Time comes back in UTC,
// truncated to the microsecond. Empty scope lists come back nil. Lists of
// clients, users and signing keys are ordered by creation time, then by
// id; tenants and transit key names by name. A refresh family is started
// only by CreateRefreshToken (an existing FamilyID is a conflict) and
// extended only by RotateRefreshToken. A transit key's versions are rows
// of their own, deleted with the key by the foreign key's cascade, and so
// are a secret's values.
type Store struct {
	w *sql.DB // exactly one connection: every write, serialized
	r *sql.DB // read-only connections

	getClient, getUser, getRefresh, getVersion *sql.Stmt // on r
	getSecret, getSecretValue                  *sql.Stmt // on r
	appendAudit                                *sql.Stmt // on w
	// A secret's write, on w: prepared once rather than by SQLite again at
	// every write (a fifth of a write's CPU).
	insertSecret, updateSecret, eraseSecretValue, insertSecretValue *sql.Stmt
}

var _ store.Store = (*Store)(nil)

// Open opens the database at path, creating it (mode 0600, and its
// directory 0700) if missing, and applies pending migrations. It fails if
// the database was written by a newer keygate.
func Open(ctx context.Context, path string) (*Store, error) { return OpenAt(ctx, path, 0) }

// OpenAt is Open migrating the schema only up to version (0: the latest),
// for restoring a snapshot of an older schema (RestoreFile). A store it
// opens with a version other than 0 serves Snapshot, Restore and Close
// only.
func OpenAt(ctx context.Context, path string, version int) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, err
	}
	// SQLite would create the file with 0644; create it first so that the
	// database, and its -wal and -shm files (which copy the database's
	// mode), are private.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}

	common := url.Values{}
	common.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	common.Add("_pragma", "foreign_keys(1)")
	common.Add("_pragma", "synchronous(FULL)")

	wq := url.Values{}
	for k, v := range common {
		wq[k] = append([]string(nil), v...)
	}
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Set("_txlock", "immediate")
	w, err := sql.Open("sqlite", dsn(abs, wq))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{w: w}
	if err := s.migrate(ctx, version); err != nil {
		w.Close()
		return nil, err
	}

	rq := common
	rq.Set("_query_only", "1")
	r, err := sql.Open("sqlite", dsn(abs, rq))
	if err != nil {
		w.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	s.r = r
	if version != 0 { // a schema the statements may not fit: Snapshot and Restore only
		return s, nil
	}
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// dsn makes a file: URI, so that no character of the path is taken for
// URI syntax.
func dsn(path string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		db   *sql.DB
		sql  string
	}{
		{&s.appendAudit, s.w, insertAudit},
		{&s.insertSecret, s.w, insertSecret},
		{&s.updateSecret, s.w, updateSecret},
		{&s.eraseSecretValue, s.w, eraseSecretValue},
		{&s.insertSecretValue, s.w, insertSecretValue},
		{&s.getClient, s.r, selectClient + ` WHERE id = ?`},
		{&s.getUser, s.r, selectUser + ` WHERE tenant = ? AND username = ?`},
		{&s.getRefresh, s.r, selectRefresh + ` WHERE digest = ?`},
		{&s.getVersion, s.r, `SELECT version, sealed, created_at FROM transit_key_versions WHERE tenant = ? AND name = ? AND version = ?`},
		{&s.getSecret, s.r, selectSecret},
		{&s.getSecretValue, s.r, selectSecretValue},
	} {
		st, err := p.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.stmt = st
	}
	return nil
}

// Close closes the database. Calls in progress finish first.
func (s *Store) Close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.getClient, s.getUser, s.getRefresh, s.getVersion, s.getSecret, s.getSecretValue, s.appendAudit,
		s.insertSecret, s.updateSecret, s.eraseSecretValue, s.insertSecretValue} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

func (s *Store) migrate(ctx context.Context, upTo int) error {
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return wrap(ctx, "migrate", err)
	}
	for _, m := range ms {
		if upTo > 0 && m.Version > upTo {
			break
		}
		if err := s.apply(ctx, m, len(ms)); err != nil {
			return err
		}
	}
	return nil
}

// apply runs m unless it is already applied, in one IMMEDIATE transaction,
// which also keeps another process from migrating at the same time.
func (s *Store) apply(ctx context.Context, m migration.Migration, latest int) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return wrap(ctx, "migrate", err)
	}
	defer tx.Rollback()
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return wrap(ctx, "migrate", err)
	}
	if have > latest {
		return fmt.Errorf("database schema version %d is newer than this keygate's %d", have, latest)
	}
	if have >= m.Version {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return wrap(ctx, fmt.Sprintf("migration %d (%s)", m.Version, m.Name), err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixMicro()); err != nil {
		return wrap(ctx, "migrate", err)
	}
	if err := tx.Commit(); err != nil {
		return wrap(ctx, "migrate", err)
	}
	return nil
}

// wrap classifies a driver error: no rows is store.ErrNotFound, a unique
// or primary-key violation store.ErrConflict, and an error after ctx ended
// wraps ctx.Err().
func wrap(ctx context.Context, op string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return fmt.Errorf("%s: %w: %v", op, store.ErrConflict, err)
		}
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%s: %w: %v", op, cerr, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
