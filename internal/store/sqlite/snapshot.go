package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/store/internal/migration"
	"github.com/keygate/keygate/internal/store/snapshot"
)

// Snapshot writes every row of every table but the migrations' to w (see
// package snapshot), read in one read transaction: in WAL mode that is a
// snapshot of the database as of its first read, so writes committed
// while it runs are in it entirely or not at all. Writers are not held.
func (s *Store) Snapshot(ctx context.Context, w io.Writer) error { return snapshotDB(ctx, s.r, w) }

// SnapshotFile writes a snapshot of the database at path, as
// Store.Snapshot does, without migrating it or writing to it (it is
// opened read-only): a keygate of another version than the one serving
// the database can back it up, whatever its schema version.
func SnapshotFile(ctx context.Context, path string, w io.Writer) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return err
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Set("mode", "ro")
	db, err := sql.Open("sqlite", dsn(abs, q))
	if err != nil {
		return err
	}
	defer db.Close()
	return snapshotDB(ctx, db, w)
}

func snapshotDB(ctx context.Context, db *sql.DB, w io.Writer) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return wrap(ctx, "taking a snapshot", err)
	}
	defer tx.Rollback()
	schema, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	tables, err := tableColumns(ctx, tx)
	if err != nil {
		return err
	}
	sw, err := snapshot.NewWriter(w, snapshot.Header{Backend: "sqlite", Schema: schema, CreatedAt: time.Now()})
	if err != nil {
		return fmt.Errorf("taking a snapshot: %w", err)
	}
	for _, t := range tables {
		cols := make([]snapshot.Column, len(t.cols))
		for i, c := range t.cols {
			switch strings.ToUpper(c.typ) {
			case "INTEGER", "INT":
				cols[i] = snapshot.Column{Name: c.name, Kind: snapshot.KindInt}
			case "TEXT":
				cols[i] = snapshot.Column{Name: c.name, Kind: snapshot.KindText}
			case "BLOB":
				cols[i] = snapshot.Column{Name: c.name, Kind: snapshot.KindBytes}
			default:
				return fmt.Errorf("taking a snapshot: table %s, column %s: type %q is not one a snapshot holds (INTEGER, TEXT, BLOB)", t.name, c.name, c.typ)
			}
		}
		if err := sw.Table(t.name, cols); err != nil {
			return fmt.Errorf("taking a snapshot: %w", err)
		}
		if err := dumpTable(ctx, tx, t, sw); err != nil {
			return err
		}
	}
	if err := sw.Close(); err != nil {
		return fmt.Errorf("taking a snapshot: %w", err)
	}
	return nil
}

type column struct{ name, typ string }

type table struct {
	name string
	cols []column
}

func (t table) names() []string {
	out := make([]string, len(t.cols))
	for i, c := range t.cols {
		out[i] = c.name
	}
	return out
}

type snapQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, q snapQuerier) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, wrap(ctx, "taking a snapshot: schema version", err)
	}
	return v, nil
}

// tableColumns lists the schema's tables, by name, and their columns in
// order, from the database itself: a table added by a later migration is
// included without this code knowing it.
func tableColumns(ctx context.Context, q snapQuerier) ([]table, error) {
	rows, err := q.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' AND name <> ? ORDER BY name`,
		snapshot.MigrationsTable)
	if err != nil {
		return nil, wrap(ctx, "taking a snapshot: tables", err)
	}
	var tables []table
	for rows.Next() {
		var t table
		if err := rows.Scan(&t.name); err != nil {
			rows.Close()
			return nil, wrap(ctx, "taking a snapshot: tables", err)
		}
		tables = append(tables, t)
	}
	if err := rows.Close(); err != nil {
		return nil, wrap(ctx, "taking a snapshot: tables", err)
	}
	for i := range tables {
		t := &tables[i]
		if !snapshot.ValidName(t.name) {
			return nil, fmt.Errorf("taking a snapshot: table name %q", t.name)
		}
		rows, err := q.QueryContext(ctx, `SELECT name, type FROM pragma_table_xinfo(?) WHERE hidden = 0 ORDER BY cid`, t.name)
		if err != nil {
			return nil, wrap(ctx, "taking a snapshot: columns", err)
		}
		for rows.Next() {
			var c column
			if err := rows.Scan(&c.name, &c.typ); err != nil {
				rows.Close()
				return nil, wrap(ctx, "taking a snapshot: columns", err)
			}
			if !snapshot.ValidName(c.name) {
				rows.Close()
				return nil, fmt.Errorf("taking a snapshot: table %s: column name %q", t.name, c.name)
			}
			t.cols = append(t.cols, c)
		}
		if err := rows.Close(); err != nil {
			return nil, wrap(ctx, "taking a snapshot: columns", err)
		}
	}
	return tables, nil
}

