package audit

import (
	"sync"
)

// Free space. A full disk fails every write, and the log is fail-closed:
// every audited request would be answered 503. So the file sink watches
// the free space of its directory's filesystem, and reports it low well
// before that: below FileConfig.MinFree, by default the smaller of
// DefaultMinFree and DefaultMinFreeRatio of the filesystem's size.

// Defaults of FileConfig.MinFree.
const (
	DefaultMinFree      = 1 << 30 // bytes
	DefaultMinFreeRatio = 0.05    // of the filesystem's size
)

// spaceCheckBytes is how much the sink writes between two looks at the
// free space besides those Space makes: a flood that fills the disk is
// seen while it runs, at one statfs per MiB.
const spaceCheckBytes = 1 << 20

// DiskSpace is the room on the file sink's filesystem.
type DiskSpace struct {
	Free    uint64 // bytes available to this process (statfs's f_bavail)
	Total   uint64 // the filesystem's size
	MinFree uint64 // the threshold in force: Low below it
	Low     bool
}

// spaceWatch is a FileSink's view of its free space.
type spaceWatch struct {
	mu      sync.Mutex
	last    DiskSpace
	known   bool // last was read, and low is its state
	written int64
}

// Space reads the free space of the directory's filesystem. When Low
// changes, FileConfig.OnSpace is told.
func (s *FileSink) Space() (DiskSpace, error) {
	w := &s.space
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written = 0
	free, total, err := s.cfg.Statfs(s.cfg.Dir)
	if err != nil {
		return DiskSpace{}, err
	}
	ds := DiskSpace{Free: free, Total: total, MinFree: minFree(s.cfg.MinFree, total)}
	ds.Low = s.cfg.MinFree >= 0 && free < ds.MinFree
	changed := !w.known && ds.Low || w.known && ds.Low != w.last.Low
	w.last, w.known = ds, true
	if changed && s.cfg.OnSpace != nil {
		s.cfg.OnSpace(ds)
	}
	return ds, nil
}

// minFree is the threshold of a filesystem of total bytes: configured
// (positive), none (negative), or the default (0).
func minFree(configured int64, total uint64) uint64 {
	switch {
	case configured > 0:
		return uint64(configured)
	case configured < 0:
		return 0
	}
	return min(DefaultMinFree, uint64(float64(total)*DefaultMinFreeRatio))
}

// wrote counts n bytes written and looks at the free space again once
// spaceCheckBytes have been since the last look. A look that fails is left
// to the writes, which report their own errors.
func (s *FileSink) wrote(n int64) {
	w := &s.space
	w.mu.Lock()
	w.written += n
	due := w.written >= spaceCheckBytes
	w.mu.Unlock()
	if due {
		s.Space() //nolint:errcheck // see above
	}
}
