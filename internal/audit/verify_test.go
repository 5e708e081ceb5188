package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// splitSink keeps each file of the chain apart, and asks for a rotation
// when told to.
type splitSink struct {
	mu     sync.Mutex
	files  [][]byte
	rotate atomic.Bool
}

func (s *splitSink) Name() string { return "split" }
func (s *splitSink) Close() error { return nil }
func (s *splitSink) RotateDue() bool {
	return s.rotate.Load()
}

func (s *splitSink) Write(_ context.Context, lines []Line) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range lines {
		if l.NewFile || len(s.files) == 0 {
			s.files = append(s.files, nil)
			s.rotate.Store(false)
		}
		s.files[len(s.files)-1] = append(s.files[len(s.files)-1], l.Bytes...)
	}
	return nil
}

// baseChain writes the chain every tampering test starts from, three files
// of seq 1-10, 11-19 and 20-28 (CheckpointEvery 5):
//
//	f1: 1 open(new), 2-6 req-0..4, 7 cp, 8-9 req-5..6, 10 cp
//	f2: 11 rotate, 12-16 req-7..11, 17 cp, 18 req-12, 19 cp
//	f3: 20 rotate, 21-25 req-13..17, 26 cp, 27 req-18, 28 cp (Close)
func baseChain(t *testing.T) [][][]byte {
	t.Helper()
	s := &splitSink{}
	l, _ := newLog(t, nil, s)
	writeN(t, l, 0, 7)
	s.rotate.Store(true)
	writeN(t, l, 7, 6)
	s.rotate.Store(true)
	writeN(t, l, 13, 6)
	closeLog(t, l)
	var files [][][]byte
	for _, f := range s.files {
		files = append(files, splitLines(f))
	}
	if n := []int{len(files[0]), len(files[1]), len(files[2])}; len(files) != 3 || !slices.Equal(n, []int{10, 9, 9}) {
		t.Fatalf("base chain has files of %v lines", n)
	}
	return files
}

// reseal does what a forger without the signing key can: it renumbers and
// re-hashes lines from file fi, line li (0-based) through file toF, line
// toL, re-signing checkpoints with signer (as kid) when it is set. A
// checkpoint of the same chain is kept as it was otherwise.
func reseal(t *testing.T, files [][][]byte, fi, li, toF, toL int, signer *SigningKey, kid string) {
	t.Helper()
	var seq uint64
	var prev Hash
	if li > 0 || fi > 0 {
		pf, pl := fi, li-1
		if li == 0 {
			pf, pl = fi-1, len(files[fi-1])-1
		}
		e := parse(t, files[pf][pl])
		seq, prev = e.Seq, e.Hash
	}
	for f := fi; f <= toF; f++ {
		for i := range files[f] {
			if f == fi && i < li || f == toF && i > toL {
				continue
			}
			e := parse(t, files[f][i])
			e.Seq, e.Prev = seq+1, prev
			if e.Type == TypeOpen && e.Start == StartNew {
				e.Seq = 1
			}
			if e.Type == TypeCheckpoint && signer != nil {
				e.KeyID = kid
				body := appendCheckpoint(appendHeader(nil, e.Node, e.Seq, &e.Prev), e.Time, e.KeyID)
				e.Sig = ed25519.Sign(signer.priv, checkpointMessage(nil, body))
			}
			files[f][i], prev = finishLine(e.appendBody(nil), 0)
			seq = e.Seq
		}
	}
}

// forged is a record line that links to the line before it, with a
// correct hash.
func forged(t *testing.T, after []byte, req string) []byte {
	t.Helper()
	p := parse(t, after)
	r := testRecord(0)
	r.RequestID, r.Time = req, p.Time
	line, _ := finishLine(appendRecord(appendHeader(nil, p.Node, p.Seq+1, &p.Hash), &r), 0)
	return line
}

func edit(t *testing.T, line []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(line, []byte(old)) {
		t.Fatalf("%q not in %s", old, line)
	}
	return bytes.Replace(line, []byte(old), []byte(new), 1)
}

