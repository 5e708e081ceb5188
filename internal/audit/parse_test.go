package audit

import (
	"bytes"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenChain encodes a small chain with every kind of line and member,
// from fixed keys and times.
func goldenChain(t testing.TB) []byte {
	t.Helper()
	k, hk := testSigner(t, 1), testHMACKey(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	var buf, scratch []byte
	var prev Hash
	var seq uint64
	add := func(content func([]byte, int) []byte) {
		seq++
		start := len(buf)
		buf = appendHeader(buf, "node-1", seq, &prev)
		buf = content(buf, start)
		buf, prev = finishLine(buf, start)
	}
	add(func(b []byte, _ int) []byte { return appendOpen(b, t0, StartNew, "", 0) })
	full := Record{
		Time: t0.Add(time.Millisecond), RequestID: "r-17", Tenant: "acme",
		Principal: Principal{Kind: PrincipalClient, ID: "kgc_orders"}, Operation: "transit.encrypt",
		Key: KeyRef{Name: "orders", Version: 3}, Result: ResultOK, Status: 200,
		Remote: netip.MustParseAddr("10.0.0.7"),
		Hashed: map[string]Digest{"ref": hk.Sum("client-ref-1"), "jti": hk.Sum("jti-1")},
	}
	add(func(b []byte, _ int) []byte { return appendRecord(b, &full) })
	minimal := Record{Time: t0.Add(2 * time.Millisecond), Operation: "oauth2.token", Result: ResultRefused}
	add(func(b []byte, _ int) []byte { return appendRecord(b, &minimal) })
	add(func(b []byte, _ int) []byte { return appendOpen(b, t0.Add(time.Second), StartRestart, "", 3) })
	refused := Record{
		Time: t0.Add(2 * time.Second), Principal: Principal{Kind: PrincipalUser, ID: "kgu_1"},
		Operation: "admin.clients.create", Result: ResultError, Reason: "store_unavailable", Status: 503,
		Remote: netip.MustParseAddr("2001:db8::7"),
	}
	add(func(b []byte, _ int) []byte { return appendRecord(b, &refused) })
	add(func(b []byte, start int) []byte {
		b = appendCheckpoint(b, t0.Add(3*time.Second), k.KeyID())
		b, scratch = signCheckpoint(b, start, k, scratch)
		return b
	})
	return buf
}

func TestGoldenLines(t *testing.T) {
	got := goldenChain(t)
	path := filepath.Join("testdata", "chain.golden.jsonl")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("encoding changed (go test -update if on purpose):\n%s\nwant:\n%s", got, want)
	}
	// Its restart follows lines no checkpoint signed: accepted only when
	// asked, and not counted as signed.
	opts := VerifyOptions{Keys: keysOf(testSigner(t, 1)), Node: "node-1"}
	var p *Problem
	if _, err := verifyBytes(opts, want); !errors.As(err, &p) || p.Kind != ProblemUnsignedRestart || p.Position.String() != "f1:3 (seq 3)" {
		t.Errorf("golden chain without CrashTails: %v", err)
	}
	opts.CrashTails = []string{"f1"}
	sum, err := verifyBytes(opts, want)
	run := UnsignedRun{Kind: ProblemUnsignedRestart, From: Position{"f1", 1, 1}, To: Position{"f1", 3, 3}, Lines: 3, Records: 2}
	if err != nil || sum.Records != 3 || sum.Signed != 1 || sum.Checkpoints != 1 || sum.Restarts != 1 || len(sum.Runs) != 1 || sum.Runs[0] != run {
		t.Errorf("golden chain: %v %+v", err, sum)
	}
}

func TestParseLineRoundTrips(t *testing.T) {
	lines := splitLines(goldenChain(t))
	// Lines the golden chain lacks: a rotation and a new segment.
	var prev Hash
	for _, open := range []struct {
		s    Start
		file string
	}{{StartRotate, FileName(7)}, {StartSegment, FileName(1)}} {
		b := appendOpen(appendHeader(nil, "n", 9, &prev), time.Unix(0, 0), open.s, open.file, 0)
		line, _ := finishLine(b, 0)
		lines = append(lines, line)
	}
	lines = append(lines, aggregateLine())
	for _, line := range lines {
		line = bytes.TrimSuffix(line, []byte("\n"))
		e, err := ParseLine(line)
		if err != nil {
			t.Fatalf("ParseLine(%s): %v", line, err)
		}
		if !e.HashMatches() {
			t.Errorf("hash does not match: %s", line)
		}
		if got := e.appendLine(nil); !bytes.Equal(got, line) {
			t.Errorf("re-encoded\n%s\nwant\n%s", got, line)
		}
	}
}

// aggregateLine is a line of an aggregate record (Record.Count), which the
// golden chain lacks.
func aggregateLine() []byte {
	var prev Hash
	t1 := time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	r := Record{Time: t1, Operation: "transit.request", Result: ResultRefused, Reason: "permission_denied", Status: 429,
		Remote: netip.MustParseAddr("192.0.2.9"), Count: 968, Since: t1.Add(-59 * time.Second)}
	line, _ := finishLine(appendRecord(appendHeader(nil, "n", 9, &prev), &r), 0)
	return line
}

func TestParseLineRefusesOtherForms(t *testing.T) {
	lines := splitLines(goldenChain(t))
	agg := string(bytes.TrimSuffix(aggregateLine(), []byte("\n")))
	full := string(bytes.TrimSuffix(lines[1], []byte("\n")))
	cp := string(bytes.TrimSuffix(lines[5], []byte("\n")))
	e, _ := ParseLine([]byte(full))
	jti := e.Record.Hashed["jti"].String()
	ref := e.Record.Hashed["ref"].String()
	tests := []struct {
		name, line, old, new string
	}{
		{"a space after a colon", full, `"seq":2`, `"seq": 2`},
		{"a space after the object", full, `"}`, `"} `},
		{"members in another order", full, `"req":"r-17","tenant":"acme"`, `"tenant":"acme","req":"r-17"`},
		{"an escape in a string", full, `"req":"r-17"`, `"req":"r\u002d17"`},
		{"upper-case hex", full, `"prev":"`, `"prev":"A`},
		{"a leading zero", full, `"seq":2`, `"seq":02`},
		{"seq 0", full, `"seq":2`, `"seq":0`},
		{"seq past uint64", full, `"seq":2`, `"seq":18446744073709551616`},
		{"version 0 written out", full, `"version":3`, `"version":0`},
		{"an empty reason written out", full, `"status":200`, `"reason":"","status":200`},
		{"an unknown member", full, `"status":200`, `"status":200,"extra":"x"`},
		{"an unknown type", full, `"type":"record"`, `"type":"note"`},
		{"another version", full, `{"v":1`, `{"v":2`},
		{"trailing data", full, `"}`, `"}x`},
		{"no hash", full, `,"hash":"`, `,"hsah":"`},
		{"hmac names out of order", full, `"jti":"` + jti + `","ref":"` + ref, `"ref":"` + ref + `","jti":"` + jti},
		{"a repeated hmac name", full, `"ref":"` + ref, `"jti":"` + jti},
		{"a raw value as digest", full, `"jti":"` + jti, `"jti":"jti-1"`},
		{"three fractional digits", full, `.124456789Z`, `.124Z`},
		{"a time zone", full, `.124456789Z`, `.124456789+01:00`},
		{"a remote address in another form", full, `"remote":"10.0.0.7"`, `"remote":"::ffff:a00:7"`},
		{"status 600", full, `"status":200`, `"status":600`},
		{"a NUL byte", full, `"r-17"`, "\"r-\x0017\""},
		{"non-ASCII", full, `"acme"`, `"acmé"`},
		{"an unknown result", full, `"result":"ok"`, `"result":"fine"`},
		{"an unknown principal kind", full, `"kind":"client"`, `"kind":"robot"`},
		{"a count of 0 written out", agg, `"count":968`, `"count":0`},
		{"a count without since", agg, `,"since":"2026-01-02T03:04:01.000000000Z"`, ``},
		{"since before count", agg, `"count":968,"since":"2026-01-02T03:04:01.000000000Z"`, `"since":"2026-01-02T03:04:01.000000000Z","count":968`},
		{"since after time", agg, `"since":"2026-01-02T03:04:01`, `"since":"2026-01-02T03:05:01`},
		{"since in another form", agg, `"since":"2026-01-02T03:04:01.000000000Z"`, `"since":"2026-01-02T03:04:01Z"`},
		{"an aggregate with a request id", agg, `"type":"record",`, `"type":"record","req":"r-1",`},
		{"a padded signature", cp, `","hash"`, `=","hash"`},
		{"a short key id", cp, `"kid":"`, `"kid":"0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(tt.line, tt.old) {
				t.Fatalf("%q not in %s", tt.old, tt.line)
			}
			line := strings.Replace(tt.line, tt.old, tt.new, 1)
			if e, err := ParseLine([]byte(line)); !errors.Is(err, ErrMalformed) {
				t.Errorf("ParseLine(%s) = %+v, %v; want ErrMalformed", line, e, err)
			}
		})
	}
}
