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
// file of whole lines that parse, but for a last line without its newline,
// which only AllowUnsignedTail accepts, listed as torn.
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
		if !bytes.HasSuffix(data, []byte("\n")) {
			if n := len(sum.Runs); n == 0 || !sum.Runs[n-1].Torn {
				t.Fatalf("accepted %q, whose last line has no newline, without saying so: %+v", data, sum.Runs)
			}
			lines = lines[:len(lines)-1]
		}
		if len(lines) != sum.Lines {
			t.Fatalf("accepted %d lines of %q as %d", len(lines), data, sum.Lines)
		}
		for _, l := range lines {
			if _, err := ParseLine(bytes.TrimSuffix(l, []byte("\n"))); err != nil {
				t.Fatalf("accepted a line that does not parse: %v", err)
			}
		}
	})
}
