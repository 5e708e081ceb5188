package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// SyncPolicy says when the file sink makes its writes durable.
type SyncPolicy uint8

// The sync policies.
const (
	// SyncBatch syncs every batch before its callers return: a record
	// whose Write returned survives a crash of the machine. The default.
	SyncBatch SyncPolicy = iota
	// SyncInterval syncs every FileConfig.SyncInterval: a crash of the
	// machine (not of the process) loses up to that much, although the
	// callers were answered.
	SyncInterval
	// SyncNever leaves it to the operating system (Close still syncs): a
	// crash of the machine can lose anything not yet written back.
	SyncNever
)

// DefaultMaxSize is the size at which the file sink rotates by default.
const DefaultMaxSize = 64 << 20

// FileConfig configures a FileSink.
type FileConfig struct {
	// Dir holds the files (created 0700 if missing; files are 0600),
	// named FileName(first seq): audit-00000000000000000001.jsonl, ...
	Dir string
	// MaxSize is the size at which the current file is rotated: the next
	// batch begins with a checkpoint closing it and a rotate line opening
	// the next. DefaultMaxSize when 0; never when negative.
	MaxSize int64
	// Sync is the sync policy.
	Sync SyncPolicy
	// SyncInterval is SyncInterval's period; a second when 0.
	SyncInterval time.Duration
	// Clock drives SyncInterval; SystemClock when nil.
	Clock Clock
	// MinFree is the free space, in bytes, on the directory's filesystem
	// below which Space reports it low: 0 is the default, the smaller of
	// DefaultMinFree and DefaultMinFreeRatio of the filesystem's size;
	// negative never reports it low.
	MinFree int64
	// Statfs reads the bytes free (to this process) and the size of the
	// filesystem holding dir; nil: statfs(2). Tests substitute a nearly
	// full disk.
	Statfs func(dir string) (free, total uint64, err error)
	// OnSpace, if set, is told when the free space becomes low and when
	// it is no longer (and at the first look if it is low then). It must
	// not call the sink.
	OnSpace func(DiskSpace)
}

// FileSink keeps the chain in JSON-lines files in one directory. At Start
// (Resume) it continues the newest file after verifying it; it refuses a
// file whose tail does not verify.
type FileSink struct {
	cfg  FileConfig
	id   string // Name's
	open func(name string, flag int, perm fs.FileMode) (file, error)

	mu      sync.Mutex
	f       file
	name    string // the current file's base name
	size    int64
	dirty   bool  // written since the last sync
	broken  error // set once the sink cannot keep the chain whole
	closed  bool
	buf     []byte
	stop    chan struct{} // ends the interval syncer
	stopped chan struct{}

	space spaceWatch // has a lock of its own: Space does not wait for writes
}

// file is what the sink needs of an *os.File.
type file interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

var (
	_ Resumer = (*FileSink)(nil)
	_ Rotator = (*FileSink)(nil)
	_ Sink    = (*WriterSink)(nil)
	_ Sink    = (*StoreSink[struct{}])(nil)
)

// NewFileSink checks cfg and returns a sink; it touches no file until
// Resume or Write.
func NewFileSink(cfg FileConfig) (*FileSink, error) {
	if cfg.Dir == "" {
		return nil, errors.New("audit.FileConfig.Dir is required")
	}
	if cfg.Sync > SyncNever {
		return nil, errors.New("audit.FileConfig.Sync: unknown policy")
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock
	}
	if cfg.Statfs == nil {
		cfg.Statfs = statfs
	}
	return &FileSink{cfg: cfg, id: "file:" + cfg.Dir, open: openOSFile}, nil
}

func openOSFile(name string, flag int, perm fs.FileMode) (file, error) {
	return os.OpenFile(name, flag, perm)
}

// Name returns "file:" and the directory.
func (s *FileSink) Name() string { return s.id }

// Files lists the sink's files in chain order, as paths.
func (s *FileSink) Files() ([]string, error) {
	names, err := s.names()
	for i, n := range names {
		names[i] = filepath.Join(s.cfg.Dir, n)
	}
	return names, err
}

