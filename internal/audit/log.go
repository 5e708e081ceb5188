package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for Config.
const (
	DefaultCheckpointEvery    = 1000
	DefaultCheckpointInterval = time.Second
	DefaultQueueSize          = 8192
	DefaultMaxBatch           = 4096
	DefaultMaxBacklog         = 1 << 16
)

// Config configures a Log. Node, Sinks and a Signer (or Sealed) are
// required; zero values elsewhere take the defaults above.
type Config struct {
	// Node names this node's chain; it is in every line (an identifier,
	// as Record.RequestID).
	Node string
	// Signer signs checkpoints.
	Signer *SigningKey
	// Sealed starts the Log without a Signer, for a sealed node, which
	// holds no key to derive one from: records are written and chained,
	// but no checkpoint is until Log.SetKeys gives a signer, whose first
	// checkpoint signs every line since the last one. A Log needs one of
	// Signer and Sealed, so that a missing key is never a silent default.
	Sealed bool
	// HMAC is the key Log.Sum makes digests with; without one, Sum makes
	// none until Log.SetKeys gives one.
	HMAC *HMACKey
	// PreviousKeys are the public keys of earlier signing keys, trusted
	// when a sink's tail is read back at Start (besides the Signer's). A
	// Sealed Log checks the tail's checkpoints against these alone; a
	// tail with a checkpoint none of them verifies does not verify
	// (ErrBadTail).
	PreviousKeys []ed25519.PublicKey
	// Sinks receive every line. A batch succeeds when at least one takes
	// it.
	Sinks []Sink
	// A checkpoint is written after every CheckpointEvery records and
	// every CheckpointInterval in which anything was written, and always
	// before a rotation and at Close.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// SignAfter lists operations whose records of success (ResultOK) are
	// followed at once by a checkpoint, in the same batch (while there is
	// a signer): a request that reads the audit log's state leaves the
	// files signed up to its own record by the time it is answered. A
	// refused one read nothing, and gets no checkpoint: whoever can send
	// one does not get a line and a signature each.
	SignAfter []Operation
	// QueueSize bounds the records waiting for the writer; a Write to a
	// full queue waits until its context is done.
	QueueSize int
	// MaxBatch bounds the records in one batch.
	MaxBatch int
	// MaxBacklog bounds the lines kept for a failing sink; past it the
	// sink is disabled until restart (its copy of the chain has a gap).
	MaxBacklog int
	// NewSegment lets Start begin a new segment (a new chain, in a new
	// file) when a sink's tail does not verify or sinks disagree, instead
	// of refusing to start.
	NewSegment bool
	// After continues the chain from a line kept elsewhere (the store's
	// last line for this node), for a Log whose sinks cannot say where
	// the chain ends; sinks that can must agree with it.
	After *Anchor
	// Clock is SystemClock when nil.
	Clock Clock
	// Logger gets sink failures; nothing is logged when nil.
	Logger *slog.Logger
	// OnBatch, if set, is called after every batch, from the writer
	// goroutine: it must return quickly.
	OnBatch func(BatchStats)
	// OnSinkFailure, if set, is called for every failed write to a sink,
	// from the writer goroutine: it must return quickly.
	OnSinkFailure func(sink string, err error)
}

// BatchStats describes one batch, for metrics.
type BatchStats struct {
	Records  int           // records written (callers woken)
	Lines    int           // lines, with checkpoints and open lines
	Accepted int           // sinks that took it
	Failed   int           // sinks that did not
	Elapsed  time.Duration // building and writing it
}

// Errors of a Log.
var (
	ErrClosed        = errors.New("audit log is closed")
	ErrNotStarted    = errors.New("audit log is not started")
	ErrNoSink        = errors.New("no audit sink accepted the record")
	ErrChainMismatch = errors.New("audit sinks disagree on where the chain ends")
	ErrNoSigner      = errors.New("no audit signing key (sealed): no checkpoint can be written")
)

// A WriteError is a batch no sink accepted: every record in it failed. It
// matches ErrNoSink, and through Unwrap each sink's error.
type WriteError struct {
	Sinks []string
	Errs  []error
}

func (e *WriteError) Error() string {
	var b strings.Builder
	b.WriteString("no audit sink accepted the record")
	for i, n := range e.Sinks {
		fmt.Fprintf(&b, "; %s: %v", n, e.Errs[i])
	}
	return b.String()
}

