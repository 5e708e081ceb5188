package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/operr"
	"github.com/keygate/keygate/internal/store/postgres"
	"github.com/keygate/keygate/internal/store/snapshot"
	"github.com/keygate/keygate/internal/store/sqlite"
)

// keygate backup and keygate restore: a snapshot of a store (package
// snapshot) taken from a running node's admin API or from the store
// itself, and restored into an empty store.

func (a *app) backup(ctx context.Context, args []string) error {
	fs := a.flags("keygate backup", "--out FILE [--data-dir DIR | --database-url URL | admin flags]",
		"Writes a snapshot of a store to FILE: every row of every table, read in one transaction, so\n"+
			"that it is consistent while the node serves. Values the store keeps sealed stay sealed: the\n"+
			"snapshot holds no root key, and restoring it needs the same root key (or passphrase).\n"+
			"By default it asks a running node's admin API (admin token required; the request is audited).\n"+
			"With --data-dir (the SQLite store in DIR/keygate.db) or --database-url it reads the store\n"+
			"directly, without migrating or writing to it, whether or not a node is running on it.\n"+
			"FILE is written under a temporary name, checked, synced and moved into place only when complete;\n"+
			"an existing FILE is never overwritten.")
	var af adminFlags
	af.register(fs)
	out := fs.String("out", "", "write the snapshot to this `file`")
	dataDir := fs.String("data-dir", "", "read the SQLite store in this data `directory`")
	dbURL := fs.String("database-url", "", "read the PostgreSQL store at this `URL`")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	switch {
	case *out == "":
		return usageErrorf(fs.Name(), "--out FILE is required")
	case *dataDir != "" && *dbURL != "":
		return usageErrorf(fs.Name(), "give at most one of --data-dir and --database-url")
	}
	if _, err := os.Lstat(*out); err == nil {
		return fmt.Errorf("%s exists: a backup never overwrites a file", *out)
	}
	var take func(ctx context.Context, w io.Writer) error
	from := ""
	switch {
	case *dataDir != "":
		path := filepath.Join(*dataDir, node.StoreFile)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		take = func(ctx context.Context, w io.Writer) error { return sqlite.SnapshotFile(ctx, path, w) }
		from = path
	case *dbURL != "":
		take = func(ctx context.Context, w io.Writer) error { return postgres.SnapshotURL(ctx, *dbURL, w) }
		from = redactURL(*dbURL)
	default:
		take, from = af.snapshot(a), af.url
	}
	n, err := writeComplete(ctx, *out, take)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Wrote %s: %d rows in %d tables from %s (schema version %d). Its sealed values need the same root key to open.\n",
		*out, n.Rows(), len(n.Tables), from, n.Header.Schema)
	return nil
}

// snapshot asks the node's admin API for a snapshot.
func (f *adminFlags) snapshot(a *app) func(context.Context, io.Writer) error {
	return func(ctx context.Context, w io.Writer) error {
		tok, err := f.token(a)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(f.url, "/")+"/v1/admin/backup", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		c, err := f.tls.client()
		if err != nil {
			return err
		}
		// The snapshot may take longer than an API call: bounded by ctx
		// only.
		c = &http.Client{Transport: c.Transport}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			var e struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
			}
			json.Unmarshal(b, &e) //nolint:errcheck // a body that is not one says nothing more
			if resp.StatusCode == http.StatusUnauthorized {
				e.Description = "the admin token was refused (give the node's admin token: --admin-token-file FILE or KEYGATE_ADMIN_TOKEN)"
			}
			return operr.Errorf("%w", &statusError{path: req.URL.Path, status: resp.StatusCode, body: b, header: resp.Header,
				code: e.Error, description: e.Description})
		}
		if ct := resp.Header.Get("Content-Type"); ct != snapshotContentType {
			return fmt.Errorf("%s: the answer is %q, not a snapshot (is %s a keygate admin listener?)", req.URL.Path, ct, f.url)
		}
		_, err = io.Copy(w, resp.Body)
		return err
	}
}

// snapshotContentType is what the admin API answers a backup with.
const snapshotContentType = "application/x-keygate-snapshot"

// writeComplete writes what take writes to a temporary file beside out,
// checks that it reads back as a complete snapshot, syncs it and links it
// to out (never replacing a file there): a backup that fails or is killed
// leaves at most a temporary file, never one named out.
func writeComplete(ctx context.Context, out string, take func(context.Context, io.Writer) error) (*snapshot.Snapshot, error) {
	dir := filepath.Dir(out)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(out)+".partial-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := take(ctx, tmp); err != nil {
		return nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	snap, err := snapshot.Read(tmp)
	if err != nil {
		return nil, fmt.Errorf("the snapshot received does not check (a node that fails while it sends one cuts it short: see its log): %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), out); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s exists: a backup never overwrites a file", out)
		}
		return nil, err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck // best effort: the file itself is synced
		d.Close()
	}
	return snap, nil
}

func (a *app) restore(ctx context.Context, args []string) error {
	fs := a.flags("keygate restore", "--in FILE (--data-dir DIR | --database-url URL)",
		"Restores a snapshot written by keygate backup into an empty store: a new data directory\n"+
			"(its SQLite store, DIR/keygate.db, is created) or an empty PostgreSQL database or schema,\n"+
			"which may be of the other backend than the one the snapshot was taken from.\n"+
			"The file is checked completely before anything is written, and the restore is one\n"+
			"transaction: a store that is not empty, a damaged file or a snapshot of a newer schema\n"+
			"version is refused and the store is left as it was; a snapshot of an older one is restored\n"+
			"at its version, then migrated to this keygate's. Start a node on the store with the\n"+
			"root key of the store the snapshot was taken from (with passphrase unsealing, copy its\n"+
			"data directory's keyring.json too), and unseal it.")
	in := fs.String("in", "", "read the snapshot from this `file`")
	dataDir := fs.String("data-dir", "", "restore into the SQLite store of this data `directory`")
	dbURL := fs.String("database-url", "", "restore into the PostgreSQL store at this `URL`")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	switch {
	case *in == "":
		return usageErrorf(fs.Name(), "--in FILE is required")
	case (*dataDir == "") == (*dbURL == ""):
		return usageErrorf(fs.Name(), "give exactly one of --data-dir and --database-url")
	}
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	snap, err := snapshot.Read(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	to := ""
	if *dataDir != "" {
		to = filepath.Join(*dataDir, node.StoreFile)
		err = sqlite.RestoreFile(ctx, to, snap)
	} else {
		to = redactURL(*dbURL)
		err = postgres.RestoreURL(ctx, *dbURL, snap)
	}
	if err != nil {
		return fmt.Errorf("restoring into %s: %w", to, err)
	}
	fmt.Fprintf(a.stdout, "Restored %d rows in %d tables into %s (a %s snapshot of schema version %d, taken %s).\n"+
		"Start a node on it with the same root key (or passphrase and keyring.json) and unseal it.\n",
		snap.Rows(), len(snap.Tables), to, snap.Header.Backend, snap.Header.Schema, snap.Header.CreatedAt.Format("2006-01-02 15:04:05Z"))
	return nil
}
