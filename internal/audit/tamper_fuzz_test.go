package audit

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// tamperBase writes the signed log FuzzVerifyTamper edits, with a fixed
// key and clock: files rotated by size, a clean restart, a new segment
// (a start sealed without the public key, unsealed before its close) and
// another restart. It verifies with no line unsigned.
func tamperBase(tb testing.TB) [][][]byte {
	tb.Helper()
	dir := tb.TempDir()
	sink := func() *FileSink { return fileSink(tb, dir, func(c *FileConfig) { c.MaxSize = 2500 }) }
	run := func(from, n int, mod func(*Config)) {
		l, _ := newLog(tb, mod, sink())
		writeN(tb, l, from, n)
		l.SetKeys(testSigner(tb, 1), nil)
		closeLog(tb, l)
	}
	run(0, 12, nil)
	run(12, 4, nil)
	run(16, 3, func(c *Config) { c.Signer, c.Sealed, c.NewSegment = nil, true, true })
	run(19, 2, nil)
	var files [][][]byte
	for _, f := range dirFiles(tb, dir) {
		files = append(files, splitLines(readFile(tb, f)))
	}
	return files
}

// tamperer applies a program of edits to files, as a forger without the
// signing key can: line and file moves, byte edits, and field edits with
// the chain renumbered and re-hashed after them.
type tamperer struct {
	files [][][]byte
	prog  []byte
}

// arg takes the next byte of the program (0 once it is used up).
func (t *tamperer) arg() int {
	if len(t.prog) == 0 {
		return 0
	}
	b := t.prog[0]
	t.prog = t.prog[1:]
	return int(b)
}

// pick takes an index below n (n > 0).
func (t *tamperer) pick(n int) int { return t.arg() % n }

// at picks a line: a file and an index in it (-1 for an empty file).
func (t *tamperer) at() (int, int) {
	f := t.pick(len(t.files))
	if len(t.files[f]) == 0 {
		return f, -1
	}
	return f, t.pick(len(t.files[f]))
}

var fieldEdits = [][2]string{
	{`"id":"kgc_orders"`, `"id":"kgc_mallory"`},
	{`"result":"ok"`, `"result":"refused"`},
	{`"req":"req-`, `"req":"rex-`},
	{`"status":200`, `"status":403`},
	{`"node":"n1"`, `"node":"n2"`},
	{`"start":"rotate"`, `"start":"segment"`},
	{`"start":"restart"`, `"start":"segment"`},
	{`"type":"checkpoint"`, `"type":"record"`},
}

// run applies at most 24 edits.
func (t *tamperer) run() {
	for n := 0; len(t.prog) > 0 && n < 24 && len(t.files) > 0; n++ {
		t.step(t.arg() % 16)
	}
}

func (t *tamperer) step(op int) {
	switch op {
	case 0, 1, 2, 3, 4, 5, 6, 15:
		t.lineEdit(op)
	default:
		t.fileEdit(op)
	}
}

// lineEdit drops, repeats, swaps or moves a line, edits a field and
// re-hashes, strips checkpoints, or inserts a forged segment start.
func (t *tamperer) lineEdit(op int) {
	f, i := t.at()
	if i < 0 {
		return
	}
	ls := t.files[f]
	switch op {
	case 0:
		t.files[f] = slices.Delete(ls, i, i+1)
	case 1:
		t.files[f] = slices.Insert(ls, i, ls[i])
	case 2:
		g, j := t.at()
		if j >= 0 {
			ls[i], t.files[g][j] = t.files[g][j], ls[i]
		}
	case 3:
		line := ls[i]
		t.files[f] = slices.Delete(ls, i, i+1)
		g := t.pick(len(t.files))
		t.files[g] = slices.Insert(t.files[g], t.pick(len(t.files[g])+1), line)
	case 4:
		e := fieldEdits[t.pick(len(fieldEdits))]
		ls[i] = bytes.Replace(ls[i], []byte(e[0]), []byte(e[1]), 1)
		t.rehash(f, i)
	case 5:
		t.stripCheckpoints(f, t.arg()%2 == 1)
	case 6:
		t.forgeSegment(f, i)
	case 15:
		t.checkpointToRecord(f, i)
	}
}

