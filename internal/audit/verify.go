package audit

import (
	"bufio"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ErrTampered matches every *Problem: the files do not verify.
var ErrTampered = errors.New("the audit log does not verify")

// ProblemKind names what Verify found wrong, for machines.
type ProblemKind string

// The problems Verify reports. Each names the first line it applies to.
const (
	ProblemTorn         ProblemKind = "torn_line"       // the last line has no newline: truncated mid-line
	ProblemMalformed    ProblemKind = "malformed"       // not a line in canonical form
	ProblemBadHash      ProblemKind = "bad_hash"        // the hash member does not match the line: edited
	ProblemWrongNode    ProblemKind = "wrong_node"      // a line of another node's chain
	ProblemSeqGap       ProblemKind = "seq_gap"         // seq jumps forward: lines removed
	ProblemReordered    ProblemKind = "reordered"       // seq jumps and the next line holds the missing one
	ProblemSeqRepeat    ProblemKind = "seq_repeat"      // seq repeats or goes back: a line inserted or moved
	ProblemBrokenLink   ProblemKind = "broken_link"     // prev is not the hash of the line before
	ProblemFileStart    ProblemKind = "file_start"      // a file does not begin or continue the chain as written
	ProblemUnknownKey   ProblemKind = "unknown_key"     // a checkpoint names a key not given to Verify
	ProblemBadSignature ProblemKind = "bad_signature"   // a checkpoint's signature does not verify
	ProblemUnsignedTail ProblemKind = "unsigned_tail"   // lines after the last checkpoint: truncated, or not closed
	ProblemShort        ProblemKind = "short_of_anchor" // the chain ends before the expected seq: truncated
	ProblemAnchor       ProblemKind = "anchor_mismatch" // the line at the anchor's seq has another hash
	ProblemEmpty        ProblemKind = "empty"           // no lines at all

	// Lines that no checkpoint signed before their writer stopped (a
	// crash, a stop while sealed, or checkpoints removed), followed by a
	// restart, which signs them only as it reads them back, or by a new
	// segment, which never signs them: accepted only for a file named in
	// VerifyOptions.CrashTails.
	ProblemUnsignedRestart ProblemKind = "unsigned_before_restart"
	ProblemUnsignedSegment ProblemKind = "unsigned_before_segment"
)

// A Position is a line: its file, its 1-based number there, and its seq
// when it had one.
type Position struct {
	File string
	Line int
	Seq  uint64
}

func (p Position) String() string {
	s := fmt.Sprintf("%s:%d", p.File, p.Line)
	if p.Seq != 0 {
		s += fmt.Sprintf(" (seq %d)", p.Seq)
	}
	return s
}

// A Problem is the first thing Verify found wrong. It matches ErrTampered.
type Problem struct {
	Position             // the first line found bad
	Kind     ProblemKind // what is wrong, for machines
	Detail   string      // what is wrong, for people
	// Since, for a checkpoint that does not verify and for an unsigned
	// tail, is the first line that is no longer authenticated: everything
	// from Since to Position may have been forged.
	Since *Position
}

func (p *Problem) Error() string {
	return fmt.Sprintf("%s: %s: %s", p.Position, p.Kind, p.Detail)
}

// Is makes a Problem match ErrTampered.
func (p *Problem) Is(target error) bool { return target == ErrTampered }

// VerifyOptions says what Verify trusts and expects.
type VerifyOptions struct {
	// Keys are the checkpoint public keys to trust, got out of band. At
	// least one is required; a key named in a file is never trusted.
	Keys []ed25519.PublicKey
	// Node, if set, is the node whose chain this must be.
	Node string
	// MinSeq, if set, is a seq the chain must reach (an external anchor:
	// a seq known to have been written). Without it a truncation right
	// after a checkpoint cannot be detected.
	MinSeq uint64
	// Anchor, if set, is a line (such as Log.LastCheckpoint, kept
	// elsewhere) that must be in the files with that hash. It implies
	// MinSeq >= Anchor.Seq.
	Anchor *Anchor
	// AllowUnsignedTail accepts lines after the last checkpoint, and a
	// last line without its newline, for a file still being written;
	// Summary.Unsigned counts them and Summary.Runs lists them. They are
	// chained but not signed, so not authenticated.
	AllowUnsignedTail bool
	// CrashTails names files, by base name, in which a crash tail is
	// accepted: lines that no checkpoint signed before their writer
	// stopped, ending in that file (with a line a crash tore, when a new
	// segment follows), after which the writer restarted or began a new
	// segment. A restart's first checkpoint signs such lines, but only as
	// the writer read them back, so whoever could write the files while
	// it was down could have changed them; a segment's never signs them.
	// Without their file here they are a Problem (ProblemUnsignedRestart,
	// ProblemUnsignedSegment); accepted, Summary.Runs lists them and
	// their records are not counted as signed.
	CrashTails []string
}

// A Summary is what Verify read.
type Summary struct {
	Node                 string
	Files, Lines         int
	Records, Checkpoints int
	Restarts, Rotations  int
	Segments             int
	FirstSeq, LastSeq    uint64
	LastHash             Hash
	FirstTime, LastTime  time.Time // of the records
	LastCheckpoint       Anchor    // the last checkpoint that verified
	Unsigned             int       // lines after LastCheckpoint (with AllowUnsignedTail)
	Adopted              int       // lines unsigned when a writer restarted (accepted with CrashTails)
	StartsAfter          string    // what the first file continues, when that was not given
	// Signed counts the records that a checkpoint their writer wrote in
	// the same run signs, as written; the others (Records - Signed) are
	// in Runs.
	Signed   int
	ByFile   []FileSummary // each file's part, in the order given
	Runs     []UnsignedRun // the unsigned lines accepted, in order
	Warnings []string
}

// A FileSummary is what Verify read in one file.
type FileSummary struct {
	Name              string
	Lines, Records    int
	Signed            int // records signed as written (see Summary.Signed)
	FirstSeq, LastSeq uint64
}

// An UnsignedRun is lines that no checkpoint signed as they were written,
// which Verify accepted because VerifyOptions said so: they are chained
// but not authenticated, and their records are not counted as signed.
type UnsignedRun struct {
	// Kind is the Problem they would be, had they not been accepted:
	// ProblemUnsignedTail (AllowUnsignedTail), ProblemUnsignedRestart or
	// ProblemUnsignedSegment (CrashTails).
	Kind           ProblemKind
	From, To       Position
	Lines, Records int
	Torn           bool // it ends with a line torn by a crash
}

// A Verifier checks files of one chain, in order. Verify and Verify
// are the usual way in; a Verifier reads from any io.Reader.
type Verifier struct {
	opts     VerifyOptions
	keys     map[string]ed25519.PublicKey
	sum      Summary
	err      error
	started  bool
	next     uint64 // the seq the next line must have
	prev     Hash   // the hash it must link to
	last     Position
	lastPrev Hash // the last line's prev
	prevFile string
	unsigned int       // lines since the last good checkpoint
	since    *Position // the first of them
	anchored bool
	run      run       // the lines not yet signed, nor accepted unsigned
	torn     *tornLine // a torn last line, accepted if a new segment follows
	ownTail  bool      // a Log reading back its own tail: any crash tail, never a torn line
}

// NewVerifier returns a Verifier; it fails without keys.
func NewVerifier(opts VerifyOptions) (*Verifier, error) {
	if len(opts.Keys) == 0 {
		return nil, errors.New("verifying an audit log needs at least one public key")
	}
	return newVerifier(opts)
}

// newVerifier is NewVerifier without the demand for keys: a Log started
// without a signer reads its tail back with the keys it has, perhaps none,
// and then any checkpoint there is an unknown key.
func newVerifier(opts VerifyOptions) (*Verifier, error) {
	v := &Verifier{opts: opts, keys: make(map[string]ed25519.PublicKey)}
	for _, k := range opts.Keys {
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: public key is %d bytes", ErrKeySize, len(k))
		}
		v.keys[KeyID(k)] = k
	}
	if a := opts.Anchor; a != nil && v.opts.MinSeq < a.Seq {
		v.opts.MinSeq = a.Seq
	}
	return v, nil
}

