// Package postgres is keygate's fleet store: PostgreSQL through a pgx
// connection pool, implementing [store.Store] for every node of a fleet.
// Each write commits before it returns and is one statement or one
// transaction; rotations and revocations of a refresh family are
// serialized (an advisory lock on the family, then SELECT ... FOR UPDATE on
// the token), so of two concurrent rotations of one token exactly one
// succeeds and the other revokes the family. Open migrates the schema under
// an advisory lock, so nodes starting together apply each migration once.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/internal/migration"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Advisory lock class ids (the first key of the two-int4 form); the
// second key is a hash of the schema or of the refresh family.
const (
	lockMigrate = 0x6b67_0001 // "kg" 1
	lockFamily  = 0x6b67_0002 // "kg" 2
)

// Store is the PostgreSQL implementation of [store.Store]. It is safe for
// concurrent use.
//
// Times are kept as timestamptz: a time.Time comes back in UTC, truncated
// to the microsecond. Empty scope lists come back nil. Lists of clients,
// users and signing keys are ordered by creation time, then by id; tenants
// and transit key names by name. A refresh family is started only by
// CreateRefreshToken (an existing FamilyID is a conflict) and extended
// only by RotateRefreshToken. A transit key's versions are rows of their
// own, deleted with the key by the foreign key's cascade; a conditional
// change of a key (a rotation, an update from a revision) is one
// statement, so of concurrent ones the first to lock the key's row wins.
type Store struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	upTo    int // the schema version to migrate to; 0: the latest (WithSchemaVersion)
}

// DefaultTimeout bounds each operation whose context has no earlier
// deadline, and each new connection: a PostgreSQL that stops answering (a
// network that drops packets, a stuck server) fails the operation after
// this long instead of holding the request that waits on it.
const DefaultTimeout = 5 * time.Second

// An Option adjusts Open.
type Option func(*Store)

// WithTimeout replaces DefaultTimeout; d <= 0 keeps the default.
func WithTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// bound gives ctx the store's deadline unless it has an earlier one.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or key=value
// connection string; pgxpool's pool_* parameters size the pool), checks
// the connection and applies pending migrations. The tables live in the
// first schema of the connection's search_path (a search_path parameter in
// url selects it). It fails if the schema was written by a newer keygate.
// Each later operation is bounded by DefaultTimeout (see WithTimeout), and
// so is each new connection unless url sets connect_timeout.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	s := &Store{timeout: DefaultTimeout}
	for _, o := range opts {
		o(s)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if cfg.ConnConfig.ConnectTimeout == 0 { // no connect_timeout in url
		cfg.ConnConfig.ConnectTimeout = s.timeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, wrap(ctx, "connect", err)
	}
	s.pool = pool
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes every connection of the pool, waiting for those in use.
//
// A connection pgx gave up on during an outage is closed in the background,
// and pgx waits up to 15 s on it (a cancel request, then a drain, into a
// server that may never answer); the pool's Close waits for that. Close
// waits at most the store timeout, so that a node shutting down during an
// outage is not held; what is left ends within pgx's own bound.
func (s *Store) Close() error {
	done := make(chan struct{})
	go func() {
		s.pool.Close()
		close(done)
	}()
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("connections still closing after %v; they end in the background", s.timeout)
	}
}

func (s *Store) migrate(ctx context.Context) (err error) {
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return wrap(ctx, "migrate", err)
	}
	defer conn.Release()
	// A session lock per schema: other nodes migrating the same schema
	// wait here, then find the work done.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(coalesce(current_schema(), '')))`, lockMigrate); err != nil {
		// The lock may or may not have been taken; drop the connection.
		conn.Conn().Close(context.Background())
		return wrap(ctx, "migrate: lock", err)
	}
	defer func() {
		_, uerr := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1, hashtext(coalesce(current_schema(), '')))`, lockMigrate)
		if uerr != nil {
			conn.Conn().Close(context.Background())
			err = errors.Join(err, fmt.Errorf("migrate: unlock: %w", uerr))
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     NOT NULL PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return wrap(ctx, "migrate", err)
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return wrap(ctx, "migrate", err)
	}
	if have > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this keygate's %d", have, len(ms))
	}
	for _, m := range ms[have:] {
		if s.upTo > 0 && m.Version > s.upTo {
			break
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return wrap(ctx, fmt.Sprintf("migration %d (%s)", m.Version, m.Name), err)
		}
	}
	return nil
}

// wrap classifies a driver error: no rows is store.ErrNotFound, a unique
// violation store.ErrConflict, a failed or broken connection or a passed
// deadline store.ErrUnavailable, and an error after ctx ended wraps
// ctx.Err().
func wrap(ctx context.Context, op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("%s: %w: %v", op, store.ErrConflict, err)
	}
	if unavailable(ctx, err) {
		err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%s: %w: %w", op, cerr, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unavailable reports whether err means the server could not be reached or
// did not answer in time, as opposed to refusing the statement (a
// *pgconn.PgError) or the caller giving up (context.Canceled).
func unavailable(ctx context.Context, err error) bool {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &pe), errors.Is(ctx.Err(), context.Canceled):
		return false
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err), errors.As(err, &ce), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	var closed interface{ SafeToRetry() bool }
	return errors.As(err, &closed) && closed.SafeToRetry() // pgconn's "conn closed" and the like
}