// Is makes a WriteError match ErrNoSink.
func (e *WriteError) Is(target error) bool { return target == ErrNoSink }

// Unwrap returns the sinks' errors.
func (e *WriteError) Unwrap() []error { return e.Errs }

// Health is a Log's state for /readyz.
type Health struct {
	Running bool
	// Ready is set while the Log runs and at least one sink took the
	// last batch. While none did, a Log with a signer tries again with a
	// checkpoint every CheckpointInterval, so that Ready comes back
	// without waiting for a Write.
	Ready bool
	Sinks []SinkHealth
}

// SinkHealth is one sink's state.
type SinkHealth struct {
	Name     string
	OK       bool   // took the last batch
	Disabled bool   // broken, or too far behind: no longer written to
	Failures uint64 // failed writes since Start
	Backlog  int    // lines it missed and will get with the next batch
	Err      error  // the last failure
}

// A Log writes records to its sinks as a hash chain with signed
// checkpoints. Write may be called from many goroutines; one writer
// goroutine takes every record waiting, writes them to the sinks as one
// batch (one write and one sync per sink) and wakes their callers. Create
// it with New, then Start; Close it even when Start fails.
type Log struct {
	cfg   Config
	clock Clock
	log   *slog.Logger

	queue     chan *request
	stopping  chan struct{} // closed by Close
	stopped   chan struct{} // closed when the writer goroutine ends
	startOnce sync.Once
	stopOnce  sync.Once
	running   atomic.Bool
	closing   atomic.Bool     // set by Close before stopping is closed
	senders   atomic.Int64    // Writes between their closing check and their send
	ctx       context.Context // the writer's; cancelled when Close gives up waiting
	cancel    context.CancelFunc
	signer    atomic.Pointer[SigningKey] // nil: no checkpoints (sealed)
	mac       atomic.Pointer[HMACKey]    // nil: Sum makes no digest

	// Owned by the writer goroutine (by Start before it runs).
	failing bool // no sink took the last batch
	st      chainState
	sinks   []*sinkState
	batch   []*request
	buf     []byte
	scratch []byte
	lines   []Line
	offs    []int
	wg      sync.WaitGroup // the sinks written in parallel
	prevHex hashHex        // the last line's hash member, the next one's prev

	mu       sync.Mutex // guards what follows
	health   Health
	lastCP   Anchor
	hasCP    bool
	closeErr error
}

// chainState is where the chain stands; a batch no sink takes is undone by
// restoring it.
type chainState struct {
	seq            uint64 // the last line's
	prev           Hash   // the last line's hash
	fileSeq        uint64 // the first seq of the current file
	sinceCP        int    // lines since the last checkpoint
	recordsSinceCP int
	lastCP         Anchor
	hasCP          bool
}

type sinkState struct {
	sink     Sink
	backlog  []Line // lines it missed, with their own bytes
	ok       bool
	disabled bool
	failures uint64
	lastErr  error
	err      error // this batch's
}

// request is a record to write, or, with no content, a checkpoint asked
// for (Log.Checkpoint).
type request struct {
	content []byte
	sign    bool // a checkpoint follows it in its batch
	done    chan error
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan error, 1)} }}