func (s *FileSink) names() ([]string, error) {
	ents, err := os.ReadDir(s.cfg.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && isFileName(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, err
}

func isFileName(n string) bool {
	digits, ok := strings.CutPrefix(n, "audit-")
	digits, ok2 := strings.CutSuffix(digits, ".jsonl")
	if !ok || !ok2 || len(digits) != 20 {
		return false
	}
	for i := range digits {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// Resume verifies the newest file (an empty one, left by a crash right
// after it was created, is removed first) and opens it to append.
func (s *FileSink) Resume(node string, keys []ed25519.PublicKey) (Tail, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return Tail{}, err
	}
	names, err := s.names()
	if err != nil {
		return Tail{}, err
	}
	for len(names) > 0 {
		fi, err := os.Stat(filepath.Join(s.cfg.Dir, names[len(names)-1]))
		if err != nil {
			return Tail{}, err
		}
		if fi.Size() > 0 {
			break
		}
		if err := os.Remove(filepath.Join(s.cfg.Dir, names[len(names)-1])); err != nil {
			return Tail{}, err
		}
		names = names[:len(names)-1]
	}
	if len(names) == 0 {
		return Tail{Empty: true}, nil
	}
	path := filepath.Join(s.cfg.Dir, names[len(names)-1])
	sum, size, err := verifyTail(path, node, keys)
	var p *Problem
	switch {
	case errors.As(err, &p) && p.Kind == ProblemWrongNode:
		return Tail{}, fmt.Errorf("%s holds another node's chain: %w", s.cfg.Dir, err)
	case errors.As(err, &p):
		return Tail{}, &TailError{File: path, MaxSeq: maxSeqIn(path), Problem: p}
	}
	if err != nil {
		return Tail{}, err
	}
	f, err := s.open(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Tail{}, err
	}
	s.f, s.name, s.size = f, filepath.Base(path), size
	s.startSyncer()
	return Tail{Seq: sum.LastSeq, Hash: sum.LastHash, File: path, FileSeq: sum.FirstSeq, Unsigned: sum.Unsigned}, nil
}

// verifyTail verifies one file as the current end of node's chain.
func verifyTail(path, node string, keys []ed25519.PublicKey) (*Summary, int64, error) {
	v, err := newVerifier(VerifyOptions{Keys: keys, Node: node, AllowUnsignedTail: true})
	if err != nil {
		return nil, 0, err
	}
	v.ownTail = true // its crash tails are Verify's to judge; a torn line is the writer's
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if err := v.File(path, f); err != nil {
		return nil, 0, err
	}
	sum, err := v.Finish()
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	return sum, fi.Size(), nil
}

// maxSeqIn returns the highest seq the lines of path claim, and at least
// the seq its name gives, for a new segment to follow.
func maxSeqIn(path string) uint64 {
	var seq uint64
	fmt.Sscanf(filepath.Base(path), "audit-%d.jsonl", &seq)
	f, err := os.Open(path)
	if err != nil {
		return seq
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), MaxLineLen)
	for sc.Scan() {
		seq = max(seq, lenientSeq(sc.Bytes()))
	}
	return seq
}

// lenientSeq returns the seq a line, even a damaged one, claims, or 0.
func lenientSeq(line []byte) uint64 {
	if e, err := ParseLine(line); err == nil {
		return e.Seq
	}
	_, rest, ok := bytes.Cut(line, []byte(`"seq":`))
	if !ok {
		return 0
	}
	p := parser{b: rest}
	return p.uint()
}

// RotateDue reports whether the current file has reached MaxSize.
func (s *FileSink) RotateDue() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.MaxSize > 0 && s.f != nil && s.size >= s.cfg.MaxSize
}

// errSync marks a failed fsync: after one, what the file holds is unknown,
// so the sink is broken rather than rolled back.
type errSync struct{ err error }

func (e errSync) Error() string { return "sync: " + e.err.Error() }
func (e errSync) Unwrap() error { return e.err }

// Write appends lines to the current file, beginning a new file at each
// line that begins one, and syncs as the policy says. On failure it
// truncates what it wrote and removes files it created; if it cannot, or
// a sync failed, it is broken (ErrSinkBroken).
func (s *FileSink) Write(_ context.Context, lines []Line) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.broken != nil:
		return s.broken
	case s.closed:
		return ErrClosed
	}
	origF, origName, origSize := s.f, s.name, s.size
	var created []string
	err := func() error {
		s.buf = s.buf[:0]
		for _, ln := range lines {
			if ln.NewFile || s.f == nil {
				if err := s.flush(); err != nil {
					return err
				}
				if err := s.next(ln.Seq); err != nil {
					return err
				}
				created = append(created, s.name)
			}
			s.buf = append(s.buf, ln.Bytes...)
		}
		if err := s.flush(); err != nil {
			return err
		}
		if s.cfg.Sync != SyncBatch {
			s.dirty = true
			return nil
		}
		if err := s.f.Sync(); err != nil {
			return errSync{err}
		}
		return nil
	}()
	if err == nil {
		n := 0
		for _, ln := range lines {
			n += len(ln.Bytes)
		}
		s.wrote(int64(n))
		return nil
	}
	if errors.As(err, new(errSync)) {
		s.broken = fmt.Errorf("%w: %s: %w", ErrSinkBroken, s.Name(), err)
		return s.broken
	}
	if rerr := s.rollback(origF, origName, origSize, created); rerr != nil {
		s.broken = fmt.Errorf("%w: %s: %v, and undoing it failed: %v", ErrSinkBroken, s.Name(), err, rerr)
		return s.broken
	}
	return fmt.Errorf("%s: %w", s.Name(), err)
}

