package kvapi_test

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tampered is the API over a SQLite store, with a connection of its own
// to the store's file, as someone with the database (not the root key)
// has it.
type tampered struct {
	*env
	db *sql.DB
}

func startTampered(t *testing.T) *tampered {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keygate.db")
	e := startWith(t, newServiceAt(t, path))
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &tampered{env: e, db: db}
}

func (e *tampered) exec(q string, args ...any) {
	e.t.Helper()
	res, err := e.db.Exec(q, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		e.t.Fatalf("%s %v: %d rows changed, want 1", q, args, n)
	}
}

func (e *tampered) value(tenant, path string, v int) []byte {
	e.t.Helper()
	var b []byte
	if err := e.db.QueryRow(`SELECT sealed FROM secret_values WHERE tenant = ? AND path = ? AND version = ?`, tenant, path, v).Scan(&b); err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *tampered) setValue(tenant, path string, v int, sealed []byte) {
	e.t.Helper()
	e.exec(`UPDATE secret_values SET sealed = ? WHERE tenant = ? AND path = ? AND version = ?`, sealed, tenant, path, v)
}

func (e *tampered) meta(tenant, path string) []byte {
	e.t.Helper()
	var b []byte
	if err := e.db.QueryRow(`SELECT sealed FROM secrets WHERE tenant = ? AND path = ?`, tenant, path).Scan(&b); err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *tampered) put(tok, path, value string) {
	e.t.Helper()
	if st, b := e.call(tok, "POST", "/v1/secret/data/"+path, `{"data":{"v":"`+value+`"}}`); st != http.StatusOK {
		e.t.Fatalf("write %s: %d %s", path, st, b)
	}
}

// refused checks that a read of path's current version v, over every
// route that opens a value, is refused 500 without naming any value
// written.
func (e *tampered) refused(tok, path string, v int, values ...string) {
	e.t.Helper()
	n := strconv.Itoa(v)
	for _, target := range []string{"/v1/secret/data/" + path, "/v1/secret/data/" + path + "?version=" + n,
		"/v1/secret/subkeys/" + path + "?version=" + n} {
		st, b := e.call(tok, "GET", target, "")
		if st != http.StatusInternalServerError {
			e.t.Errorf("GET %s: %d %s, want 500", target, st, b)
		}
		for _, v := range values {
			if strings.Contains(string(b), v) {
				e.t.Errorf("GET %s: the answer holds %q: %s", target, v, b)
			}
		}
	}
}

// TestTamperedStore: a sealed value or metadata moved in the database to
// another path, version or tenant, rolled back to a value an earlier
// secret of the same path held, truncated or with a byte flipped, is
// refused at every read over HTTP: never served as the secret it was put
// in place of.
func TestTamperedStore(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(e *tampered, alpha, beta string)
		// read is the path read (in alpha) after tamper, and its current
		// version, which tamper changed
		read    string
		version int
	}{
		{"value from another path", func(e *tampered, _, _ string) {
			e.setValue("alpha", "app/a", 1, e.value("alpha", "app/b", 1))
		}, "app/a", 1},
		{"value from another version", func(e *tampered, _, _ string) {
			e.setValue("alpha", "app/v", 2, e.value("alpha", "app/v", 1))
		}, "app/v", 2},
		{"value from another tenant", func(e *tampered, _, _ string) {
			e.setValue("alpha", "app/a", 1, e.value("beta", "app/a", 1))
		}, "app/a", 1},
		{"metadata from another path", func(e *tampered, _, _ string) {
			e.exec(`UPDATE secrets SET sealed = ? WHERE tenant = 'alpha' AND path = 'app/a'`, e.meta("alpha", "app/b"))
		}, "app/a", 1},
		{"metadata from another tenant", func(e *tampered, _, _ string) {
			e.exec(`UPDATE secrets SET sealed = ? WHERE tenant = 'alpha' AND path = 'app/a'`, e.meta("beta", "app/a"))
		}, "app/a", 1},
		{"value truncated", func(e *tampered, _, _ string) {
			v := e.value("alpha", "app/a", 1)
			e.setValue("alpha", "app/a", 1, v[:len(v)-1])
		}, "app/a", 1},
		{"value with a byte flipped", func(e *tampered, _, _ string) {
			v := e.value("alpha", "app/a", 1)
			v[len(v)/2] ^= 1
			e.setValue("alpha", "app/a", 1, v)
		}, "app/a", 1},
		{"metadata with a byte flipped", func(e *tampered, _, _ string) {
			m := e.meta("alpha", "app/a")
			m[len(m)/2] ^= 1
			e.exec(`UPDATE secrets SET sealed = ? WHERE tenant = 'alpha' AND path = 'app/a'`, m)
		}, "app/a", 1},
		{"value of the path before it was deleted", func(e *tampered, alpha, _ string) {
			old := e.value("alpha", "app/r", 1)
			if st, b := e.call(alpha, "DELETE", "/v1/secret/metadata/app/r", ""); st != http.StatusNoContent {
				e.t.Fatalf("delete: %d %s", st, b)
			}
			e.put(alpha, "app/r", "r-new")
			e.setValue("alpha", "app/r", 1, old)
		}, "app/r", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startTampered(t)
			alpha, beta := e.token("alpha", allScopes...), e.token("beta", allScopes...)
			e.put(alpha, "app/a", "alpha-a")
			e.put(alpha, "app/b", "alpha-b")
			e.put(alpha, "app/v", "alpha-v1")
			e.put(alpha, "app/v", "alpha-v2")
			e.put(alpha, "app/r", "r-old")
			e.put(beta, "app/a", "beta-a")
			tc.tamper(e, alpha, beta)
			e.refused(alpha, tc.read, tc.version, "alpha-", "beta-", "r-old", "r-new")
		})
	}
}

// TestTamperedStoreDestroyed: a destroyed version's value put back in the
// database from a copy taken before is not served: the path's sealed
// metadata says it is destroyed.
func TestTamperedStoreDestroyed(t *testing.T) {
	e := startTampered(t)
	tok := e.token("alpha", allScopes...)
	e.put(tok, "app/d", "d-one")
	e.put(tok, "app/d", "d-two")
	kept := e.value("alpha", "app/d", 1)
	if st, b := e.call(tok, "PUT", "/v1/secret/destroy/app/d", `{"versions":[1]}`); st != http.StatusNoContent {
		t.Fatalf("destroy: %d %s", st, b)
	}
	if _, err := e.db.Exec(`INSERT INTO secret_values (tenant, path, version, sealed, created_at) VALUES ('alpha', 'app/d', 1, ?, 0)`, kept); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/v1/secret/data/app/d?version=1", "/v1/secret/subkeys/app/d?version=1"} {
		if st, b := e.call(tok, "GET", target, ""); st != http.StatusNotFound || strings.Contains(string(b), "d-one") ||
			!strings.Contains(string(b), `"destroyed":true`) {
			t.Errorf("GET %s: %d %s, want 404 destroyed, without the value", target, st, b)
		}
	}
	if st, b := e.call(tok, "POST", "/v1/secret/undelete/app/d", `{"versions":[1]}`); st != http.StatusNoContent {
		t.Fatalf("undelete: %d %s", st, b)
	}
	if st, b := e.call(tok, "GET", "/v1/secret/data/app/d?version=1", ""); st != http.StatusNotFound || strings.Contains(string(b), "d-one") {
		t.Errorf("after undelete: %d %s, want 404 without the value", st, b)
	}
}