// Verify verifies the named files, in order, as one chain. The error
// is a *Problem when they do not verify, or the error reading them; the
// Summary covers what was read either way.
func Verify(opts VerifyOptions, paths ...string) (*Summary, error) {
	v, err := NewVerifier(opts)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return v.Summary(), err
		}
		err = v.File(p, f)
		f.Close()
		if err != nil {
			return v.Summary(), err
		}
	}
	return v.Finish()
}

// Summary returns what has been read so far.
func (v *Verifier) Summary() *Summary {
	s := v.sum
	s.ByFile, s.Runs, s.Warnings = slices.Clone(s.ByFile), slices.Clone(s.Runs), slices.Clone(s.Warnings)
	return &s
}

// File reads the next file of the chain. It returns the first Problem (and
// returns it again on every later call), or an error reading r.
func (v *Verifier) File(name string, r io.Reader) error {
	if v.err != nil {
		return v.err
	}
	v.sum.Files++
	v.sum.ByFile = append(v.sum.ByFile, FileSummary{Name: name})
	br := bufio.NewReaderSize(r, MaxLineLen)
	n := 0
	for {
		raw, err := br.ReadSlice('\n')
		if len(raw) == 0 && err == io.EOF {
			break
		}
		n++
		pos := Position{File: name, Line: n}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return v.fail(ProblemMalformed, pos, fmt.Sprintf("longer than %d bytes", MaxLineLen))
		case err == io.EOF && v.mayDeferTorn(name):
			// Judged by what follows: the end, or a new segment.
			v.torn = &tornLine{pos: pos, seq: lenientSeq(raw)}
			v.prevFile = name
			return nil
		case err == io.EOF:
			return v.failTorn(pos)
		case err != nil:
			v.err = err
			return err
		}
		e, err := ParseLine(raw[:len(raw)-1])
		if err != nil {
			return v.fail(ProblemMalformed, pos, err.Error())
		}
		pos.Seq = e.Seq
		if err := v.line(e, pos, n == 1, br); err != nil {
			return err
		}
	}
	if n == 0 {
		return v.fail(ProblemFileStart, Position{File: name}, "the file is empty")
	}
	v.prevFile = name
	return nil
}