func TestVerifyDetectsTampering(t *testing.T) {
	other := testSigner(t, 2)
	trusted := testSigner(t, 1)
	type files = [][][]byte
	tests := []struct {
		name   string
		tamper func(t *testing.T, fs files) files
		opts   func(o *VerifyOptions, base files)
		kind   ProblemKind
		at     string // file:line (seq) of the first bad line
		since  string // Problem.Since, for unauthenticated ranges
	}{
		{name: "edit a field", kind: ProblemBadHash, at: "f2:3 (seq 13)",
			tamper: func(t *testing.T, fs files) files {
				fs[1][2] = edit(t, fs[1][2], `"result":"ok"`, `"result":"refused"`)
				return fs
			}},
		{name: "edit a field and re-hash the line", kind: ProblemBrokenLink, at: "f2:4 (seq 14)",
			tamper: func(t *testing.T, fs files) files {
				fs[1][2] = edit(t, fs[1][2], `"req":"req-8"`, `"req":"req-X"`)
				reseal(t, fs, 1, 2, 1, 2, nil, "")
				return fs
			}},
		{name: "edit a field and re-hash the rest of the chain", kind: ProblemBadSignature, at: "f2:7 (seq 17)", since: "f2:1 (seq 11)",
			tamper: func(t *testing.T, fs files) files {
				fs[1][2] = edit(t, fs[1][2], `"req":"req-8"`, `"req":"req-X"`)
				reseal(t, fs, 1, 2, 2, 8, nil, "")
				return fs
			}},
		{name: "edit the node of a line", kind: ProblemWrongNode, at: "f2:3 (seq 13)",
			tamper: func(t *testing.T, fs files) files {
				fs[1][2] = edit(t, fs[1][2], `"node":"n1"`, `"node":"n2"`)
				reseal(t, fs, 1, 2, 1, 2, nil, "")
				return fs
			}},
		{name: "delete a line", kind: ProblemSeqGap, at: "f2:3 (seq 14)",
			tamper: func(t *testing.T, fs files) files {
				fs[1] = slices.Delete(fs[1], 2, 3)
				return fs
			}},
		{name: "delete a line and renumber the rest", kind: ProblemBadSignature, at: "f2:6 (seq 16)", since: "f2:1 (seq 11)",
			tamper: func(t *testing.T, fs files) files {
				fs[1] = slices.Delete(fs[1], 2, 3)
				reseal(t, fs, 1, 2, 2, 8, nil, "")
				return fs
			}},
		{name: "insert a forged line with a recomputed hash", kind: ProblemSeqRepeat, at: "f2:3 (seq 13)",
			tamper: func(t *testing.T, fs files) files {
				fs[1] = slices.Insert(fs[1], 2, forged(t, fs[1][1], "forged"))
				return fs
			}},
		{name: "insert a forged line and renumber the rest (no valid checkpoint)", kind: ProblemBadSignature, at: "f2:8 (seq 18)", since: "f2:1 (seq 11)",
			tamper: func(t *testing.T, fs files) files {
				fs[1] = slices.Insert(fs[1], 2, forged(t, fs[1][1], "forged"))
				reseal(t, fs, 1, 3, 2, 8, nil, "")
				return fs
			}},
		{name: "append a forged line after the last checkpoint", kind: ProblemUnsignedTail, at: "f3:10 (seq 29)", since: "f3:10 (seq 29)",
			tamper: func(t *testing.T, fs files) files {
				fs[2] = append(fs[2], forged(t, fs[2][8], "forged"))
				return fs
			}},
		{name: "swap two lines", kind: ProblemReordered, at: "f2:3 (seq 14)",
			tamper: func(t *testing.T, fs files) files {
				fs[1][2], fs[1][3] = fs[1][3], fs[1][2]
				return fs
			}},
		{name: "truncate mid-line", kind: ProblemTorn, at: "f3:9",
			tamper: func(t *testing.T, fs files) files {
				fs[2][8] = fs[2][8][:len(fs[2][8])/2]
				return fs
			}},
		{name: "truncate at a line boundary", kind: ProblemUnsignedTail, at: "f3:8 (seq 27)", since: "f3:8 (seq 27)",
			tamper: func(t *testing.T, fs files) files {
				fs[2] = fs[2][:8]
				return fs
			}},
		{name: "truncate right after a checkpoint, with an expected seq", kind: ProblemShort, at: "f3:7 (seq 26)",
			tamper: func(t *testing.T, fs files) files {
				fs[2] = fs[2][:7]
				return fs
			},
			opts: func(o *VerifyOptions, _ files) { o.MinSeq = 28 }},
		{name: "truncate right after a checkpoint, with an anchor", kind: ProblemShort, at: "f3:7 (seq 26)",
			tamper: func(t *testing.T, fs files) files {
				fs[2] = fs[2][:7]
				return fs
			},
			opts: func(o *VerifyOptions, fs files) {
				e := parse(t, fs[2][8])
				o.Anchor = &Anchor{Seq: e.Seq, Hash: e.Hash}
			}},
		{name: "an anchor whose hash differs", kind: ProblemAnchor, at: "f2:7 (seq 17)",
			tamper: func(t *testing.T, fs files) files { return fs },
			opts:   func(o *VerifyOptions, _ files) { o.Anchor = &Anchor{Seq: 17} }},
		{name: "swap files", kind: ProblemSeqGap, at: "f2:1 (seq 20)",
			tamper: func(t *testing.T, fs files) files { return files{fs[0], fs[2], fs[1]} }},
		{name: "swap the first two files", kind: ProblemFileStart, at: "f2:1 (seq 1)",
			tamper: func(t *testing.T, fs files) files { return files{fs[1], fs[0], fs[2]} }},
		{name: "remove a middle file", kind: ProblemSeqGap, at: "f2:1 (seq 20)",
			tamper: func(t *testing.T, fs files) files { return files{fs[0], fs[2]} }},
		{name: "remove a file's first line", kind: ProblemFileStart, at: "f2:1 (seq 12)",
			tamper: func(t *testing.T, fs files) files {
				fs[1] = fs[1][1:]
				return fs
			}},
		{name: "join two files", kind: ProblemFileStart, at: "f1:11 (seq 11)",
			tamper: func(t *testing.T, fs files) files {
				return files{append(fs[0], fs[1]...), fs[2]}
			}},
		{name: "replace the checkpoint signature", kind: ProblemBadHash, at: "f2:7 (seq 17)",
			tamper: func(t *testing.T, fs files) files {
				e := parse(t, fs[0][6])
				fs[1][6] = edit(t, fs[1][6], string(appendSig(nil, parse(t, fs[1][6]).Sig)), string(appendSig(nil, e.Sig)))
				return fs
			}},
		{name: "replace the checkpoint signature and re-hash", kind: ProblemBadSignature, at: "f2:7 (seq 17)", since: "f2:1 (seq 11)",
			tamper: func(t *testing.T, fs files) files {
				e := parse(t, fs[0][6])
				fs[1][6] = edit(t, fs[1][6], string(appendSig(nil, parse(t, fs[1][6]).Sig)), string(appendSig(nil, e.Sig)))
				reseal(t, fs, 1, 6, 1, 6, nil, "")
				return fs
			}},
		{name: "a checkpoint signed by another key", kind: ProblemUnknownKey, at: "f2:7 (seq 17)", since: "f2:1 (seq 11)",
			tamper: func(t *testing.T, fs files) files {
				reseal(t, fs, 1, 6, 1, 6, other, other.KeyID())
				return fs
			}},
		{name: "a checkpoint signed by another key under the trusted key id", kind: ProblemBadSignature, at: "f2:7 (seq 17)", since: "f2:1 (seq 11)",
			tamper: func(t *testing.T, fs files) files {
				reseal(t, fs, 1, 6, 1, 6, other, trusted.KeyID())
				return fs
			}},
		{name: "the whole chain rewritten and signed by another key", kind: ProblemUnknownKey, at: "f1:7 (seq 7)", since: "f1:1 (seq 1)",
			tamper: func(t *testing.T, fs files) files {
				fs[0][3] = edit(t, fs[0][3], `"req":"req-2"`, `"req":"req-X"`)
				reseal(t, fs, 0, 0, 2, 8, other, other.KeyID())
				return fs
			}},
		{name: "a blank line", kind: ProblemMalformed, at: "f2:3",
			tamper: func(t *testing.T, fs files) files {
				fs[1] = slices.Insert(fs[1], 2, []byte("\n"))
				return fs
			}},
		{name: "a line in another form", kind: ProblemMalformed, at: "f2:3",
			tamper: func(t *testing.T, fs files) files {
				fs[1][2] = edit(t, fs[1][2], `"seq":13,`, `"seq": 13,`)
				return fs
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := tt.tamper(t, baseChain(t))
			opts := VerifyOptions{Keys: keysOf(trusted), Node: "n1"}
			if tt.opts != nil {
				tt.opts(&opts, baseChain(t)) // the chain as written
			}
			var contents [][]byte
			for _, f := range fs {
				contents = append(contents, bytes.Join(f, nil))
			}
			sum, err := verifyBytes(opts, contents...)
			checkProblem(t, err, sum, tt.kind, tt.at, tt.since)
		})
	}
}

