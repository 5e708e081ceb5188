package snapshot

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors a restore refuses with before it writes anything.
var (
	// ErrNotEmpty: the target store holds rows.
	ErrNotEmpty = errors.New("the target store is not empty: restore only into a new store (a data directory without keygate.db, or an empty database schema)")
	// ErrSchema: the snapshot's schema version is not the target's.
	ErrSchema = errors.New("the snapshot's schema version differs from this keygate's")
)

// MigrationsTable is the backends' migration bookkeeping, which a snapshot
// leaves out: the target has its own, from its own migrations.
const MigrationsTable = "schema_migrations"

// CheckSchema refuses a snapshot whose schema version is not target, the
// version the restoring store is migrated to. A newer one holds what this
// keygate does not know; an older one would skip the data changes of the
// migrations between, so it is restored into a store migrated only to its
// version, which is then migrated the rest of the way (the backends'
// RestoreFile and RestoreURL do both).
func CheckSchema(s *Snapshot, target int) error {
	switch {
	case s.Header.Schema > target:
		return fmt.Errorf("%w: the snapshot is of schema version %d, newer than this keygate's %d: restore it with the keygate release that took it, or a newer one",
			ErrSchema, s.Header.Schema, target)
	case s.Header.Schema < target:
		return fmt.Errorf("%w: the snapshot is of schema version %d and the store's %d: restore it into a new store, which is migrated after the restore",
			ErrSchema, s.Header.Schema, target)
	}
	return nil
}

// CheckTables refuses a snapshot whose tables and columns are not those of
// the target, columns named by table: the same tables, each with the same
// column names (their order and declared types may differ).
func CheckTables(s *Snapshot, target map[string][]string) error {
	var missing []string
	for _, t := range s.Tables {
		cols, ok := target[t.Name]
		if !ok {
			return fmt.Errorf("%w: the snapshot's table %s is not in the target store", ErrSchema, t.Name)
		}
		have := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			have[i] = c.Name
		}
		want := slices.Clone(cols)
		slices.Sort(have)
		slices.Sort(want)
		if !slices.Equal(have, want) {
			return fmt.Errorf("%w: table %s has columns %s in the snapshot and %s in the target store", ErrSchema, t.Name,
				strings.Join(have, ","), strings.Join(want, ","))
		}
	}
	for name := range target {
		if !slices.ContainsFunc(s.Tables, func(t Table) bool { return t.Name == name }) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%w: the snapshot has no table %s", ErrSchema, strings.Join(missing, ", "))
	}
	return nil
}

// Seeds are the rows a freshly migrated store holds that no user wrote,
// by table: a condition in SQL both backends run that a row of the
// migrations' matches. A restore counts a store whose tables hold only
// such rows as empty, and deletes them before it writes the snapshot's
// (the 'default' tenant, which migration 3 creates without a data key, is
// replaced by the snapshot's own). A migration that inserts rows of its
// own adds their condition here; until it does, every restore into a new
// store is refused as not empty (which the round-trip tests show).
var Seeds = map[string]string{
	"tenants": "name = 'default' AND data_key IS NULL",
}
