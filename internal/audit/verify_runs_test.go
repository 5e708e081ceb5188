package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// story runs a node's writers over one directory, one after another, with
// the edits a crash or an attacker makes to the files in between.
type story struct {
	t   *testing.T
	dir string
	n   int // records written so far, for their request ids
}

func newStory(t *testing.T) *story { return &story{t: t, dir: t.TempDir()} }

// run starts a writer (a new segment where the tail does not verify),
// writes records and closes it.
func (s *story) run(records int, mod func(*Config)) {
	s.t.Helper()
	l, _ := newLog(s.t, func(c *Config) {
		c.NewSegment = true
		if mod != nil {
			mod(c)
		}
	}, fileSink(s.t, s.dir, nil))
	writeN(s.t, l, s.n, records)
	s.n += records
	closeLog(s.t, l)
}

// crash is run, but the files are left as they were before the final
// checkpoint, as a crash leaves them.
func (s *story) crash(records int) {
	s.t.Helper()
	l, _ := newLog(s.t, func(c *Config) { c.NewSegment = true }, fileSink(s.t, s.dir, nil))
	writeN(s.t, l, s.n, records)
	s.n += records
	before := s.files()
	closeLog(s.t, l)
	for i, f := range dirFiles(s.t, s.dir) {
		if err := os.WriteFile(f, bytes.Join(before[i], nil), 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}

// files returns each file's lines.
func (s *story) files() [][][]byte {
	var out [][][]byte
	for _, f := range dirFiles(s.t, s.dir) {
		out = append(out, splitLines(readFile(s.t, f)))
	}
	return out
}

// edit rewrites file i (0-based) with what change makes of its lines.
func (s *story) edit(i int, change func(lines [][]byte) [][]byte) {
	s.t.Helper()
	f := dirFiles(s.t, s.dir)[i]
	if err := os.WriteFile(f, bytes.Join(change(splitLines(readFile(s.t, f))), nil), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// rewrite is what a forger without the key does to lines from index from
// on: checkpoints there dropped (all, or only the last one), the
// principal of n records changed, and the chain renumbered and re-hashed
// from the first line changed.
func rewrite(t *testing.T, lines [][]byte, from int, onlyLastCheckpoint bool, n int) [][]byte {
	t.Helper()
	last := -1
	for i := from; i < len(lines); i++ {
		if parse(t, lines[i]).Type == TypeCheckpoint {
			last = i
		}
	}
	var out [][]byte
	for i, l := range lines {
		if i >= from && parse(t, l).Type == TypeCheckpoint && (!onlyLastCheckpoint || i == last) {
			continue
		}
		if i >= from && n > 0 && parse(t, l).Type == TypeRecord {
			l, n = edit(t, l, `"id":"kgc_orders"`, `"id":"kgc_mallory"`), n-1
		}
		out = append(out, l)
	}
	if n > 0 {
		t.Fatalf("rewrite: %d records short", n)
	}
	files := [][][]byte{out}
	reseal(t, files, 0, from, 0, len(out)-1, nil, "")
	return files[0]
}

// lastCheckpointBefore is the index of the last checkpoint in lines
// before index end.
func lastCheckpointBefore(t *testing.T, lines [][]byte, end int) int {
	for i := end - 1; i >= 0; i-- {
		if parse(t, lines[i]).Type == TypeCheckpoint {
			return i
		}
	}
	t.Fatal("no checkpoint")
	return -1
}

const partialLine = `{"v":1,"node":"n1","seq":`

func appendPartial(lines [][]byte) [][]byte { return append(lines, []byte(partialLine)) }

func dropPartial(lines [][]byte) [][]byte {
	if n := len(lines); n > 0 && !bytes.HasSuffix(lines[n-1], []byte("\n")) {
		return lines[:n-1]
	}
	return lines
}

// TestVerifyRefusesUnsignedRuns: lines no checkpoint of their own writer's
// run signs are never taken as signed: before a new segment, whose chain
// starts from zero, and before a restart, whose writer signs what it reads
// back. Each case is told as writers and edits over one directory; the
// files are then verified as f1, f2, ...
func TestVerifyRefusesUnsignedRuns(t *testing.T) {
	tests := []struct {
		name  string
		story func(s *story)
		opts  func(o *VerifyOptions)
		kind  ProblemKind
		at    string // file:line (seq) of the first bad line
		since string
	}{
		{name: "every checkpoint stripped, 13 principals changed, re-hashed, then a torn line for a new segment, removed after it",
			kind: ProblemUnsignedSegment, at: "f1:21 (seq 21)", since: "f1:1 (seq 1)",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, func(ls [][]byte) [][]byte { return appendPartial(rewrite(s.t, ls, 0, false, 13)) })
				s.run(1, nil)
				s.edit(0, dropPartial)
			}},
		{name: "the last checkpoint stripped, five records rewritten, then a new segment",
			kind: ProblemUnsignedSegment, at: "f1:24 (seq 24)", since: "f1:20 (seq 20)",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, func(ls [][]byte) [][]byte {
					return appendPartial(rewrite(s.t, ls, lastCheckpointBefore(s.t, ls, len(ls)-1)+1, true, 5))
				})
				s.run(1, nil)
				s.edit(0, dropPartial)
			}},
		{name: "the last checkpoint stripped and the torn line left: the segment does not excuse it",
			kind: ProblemTorn, at: "f1:25",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, func(ls [][]byte) [][]byte { return appendPartial(ls[:len(ls)-1]) })
				s.run(1, nil)
			}},
		{name: "a torn line before a file that is no new segment, with AllowUnsignedTail",
			kind: ProblemTorn, at: "f1:28",
			story: func(s *story) {
				s.run(20, nil)
				s.run(2, func(c *Config) { c.Sinks = []Sink{fileSink(s.t, s.dir, func(f *FileConfig) { f.MaxSize = 1 })} })
				s.edit(0, appendPartial)
			},
			opts: func(o *VerifyOptions) { o.AllowUnsignedTail, o.CrashTails = true, []string{"f1"} }},
		{name: "every checkpoint stripped and 13 principals changed, then a restart that signs them as it reads them",
			kind: ProblemUnsignedRestart, at: "f1:21 (seq 21)", since: "f1:1 (seq 1)",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, func(ls [][]byte) [][]byte { return rewrite(s.t, ls, 0, false, 13) })
				s.run(1, nil)
			}},
		{name: "a crash's unsigned tail rewritten before the restart",
			kind: ProblemUnsignedRestart, at: "f1:10 (seq 10)", since: "f1:8 (seq 8)",
			story: func(s *story) {
				s.crash(8)
				s.edit(0, func(ls [][]byte) [][]byte { return rewrite(s.t, ls, 7, false, 2) })
				s.run(1, nil)
			}},
		{name: "a crash tail accepted in another file than the one it ends in",
			kind: ProblemUnsignedSegment, at: "f1:24 (seq 24)", since: "f1:20 (seq 20)",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, func(ls [][]byte) [][]byte { return appendPartial(ls[:len(ls)-1]) })
				s.run(1, nil)
				s.edit(0, dropPartial)
			},
			opts: func(o *VerifyOptions) { o.CrashTails = []string{"f2"} }},
		{name: "the files before a segment truncated",
			kind: ProblemSeqGap, at: "f2:1 (seq 26)",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, appendPartial)
				s.run(1, nil)
				// Back to the checkpoint before the last: a file that verifies.
				s.edit(0, func(ls [][]byte) [][]byte { return ls[:lastCheckpointBefore(s.t, ls, len(ls)-2)+1] })
			}},
		{name: "a forged segment appended after a signed chain",
			kind: ProblemUnsignedTail, at: "f2:2 (seq 27)", since: "f2:1 (seq 26)",
			story: func(s *story) {
				s.run(20, nil)
				last := parse(s.t, s.files()[0][24])
				var zero Hash
				open, _ := finishLine(appendOpen(appendHeader(nil, "n1", last.Seq+1, &zero), last.Time, StartSegment, FileName(1), 0), 0)
				path := filepath.Join(s.dir, FileName(last.Seq+1))
				os.WriteFile(path, append(open, forged(s.t, open, "forged")...), 0o600)
			}},
		{name: "a forged segment line inside a file, the rest re-hashed",
			kind: ProblemFileStart, at: "f1:8 (seq 8)",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, func(ls [][]byte) [][]byte {
					p := parse(s.t, ls[6])
					var zero Hash
					open, _ := finishLine(appendOpen(appendHeader(nil, "n1", p.Seq+1, &zero), p.Time, StartSegment, FileName(1), 0), 0)
					ls = slices.Insert(ls, 7, open)
					files := [][][]byte{ls}
					reseal(s.t, files, 0, 8, 0, len(ls)-1, nil, "")
					return files[0]
				})
			}},
		{name: "a rotation's first line turned into a segment start, the file re-hashed",
			kind: ProblemBadSignature, at: "f2:3 (seq 30)", since: "f2:1 (seq 28)",
			story: func(s *story) {
				s.run(20, nil)
				s.run(5, func(c *Config) { c.Sinks = []Sink{fileSink(s.t, s.dir, func(f *FileConfig) { f.MaxSize = 1 })} })
				s.edit(1, func(ls [][]byte) [][]byte {
					e := parse(s.t, ls[0])
					e.Start, e.Prev = StartSegment, Hash{}
					ls[0], _ = finishLine(e.appendBody(nil), 0)
					files := [][][]byte{ls}
					reseal(s.t, files, 0, 1, 0, len(ls)-1, nil, "")
					return files[0]
				})
			}},
		{name: "a segment's file given twice",
			kind: ProblemSeqRepeat, at: "f3:1 (seq 26)",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, appendPartial)
				s.run(1, nil)
				s.edit(0, dropPartial)
				fs := dirFiles(s.t, s.dir)
				os.WriteFile(filepath.Join(s.dir, FileName(99)), readFile(s.t, fs[1]), 0o600)
			},
			opts: func(o *VerifyOptions) { o.CrashTails = []string{"f1"} }},
		{name: "a segment of another node spliced in",
			kind: ProblemWrongNode, at: "f2:1 (seq 26)",
			story: func(s *story) {
				s.run(20, nil)
				n2 := newStory(s.t) // its chain, with the same key, broken at the same seq
				node := func(c *Config) { c.Node = "n2" }
				n2.run(20, node)
				n2.edit(0, appendPartial)
				n2.run(1, node)
				os.WriteFile(filepath.Join(s.dir, FileName(26)), readFile(s.t, dirFiles(s.t, n2.dir)[1]), 0o600)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStory(t)
			tt.story(s)
			opts := VerifyOptions{Keys: keysOf(testSigner(t, 1))}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			var contents [][]byte
			for _, f := range dirFiles(t, s.dir) {
				contents = append(contents, readFile(t, f))
			}
			sum, err := verifyBytes(opts, contents...)
			checkProblem(t, err, sum, tt.kind, tt.at, tt.since)
		})
	}
}

