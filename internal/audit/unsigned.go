package audit

import (
	"fmt"
	"path/filepath"
	"slices"
)

// The Verifier's account of unsigned lines. A line is signed when a
// checkpoint that its writer wrote later in the same run verifies: that
// checkpoint's prev is the hash the writer computed as it wrote, so it
// vouches for the line as written. Lines that no such checkpoint follows
// are a run: at the end of the chain (the tail), before a restart (whose
// writer read them back from the files and signs them as it found them)
// or before a new segment (whose chain starts from zero and signs nothing
// before it). Each is a Problem unless VerifyOptions accepts it, and an
// accepted run is listed, never counted as signed.

// run is the lines since the last good checkpoint or the last run
// accepted: not yet signed, nor accepted unsigned.
type run struct {
	from    *Position
	lines   int
	records []fileCount // its records, by file
}

type fileCount struct{ file, n int }

// tornLine is a file's last line without a newline, kept for the file
// that follows to judge.
type tornLine struct {
	pos Position
	seq uint64 // the seq it claims, if that much of it was written
}

// pend adds the line at pos to the run.
func (v *Verifier) pend(pos Position, record bool) {
	if v.unsigned == 0 {
		p := pos
		v.since = &p
	}
	v.unsigned++
	if v.run.lines == 0 {
		p := pos
		v.run.from = &p
	}
	v.run.lines++
	if !record {
		return
	}
	f := len(v.sum.ByFile) - 1
	if n := len(v.run.records); n > 0 && v.run.records[n-1].file == f {
		v.run.records[n-1].n++
		return
	}
	v.run.records = append(v.run.records, fileCount{file: f, n: 1})
}

// signRun counts the run as signed by the checkpoint just verified.
func (v *Verifier) signRun() {
	for _, c := range v.run.records {
		v.sum.ByFile[c.file].Signed += c.n
		v.sum.Signed += c.n
	}
	v.unsigned, v.since = 0, nil
	v.run = run{records: v.run.records[:0]}
}

// acceptRun lists the run, ending at to, as accepted unsigned.
func (v *Verifier) acceptRun(kind ProblemKind, to Position) {
	r := UnsignedRun{Kind: kind, To: to, Lines: v.run.lines}
	if v.run.from != nil {
		r.From = *v.run.from
	} else {
		r.From = to // the torn line alone
	}
	for _, c := range v.run.records {
		r.Records += c.n
	}
	if v.torn != nil {
		r.Torn, r.Lines = true, r.Lines+1
		v.torn = nil
	}
	v.sum.Runs = append(v.sum.Runs, r)
	v.run = run{records: v.run.records[:0]}
}

// crashTail judges the run (and a torn line) before the restart or new
// segment at pos.
func (v *Verifier) crashTail(kind ProblemKind, pos Position) error {
	if v.run.lines == 0 && v.torn == nil {
		return nil
	}
	end := v.runEnd()
	if v.crashTailOK(end.File) {
		v.acceptRun(kind, end)
		return nil
	}
	lines, from := v.run.lines, end
	if v.run.from != nil {
		from = *v.run.from
	}
	if v.torn != nil {
		lines++
	}
	p := &Problem{Position: end, Kind: kind, Since: &from}
	switch kind {
	case ProblemUnsignedRestart:
		p.Detail = fmt.Sprintf("%d line(s) from %s to here were signed by no checkpoint before their writer stopped; it restarted at %s and signed them only as it read them back, so whoever could write the files meanwhile could have changed them (a crash or a stop while sealed leaves such lines; so does removing checkpoints)", lines, from, pos)
	default:
		p.Detail = fmt.Sprintf("%d line(s) from %s to here are signed by no checkpoint: %s begins a new segment, whose checkpoints sign nothing before it (a crash leaves such lines, and tears the last; so does removing or rewriting checkpoints)", lines, from, pos)
	}
	v.err = p
	return p
}

// runEnd is the last line of the run: a torn line, or the last line read.
func (v *Verifier) runEnd() Position {
	if v.torn != nil {
		return v.torn.pos
	}
	return v.last
}

// mayDeferTorn says whether a torn last line of file may be accepted,
// at the end of the chain or before a new segment.
func (v *Verifier) mayDeferTorn(file string) bool {
	return v.started && (v.opts.AllowUnsignedTail || v.crashTailOK(file))
}

func (v *Verifier) crashTailOK(file string) bool {
	if v.ownTail {
		return true
	}
	base := filepath.Base(file)
	return slices.ContainsFunc(v.opts.CrashTails, func(c string) bool { return filepath.Base(c) == base })
}