func (t *tamperer) fileEdit(op int) {
	f := t.pick(len(t.files))
	switch op {
	case 7: // flip bits of a byte
		if b := bytes.Join(t.files[f], nil); len(b) > 0 {
			b[(t.arg()<<8|t.arg())%len(b)] ^= byte(t.arg() | 1)
			t.files[f] = splitLines(b)
		}
	case 8: // truncate
		b := bytes.Join(t.files[f], nil)
		t.files[f] = splitLines(b[:(t.arg()<<8|t.arg())%(len(b)+1)])
	case 9:
		t.files = slices.Delete(t.files, f, f+1)
	case 10:
		t.files = slices.Insert(t.files, f, slices.Clone(t.files[f]))
	case 11:
		g := t.pick(len(t.files))
		t.files[f], t.files[g] = t.files[g], t.files[f]
	case 12: // split
		i := t.pick(len(t.files[f]) + 1)
		rest := slices.Clone(t.files[f][i:])
		t.files[f] = t.files[f][:i]
		t.files = slices.Insert(t.files, f+1, rest)
	case 13: // join with the next
		if f+1 < len(t.files) {
			t.files[f] = append(t.files[f], t.files[f+1]...)
			t.files = slices.Delete(t.files, f+1, f+2)
		}
	case 14: // a partial line at the end
		t.files[f] = append(t.files[f], []byte(partialLine))
	}
}

// rehash renumbers and re-hashes the chain from file f, line i, each line
// after the one before it as they now stand, up to the next segment start
// (whose chain does not depend on what is before it); a line that does not
// parse is left as it is.
func (t *tamperer) rehash(f, i int) {
	var seq uint64
	var prev Hash
	if e := t.before(f, i); e != nil {
		seq, prev = e.Seq, e.Hash
	}
	first := true
	for ; f < len(t.files); f, i = f+1, 0 {
		for ; i < len(t.files[f]); i, first = i+1, false {
			e, err := ParseLine(bytes.TrimSuffix(t.files[f][i], []byte("\n")))
			if err != nil {
				continue
			}
			if e.Type == TypeOpen && e.Start == StartSegment && !first {
				return
			}
			e.Seq, e.Prev = seq+1, prev
			switch {
			case e.Type == TypeOpen && e.Start == StartNew:
				e.Seq, e.Prev = 1, Hash{}
			case e.Type == TypeOpen && e.Start == StartSegment:
				e.Prev = Hash{}
			}
			t.files[f][i], prev = finishLine(e.appendBody(nil), 0)
			seq = e.Seq
		}
	}
}

// before is the last line that parses before file f, line i.
func (t *tamperer) before(f, i int) *Entry {
	for ; f >= 0; f-- {
		if i < 0 {
			i = len(t.files[f])
		}
		for i--; i >= 0; i-- {
			if e, err := ParseLine(bytes.TrimSuffix(t.files[f][i], []byte("\n"))); err == nil {
				return e
			}
		}
	}
	return nil
}

// stripCheckpoints drops file f's checkpoints (or only its last) and
// re-hashes from the first line dropped.
func (t *tamperer) stripCheckpoints(f int, onlyLast bool) {
	var cps []int
	for i, l := range t.files[f] {
		if bytes.Contains(l, []byte(`"type":"checkpoint"`)) {
			cps = append(cps, i)
		}
	}
	if len(cps) == 0 {
		return
	}
	if onlyLast {
		cps = cps[len(cps)-1:]
	}
	for k := len(cps) - 1; k >= 0; k-- {
		t.files[f] = slices.Delete(t.files[f], cps[k], cps[k]+1)
	}
	t.rehash(f, cps[0])
}

// checkpointToRecord replaces a checkpoint at file f, line i, with a
// forged record, which keeps the seqs after it, and re-hashes.
func (t *tamperer) checkpointToRecord(f, i int) {
	e, err := ParseLine(bytes.TrimSuffix(t.files[f][i], []byte("\n")))
	if err != nil || e.Type != TypeCheckpoint {
		return
	}
	r := testRecord(999)
	r.Time = e.Time
	t.files[f][i], _ = finishLine(appendRecord(appendHeader(nil, e.Node, e.Seq, &e.Prev), &r), 0)
	t.rehash(f, i)
}

// forgeSegment inserts a segment start before file f, line i, and
// re-hashes after it.
func (t *tamperer) forgeSegment(f, i int) {
	var seq uint64
	if e := t.before(f, i); e != nil {
		seq = e.Seq
	}
	var zero Hash
	open, _ := finishLine(appendOpen(appendHeader(nil, "n1", seq+1, &zero), newFakeClock().Now(), StartSegment, FileName(1), 0), 0)
	t.files[f] = slices.Insert(t.files[f], i, open)
	t.rehash(f, i)
}