func (v *Verifier) fail(kind ProblemKind, pos Position, detail string) error {
	v.err = &Problem{Position: pos, Kind: kind, Detail: detail}
	return v.err
}

func (v *Verifier) failTorn(pos Position) error {
	return v.fail(ProblemTorn, pos, "the last line has no newline: the file was cut mid-line (truncated, or its writer stopped mid-write)")
}

func (v *Verifier) failSince(kind ProblemKind, pos Position, detail string) error {
	p := &Problem{Position: pos, Kind: kind, Detail: detail}
	if v.since != nil {
		s := *v.since
		p.Since = &s
		p.Detail += fmt.Sprintf("; nothing from %s on is authenticated", s)
	}
	v.err = p
	return p
}

func (v *Verifier) warn(format string, args ...any) {
	v.sum.Warnings = append(v.sum.Warnings, fmt.Sprintf(format, args...))
}

// line checks one parsed line at pos; first says it is the first of its
// file, and next lets a seq gap look at the line after.
func (v *Verifier) line(e *Entry, pos Position, first bool, next *bufio.Reader) error {
	switch {
	case v.torn != nil && !(first && e.Type == TypeOpen && e.Start == StartSegment):
		return v.failTorn(v.torn.pos) // only a new segment follows a torn line
	case v.sum.Node == "" && v.opts.Node != "" && e.Node != v.opts.Node,
		v.sum.Node != "" && e.Node != v.sum.Node:
		return v.fail(ProblemWrongNode, pos, fmt.Sprintf("a line of node %q in the chain of %q", e.Node, v.chainNode()))
	case !e.HashMatches():
		return v.fail(ProblemBadHash, pos, "the line's hash does not match its content: the line was edited")
	}
	v.sum.Node = e.Node
	if err := v.fileStart(e, pos, first); err != nil {
		return err
	}
	if e.Seq != v.next {
		return v.seqProblem(e, pos, next)
	}
	if e.Prev != v.prev {
		return v.fail(ProblemBrokenLink, pos, fmt.Sprintf("prev is not the hash of the line before (%s): that line was edited and re-hashed, or lines were removed or inserted between them", v.last))
	}
	if a := v.opts.Anchor; a != nil && e.Seq == a.Seq {
		if e.Hash != a.Hash {
			return v.fail(ProblemAnchor, pos, "the line's hash is not the anchor's: the chain was rewritten from here or before")
		}
		v.anchored = true
	}
	switch e.Type {
	case TypeCheckpoint:
		if err := v.checkpoint(e, pos); err != nil {
			return err
		}
	case TypeRecord:
		v.record(e)
	case TypeOpen:
		if err := v.open(e, pos); err != nil {
			return err
		}
	}
	if e.Type != TypeCheckpoint {
		v.pend(pos, e.Type == TypeRecord)
	}
	v.advance(e, pos)
	return nil
}

