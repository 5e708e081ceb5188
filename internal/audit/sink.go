package audit

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"sync"
	"time"
)

// A Sink keeps the lines of the chain. The Log calls Write from one
// goroutine, with every line in order: a sink that failed gets the lines it
// missed again, before the next ones.
type Sink interface {
	// Name identifies the sink in logs, metrics and Health.
	Name() string
	// Write keeps lines, durably as far as the sink promises, before it
	// returns nil. It is all or nothing: after an error the sink must
	// hold none of lines (the file sink truncates what it wrote), or
	// return an error matching ErrSinkBroken, after which the Log stops
	// using it. It must not keep or modify the lines' bytes after it
	// returns.
	Write(ctx context.Context, lines []Line) error
	// Close releases the sink; the Log calls it once, from Close.
	Close() error
}

// A Line is one encoded line as a Sink gets it.
type Line struct {
	Seq  uint64
	Type LineType
	// NewFile is set on an open line that begins a file: a new chain, a
	// rotation or a new segment.
	NewFile bool
	// Bytes is the canonical line with its trailing newline.
	Bytes []byte
}

// ErrSinkBroken is returned by a sink that can no longer keep the chain
// whole (it failed and could not undo a partial write); the Log stops
// writing to it until restarted.
var ErrSinkBroken = errors.New("audit sink is broken")

// A Resumer is a sink that keeps the chain where it can read it back (the
// file sink): at Start the Log continues the chain from where it ends.
type Resumer interface {
	Sink
	// Resume reads where the sink's copy of node's chain ends, checking
	// its checkpoints against keys. A tail that does not verify is a
	// *TailError.
	Resume(node string, keys []ed25519.PublicKey) (Tail, error)
}

// A Tail is where a Resumer's copy of the chain ends.
type Tail struct {
	Empty    bool   // nothing written yet
	Seq      uint64 // the last line
	Hash     Hash
	File     string // the current file
	FileSeq  uint64 // the first seq of the current file
	Unsigned int    // lines after the last checkpoint
}

// ErrBadTail matches a *TailError.
var ErrBadTail = errors.New("the audit log's tail does not verify")

// A TailError is a sink's chain whose end does not verify; the Log will
// not continue it (Config.NewSegment starts a new segment instead).
type TailError struct {
	File    string
	MaxSeq  uint64 // the highest seq found in it, for the new segment to follow
	Problem error  // the *Problem, usually
}

func (e *TailError) Error() string {
	return "the tail of audit file " + e.File + " does not verify: " + e.Problem.Error()
}

// Unwrap returns the Problem.
func (e *TailError) Unwrap() error { return e.Problem }

// Is makes a TailError match ErrBadTail.
func (e *TailError) Is(target error) bool { return target == ErrBadTail }

// A Rotator is a sink that wants the chain to move to a new file; the Log
// asks before each batch and, when one does, writes a checkpoint and a
// rotate line, which begins the next file.
type Rotator interface {
	RotateDue() bool
}

// WriterSink writes lines to an io.Writer such as os.Stdout, one Write
// call per batch. It cannot take back a partial write, and it never syncs:
// it is for shipping the log elsewhere, not for keeping it.
type WriterSink struct {
	name string
	mu   sync.Mutex
	w    io.Writer
	buf  []byte
}

// NewWriterSink returns a sink writing to w under name (e.g. "stdout").
func NewWriterSink(name string, w io.Writer) *WriterSink {
	return &WriterSink{name: name, w: w}
}

// Name returns the sink's name.
func (s *WriterSink) Name() string { return s.name }

// Write writes lines in one call to the writer.
func (s *WriterSink) Write(_ context.Context, lines []Line) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = joinLines(s.buf[:0], lines)
	_, err := s.w.Write(s.buf)
	return err
}

// Close does nothing: the writer is the caller's.
func (s *WriterSink) Close() error { return nil }

func joinLines(dst []byte, lines []Line) []byte {
	for _, l := range lines {
		dst = append(dst, l.Bytes...)
	}
	return dst
}

// An Appender is a store that keeps audit lines in its own entry type E,
// such as a store with AppendAudit(ctx, []store.AuditEntry) error. It must
// write all the entries or none (one transaction), and should refuse an
// entry whose (node, seq) it holds already.
type Appender[E any] interface {
	AppendAudit(ctx context.Context, entries []E) error
}

// StoreSink appends lines to a store; each line becomes one entry made by
// the entry function (node, seq and the line without its newline). A store
// keeps its lines away from the node's files, so it is also a place the
// chain's checkpoints are anchored (see Verify's MinSeq and Anchor).
type StoreSink[E any] struct {
	// Timeout bounds one AppendAudit call; DefaultStoreTimeout when 0.
	Timeout time.Duration

	name    string
	node    string
	store   Appender[E]
	entry   func(node string, seq uint64, line []byte) E
	entries []E
}

// NewStoreSink returns a sink appending node's lines to store. entry makes
// the store's entry; line is valid only during the call, so it must be
// copied if the entry keeps it (a string conversion copies).
func NewStoreSink[E any](name, node string, store Appender[E], entry func(node string, seq uint64, line []byte) E) *StoreSink[E] {
	return &StoreSink[E]{name: name, node: node, store: store, entry: entry}
}

// Name returns the sink's name.
func (s *StoreSink[E]) Name() string { return s.name }

// DefaultStoreTimeout bounds a StoreSink's call to its store.
const DefaultStoreTimeout = 10 * time.Second

// Write appends the lines as one call to AppendAudit.
func (s *StoreSink[E]) Write(ctx context.Context, lines []Line) error {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultStoreTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s.entries = s.entries[:0]
	for _, l := range lines {
		s.entries = append(s.entries, s.entry(s.node, l.Seq, l.Bytes[:len(l.Bytes)-1]))
	}
	err := s.store.AppendAudit(ctx, s.entries)
	clear(s.entries)
	return err
}

// Close does nothing: the store is the caller's.
func (s *StoreSink[E]) Close() error { return nil }