// authenticated counts, per file, the records a checkpoint signs as
// written, from the bytes alone: a record is, when it and the lines after
// it, up to a checkpoint, are lines of base, consecutive there, with no
// segment start among them (a segment's chain starts from zero).
func authenticated(base, files [][][]byte) []int {
	index := map[string]int{}
	n := 0
	for _, f := range base {
		for _, l := range f {
			index[string(l)] = n
			n++
		}
	}
	type line struct {
		file, orig int
		b          []byte
	}
	var all []line
	for fi, f := range files {
		for _, l := range f {
			o, ok := index[string(l)]
			if !ok {
				o = -1
			}
			all = append(all, line{fi, o, l})
		}
	}
	out := make([]int, len(files))
	signed := false // whether the line after the current one is
	for k := len(all) - 1; k >= 0; k-- {
		l := all[k]
		switch {
		case l.orig < 0:
			signed = false
		case bytes.Contains(l.b, []byte(`"type":"checkpoint"`)):
			signed = true
		case k+1 == len(all), all[k+1].orig != l.orig+1, bytes.Contains(all[k+1].b, []byte(`"start":"segment"`)):
			signed = false
		}
		if signed && bytes.Contains(l.b, []byte(`"type":"record"`)) {
			out[l.file]++
		}
	}
	return out
}

// FuzzVerifyTamper: whatever a forger without the key does to a signed log
// (the edits of tamperer), Verify never takes it as fully signed unless
// its lines are the log's own, byte for byte; and told to accept unsigned
// lines (every crash tail, the tail), it never counts as signed a record
// that no checkpoint signs as written.
func FuzzVerifyTamper(f *testing.F) {
	base := tamperBase(f)
	lastFile := base[len(base)-1]
	last, err := ParseLine(bytes.TrimSuffix(lastFile[len(lastFile)-1], []byte("\n")))
	if err != nil {
		f.Fatal(err)
	}
	keys := keysOf(testSigner(f, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, prog []byte) {
		tm := &tamperer{prog: prog}
		for _, fl := range base {
			tm.files = append(tm.files, slices.Clone(fl))
		}
		tm.run()
		contents := make([][]byte, len(tm.files))
		names := make([]string, len(tm.files))
		for i, fl := range tm.files {
			contents[i], names[i] = bytes.Join(fl, nil), fmt.Sprintf("f%d", i+1)
		}
		sum, err := verifyBytes(VerifyOptions{Keys: keys, Node: "n1", Anchor: &Anchor{Seq: last.Seq, Hash: last.Hash}}, contents...)
		if err == nil {
			checkUntouched(t, base, contents, sum)
		}
		sum, err = verifyBytes(VerifyOptions{Keys: keys, AllowUnsignedTail: true, CrashTails: names}, contents...)
		if err == nil {
			checkSignedCounts(t, authenticated(base, tm.files), sum)
		}
	})
}

// checkUntouched: the files verified as fully signed, so they must be the
// base's lines, or (when Verify says it starts later) its last ones.
func checkUntouched(t *testing.T, base [][][]byte, contents [][]byte, sum *Summary) {
	t.Helper()
	var want []byte
	for _, fl := range base {
		want = append(want, bytes.Join(fl, nil)...)
	}
	got := bytes.Join(contents, nil)
	switch {
	case sum.Signed != sum.Records || len(sum.Runs) != 0:
		t.Fatalf("verified with unsigned lines and no option to accept them: %+v", sum)
	case sum.StartsAfter == "" && !bytes.Equal(got, want):
		t.Fatalf("verified as fully signed, but the lines are not the log's:\n%s", got)
	case !bytes.HasSuffix(want, got) || (len(got) < len(want) && want[len(want)-len(got)-1] != '\n'):
		t.Fatalf("verified from seq %d, but the lines are not the log's last:\n%s", sum.FirstSeq, got)
	}
}

// checkSignedCounts: no file has more records counted as signed than
// records a checkpoint signs as written (authenticated), and the records
// not counted are those of the runs listed.
func checkSignedCounts(t *testing.T, auth []int, sum *Summary) {
	t.Helper()
	total := 0
	for i, fs := range sum.ByFile {
		if fs.Signed > auth[i] {
			t.Fatalf("f%d: %d records counted as signed, but only %d are signed as written; %+v", i+1, fs.Signed, auth[i], sum)
		}
		total += fs.Signed
	}
	if total != sum.Signed || sum.Records-sum.Signed != unsignedRecords(sum.Runs) {
		t.Fatalf("signed %d (by file %d) of %d records, runs %+v", sum.Signed, total, sum.Records, sum.Runs)
	}
}
