package audit

import (
	"bytes"
	"testing"
)

// FuzzParseLine: ParseLine never panics, and a line it accepts re-encodes
// to the same bytes.
func FuzzParseLine(f *testing.F) {
	for _, line := range splitLines(goldenChain(f)) {
		f.Add(bytes.TrimSuffix(line, []byte("\n")))
	}
	f.Add(bytes.TrimSuffix(aggregateLine(), []byte("\n")))
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseLine(line)
		if err != nil {
			return
		}
		if got := e.appendLine(nil); !bytes.Equal(got, line) {
			t.Fatalf("accepted\n%q\nre-encodes as\n%q", line, got)
		}
		if err := e.check(); err != nil {
			t.Fatalf("accepted a line that breaks the rules: %v", err)
		}
	})
}

// FuzzVerify: Verify never panics on any file, and what it accepts is a
// file of whole lines that parse.
func FuzzVerify(f *testing.F) {
	f.Add(goldenChain(f))
	chain := goldenChain(f)
	f.Add(chain[:len(chain)-1])
	f.Add(append(append([]byte(nil), chain...), chain...))
	keys := keysOf(testSigner(f, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		sum, err := verifyBytes(VerifyOptions{Keys: keys, AllowUnsignedTail: true}, data)
		if err != nil {
			return
		}
		lines := splitLines(data)
		if len(lines) != sum.Lines || !bytes.HasSuffix(data, []byte("\n")) {
			t.Fatalf("accepted %d lines of %q as %d", len(lines), data, sum.Lines)
		}
		for _, l := range lines {
			if _, err := ParseLine(bytes.TrimSuffix(l, []byte("\n"))); err != nil {
				t.Fatalf("accepted a line that does not parse: %v", err)
			}
		}
	})
}
