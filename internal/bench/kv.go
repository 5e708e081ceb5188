package bench

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the SQLite driver keygate's store uses
)

// The reference modes of the secret store's scenarios ('keygate bench
// scenario secret-read|secret-write --reference'): what a read or a write
// of a 1 KiB secret costs at the least, on the same net/http settings.
const (
	// ModeKVRead answers every request with the plaintext of one AES-256-GCM
	// open (cached cipher) of a 1 KiB JSON value sealed once and held in
	// memory: a read with no store and no token.
	ModeKVRead = "kv-read"
	// ModeKVWrite reads the request body (at most 1 MiB) and inserts it as
	// one row of its own table in the store (KVStore), with the durability
	// keygate's secret writes have: on SQLite the same pragmas (WAL,
	// synchronous=FULL, busy_timeout, one writer connection, BEGIN
	// IMMEDIATE); on PostgreSQL a plain INSERT in a transaction of its own.
	// It answers 204.
	ModeKVWrite = "kv-write"
)

// KVModes lists the secret store's reference modes.
var KVModes = []string{ModeKVRead, ModeKVWrite}

// KVValueBytes is the size of ModeKVRead's value, as the secret scenarios'.
const KVValueBytes = 1024

// KVHandler returns the handler of a KV mode behind Guard, and what to
// close when the server stops. storeURL is ModeKVWrite's store: a
// postgres:// URL, or the path of a SQLite file (created if missing).
func KVHandler(ctx context.Context, mode, storeURL string) (http.Handler, io.Closer, error) {
	switch mode {
	case ModeKVRead:
		if storeURL != "" {
			return nil, nil, fmt.Errorf("mode %s takes no store", mode)
		}
		h, err := kvRead()
		return Guard(mode, h), io.NopCloser(nil), err
	case ModeKVWrite:
		if storeURL == "" {
			return nil, nil, fmt.Errorf("mode %s needs a store (a postgres:// URL or a SQLite file)", mode)
		}
		ins, closer, err := openKVStore(ctx, storeURL)
		if err != nil {
			return nil, nil, err
		}
		return Guard(mode, kvWrite(ins)), closer, nil
	}
	return nil, nil, fmt.Errorf("unknown KV mode %q (one of %s)", mode, strings.Join(KVModes, ", "))
}

func kvRead() (http.Handler, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	value := []byte(`{"value":"` + strings.Repeat("x", KVValueBytes-len(`{"value":""}`)) + `"}`)
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	ad := []byte("kv2:value\x00default\x00bench/0\x001")
	sealed := gcm.Seal(nil, nonce, value, ad)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		pt, err := gcm.Open(nil, nonce, sealed, ad)
		if err != nil {
			http.Error(w, "open failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(pt) //nolint:errcheck // the client went away
	}), nil
}

// kvInsert inserts one value as a row of its own, durably.
type kvInsert func(ctx context.Context, value []byte) error

func kvWrite(insert kvInsert) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "reading the body failed", http.StatusBadRequest)
			return
		}
		if err := insert(r.Context(), body); err != nil {
			http.Error(w, "insert failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

const kvTable = `keygate_bench_kv`

func openKVStore(ctx context.Context, storeURL string) (kvInsert, io.Closer, error) {
	if strings.HasPrefix(storeURL, "postgres://") || strings.HasPrefix(storeURL, "postgresql://") {
		pool, err := pgxpool.New(ctx, storeURL)
		if err != nil {
			return nil, nil, errors.New("kv-write: the PostgreSQL URL does not parse") // it may hold a password
		}
		if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+kvTable+
			` (id BIGSERIAL PRIMARY KEY, value BYTEA NOT NULL, created_at TIMESTAMPTZ NOT NULL)`); err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("kv-write: create table: %w", err)
		}
		insert := func(ctx context.Context, value []byte) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO `+kvTable+` (value, created_at) VALUES ($1, $2)`, value, time.Now())
				return err
			})
		}
		return insert, closerFunc(func() error { pool.Close(); return nil }), nil
	}
	abs, err := filepath.Abs(storeURL)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, nil, err
	}
	// The pragmas of keygate's SQLite store (internal/store/sqlite).
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+kvTable+
		` (id INTEGER PRIMARY KEY, value BLOB NOT NULL, created_at INTEGER NOT NULL)`); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("kv-write: create table: %w", err)
	}
	stmt, err := db.PrepareContext(ctx, `INSERT INTO `+kvTable+` (value, created_at) VALUES (?, ?)`)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	insert := func(ctx context.Context, value []byte) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, value, time.Now().UnixMicro()); err != nil {
			tx.Rollback() //nolint:errcheck // the insert's error is the one to report
			return err
		}
		return tx.Commit()
	}
	return insert, closerFunc(db.Close), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
