// Package migration reads a store backend's versioned schema migrations:
// SQL files named NNNN_description.sql embedded in the backend, numbered
// from 1 without gaps. Each backend applies the pending ones in version
// order, each in its own transaction, and records them in a
// schema_migrations table; a database newer than the binary is refused.
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema step.
type Migration struct {
	Version int    // 1, 2, ...
	Name    string // the file name without the version and extension
	SQL     string
}

// Load reads the migrations in dir of fsys. It fails unless the versions
// run 1, 2, ... n without gaps or duplicates.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, desc, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		if !ok {
			return nil, fmt.Errorf("%s: want NNNN_description.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%s: bad version %q", name, num)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: desc, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("version %d found where %d expected", m.Version, i+1)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return ms, nil
}
