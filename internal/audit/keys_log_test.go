package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"
)

// A Log without keys (a sealed node) writes and chains every record but
// signs nothing and makes no digest; the first checkpoint after SetKeys
// signs the lines since, and the whole chain verifies.
func TestLogWithoutKeysUntilSetKeys(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, clock := newLog(t, func(c *Config) { c.Signer, c.Sealed = nil, true }, mem)
	if _, ok := l.Sum("jti-1"); ok {
		t.Error("Sum made a digest without an HMAC key")
	}
	if l.Signing() != nil {
		t.Error("Signing is set without a signer")
	}
	writeN(t, l, 0, 12) // past CheckpointEvery (5) twice
	clock.Tick()
	writeN(t, l, 12, 1) // the tick has been handled once this batch is
	if n := bytes.Count(mem.bytes(), []byte(`"type":"checkpoint"`)); n != 0 {
		t.Fatalf("%d checkpoints without a signer", n)
	}
	signer, mac := testSigner(t, 1), testHMACKey(t)
	l.SetKeys(signer, mac)
	if d, ok := l.Sum("jti-1"); !ok || !d.Equal(mac.Sum("jti-1")) {
		t.Error("Sum after SetKeys is not the key's digest")
	}
	if !bytes.Equal(l.Signing(), signer.Public()) {
		t.Error("Signing is not the signer's public key")
	}
	clock.Tick()
	waitFor(t, func() bool { return bytes.Count(mem.bytes(), []byte(`"type":"checkpoint"`)) == 1 })
	cp, ok := l.LastCheckpoint()
	if !ok || cp.Seq != 15 { // open, 13 records, checkpoint
		t.Errorf("LastCheckpoint = %+v %v, want seq 15", cp, ok)
	}
	closeLog(t, l)
	sum, err := verifyBytes(VerifyOptions{Keys: keysOf(signer), Node: "n1"}, mem.bytes())
	if err != nil {
		t.Fatalf("Verify: %v\n%s", err, mem.bytes())
	}
	if sum.Records != 13 || sum.Checkpoints != 1 || sum.Unsigned != 0 {
		t.Errorf("summary %+v: want 13 records and 1 checkpoint", sum)
	}
}