// New checks cfg and returns a Log that is not yet started.
func New(cfg Config) (*Log, error) {
	if err := checkID(cfg.Node, true); err != nil {
		return nil, fmt.Errorf("audit.Config.Node: %v", err)
	}
	if (cfg.Signer == nil) != cfg.Sealed {
		return nil, errors.New("give exactly one of audit.Config.Signer and Config.Sealed")
	}
	if len(cfg.Sinks) == 0 {
		return nil, errors.New("audit.Config.Sinks: at least one sink is required")
	}
	setDefault(&cfg.CheckpointEvery, DefaultCheckpointEvery)
	setDefault(&cfg.CheckpointInterval, DefaultCheckpointInterval)
	setDefault(&cfg.QueueSize, DefaultQueueSize)
	setDefault(&cfg.MaxBatch, DefaultMaxBatch)
	setDefault(&cfg.MaxBacklog, DefaultMaxBacklog)
	if cfg.Clock == nil {
		cfg.Clock = SystemClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	l := &Log{
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		queue:    make(chan *request, cfg.QueueSize),
		stopping: make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	for _, s := range cfg.Sinks {
		l.sinks = append(l.sinks, &sinkState{sink: s})
	}
	l.SetKeys(cfg.Signer, cfg.HMAC)
	return l, nil
}

// SetKeys replaces the key that signs checkpoints and the key Sum makes
// digests with; nil forgets either. A sealed node forgets both when it
// seals and gives them back when it is unsealed. While there is no signer
// the Log writes no checkpoint (not even before a rotation or at Close);
// the first checkpoint after a signer is given signs every line since the
// last one, which were chained but not authenticated until then. A
// checkpoint names its signer's key, so a verifier needs the public key
// of every signer the Log had.
func (l *Log) SetKeys(signer *SigningKey, mac *HMACKey) {
	l.signer.Store(signer)
	l.mac.Store(mac)
}

// Sum returns the HMAC-SHA256 of value under the Log's HMAC key, for a
// Record's Hashed; ok is false, and the value must then be left out of the
// record, while the Log has no HMAC key (see SetKeys).
func (l *Log) Sum(value string) (d Digest, ok bool) {
	k := l.mac.Load()
	if k == nil {
		return Digest{}, false
	}
	return k.Sum(value), true
}

// Signing returns the public key that signs the Log's checkpoints, or nil
// while it has no signer.
func (l *Log) Signing() ed25519.PublicKey {
	if k := l.signer.Load(); k != nil {
		return k.Public()
	}
	return nil
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Start reads back where the chain ends (from the sinks that can say, and
// Config.After), writes an open line continuing it, or beginning a new
// chain or segment, and starts the writer goroutine. It fails when no sink
// takes the open line, and when a sink's tail does not verify or sinks
// disagree (ErrBadTail, ErrChainMismatch) unless Config.NewSegment is set.
func (l *Log) Start(ctx context.Context) error {
	first := false
	l.startOnce.Do(func() { first = true })
	select {
	case <-l.stopping:
		return ErrClosed
	default:
	}
	if !first {
		return errors.New("audit log: Start called twice")
	}
	plan, err := l.resume()
	if err != nil {
		return err
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	if err := l.commit(ctx, nil, &plan, false); err != nil {
		l.cancel()
		return fmt.Errorf("start: %w", err)
	}
	ticker := l.clock.NewTicker(l.cfg.CheckpointInterval)
	l.running.Store(true)
	go l.run(ticker)
	return nil
}

// openPlan is the open line Start writes.
type openPlan struct {
	start    Start
	prevFile string
	unsigned uint64
}

// resume decides how the chain goes on, and sets l.st.
func (l *Log) resume() (openPlan, error) {
	keys := l.cfg.PreviousKeys
	if sg := l.signer.Load(); sg != nil {
		keys = append([]ed25519.PublicKey{sg.Public()}, keys...)
	}
	var tails []Tail
	var bad []*TailError
	var maxSeq uint64
	for _, s := range l.cfg.Sinks {
		r, ok := s.(Resumer)
		if !ok {
			continue
		}
		t, err := r.Resume(l.cfg.Node, keys)
		var te *TailError
		switch {
		case errors.As(err, &te):
			bad = append(bad, te)
			maxSeq = max(maxSeq, te.MaxSeq)
		case err != nil:
			return openPlan{}, fmt.Errorf("read back %s: %w", s.Name(), err)
		case !t.Empty:
			tails = append(tails, t)
			maxSeq = max(maxSeq, t.Seq)
		}
	}
	if a := l.cfg.After; a != nil {
		tails = append(tails, Tail{Seq: a.Seq, Hash: a.Hash})
		maxSeq = max(maxSeq, a.Seq)
	}
	agree := true
	for _, t := range tails {
		agree = agree && t.Seq == tails[0].Seq && t.Hash == tails[0].Hash
	}
	switch {
	case len(bad) == 0 && len(tails) == 0:
		l.st = chainState{}
		return openPlan{start: StartNew}, nil
	case len(bad) == 0 && agree:
		l.st = chainState{seq: tails[0].Seq, prev: tails[0].Hash}
		var unsigned int
		for _, t := range tails {
			unsigned = max(unsigned, t.Unsigned)
			if l.st.fileSeq == 0 {
				l.st.fileSeq = t.FileSeq
			}
		}
		l.st.sinceCP, l.st.recordsSinceCP = unsigned, unsigned
		return openPlan{start: StartRestart, unsigned: uint64(unsigned)}, nil
	case !l.cfg.NewSegment && len(bad) > 0:
		return openPlan{}, fmt.Errorf("%w (Config.NewSegment would begin a new segment in a new file)", bad[0])
	case !l.cfg.NewSegment:
		var where []string
		for _, t := range tails {
			where = append(where, fmt.Sprintf("seq %d hash %s in %q", t.Seq, t.Hash, t.File))
		}
		return openPlan{}, fmt.Errorf("%w: %s", ErrChainMismatch, strings.Join(where, ", "))
	}
	var prevFile string
	if len(bad) > 0 {
		prevFile = filepath.Base(bad[0].File)
		l.log.Warn("audit log: beginning a new segment after a tail that does not verify", "file", bad[0].File, "problem", bad[0].Problem)
	} else {
		for _, t := range tails {
			if prevFile == "" && t.File != "" {
				prevFile = filepath.Base(t.File)
			}
		}
		l.log.Warn("audit log: beginning a new segment: sinks disagree on where the chain ends")
	}
	l.st = chainState{seq: maxSeq}
	return openPlan{start: StartSegment, prevFile: prevFile}, nil
}

// Write records r, and returns once the batch holding it is written (and
// synced, as far as the sinks' policies go) to at least one sink. It fails
// when no sink took it (ErrNoSink), when r is invalid (ErrInvalidRecord),
// when the Log is closed (ErrClosed), and when ctx is done: while waiting
// for room in the queue (the record is not written) or for the writer (it
// may yet be written). A record whose Write failed must be treated as not
// written: the operation it describes must fail. A ctx that cannot be
// cancelled (context.WithoutCancel) is the cheapest to wait with.
func (l *Log) Write(ctx context.Context, r Record) error {
	if !l.running.Load() {
		if l.closing.Load() {
			return ErrClosed
		}
		return ErrNotStarted
	}
	if r.Time.IsZero() {
		r.Time = l.clock.Now()
	}
	r.Remote = r.Remote.Unmap()
	if err := r.Validate(); err != nil {
		return err
	}
	req := requestPool.Get().(*request)
	req.content = appendRecord(req.content[:0], &r)
	req.sign = r.Result == ResultOK && l.signsAfter(r.Operation)
	return l.submit(ctx, req)
}

func (l *Log) signsAfter(op Operation) bool {
	for _, o := range l.cfg.SignAfter {
		if o == op {
			return true
		}
	}
	return false
}

// Checkpoint writes a checkpoint now, unless every line is signed already,
// and returns the last checkpoint: every line up to it is signed. It fails
// with ErrNoSigner while the Log has no signer, and as Write does when no
// sink takes the checkpoint or ctx is done first.
func (l *Log) Checkpoint(ctx context.Context) (Anchor, error) {
	switch {
	case l.closing.Load():
		return Anchor{}, ErrClosed
	case !l.running.Load():
		return Anchor{}, ErrNotStarted
	case l.signer.Load() == nil:
		return Anchor{}, ErrNoSigner
	}
	req := requestPool.Get().(*request)
	req.content, req.sign = req.content[:0], true
	if err := l.submit(ctx, req); err != nil {
		return Anchor{}, err
	}
	cp, _ := l.LastCheckpoint()
	return cp, nil
}

// submit hands req to the writer and waits for its answer.
func (l *Log) submit(ctx context.Context, req *request) error {
	if err := l.enqueue(ctx, req); err != nil {
		requestPool.Put(req)
		return err
	}
	// The writer answers every request it was given, even when closing
	// (enqueue and finish see to it), so done is the only thing to wait on.
	done := ctx.Done()
	if done == nil {
		err := <-req.done
		requestPool.Put(req)
		return err
	}
	select {
	case err := <-req.done:
		requestPool.Put(req)
		return err
	case <-done:
		select {
		case err := <-req.done:
			requestPool.Put(req)
			return err
		default:
			// The writer still holds req: it is not returned to the pool.
			return fmt.Errorf("waiting for the write (the record may yet be written): %w", context.Cause(ctx))
		}
	}
}

// enqueue hands req to the writer, or fails without having done so. The
// senders count lets the writer's finish know that no request can still
// arrive: a Write counted before Close set closing is waited for, and one
// counted after sees closing (both are sequentially consistent atomics).
func (l *Log) enqueue(ctx context.Context, req *request) error {
	l.senders.Add(1)
	defer l.senders.Add(-1)
	if l.closing.Load() {
		return ErrClosed
	}
	select {
	case l.queue <- req:
		return nil
	default: // the queue is full: wait for room
	}
	select {
	case l.queue <- req:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for room in the queue: %w", context.Cause(ctx))
	}
}

// Close stops accepting records, writes those waiting, writes a final
// checkpoint, closes the sinks and stops the writer goroutine. If ctx is
// done first, the context the sinks write under is cancelled, so a sink
// that honours it (the store) gives up, and what is still waiting fails;
// Close still waits for the writer goroutine to end (a file write cannot
// be interrupted). It returns the final checkpoint's and the sinks' errors.
func (l *Log) Close(ctx context.Context) error {
	first := false
	l.stopOnce.Do(func() {
		first = true
		l.closing.Store(true)
		close(l.stopping)
	})
	if !l.running.Load() {
		if first {
			return l.closeSinks()
		}
		return nil
	}
	select {
	case <-l.stopped:
	case <-ctx.Done():
		l.cancel()
		<-l.stopped
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeErr
}

func (l *Log) closeSinks() error {
	var errs []error
	for _, s := range l.sinks {
		if err := s.sink.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.sink.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// Health reports whether the Log runs and which sinks took the last batch.
func (l *Log) Health() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.health
	h.Running = l.running.Load()
	select {
	case <-l.stopped:
		h.Running = false
	default:
	}
	h.Ready = h.Ready && h.Running
	h.Sinks = append([]SinkHealth(nil), h.Sinks...)
	return h
}

// LastCheckpoint returns the last checkpoint a sink took; keep it apart
// from the files (the store sink keeps every line) and give it to Verify
// as Anchor to detect a truncation right after a checkpoint.
func (l *Log) LastCheckpoint() (Anchor, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastCP, l.hasCP
}

// run is the writer goroutine.
func (l *Log) run(t Ticker) {
	defer close(l.stopped)
	defer t.Stop()
	for {
		select {
		case r := <-l.queue:
			l.batch = append(l.batch[:0], r)
			// The Write that woke the writer made it the next goroutine to
			// run: let the others ready to run (requests on other
			// connections) reach their Write first, so that they share this
			// batch's write and sync instead of each paying for one.
			runtime.Gosched()
			l.fill()
			l.commit(l.ctx, l.batch, nil, false)
		case <-t.C():
			// A checkpoint when lines are unsigned; and while no sink
			// took the last batch, one to find out whether a sink works
			// again, so that Health recovers without a Write.
			if (l.st.sinceCP > 0 || l.failing) && l.signer.Load() != nil {
				l.commit(l.ctx, nil, nil, true)
			}
		case <-l.stopping:
			l.finish()
			return
		}
	}
}

// fill adds the records waiting, up to MaxBatch, to the batch.
func (l *Log) fill() {
	for len(l.batch) < l.cfg.MaxBatch {
		select {
		case r := <-l.queue:
			l.batch = append(l.batch, r)
		default:
			return
		}
	}
}

// finish writes what is waiting, including what Writes still sending
// bring, then the final checkpoint, and closes the sinks.
func (l *Log) finish() {
	for {
		l.drain()
		if l.senders.Load() == 0 {
			// A Write counted after this saw closing and sends nothing; one
			// that sent and left before it is in the queue now.
			l.drain()
			break
		}
		runtime.Gosched() // a Write between its closing check and its send
	}
	var err error
	if l.st.sinceCP > 0 && l.signer.Load() != nil {
		if err = l.commit(l.ctx, nil, nil, true); err != nil {
			err = fmt.Errorf("final checkpoint: %w", err)
		}
	}
	err = errors.Join(err, l.closeSinks())
	l.mu.Lock()
	l.closeErr = err
	l.mu.Unlock()
}

// drain commits what the queue holds.
func (l *Log) drain() {
	for {
		l.batch = l.batch[:0]
		l.fill()
		if len(l.batch) == 0 {
			return
		}
		l.commit(l.ctx, l.batch, nil, false)
	}
}

// commit builds one batch (an open line or a rotation, the records, a
// checkpoint when due and a signer is set), writes it to the sinks and
// wakes the callers.
func (l *Log) commit(ctx context.Context, reqs []*request, open *openPlan, checkpoint bool) error {
	began := l.clock.Now()
	saved := l.st
	sg := l.signer.Load()
	l.buf, l.lines, l.offs = l.buf[:0], l.lines[:0], l.offs[:0]
	switch {
	case open != nil:
		l.addOpen(began, *open)
	case l.rotateDue():
		// Without a signer the old file ends unsigned: the next
		// checkpoint, in a later file, signs its last lines.
		if l.st.sinceCP > 0 && sg != nil {
			l.addCheckpoint(began, sg)
		}
		l.addOpen(began, openPlan{start: StartRotate, prevFile: FileName(l.st.fileSeq)})
	}
	for _, r := range reqs {
		checkpoint = checkpoint || r.sign
		if len(r.content) == 0 {
			continue // a checkpoint asked for
		}
		start := l.begin()
		l.buf = append(l.buf, r.content...)
		l.end(start, TypeRecord, false)
	}
	if sg != nil && (checkpoint && (l.st.sinceCP > 0 || l.failing) || l.st.recordsSinceCP >= l.cfg.CheckpointEvery) {
		l.addCheckpoint(began, sg)
	}
	if len(l.lines) == 0 {
		// Nothing to write: every line is signed, or a checkpoint was due
		// but the signer has just been forgotten.
		answer(reqs, nil, sg)
		return nil
	}
	l.offs = append(l.offs, len(l.buf))
	for i := range l.lines {
		l.lines[i].Bytes = l.buf[l.offs[i]:l.offs[i+1]:l.offs[i+1]]
	}
	accepted, err := l.fanOut(ctx, l.lines)
	if err != nil {
		l.st = saved
	}
	l.failing = err != nil
	l.mu.Lock()
	l.lastCP, l.hasCP = l.st.lastCP, l.st.hasCP
	l.mu.Unlock()
	if l.cfg.OnBatch != nil {
		l.cfg.OnBatch(BatchStats{
			Records: len(reqs), Lines: len(l.lines), Accepted: accepted,
			Failed: len(l.sinks) - accepted, Elapsed: l.clock.Now().Sub(began),
		})
	}
	answer(reqs, err, sg)
	return err
}

// answer wakes the callers of a batch: a checkpoint asked for without a
// signer to write it fails.
func answer(reqs []*request, err error, sg *SigningKey) {
	for _, r := range reqs {
		if err == nil && sg == nil && len(r.content) == 0 {
			r.done <- ErrNoSigner
			continue
		}
		r.done <- err
	}
}

func (l *Log) rotateDue() bool {
	for _, s := range l.sinks {
		if r, ok := s.sink.(Rotator); ok && !s.disabled && r.RotateDue() {
			return true
		}
	}
	return false
}

// begin starts the next line in l.buf and returns where.
func (l *Log) begin() int {
	start := len(l.buf)
	l.offs = append(l.offs, start)
	l.buf = appendHeaderHex(l.buf, l.cfg.Node, l.st.seq+1, l.prevHex.of(&l.st.prev))
	return start
}

// hashHex is a hash and its hex. A line's prev is the hash the line
// before it ends with, so the writer copies that hex rather than encode
// the hash again; it encodes only after Start or a batch that failed (a
// chain restored).
type hashHex struct {
	h   Hash
	x   [2 * sha256.Size]byte
	set bool
}

// of returns h in hex.
func (c *hashHex) of(h *Hash) []byte {
	if !c.set || c.h != *h {
		c.h, c.set = *h, true
		h.appendHex(c.x[:0])
	}
	return c.x[:]
}

// keep remembers line's hash member, the hex of h.
func (c *hashHex) keep(h Hash, line []byte) {
	const tail = len("\"}\n")
	c.h, c.set = h, true
	copy(c.x[:], line[len(line)-tail-len(c.x):len(line)-tail])
}

// end finishes the line begun at start and advances the chain.
func (l *Log) end(start int, typ LineType, newFile bool) {
	var h Hash
	l.buf, h = finishLine(l.buf, start)
	l.prevHex.keep(h, l.buf)
	l.st.seq++
	l.st.prev = h
	l.lines = append(l.lines, Line{Seq: l.st.seq, Type: typ, NewFile: newFile})
	switch typ {
	case TypeCheckpoint:
		l.st.sinceCP, l.st.recordsSinceCP = 0, 0
		l.st.lastCP, l.st.hasCP = Anchor{Seq: l.st.seq, Hash: h}, true
	case TypeRecord:
		l.st.recordsSinceCP++
		l.st.sinceCP++
	default:
		l.st.sinceCP++
	}
	if newFile || l.st.fileSeq == 0 {
		l.st.fileSeq = l.st.seq // a file sink without a file begins one here too
	}
}

func (l *Log) addOpen(now time.Time, p openPlan) {
	start := l.begin()
	l.buf = appendOpen(l.buf, now, p.start, p.prevFile, p.unsigned)
	l.end(start, TypeOpen, p.start.newFile())
}

func (l *Log) addCheckpoint(now time.Time, sg *SigningKey) {
	start := l.begin()
	l.buf = appendCheckpoint(l.buf, now, sg.KeyID())
	l.buf, l.scratch = signCheckpoint(l.buf, start, sg, l.scratch)
	l.end(start, TypeCheckpoint, false)
}

// fanOut writes lines to every sink still in use, in parallel, each with
// the lines it missed first. It returns how many took them, and a
// *WriteError when none did. ctx is cancelled only when Close gives up
// waiting; a sink that talks to a server bounds its own calls (StoreSink).
func (l *Log) fanOut(ctx context.Context, lines []Line) (int, error) {
	var inline *sinkState
	for _, s := range l.sinks {
		switch {
		case s.disabled:
		case inline == nil:
			inline = s
		default:
			l.wg.Go(func() { s.err = s.write(ctx, lines) })
		}
	}
	if inline != nil {
		inline.err = inline.write(ctx, lines)
	}
	l.wg.Wait()

	accepted := 0
	for _, s := range l.sinks {
		if !s.disabled && s.err == nil {
			accepted++
		}
	}
	var werr *WriteError
	if accepted == 0 {
		werr = &WriteError{}
	}
	for _, s := range l.sinks {
		switch {
		case s.disabled:
			if werr != nil {
				werr.Sinks, werr.Errs = append(werr.Sinks, s.sink.Name()), append(werr.Errs, s.lastErr)
			}
		case s.err == nil:
			s.ok, s.backlog = true, nil
		default:
			s.ok, s.lastErr = false, s.err
			s.failures++
			l.log.Warn("audit sink failed", "sink", s.sink.Name(), "err", s.err, "lines", len(lines))
			if l.cfg.OnSinkFailure != nil {
				l.cfg.OnSinkFailure(s.sink.Name(), s.err)
			}
			if werr != nil {
				werr.Sinks, werr.Errs = append(werr.Sinks, s.sink.Name()), append(werr.Errs, s.err)
			} else {
				l.keepBacklog(s, lines)
			}
		}
	}
	l.mu.Lock()
	l.health.Ready = accepted > 0
	l.health.Sinks = l.health.Sinks[:0] // Health hands out copies
	for _, s := range l.sinks {
		l.health.Sinks = append(l.health.Sinks, SinkHealth{
			Name: s.sink.Name(), OK: s.ok, Disabled: s.disabled,
			Failures: s.failures, Backlog: len(s.backlog), Err: s.lastErr,
		})
	}
	l.mu.Unlock()
	if werr != nil {
		return 0, werr
	}
	return accepted, nil
}

// write writes the sink's backlog and lines.
func (s *sinkState) write(ctx context.Context, lines []Line) error {
	if len(s.backlog) > 0 {
		lines = append(s.backlog[:len(s.backlog):len(s.backlog)], lines...)
	}
	return s.sink.Write(ctx, lines)
}

// keepBacklog keeps copies of lines another sink took for s, which missed
// them, or disables s when it is broken or too far behind.
func (l *Log) keepBacklog(s *sinkState, lines []Line) {
	if errors.Is(s.err, ErrSinkBroken) || len(s.backlog)+len(lines) > l.cfg.MaxBacklog {
		s.disabled, s.backlog = true, nil
		l.log.Error("audit sink disabled until restart: its copy of the chain has a gap", "sink", s.sink.Name(), "err", s.err)
		return
	}
	for _, ln := range lines {
		ln.Bytes = append([]byte(nil), ln.Bytes...)
		s.backlog = append(s.backlog, ln)
	}
}