// dumpTable writes t's rows, ordered by every column so that two
// snapshots of the same rows are the same.
func dumpTable(ctx context.Context, tx *sql.Tx, t table, sw *snapshot.Writer) error {
	order := make([]string, len(t.cols))
	for i := range t.cols {
		order[i] = fmt.Sprint(i + 1)
	}
	rows, err := tx.QueryContext(ctx, `SELECT "`+strings.Join(t.names(), `", "`)+`" FROM "`+t.name+`" ORDER BY `+strings.Join(order, ", "))
	if err != nil {
		return wrap(ctx, "taking a snapshot: "+t.name, err)
	}
	defer rows.Close()
	vals := make([]any, len(t.cols))
	ptrs := make([]any, len(t.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return wrap(ctx, "taking a snapshot: "+t.name, err)
		}
		for i, v := range vals {
			switch x := v.(type) {
			case nil, int64, []byte:
			case string:
				if strings.ToUpper(t.cols[i].typ) == "BLOB" {
					vals[i] = []byte(x)
				}
			default:
				return fmt.Errorf("taking a snapshot: table %s, column %s: a %T", t.name, t.cols[i].name, v)
			}
		}
		if err := sw.Row(vals); err != nil {
			return fmt.Errorf("taking a snapshot: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return wrap(ctx, "taking a snapshot: "+t.name, err)
	}
	return nil
}

// Restore writes the snapshot s into the store, which must be empty (see
// snapshot.Seeds), in one transaction: a restore that fails leaves the
// store as it was. It refuses a snapshot of another schema version
// (snapshot.CheckSchema) or with other tables or columns. Each value is
// converted to its column's type: a bool to 0 or 1, a time to
// microseconds, JSON to its text.
func (s *Store) Restore(ctx context.Context, snap *snapshot.Snapshot) error {
	tx, err := s.w.BeginTx(ctx, nil) // IMMEDIATE: no other writer until it ends
	if err != nil {
		return wrap(ctx, "restore", err)
	}
	defer tx.Rollback()
	// Foreign keys are checked at the commit, so the tables go in in any
	// order.
	if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
		return wrap(ctx, "restore", err)
	}
	schema, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if err := snapshot.CheckSchema(snap, schema); err != nil {
		return err
	}
	tables, err := tableColumns(ctx, tx)
	if err != nil {
		return err
	}
	byName := map[string]table{}
	names := map[string][]string{}
	for _, t := range tables {
		byName[t.name], names[t.name] = t, t.names()
	}
	if err := snapshot.CheckTables(snap, names); err != nil {
		return err
	}
	for _, t := range tables {
		q := `SELECT count(*) FROM "` + t.name + `"`
		if seed, ok := snapshot.Seeds[t.name]; ok {
			q += ` WHERE NOT (` + seed + `)`
		}
		var n int
		if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return wrap(ctx, "restore: "+t.name, err)
		}
		if n > 0 {
			return fmt.Errorf("%w (table %s holds %d rows)", snapshot.ErrNotEmpty, t.name, n)
		}
	}
	for name := range snapshot.Seeds {
		if _, ok := byName[name]; ok {
			if _, err := tx.ExecContext(ctx, `DELETE FROM "`+name+`"`); err != nil {
				return wrap(ctx, "restore: "+name, err)
			}
		}
	}
	for _, st := range snap.Tables {
		t := byName[st.Name]
		types := map[string]string{}
		for _, c := range t.cols {
			types[c.name] = strings.ToUpper(c.typ)
		}
		names := make([]string, len(st.Columns))
		marks := make([]string, len(st.Columns))
		for i, c := range st.Columns {
			names[i], marks[i] = c.Name, "?"
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO "`+st.Name+`" ("`+strings.Join(names, `", "`)+`") VALUES (`+strings.Join(marks, ", ")+`)`)
		if err != nil {
			return wrap(ctx, "restore: "+st.Name, err)
		}
		args := make([]any, len(st.Columns))
		for _, row := range st.Rows {
			for i, v := range row {
				if args[i], err = toSQLite(types[st.Columns[i].Name], v); err != nil {
					ins.Close()
					return fmt.Errorf("restore: table %s, column %s: %w", st.Name, st.Columns[i].Name, err)
				}
			}
			if _, err := ins.ExecContext(ctx, args...); err != nil {
				ins.Close()
				return wrap(ctx, "restore: "+st.Name, err)
			}
		}
		if err := ins.Close(); err != nil {
			return wrap(ctx, "restore: "+st.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return wrap(ctx, "restore: commit", err)
	}
	return nil
}

// toSQLite converts a snapshot value to what a column of SQLite type typ
// holds.
func toSQLite(typ string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "INTEGER", "INT":
		switch x := v.(type) {
		case int64:
			return x, nil
		case bool:
			if x {
				return int64(1), nil
			}
			return int64(0), nil
		case time.Time:
			return x.UnixMicro(), nil
		}
	case "TEXT":
		if x, ok := v.(string); ok {
			return x, nil
		}
	case "BLOB":
		if x, ok := v.([]byte); ok {
			return x, nil
		}
	}
	return nil, fmt.Errorf("a %T does not go into a %s column", v, typ)
}

// RestoreFile restores snap into a new store at path: the database is
// created and migrated to the snapshot's schema version, restored
// (Store.Restore), then migrated to this keygate's, as an upgrade would
// migrate the database the snapshot was taken from. A snapshot of a newer
// schema than this keygate's is refused before anything is created.
func RestoreFile(ctx context.Context, path string, snap *snapshot.Snapshot) error {
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		return err
	}
	if snap.Header.Schema > len(ms) {
		return snapshot.CheckSchema(snap, len(ms))
	}
	s, err := OpenAt(ctx, path, snap.Header.Schema)
	if err != nil {
		return err
	}
	if err := s.Restore(ctx, snap); err != nil {
		s.Close()
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	if s, err = Open(ctx, path); err != nil {
		return fmt.Errorf("restored; migrating to this keygate's schema: %w", err)
	}
	return s.Close()
}
