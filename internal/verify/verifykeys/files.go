package verifykeys

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

// FilesConfig configures a Files source.
type FilesConfig struct {
	// Paths are the PEM (public or private key), JWK and JWKS files; each
	// must yield at least one key.
	Paths []string
	// Algorithms binds the keys (see [keyfile.LoadKeys]): to every one of
	// them that fits a key, or with none to the one the key implies.
	Algorithms []jose.Alg
	// Logger receives key changes at Info and failed loads at Error
	// (default slog.Default()).
	Logger *slog.Logger
	// Now stamps Status and LoadEvent (default time.Now).
	Now func() time.Time
	// OnLoad, if set, is called after every load (the first, and every
	// Reload and Poll that read the files again), successful or not. It
	// must not block.
	OnLoad func(LoadEvent)
}

// LoadEvent reports one load of a Files source to metrics.
type LoadEvent struct {
	Result string    // ResultOK, or ResultError when a file failed to read, parse or yield a key
	Keys   int       // keys in force after the load
	At     time.Time // when the load ended
	Err    error     // why it failed
}

// ResultError is a LoadEvent's Result for a failed load.
const ResultError = "error"

// Files is a key set read from files, and read again on [Files.Reload] and
// when [Files.Poll] finds a file's content changed. A load that fails
// leaves the keys last loaded in force: a file caught half written, or
// broken by hand, never empties the set, and it is logged, counted
// (OnLoad) and reported by Status until a load succeeds.
type Files struct {
	cfg    FilesConfig
	set    atomic.Pointer[jose.KeySet]
	status atomic.Pointer[Status] // as of the last load: /readyz never waits for one

	mu   sync.Mutex // one load at a time; guards sums
	sums []fileSum  // each file's content at the last load, good or bad
}

// fileSum identifies a file's content: its SHA-256, or a zero sum with
// missing set when it could not be read.
type fileSum struct {
	sum     [sha256.Size]byte
	missing bool
}

// LoadFiles reads cfg.Paths and returns a source serving their keys. It
// fails, naming the file at fault, if any file cannot be read or yields no
// key.
func LoadFiles(cfg FilesConfig) (*Files, error) {
	if len(cfg.Paths) == 0 {
		return nil, errors.New("no key files given")
	}
	cfg.Paths = slices.Clone(cfg.Paths)
	cfg.Algorithms = slices.Clone(cfg.Algorithms)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &Files{cfg: cfg}
	f.set.Store(emptySet)
	f.status.Store(&Status{})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.loadLocked(f.read()); err != nil {
		return nil, err
	}
	return f, nil
}

// Current returns the keys of the last successful load. It never blocks
// and never returns nil.
func (f *Files) Current() *jose.KeySet { return f.set.Load() }

// Refetch returns Current: files are read again by Reload and Poll, never
// because a token names an unknown kid.
func (f *Files) Refetch(context.Context) *jose.KeySet { return f.Current() }

// Status reports the set's size, the last load and, while the files fail
// to load, the error (with Stale set: the keys in force are older than
// the files).
func (f *Files) Status() Status {
	st := *f.status.Load()
	st.Keys = f.Current().Len()
	st.Stale = st.LastError != nil
	return st
}

// Reload reads every file again, whether or not it changed, and swaps in
// its keys. On error the keys in force stay, and the error names the file.
// When Reload returns nil, no request that starts afterwards is verified
// with a key the files no longer hold.
func (f *Files) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loadLocked(f.read())
}

// Poll reads the files and loads them again if the content of any differs
// from what the last load (successful or not) read: a same-size edit, a
// restored modification time or a new file renamed into place are all
// seen. It returns the load's error, or nil when nothing changed. A broken
// file is therefore logged and counted once, not on every poll, and loads
// as soon as it is fixed.
func (f *Files) Poll() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.read()
	if slices.Equal(r.sums, f.sums) {
		return nil
	}
	return f.loadLocked(r)
}

// readResult is the files' contents, or why one could not be read.
type readResult struct {
	data [][]byte
	sums []fileSum
	err  error // the first read error
}

func (f *Files) read() readResult {
	r := readResult{data: make([][]byte, len(f.cfg.Paths)), sums: make([]fileSum, len(f.cfg.Paths))}
	for i, p := range f.cfg.Paths {
		b, err := keyfile.Read(p)
		if err != nil {
			r.sums[i].missing = true
			if r.err == nil {
				r.err = err
			}
			continue
		}
		r.data[i], r.sums[i].sum = b, sha256.Sum256(b)
	}
	return r
}

// loadLocked parses what read returned and, if every file yields keys,
// publishes them. f.mu must be held.
func (f *Files) loadLocked(r readResult) error {
	f.sums = r.sums
	err := r.err
	var all []*jose.Key
	for i, p := range f.cfg.Paths {
		if err != nil {
			break
		}
		var ks []*jose.Key
		if ks, err = keyfile.ParseKeys(r.data[i], f.cfg.Algorithms, ""); err != nil {
			err = fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, ks...)
	}
	now := f.cfg.Now()
	st := *f.status.Load()
	st.LastAttempt = now
	if err != nil {
		st.LastError = err
		f.status.Store(&st)
		old := f.Current()
		if old.Len() > 0 {
			f.cfg.Logger.Error("keys: key files failed to load; the keys last loaded keep serving",
				"files", f.cfg.Paths, "err", err, "serving_keys", old.Len())
		}
		f.report(LoadEvent{Result: ResultError, Keys: old.Len(), At: now, Err: err})
		return err
	}
	set := jose.NewKeySet(all...)
	old := f.set.Swap(set)
	st.LastSuccess, st.LastError = now, nil
	f.status.Store(&st)
	if added, removed := diffKeys(old, set); old.Len() > 0 && (len(added) > 0 || len(removed) > 0) {
		f.cfg.Logger.Info("keys: key files changed", "files", f.cfg.Paths, "keys", set.Len(),
			"added", added, "removed", removed)
	}
	f.report(LoadEvent{Result: ResultOK, Keys: set.Len(), At: now})
	return nil
}

func (f *Files) report(ev LoadEvent) {
	if f.cfg.OnLoad != nil {
		f.cfg.OnLoad(ev)
	}
}
