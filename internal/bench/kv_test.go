package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/testnet"
)

// TestKVRead: the read reference answers the 1 KiB JSON value it sealed,
// opened at each request, and refuses a request without the run's marker.
func TestKVRead(t *testing.T) {
	h, closer, err := KVHandler(context.Background(), ModeKVRead, "")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	for range 2 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, benchRequest(http.MethodGet, "/v1/secret/data/bench/0", nil))
		var v struct{ Value string }
		if rec.Code != http.StatusOK || rec.Body.Len() != KVValueBytes || json.Unmarshal(rec.Body.Bytes(), &v) != nil || v.Value == "" {
			t.Fatalf("status %d, %d bytes: %.40q", rec.Code, rec.Body.Len(), rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusForbidden {
		t.Errorf("without the marker: status %d, want 403", rec.Code)
	}
}

// TestKVWrite: the write reference stores each body as a row of its own,
// on SQLite and (with DATABASE_URL) on PostgreSQL.
func TestKVWrite(t *testing.T) {
	count := map[string]func(t *testing.T, store string) int{
		"sqlite": func(t *testing.T, store string) int {
			db, err := sql.Open("sqlite", store)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM ` + kvTable + ` WHERE length(value) > 0`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		"postgres": func(t *testing.T, store string) int {
			conn, err := pgx.Connect(t.Context(), store)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(t.Context())
			var n int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+kvTable+` WHERE length(value) > 0`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
	}
	for name, n := range count {
		t.Run(name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "kv.db")
			if name == "postgres" {
				base := os.Getenv("DATABASE_URL")
				if base == "" {
					t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
				}
				store = testnet.PostgresSchema(t, base, "kg_benchkv")
			}
			h, closer, err := KVHandler(t.Context(), ModeKVWrite, store)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, benchRequest(http.MethodPost, "/v1/secret/data/bench/0", bytes.NewReader([]byte(`{"data":{"v":`+strconv.Itoa(i)+`}}`))))
				if rec.Code != http.StatusNoContent {
					t.Fatalf("write %d: status %d %s", i, rec.Code, rec.Body)
				}
			}
			if err := closer.Close(); err != nil {
				t.Fatal(err)
			}
			if got := n(t, store); got != 3 {
				t.Errorf("%d rows, want 3", got)
			}
		})
	}
}

// TestKVHandlerRefuses: a mode that is not a KV mode, kv-write without a
// store and kv-read with one are errors.
func TestKVHandlerRefuses(t *testing.T) {
	for _, c := range []struct{ mode, store string }{{"noop", ""}, {ModeKVWrite, ""}, {ModeKVRead, "x.db"}} {
		if _, _, err := KVHandler(context.Background(), c.mode, c.store); err == nil {
			t.Errorf("KVHandler(%q, %q) accepted", c.mode, c.store)
		}
	}
}