// Seal forgets the keys: the lines after are chained but unsigned, a
// restart without a signer reads the tail back with the previous public
// key, and the first checkpoint after the keys come back signs them all.
func TestLogForgetKeysAndRestartSealed(t *testing.T) {
	dir := t.TempDir()
	signer := testSigner(t, 1)
	l, _ := newLog(t, func(c *Config) { c.HMAC = testHMACKey(t) }, fileSink(t, dir, nil))
	writeN(t, l, 0, 7) // one checkpoint after 5
	l.SetKeys(nil, nil)
	if _, ok := l.Sum("x"); ok {
		t.Error("Sum after the keys were forgotten")
	}
	writeN(t, l, 7, 3)
	closeLog(t, l) // no final checkpoint: no signer
	files := dirFiles(t, dir)
	if _, err := Verify(VerifyOptions{Keys: keysOf(signer)}, files...); !errors.Is(err, ErrTampered) {
		t.Fatalf("a chain ending unsigned verified: %v", err)
	}

	// Sealed again at the restart: no signer, the public key given.
	l, err := New(Config{Node: "n1", Sealed: true, PreviousKeys: keysOf(signer), Sinks: []Sink{fileSink(t, dir, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatalf("Start without a signer: %v", err)
	}
	writeN(t, l, 10, 2)
	l.SetKeys(signer, nil)
	closeLog(t, l) // the final checkpoint signs everything since seq 7's
	// The lines written sealed before the stop were signed only after
	// the restart read them back: accepted only when asked.
	files = dirFiles(t, dir)
	var p *Problem
	if _, err := Verify(VerifyOptions{Keys: keysOf(signer), Node: "n1"}, files...); !errors.As(err, &p) || p.Kind != ProblemUnsignedRestart {
		t.Fatalf("Verify without CrashTails: %v, want %s", err, ProblemUnsignedRestart)
	}
	sum, err := Verify(VerifyOptions{Keys: keysOf(signer), Node: "n1", CrashTails: files[:1]}, files...)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// Records 0-4, before the first checkpoint, are signed as written;
	// 5-6, after it, and 7-9, written sealed, were unsigned at the stop;
	// 10-11, after the restart, are signed by the final checkpoint.
	if sum.Records != 12 || sum.Signed != 7 || sum.Restarts != 1 || sum.Adopted != 5 || len(sum.Runs) != 1 || sum.Runs[0].Records != 5 {
		t.Errorf("summary %+v: want 12 records, 7 signed, a restart and 5 adopted", sum)
	}
}

// Started without a signer, a Log reads its tail back with the keys it is
// given: none verifies a checkpoint (ErrBadTail), while a tail that never
// had one continues.
func TestLogStartWithoutKeys(t *testing.T) {
	signed := t.TempDir()
	l, _ := newLog(t, nil, fileSink(t, signed, nil))
	writeN(t, l, 0, 2)
	closeLog(t, l)
	l, err := New(Config{Node: "n1", Sealed: true, Sinks: []Sink{fileSink(t, signed, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	err = l.Start(context.Background())
	if !errors.Is(err, ErrBadTail) {
		t.Errorf("Start with no key for the tail's checkpoint: %v, want ErrBadTail", err)
	}
	l.Close(context.Background())
	var p *Problem
	if !errors.As(err, &p) || p.Kind != ProblemUnknownKey {
		t.Errorf("problem %v, want %s", err, ProblemUnknownKey)
	}

	unsigned := t.TempDir()
	for i := range 2 {
		l, err := New(Config{Node: "n1", Sealed: true, Sinks: []Sink{fileSink(t, unsigned, nil)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Start(context.Background()); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		writeN(t, l, 2*i, 2)
		closeLog(t, l)
	}
	files := dirFiles(t, unsigned)
	sum, err := Verify(VerifyOptions{Keys: []ed25519.PublicKey{testSigner(t, 1).Public()}, AllowUnsignedTail: true, CrashTails: files}, files...)
	if err != nil || sum.Records != 4 || sum.Signed != 0 || sum.Unsigned != sum.Lines || len(sum.Runs) != 2 {
		t.Errorf("unsigned chain: %+v %v", sum, err)
	}
}

// Files rotated while there is no signer end without a checkpoint; the
// next checkpoint, in a later file, signs them, and the files verify as
// one chain.
func TestLogRotatesWithoutSigner(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLog(t, func(c *Config) { c.Signer, c.Sealed = nil, true },
		fileSink(t, dir, func(c *FileConfig) { c.MaxSize = 600 }))
	writeN(t, l, 0, 12)
	signer := testSigner(t, 2)
	l.SetKeys(signer, nil)
	writeN(t, l, 12, 1)
	closeLog(t, l)
	files := dirFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("%d files, want rotations", len(files))
	}
	sum, err := Verify(VerifyOptions{Keys: keysOf(signer)}, files...)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if sum.Rotations != len(files)-1 || sum.Records != 13 {
		t.Errorf("summary %+v", sum)
	}
	// The batch after SetKeys closes the file it finds full (the last
	// record written without a signer's) with a checkpoint, and Close
	// rotates once more; the files before were closed without one.
	for _, f := range files[:len(files)-3] {
		if bytes.Contains(readFile(t, f), []byte(`"type":"checkpoint"`)) {
			t.Errorf("%s has a checkpoint, written without a signer", f)
		}
	}
}

// A pending record (written before a change) encodes, parses back and
// validates like any other result.
func TestPendingResult(t *testing.T) {
	r := testRecord(1)
	r.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r.Result = ResultPending
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	var prev Hash
	b := appendHeader(nil, "n1", 1, &prev)
	b = appendRecord(b, &r)
	b, _ = finishLine(b, 0)
	e, err := ParseLine(bytes.TrimSuffix(b, []byte("\n")))
	if err != nil || e.Record.Result != ResultPending || !bytes.Contains(b, []byte(`"result":"pending"`)) {
		t.Fatalf("pending record %s: %+v %v", b, e, err)
	}
}

func TestValidators(t *testing.T) {
	for _, c := range []struct {
		ok  bool
		got bool
	}{
		{true, Operation("admin.clients.create").Valid()},
		{false, Operation("admin").Valid()},
		{false, Operation("Admin.x").Valid()},
		{true, Reason("invalid_client").Valid()},
		{false, Reason("Bad Reason").Valid()},
		{true, ValidID("kgc_abc-1")},
		{false, ValidID("")},
		{false, ValidID("a b")},
		{false, ValidID(string(bytes.Repeat([]byte{'a'}, MaxIDLen+1)))},
		{true, ValidHashName("jti")},
		{false, ValidHashName("j.ti")},
	} {
		if c.ok != c.got {
			t.Errorf("case %+v", c)
		}
	}
}

// HMACKey.Sum is HMAC-SHA256 and allocates nothing in steady state (it is
// on the path of every audited request that records a hashed value).
func TestHMACSum(t *testing.T) {
	k := testHMACKey(t)
	m := hmac.New(sha256.New, bytes.Repeat([]byte{0x5a}, 32))
	m.Write([]byte("jti-1"))
	if got := k.Sum("jti-1"); got.String() != "hmac-sha256:"+hex.EncodeToString(m.Sum(nil)) {
		t.Errorf("Sum = %s", got)
	}
	if raceEnabled {
		return
	}
	if n := testing.AllocsPerRun(100, func() { k.Sum("a somewhat longer value to hash") }); n != 0 {
		t.Errorf("Sum allocates %v times, want 0", n)
	}
}

// While no sink takes a batch, Health is not ready; the Log tries again
// with a checkpoint on each tick, so that readiness comes back once a sink
// works, without a Write.
func TestHealthRecoversWithoutWrites(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, clock := newLog(t, nil, mem)
	defer closeLog(t, l)
	writeN(t, l, 0, 1)
	clock.Tick()
	waitFor(t, func() bool { return bytes.Count(mem.bytes(), []byte(`"type":"checkpoint"`)) == 1 })
	mem.setFail(errors.New("disk full"))
	if err := l.Write(context.Background(), testRecord(1)); !errors.Is(err, ErrNoSink) {
		t.Fatalf("Write to a failing sink: %v", err)
	}
	if l.Health().Ready {
		t.Fatal("ready although no sink took the last batch")
	}
	mem.setFail(nil)
	clock.Tick()
	waitFor(t, func() bool { return l.Health().Ready })
	writeN(t, l, 2, 1)
	closeLog(t, l)
	if _, err := verifyBytes(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, mem.bytes()); err != nil {
		t.Errorf("Verify: %v", err)
	}
}