// TestVerifyAcceptsCrashTailsAsUnsigned: what a real crash leaves (lines
// after the last checkpoint, perhaps a torn one) verifies when its file is
// named in CrashTails, listed and not counted as signed; a new segment
// after a fully signed file needs nothing.
func TestVerifyAcceptsCrashTailsAsUnsigned(t *testing.T) {
	tests := []struct {
		name     string
		story    func(s *story)
		opts     VerifyOptions
		records  int
		signed   []int // by file
		runs     []UnsignedRun
		segments int
		restarts int
	}{
		{name: "the rewritten file of the reproduction, accepted: none of it signed",
			story: func(s *story) {
				s.run(20, nil)
				s.edit(0, func(ls [][]byte) [][]byte { return appendPartial(rewrite(s.t, ls, 0, false, 13)) })
				s.run(1, nil)
				s.edit(0, dropPartial)
			},
			opts:    VerifyOptions{CrashTails: []string{"f1"}},
			records: 21, signed: []int{0, 1}, segments: 1,
			runs: []UnsignedRun{{Kind: ProblemUnsignedSegment, From: Position{"f1", 1, 1}, To: Position{"f1", 21, 21}, Lines: 21, Records: 20}}},
		{name: "a crash tears a line that has its seq; a new segment follows",
			story: func(s *story) {
				s.crash(8)
				s.edit(0, func(ls [][]byte) [][]byte { return append(ls, []byte(`{"v":1,"node":"n1","seq":11,"prev":"12`)) })
				s.run(2, nil)
			},
			opts:    VerifyOptions{CrashTails: []string{"f1"}},
			records: 10, signed: []int{5, 2}, segments: 1,
			runs: []UnsignedRun{{Kind: ProblemUnsignedSegment, From: Position{"f1", 8, 8}, To: Position{"f1", 11, 0}, Lines: 4, Records: 3, Torn: true}}},
		{name: "a crash tears a line before its seq; a new segment follows",
			story: func(s *story) {
				s.crash(8)
				s.edit(0, appendPartial)
				s.run(2, nil)
			},
			opts:    VerifyOptions{CrashTails: []string{"f1"}},
			records: 10, signed: []int{5, 2}, segments: 1,
			runs: []UnsignedRun{{Kind: ProblemUnsignedSegment, From: Position{"f1", 8, 8}, To: Position{"f1", 11, 0}, Lines: 4, Records: 3, Torn: true}}},
		{name: "a crash, then a restart",
			story: func(s *story) {
				s.crash(8)
				s.run(2, nil)
			},
			opts:    VerifyOptions{CrashTails: []string{"f1"}},
			records: 10, signed: []int{7}, restarts: 1,
			runs: []UnsignedRun{{Kind: ProblemUnsignedRestart, From: Position{"f1", 8, 8}, To: Position{"f1", 10, 10}, Lines: 3, Records: 3}}},
		{name: "a new segment after a file that ends signed (started sealed without the public key)",
			story: func(s *story) {
				s.run(7, nil)
				l, _ := newLog(s.t, func(c *Config) { c.Signer, c.Sealed, c.NewSegment = nil, true, true }, fileSink(s.t, s.dir, nil))
				writeN(s.t, l, 7, 2)
				l.SetKeys(testSigner(s.t, 1), nil) // unsealed: its checkpoints sign the segment
				closeLog(s.t, l)
				s.run(1, nil)
			},
			records: 10, signed: []int{7, 3}, segments: 1, restarts: 1},
		{name: "a file still being written",
			story:   func(s *story) { s.crash(8) },
			opts:    VerifyOptions{AllowUnsignedTail: true},
			records: 8, signed: []int{5},
			runs: []UnsignedRun{{Kind: ProblemUnsignedTail, From: Position{"f1", 8, 8}, To: Position{"f1", 10, 10}, Lines: 3, Records: 3}}},
		{name: "a file still being written, read in the middle of a write",
			story: func(s *story) {
				s.run(5, nil)
				s.edit(0, appendPartial)
			},
			opts:    VerifyOptions{AllowUnsignedTail: true},
			records: 5, signed: []int{5},
			runs: []UnsignedRun{{Kind: ProblemUnsignedTail, From: Position{"f1", 8, 0}, To: Position{"f1", 8, 0}, Lines: 1, Torn: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStory(t)
			tt.story(s)
			opts := tt.opts
			opts.Keys = keysOf(testSigner(t, 1))
			var contents [][]byte
			for _, f := range dirFiles(t, s.dir) {
				contents = append(contents, readFile(t, f))
			}
			sum, err := verifyBytes(opts, contents...)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			var signed []int
			for _, f := range sum.ByFile {
				signed = append(signed, f.Signed)
			}
			if sum.Records != tt.records || !slices.Equal(signed, tt.signed) || sum.Signed != sum.Records-unsignedRecords(sum.Runs) {
				t.Errorf("%d records, signed by file %v (%d in all); want %d, %v", sum.Records, signed, sum.Signed, tt.records, tt.signed)
			}
			if !slices.Equal(sum.Runs, tt.runs) {
				t.Errorf("runs\n%+v\nwant\n%+v", sum.Runs, tt.runs)
			}
			if sum.Segments != tt.segments || sum.Restarts != tt.restarts {
				t.Errorf("%d segments, %d restarts; want %d, %d", sum.Segments, sum.Restarts, tt.segments, tt.restarts)
			}
		})
	}
}

func unsignedRecords(runs []UnsignedRun) int {
	n := 0
	for _, r := range runs {
		n += r.Records
	}
	return n
}