// flush writes the buffered lines to the current file.
func (s *FileSink) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	n, err := s.f.Write(s.buf)
	s.size += int64(n)
	s.buf = s.buf[:0]
	return err
}

// next closes the current file, synced, and creates the file beginning
// with seq.
func (s *FileSink) next(seq uint64) error {
	if s.f != nil {
		if s.cfg.Sync != SyncNever {
			if err := s.f.Sync(); err != nil {
				return errSync{err}
			}
		}
		err := s.f.Close()
		s.f = nil
		if err != nil {
			return err
		}
	}
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return err
	}
	name := FileName(seq)
	f, err := s.open(filepath.Join(s.cfg.Dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	s.f, s.name, s.size = f, name, 0
	s.startSyncer()
	if s.cfg.Sync != SyncNever {
		if err := syncDir(s.cfg.Dir); err != nil {
			return errSync{err}
		}
	}
	return nil
}

// rollback undoes a failed Write: it removes the files it created and
// truncates the file it began with to its size before.
func (s *FileSink) rollback(origF file, origName string, origSize int64, created []string) error {
	var errs []error
	if s.f != nil && s.f != origF {
		errs = append(errs, s.f.Close())
		s.f = nil
	}
	for _, n := range created {
		errs = append(errs, os.Remove(filepath.Join(s.cfg.Dir, n)))
	}
	if s.f == nil && origName != "" {
		f, err := s.open(filepath.Join(s.cfg.Dir, origName), os.O_WRONLY|os.O_APPEND, 0o600)
		errs = append(errs, err)
		s.f = f
	}
	if s.f != nil {
		errs = append(errs, s.f.Truncate(origSize))
	}
	s.name, s.size = origName, origSize
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// startSyncer starts the SyncInterval goroutine, once.
func (s *FileSink) startSyncer() {
	if s.cfg.Sync != SyncInterval || s.stop != nil {
		return
	}
	s.stop, s.stopped = make(chan struct{}), make(chan struct{})
	t := s.cfg.Clock.NewTicker(s.cfg.SyncInterval)
	go func() {
		defer close(s.stopped)
		defer t.Stop()
		for {
			select {
			case <-t.C():
				s.syncDirty()
			case <-s.stop:
				return
			}
		}
	}()
}

// syncDirty syncs the current file if it was written since the last sync.
// It does not hold the sink's lock while the disk works: a sync of a
// second's records takes milliseconds, which would stall every Write (and
// so every audited request) behind it. A rotation meanwhile syncs and
// closes the file itself; os.File keeps the descriptor open until this
// sync returns.
func (s *FileSink) syncDirty() {
	s.mu.Lock()
	f := s.f
	if !s.dirty || f == nil || s.broken != nil {
		s.mu.Unlock()
		return
	}
	s.dirty = false
	s.mu.Unlock()
	err := f.Sync()
	if err == nil || errors.Is(err, os.ErrClosed) {
		return // closed: next or Close synced it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken == nil {
		s.broken = fmt.Errorf("%w: %s: %w", ErrSinkBroken, s.Name(), errSync{err})
	}
}

// Close syncs and closes the current file.
func (s *FileSink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	stop, stopped := s.stop, s.stopped
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-stopped
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Sync()
	if s.broken != nil {
		err = nil // the failure was reported already
	}
	err = errors.Join(err, s.f.Close())
	s.f = nil
	return err
}