func (v *Verifier) checkpoint(e *Entry, pos Position) error {
	pub, ok := v.keys[e.KeyID]
	if !ok {
		return v.failSince(ProblemUnknownKey, pos, fmt.Sprintf("the checkpoint names key %s, which is not a trusted key", e.KeyID))
	}
	if !e.checkSignature(pub) {
		return v.failSince(ProblemBadSignature, pos, "the checkpoint's signature does not verify: lines before it were edited, inserted or removed and the chain re-hashed, or the checkpoint was forged")
	}
	v.sum.Checkpoints++
	v.sum.LastCheckpoint = Anchor{Seq: e.Seq, Hash: e.Hash}
	v.signRun()
	return nil
}

func (v *Verifier) record(e *Entry) {
	v.sum.Records++
	v.file().Records++
	if v.sum.FirstTime.IsZero() || e.Time.Before(v.sum.FirstTime) {
		v.sum.FirstTime = e.Time
	}
	if e.Time.After(v.sum.LastTime) {
		v.sum.LastTime = e.Time
	}
}

// advance makes e, at pos, the last line read.
func (v *Verifier) advance(e *Entry, pos Position) {
	v.started = true
	v.next, v.prev, v.last, v.lastPrev = e.Seq+1, e.Hash, pos, e.Prev
	v.sum.Lines++
	if v.sum.FirstSeq == 0 {
		v.sum.FirstSeq = e.Seq
	}
	v.sum.LastSeq, v.sum.LastHash = e.Seq, e.Hash
	f := v.file()
	f.Lines++
	if f.FirstSeq == 0 {
		f.FirstSeq = e.Seq
	}
	f.LastSeq = e.Seq
}

// file is the summary of the file being read.
func (v *Verifier) file() *FileSummary { return &v.sum.ByFile[len(v.sum.ByFile)-1] }

func (v *Verifier) chainNode() string {
	if v.sum.Node != "" {
		return v.sum.Node
	}
	return v.opts.Node
}

// fileStart checks how a file begins, and open lines within a file. The
// first line of the first file sets the seq and hash the chain continues
// from.
func (v *Verifier) fileStart(e *Entry, pos Position, first bool) error {
	if !first {
		if e.Type == TypeOpen && e.Start != StartRestart {
			return v.fail(ProblemFileStart, pos, fmt.Sprintf("a %q open line inside a file: files were joined or lines inserted", e.Start))
		}
		return nil
	}
	if e.Type != TypeOpen {
		return v.fail(ProblemFileStart, pos, "the file does not begin with an open line: lines were removed from its start")
	}
	var zero Hash
	switch {
	case e.Start == StartNew && (e.Seq != 1 || e.Prev != zero):
		return v.fail(ProblemFileStart, pos, "a new chain must begin at seq 1 after a zero hash")
	case e.Start == StartSegment && e.Prev != zero:
		return v.fail(ProblemFileStart, pos, "a new segment must begin after a zero hash")
	case !v.started:
		v.next, v.prev = e.Seq, e.Prev
		if e.Start != StartNew {
			v.startsAfter(e)
		}
	case e.Start == StartNew:
		return v.fail(ProblemFileStart, pos, fmt.Sprintf("the file begins a new chain where seq %d, continuing %s, was expected: files swapped, or a file missing", v.next, v.prevFile))
	case e.Start == StartSegment:
		v.prev = zero // the segment's break in the chain is judged by open
		if v.torn != nil && v.torn.seq == v.next {
			v.next++ // the torn line had taken that seq
		}
		if want := filepath.Base(v.runEnd().File); e.PrevFile != want {
			v.warn("%s names %q as the file its writer could not continue, not %s (renamed files?)", pos, e.PrevFile, want)
		}
	case e.Start == StartRotate && e.PrevFile != filepath.Base(v.prevFile):
		v.warn("%s names %q as the file before it, not %s (renamed files?)", pos, e.PrevFile, filepath.Base(v.prevFile))
	}
	return nil
}

