package audit

import (
	"bufio"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// ErrTampered matches every *Problem: the files do not verify.
var ErrTampered = errors.New("audit: the log does not verify")

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
	// AllowUnsignedTail accepts lines after the last checkpoint, for a
	// file still being written; Summary.Unsigned counts them. They are
	// chained but not signed, so not authenticated.
	AllowUnsignedTail bool
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
	Adopted              int       // lines unsigned when a writer restarted, signed by a later checkpoint
	StartsAfter          string    // what the first file continues, when that was not given
	Warnings             []string
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
}

// NewVerifier returns a Verifier; it fails without keys.
func NewVerifier(opts VerifyOptions) (*Verifier, error) {
	if len(opts.Keys) == 0 {
		return nil, errors.New("audit: verify needs at least one public key")
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
	return &s
}

// File reads the next file of the chain. It returns the first Problem (and
// returns it again on every later call), or an error reading r.
func (v *Verifier) File(name string, r io.Reader) error {
	if v.err != nil {
		return v.err
	}
	v.sum.Files++
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
		case err == io.EOF:
			return v.fail(ProblemTorn, pos, "the last line has no newline: the file was cut mid-line (truncated, or its writer stopped mid-write)")
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
		pub, ok := v.keys[e.KeyID]
		if !ok {
			return v.failSince(ProblemUnknownKey, pos, fmt.Sprintf("the checkpoint names key %s, which is not a trusted key", e.KeyID))
		}
		if !e.checkSignature(pub) {
			return v.failSince(ProblemBadSignature, pos, "the checkpoint's signature does not verify: lines before it were edited, inserted or removed and the chain re-hashed, or the checkpoint was forged")
		}
		v.sum.Checkpoints++
		v.sum.LastCheckpoint = Anchor{Seq: e.Seq, Hash: e.Hash}
		v.unsigned, v.since = 0, nil
	case TypeRecord:
		v.sum.Records++
		if v.sum.FirstTime.IsZero() || e.Time.Before(v.sum.FirstTime) {
			v.sum.FirstTime = e.Time
		}
		if e.Time.After(v.sum.LastTime) {
			v.sum.LastTime = e.Time
		}
	case TypeOpen:
		v.open(e, pos)
	}
	if e.Type != TypeCheckpoint {
		if v.unsigned == 0 {
			p := pos
			v.since = &p
		}
		v.unsigned++
	}
	v.started = true
	v.next, v.prev, v.last, v.lastPrev = e.Seq+1, e.Hash, pos, e.Prev
	v.sum.Lines++
	if v.sum.FirstSeq == 0 {
		v.sum.FirstSeq = e.Seq
	}
	v.sum.LastSeq, v.sum.LastHash = e.Seq, e.Hash
	return nil
}

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
		if e.Start == StartRotate || e.Start == StartRestart {
			v.sum.StartsAfter = e.PrevFile
			if v.sum.StartsAfter == "" {
				v.sum.StartsAfter = "an earlier part of the chain"
			}
			v.warn("the chain is verified from seq %d only: it continues %s, which was not given", e.Seq, v.sum.StartsAfter)
		}
	case e.Start == StartNew:
		return v.fail(ProblemFileStart, pos, fmt.Sprintf("the file begins a new chain where seq %d, continuing %s, was expected: files swapped, or a file missing", v.next, v.prevFile))
	case e.Start == StartSegment:
		v.prev = zero // the segment's break in the chain is recorded (open below)
	case e.Start == StartRotate && e.PrevFile != filepath.Base(v.prevFile):
		v.warn("%s names %q as the file before it, not %s (renamed files?)", pos, e.PrevFile, filepath.Base(v.prevFile))
	}
	return nil
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

func (v *Verifier) open(e *Entry, pos Position) {
	switch e.Start {
	case StartRestart:
		v.sum.Restarts++
		if v.unsigned > 0 && v.started {
			v.sum.Adopted += v.unsigned
			v.warn("%s: the writer restarted after %d unsigned line(s) (from %s), signed only by a later checkpoint", pos, v.unsigned, v.since)
		}
		if e.Unsigned != uint64(v.unsigned) && v.started {
			v.warn("%s: the restart counted %d unsigned line(s), the verifier %d", pos, e.Unsigned, v.unsigned)
		}
	case StartRotate:
		v.sum.Rotations++
	case StartSegment:
		v.sum.Segments++
		if v.started {
			v.warn("%s: a new segment begins: the writer could not continue the chain in %s", pos, e.PrevFile)
		}
	}
}

// Finish checks the end of the chain and returns the summary, with the
// first Problem if any.
func (v *Verifier) Finish() (*Summary, error) {
	if v.err != nil {
		return v.Summary(), v.err
	}
	if !v.started {
		return v.Summary(), v.fail(ProblemEmpty, Position{File: v.prevFile}, "no lines")
	}
	v.sum.Unsigned = v.unsigned
	if v.unsigned > 0 && !v.opts.AllowUnsignedTail {
		return v.Summary(), v.failSince(ProblemUnsignedTail, v.last, fmt.Sprintf("the chain ends with %d line(s) after its last checkpoint: it was truncated at a line boundary, or its writer is still running or stopped without closing", v.unsigned))
	}
	if v.sum.LastSeq < v.opts.MinSeq {
		return v.Summary(), v.fail(ProblemShort, v.last, fmt.Sprintf("the chain ends at seq %d, but seq %d was written: it was truncated", v.sum.LastSeq, v.opts.MinSeq))
	}
	if v.opts.Anchor != nil && !v.anchored {
		return v.Summary(), v.fail(ProblemAnchor, v.last, fmt.Sprintf("the anchor's seq %d is before the first line given (seq %d)", v.opts.Anchor.Seq, v.sum.FirstSeq))
	}
	return v.Summary(), nil
}
