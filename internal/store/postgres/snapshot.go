package postgres

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keygate/keygate/internal/store/internal/migration"
	"github.com/keygate/keygate/internal/store/snapshot"
)

// Snapshot writes every row of every table of the store's schema but the
// migrations' to w (see package snapshot), read in one transaction
// (SERIALIZABLE, READ ONLY, DEFERRABLE: it waits, if it must, for a moment
// from which it cannot see an anomaly, then neither blocks writers nor is
// cancelled by them), so that writes committed while it runs are in it
// entirely or not at all. It is not bounded by the store's timeout, only
// by ctx.
func (s *Store) Snapshot(ctx context.Context, w io.Writer) error { return snapshotDB(ctx, s.pool, w) }

// SnapshotURL writes a snapshot of the store at url, as Store.Snapshot
// does, without migrating it (the transaction is read-only): a keygate of
// another version than the one serving the database can back it up,
// whatever its schema version.
func SnapshotURL(ctx context.Context, url string, w io.Writer) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return wrap(ctx, "connect", err)
	}
	defer conn.Close(context.Background())
	return snapshotDB(ctx, conn, w)
}

type beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

func snapshotDB(ctx context.Context, db beginner, w io.Writer) error {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly, DeferrableMode: pgx.Deferrable})
	if err != nil {
		return wrap(ctx, "taking a snapshot", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read only
	schema, err := pgSchemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	tables, err := pgTables(ctx, tx)
	if err != nil {
		return err
	}
	sw, err := snapshot.NewWriter(w, snapshot.Header{Backend: "postgres", Schema: schema, CreatedAt: time.Now()})
	if err != nil {
		return fmt.Errorf("taking a snapshot: %w", err)
	}
	for _, t := range tables {
		cols := make([]snapshot.Column, len(t.cols))
		sel := make([]string, len(t.cols))
		for i, c := range t.cols {
			k, err := pgKind(c.typ)
			if err != nil {
				return fmt.Errorf("taking a snapshot: table %s, column %s: %w", t.name, c.name, err)
			}
			cols[i] = snapshot.Column{Name: c.name, Kind: k}
			sel[i] = `"` + c.name + `"`
			if k == snapshot.KindJSON {
				sel[i] += `::text` // as text, not decoded
			}
		}
		if err := sw.Table(t.name, cols); err != nil {
			return fmt.Errorf("taking a snapshot: %w", err)
		}
		if err := dumpTable(ctx, tx, t, sel, cols, sw); err != nil {
			return err
		}
	}
	if err := sw.Close(); err != nil {
		return fmt.Errorf("taking a snapshot: %w", err)
	}
	return nil
}

type pgColumn struct{ name, typ string }

type pgTable struct {
	name string
	cols []pgColumn
}

func (t pgTable) names() []string {
	out := make([]string, len(t.cols))
	for i, c := range t.cols {
		out[i] = c.name
	}
	return out
}

func pgSchemaVersion(ctx context.Context, tx pgx.Tx) (int, error) {
	var v int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, wrap(ctx, "taking a snapshot: schema version", err)
	}
	return v, nil
}

// pgTables lists the tables of the connection's current schema, by name,
// and their columns in order with their types (format_type), from the
// catalog: a table added by a later migration is included without this
// code knowing it.
func pgTables(ctx context.Context, tx pgx.Tx) ([]pgTable, error) {
	rows, err := tx.Query(ctx, `SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind IN ('r', 'p') AND c.relname <> $1
			AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
		ORDER BY c.relname COLLATE "C", a.attnum`, snapshot.MigrationsTable)
	if err != nil {
		return nil, wrap(ctx, "taking a snapshot: tables", err)
	}
	defer rows.Close()
	var tables []pgTable
	for rows.Next() {
		var tname string
		var c pgColumn
		if err := rows.Scan(&tname, &c.name, &c.typ); err != nil {
			return nil, wrap(ctx, "taking a snapshot: tables", err)
		}
		if !snapshot.ValidName(tname) || !snapshot.ValidName(c.name) {
			return nil, fmt.Errorf("taking a snapshot: table %q, column %q: a name a snapshot cannot hold", tname, c.name)
		}
		if n := len(tables); n == 0 || tables[n-1].name != tname {
			tables = append(tables, pgTable{name: tname})
		}
		tables[len(tables)-1].cols = append(tables[len(tables)-1].cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "taking a snapshot: tables", err)
	}
	return tables, nil
}