// startsAfter notes that the first file continues a part of the chain, or
// follows a segment, that was not given.
func (v *Verifier) startsAfter(e *Entry) {
	v.sum.StartsAfter = e.PrevFile
	if v.sum.StartsAfter == "" {
		v.sum.StartsAfter = "an earlier part of the chain"
	}
	what := "it continues"
	if e.Start == StartSegment {
		what = "it begins a new segment after"
	}
	v.warn("the chain is verified from seq %d only: %s %s, which was not given", e.Seq, what, v.sum.StartsAfter)
}

// seqProblem reports a line whose seq is not the next one.
func (v *Verifier) seqProblem(e *Entry, pos Position, next *bufio.Reader) error {
	if e.Seq+1 == v.next && e.Prev == v.lastPrev && v.started {
		return v.fail(ProblemSeqRepeat, v.last, fmt.Sprintf("this line and the next (%s) both follow seq %d as seq %d: one of them was inserted", pos, e.Seq-1, e.Seq))
	}
	if e.Seq < v.next {
		return v.fail(ProblemSeqRepeat, pos, fmt.Sprintf("seq %d where %d was expected: a line was inserted, repeated or moved here", e.Seq, v.next))
	}
	if raw, err := next.ReadSlice('\n'); err == nil {
		if n, err := ParseLine(raw[:len(raw)-1]); err == nil && n.Seq == v.next {
			return v.fail(ProblemReordered, pos, fmt.Sprintf("seq %d comes before seq %d: lines were reordered", e.Seq, v.next))
		}
	}
	if pos.Line == 1 {
		return v.fail(ProblemSeqGap, pos, fmt.Sprintf("the file begins at seq %d where %d was expected: a file is missing, or the files are out of order", e.Seq, v.next))
	}
	return v.fail(ProblemSeqGap, pos, fmt.Sprintf("seq %d where %d was expected: %d line(s) removed before this one", e.Seq, v.next, e.Seq-v.next))
}

// open counts an open line, and judges the unsigned lines a restart or a
// new segment follows.
func (v *Verifier) open(e *Entry, pos Position) error {
	switch e.Start {
	case StartRestart:
		v.sum.Restarts++
		if v.started && e.Unsigned != uint64(v.unsigned) {
			v.warn("%s: the restart counted %d unsigned line(s), the verifier %d", pos, e.Unsigned, v.unsigned)
		}
		if v.started && v.run.lines > 0 {
			v.sum.Adopted += v.run.lines
			return v.crashTail(ProblemUnsignedRestart, pos)
		}
	case StartRotate:
		v.sum.Rotations++
	case StartSegment:
		v.sum.Segments++
		if !v.started {
			return nil
		}
		v.warn("%s: a new segment begins: the writer could not continue the chain in %s", pos, e.PrevFile)
		if err := v.crashTail(ProblemUnsignedSegment, pos); err != nil {
			return err
		}
		// The segment's checkpoints sign nothing before it.
		v.unsigned, v.since = 0, nil
	}
	return nil
}

// Finish checks the end of the chain and returns the summary, with the
// first Problem if any.
func (v *Verifier) Finish() (*Summary, error) {
	switch {
	case v.err != nil:
		return v.Summary(), v.err
	case v.torn != nil && (!v.opts.AllowUnsignedTail || v.ownTail):
		return v.Summary(), v.failTorn(v.torn.pos)
	case !v.started:
		return v.Summary(), v.fail(ProblemEmpty, Position{File: v.prevFile}, "no lines")
	}
	v.sum.Unsigned = v.unsigned
	if v.unsigned > 0 && !v.opts.AllowUnsignedTail {
		return v.Summary(), v.failSince(ProblemUnsignedTail, v.last, fmt.Sprintf("the chain ends with %d line(s) after its last checkpoint: it was truncated at a line boundary, or its writer is still running or stopped without closing", v.unsigned))
	}
	if v.run.lines > 0 || v.torn != nil {
		v.acceptRun(ProblemUnsignedTail, v.runEnd())
	}
	if v.sum.LastSeq < v.opts.MinSeq {
		return v.Summary(), v.fail(ProblemShort, v.last, fmt.Sprintf("the chain ends at seq %d, but seq %d was written: it was truncated", v.sum.LastSeq, v.opts.MinSeq))
	}
	if v.opts.Anchor != nil && !v.anchored {
		return v.Summary(), v.fail(ProblemAnchor, v.last, fmt.Sprintf("the anchor's seq %d is before the first line given (seq %d)", v.opts.Anchor.Seq, v.sum.FirstSeq))
	}
	return v.Summary(), nil
}