// checkProblem checks that Verify failed as tampered, with a Problem of
// kind at position at whose run began at since ("" for none).
func checkProblem(t *testing.T, err error, sum *Summary, kind ProblemKind, at, since string) {
	t.Helper()
	var p *Problem
	if !errors.As(err, &p) || !errors.Is(err, ErrTampered) {
		t.Fatalf("Verify: %v, want a Problem; summary %+v", err, sum)
	}
	if p.Kind != kind || p.Position.String() != at {
		t.Errorf("Verify: %v\nwant %s at %s", err, kind, at)
	}
	var got string
	if p.Since != nil {
		got = p.Since.String()
	}
	if got != since {
		t.Errorf("Since %q, want %q", got, since)
	}
}

func TestVerifyAcceptsTheUntamperedChain(t *testing.T) {
	fs := baseChain(t)
	var contents [][]byte
	for _, f := range fs {
		contents = append(contents, bytes.Join(f, nil))
	}
	k := testSigner(t, 1)
	last := parse(t, fs[2][8])
	v, err := NewVerifier(VerifyOptions{Keys: keysOf(testSigner(t, 3), k), Node: "n1", MinSeq: 28, Anchor: &Anchor{Seq: 28, Hash: last.Hash}})
	if err != nil {
		t.Fatal(err)
	}
	for i, seq := range []uint64{1, 11, 20} {
		if err := v.File("/var/log/keygate/"+FileName(seq), bytes.NewReader(contents[i])); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := v.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 19 || sum.Checkpoints != 6 || sum.Rotations != 2 || sum.Lines != 28 || sum.Files != 3 || len(sum.Warnings) != 0 {
		t.Errorf("summary %+v", sum)
	}

	// The limit the documentation states: a truncation right after a
	// checkpoint verifies without an anchor.
	if _, err := verifyBytes(VerifyOptions{Keys: keysOf(k)}, contents[0], contents[1], bytes.Join(fs[2][:7], nil)); err != nil {
		t.Errorf("truncated after a checkpoint, no anchor: %v", err)
	}
	// A file still being written verifies with AllowUnsignedTail, which
	// counts what is not signed.
	sum, err = verifyBytes(VerifyOptions{Keys: keysOf(k), AllowUnsignedTail: true}, contents[0], contents[1], bytes.Join(fs[2][:8], nil))
	if err != nil || sum.Unsigned != 1 {
		t.Errorf("open tail: %v, %d unsigned", err, sum.Unsigned)
	}
	// A later file alone verifies from where it begins, and says so.
	sum, err = verifyBytes(VerifyOptions{Keys: keysOf(k)}, contents[2])
	if err != nil || sum.StartsAfter != FileName(11) || sum.FirstSeq != 20 {
		t.Errorf("last file alone: %v, %+v", err, sum)
	}
}

func TestVerifyNeedsKeys(t *testing.T) {
	if _, err := NewVerifier(VerifyOptions{}); err == nil {
		t.Error("NewVerifier without keys succeeded")
	}
	if _, err := NewVerifier(VerifyOptions{Keys: []ed25519.PublicKey{make([]byte, 31)}}); err == nil {
		t.Error("NewVerifier with a short key succeeded")
	}
	_, err := verifyBytes(VerifyOptions{Keys: keysOf(testSigner(t, 1))})
	if p := (*Problem)(nil); !errors.As(err, &p) || p.Kind != ProblemEmpty {
		t.Errorf("no files: %v", err)
	}
}

func TestProblemNamesTheLine(t *testing.T) {
	p := &Problem{Position: Position{File: "audit-1.jsonl", Line: 7, Seq: 9}, Kind: ProblemBadHash, Detail: "edited"}
	if got, want := p.Error(), "audit-1.jsonl:7 (seq 9): bad_hash: edited"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !strings.Contains(fmt.Sprint(p), "bad_hash") {
		t.Error(p)
	}
}