// pgKind is the snapshot kind of a column of PostgreSQL type typ.
func pgKind(typ string) (snapshot.Kind, error) {
	switch baseType(typ) {
	case "bigint", "integer", "smallint":
		return snapshot.KindInt, nil
	case "text", "character varying":
		return snapshot.KindText, nil
	case "bytea":
		return snapshot.KindBytes, nil
	case "boolean":
		return snapshot.KindBool, nil
	case "timestamp with time zone":
		return snapshot.KindTime, nil
	case "jsonb", "json":
		return snapshot.KindJSON, nil
	}
	return "", fmt.Errorf("type %q is not one a snapshot holds", typ)
}

// dumpTable writes t's rows, ordered by every column so that two
// snapshots of the same rows are the same.
func dumpTable(ctx context.Context, tx pgx.Tx, t pgTable, sel []string, cols []snapshot.Column, sw *snapshot.Writer) error {
	order := make([]string, len(t.cols))
	for i := range t.cols {
		order[i] = fmt.Sprint(i + 1)
	}
	rows, err := tx.Query(ctx, `SELECT `+strings.Join(sel, ", ")+` FROM "`+t.name+`" ORDER BY `+strings.Join(order, ", "))
	if err != nil {
		return wrap(ctx, "taking a snapshot: "+t.name, err)
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return wrap(ctx, "taking a snapshot: "+t.name, err)
		}
		for i, v := range vals {
			switch x := v.(type) {
			case int32:
				vals[i] = int64(x)
			case int16:
				vals[i] = int64(x)
			case time.Time:
				vals[i] = x.UTC()
			case nil, int64, string, []byte, bool:
			default:
				return fmt.Errorf("taking a snapshot: table %s, column %s: a %T", t.name, cols[i].Name, v)
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

// Restore writes the snapshot snap into the store's schema, which must be
// empty (see snapshot.Seeds), in one transaction: a restore that fails
// leaves the schema as it was. It refuses a snapshot of another schema
// version (snapshot.CheckSchema) or with other tables or columns. Tables
// are written parents first (by their foreign keys), each with COPY; each
// value is converted to its column's type (an integer 0 or 1 to a boolean,
// microseconds to a timestamptz, text to jsonb). Sequences owned by a
// column are then set past the largest value restored.
func (s *Store) Restore(ctx context.Context, snap *snapshot.Snapshot) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		return wrap(ctx, "restore", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after a commit, a no-op
	// Nothing else writes the schema's tables while the restore runs.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`, lockMigrate); err != nil {
		return wrap(ctx, "restore: lock", err)
	}
	schema, err := pgSchemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if err := snapshot.CheckSchema(snap, schema); err != nil {
		return err
	}
	tables, err := pgTables(ctx, tx)
	if err != nil {
		return err
	}
	byName := map[string]pgTable{}
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
		if err := tx.QueryRow(ctx, q).Scan(&n); err != nil {
			return wrap(ctx, "restore: "+t.name, err)
		}
		if n > 0 {
			return fmt.Errorf("%w (table %s holds %d rows)", snapshot.ErrNotEmpty, t.name, n)
		}
	}
	for name := range snapshot.Seeds {
		if _, ok := byName[name]; ok {
			if _, err := tx.Exec(ctx, `DELETE FROM "`+name+`"`); err != nil {
				return wrap(ctx, "restore: "+name, err)
			}
		}
	}
	order, err := parentsFirst(ctx, tx, snap)
	if err != nil {
		return err
	}
	for _, st := range order {
		types := map[string]string{}
		for _, c := range byName[st.Name].cols {
			types[c.name] = c.typ
		}
		cols := make([]string, len(st.Columns))
		for i, c := range st.Columns {
			cols[i] = c.Name
		}
		rows := make([][]any, len(st.Rows))
		for r, row := range st.Rows {
			out := make([]any, len(row))
			for i, v := range row {
				if out[i], err = toPostgres(types[cols[i]], v); err != nil {
					return fmt.Errorf("restore: table %s, column %s: %w", st.Name, cols[i], err)
				}
			}
			rows[r] = out
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{st.Name}, cols, pgx.CopyFromRows(rows)); err != nil {
			return wrap(ctx, "restore: "+st.Name, err)
		}
	}
	// Sequences (serial and identity columns) continue after the rows
	// restored; none of keygate's tables has one yet.
	if _, err := tx.Exec(ctx, `DO $$
		DECLARE r record; m bigint;
		BEGIN
			FOR r IN SELECT c.relname AS tbl, a.attname AS col, pg_get_serial_sequence(quote_ident(c.relname), a.attname) AS seq
				FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
				WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
			LOOP
				IF r.seq IS NOT NULL THEN
					EXECUTE format('SELECT max(%I) FROM %I', r.col, r.tbl) INTO m;
					IF m IS NOT NULL THEN PERFORM setval(r.seq, m); END IF;
				END IF;
			END LOOP;
		END $$`); err != nil {
		return wrap(ctx, "restore: sequences", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return wrap(ctx, "restore: commit", err)
	}
	return nil
}

// parentsFirst orders snap's tables so that a table comes after every
// table its foreign keys reference, as the target's catalog declares them
// (then by name).
func parentsFirst(ctx context.Context, tx pgx.Tx, snap *snapshot.Snapshot) ([]snapshot.Table, error) {
	rows, err := tx.Query(ctx, `SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c
		WHERE c.contype = 'f' AND c.connamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`)
	if err != nil {
		return nil, wrap(ctx, "restore: foreign keys", err)
	}
	parents := map[string][]string{}
	for rows.Next() {
		var child, parent string
		if err := rows.Scan(&child, &parent); err != nil {
			rows.Close()
			return nil, wrap(ctx, "restore: foreign keys", err)
		}
		child, parent = unqualify(child), unqualify(parent)
		if child != parent {
			parents[child] = append(parents[child], parent)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "restore: foreign keys", err)
	}
	var out []snapshot.Table
	done := map[string]bool{}
	left := slices.Clone(snap.Tables)
	for len(left) > 0 {
		n := len(left)
		left = slices.DeleteFunc(left, func(t snapshot.Table) bool {
			for _, p := range parents[t.Name] {
				if !done[p] {
					return false
				}
			}
			out = append(out, t)
			return true
		})
		for _, t := range out[len(out)-(n-len(left)):] {
			done[t.Name] = true
		}
		if len(left) == n {
			return nil, fmt.Errorf("restore: the foreign keys of tables %v form a cycle", left[0].Name)
		}
	}
	return out, nil
}

// unqualify drops a schema and quotes from a regclass's text.
func unqualify(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return strings.Trim(name, `"`)
}

// toPostgres converts a snapshot value to what pgx writes into a column of
// type typ (format_type's name).
func toPostgres(typ string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch baseType(typ) {
	case "bigint", "integer", "smallint":
		if x, ok := v.(int64); ok {
			return x, nil
		}
	case "boolean":
		switch x := v.(type) {
		case bool:
			return x, nil
		case int64:
			if x == 0 || x == 1 {
				return x == 1, nil
			}
			return nil, fmt.Errorf("%d is not a boolean (0 or 1)", x)
		}
	case "timestamp with time zone":
		switch x := v.(type) {
		case time.Time:
			return x, nil
		case int64:
			return time.UnixMicro(x).UTC(), nil
		}
	case "jsonb", "json":
		if x, ok := v.(string); ok {
			return x, nil // pgx sends a string as the JSON text it is
		}
	case "text", "character varying":
		if x, ok := v.(string); ok {
			return x, nil
		}
	case "bytea":
		if x, ok := v.([]byte); ok {
			return x, nil
		}
	}
	return nil, fmt.Errorf("a %T does not go into a %s column", v, typ)
}

// WithSchemaVersion has Open migrate the schema only up to version (0:
// the latest), for restoring a snapshot of an older schema (RestoreURL).
func WithSchemaVersion(version int) Option {
	return func(s *Store) { s.upTo = version }
}

// RestoreURL restores snap into the empty store at url: its schema is
// migrated to the snapshot's version, restored (Store.Restore), then
// migrated to this keygate's, as an upgrade would migrate the database
// the snapshot was taken from. A snapshot of a newer schema than this
// keygate's is refused before anything is written.
func RestoreURL(ctx context.Context, url string, snap *snapshot.Snapshot) error {
	ms, err := migration.Load(migrationFS, "migrations")
	if err != nil {
		return err
	}
	if snap.Header.Schema > len(ms) {
		return snapshot.CheckSchema(snap, len(ms))
	}
	s, err := Open(ctx, url, WithSchemaVersion(snap.Header.Schema))
	if err != nil {
		return err
	}
	if err := s.Restore(ctx, snap); err != nil {
		s.Close()
		return err
	}
	s.Close()
	if s, err = Open(ctx, url); err != nil {
		return fmt.Errorf("restored; migrating to this keygate's schema: %w", err)
	}
	return s.Close()
}

// baseType is format_type's name without a length ("character
// varying(64)").
func baseType(typ string) string {
	if i := strings.IndexByte(typ, '('); i >= 0 {
		return typ[:i]
	}
	return typ
}
