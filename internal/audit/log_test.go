package audit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLogWritesAVerifiableChain(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, _ := newLog(t, nil, mem)
	writeN(t, l, 0, 12)
	cp, ok := l.LastCheckpoint()
	closeLog(t, l)

	sum, err := verifyBytes(VerifyOptions{Keys: keysOf(testSigner(t, 1)), Node: "n1"}, mem.bytes())
	if err != nil {
		t.Fatalf("Verify: %v\n%s", err, mem.bytes())
	}
	// open, 5 records, checkpoint, 5 records, checkpoint, 2 records, final checkpoint
	want := Summary{Node: "n1", Files: 1, Lines: 16, Records: 12, Checkpoints: 3, FirstSeq: 1, LastSeq: 16}
	if sum.Node != want.Node || sum.Lines != want.Lines || sum.Records != want.Records ||
		sum.Checkpoints != want.Checkpoints || sum.FirstSeq != want.FirstSeq || sum.LastSeq != want.LastSeq {
		t.Errorf("summary %+v, want %+v", sum, want)
	}
	if !ok || cp.Seq != 13 {
		t.Errorf("LastCheckpoint before Close = %+v %v, want seq 13", cp, ok)
	}
	if sum.LastCheckpoint.Seq != 16 || sum.LastCheckpoint.Hash != sum.LastHash {
		t.Errorf("last checkpoint %+v, want the last line", sum.LastCheckpoint)
	}
}

func TestCheckpointOnTick(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, clock := newLog(t, func(c *Config) { c.CheckpointEvery = 1000 }, mem)
	defer closeLog(t, l)
	writeN(t, l, 0, 2)
	clock.Tick()
	waitFor(t, func() bool { return bytes.Count(mem.bytes(), []byte(`"type":"checkpoint"`)) == 1 })
	clock.Tick() // nothing new since: no second checkpoint
	writeN(t, l, 2, 1)
	if n := bytes.Count(mem.bytes(), []byte(`"type":"checkpoint"`)); n != 1 {
		t.Errorf("%d checkpoints, want 1", n)
	}
}

// TestCheckpointOnRequest: Log.Checkpoint signs every line written so far
// before it returns, while the Log runs, and returns the checkpoint; with
// nothing unsigned it writes nothing; without a signer it fails.
func TestCheckpointOnRequest(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, _ := newLog(t, func(c *Config) { c.CheckpointEvery = 1000 }, mem)
	writeN(t, l, 0, 3)
	keys := keysOf(testSigner(t, 1))
	if _, err := verifyBytes(VerifyOptions{Keys: keys}, mem.bytes()); !isProblem(err, ProblemUnsignedTail) {
		t.Fatalf("before Checkpoint: %v, want %s", err, ProblemUnsignedTail)
	}
	cp, err := l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sum, err := verifyBytes(VerifyOptions{Keys: keys, Anchor: &cp}, mem.bytes())
	if err != nil || sum.LastCheckpoint != cp || sum.LastSeq != cp.Seq || sum.Signed != 3 {
		t.Fatalf("after Checkpoint %+v: %v %+v", cp, err, sum)
	}
	before := mem.bytes()
	if again, err := l.Checkpoint(context.Background()); err != nil || again != cp || !bytes.Equal(mem.bytes(), before) {
		t.Errorf("Checkpoint with nothing unsigned: %+v %v, wrote %d bytes", again, err, len(mem.bytes())-len(before))
	}
	l.SetKeys(nil, nil)
	if _, err := l.Checkpoint(context.Background()); !errors.Is(err, ErrNoSigner) {
		t.Errorf("Checkpoint without a signer: %v, want ErrNoSigner", err)
	}
	closeLog(t, l)
	if _, err := l.Checkpoint(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Checkpoint after Close: %v, want ErrClosed", err)
	}
	unstarted, err := New(Config{Node: "n1", Signer: testSigner(t, 1), Sinks: []Sink{&memSink{name: "mem"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unstarted.Checkpoint(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Checkpoint before Start: %v, want ErrNotStarted", err)
	}
}

// TestSignAfter: a record of an operation in Config.SignAfter is followed
// by a checkpoint in its own batch, so that the files are signed up to it
// when its Write returns; another operation's is not.
func TestSignAfter(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, _ := newLog(t, func(c *Config) { c.CheckpointEvery, c.SignAfter = 1000, []Operation{"admin.audit.read"} }, mem)
	defer closeLog(t, l)
	keys := keysOf(testSigner(t, 1))
	writeN(t, l, 0, 2)
	if _, err := verifyBytes(VerifyOptions{Keys: keys}, mem.bytes()); !isProblem(err, ProblemUnsignedTail) {
		t.Fatalf("after records of another operation: %v, want %s", err, ProblemUnsignedTail)
	}
	// A refused request read nothing of the log's state, and whoever can
	// send one must not get a checkpoint (a line and a signature) each.
	for _, res := range []Result{ResultRefused, ResultError} {
		r := testRecord(2)
		r.Operation, r.Result, r.Principal, r.Status = "admin.audit.read", res, Principal{}, 401
		if err := l.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if _, err := verifyBytes(VerifyOptions{Keys: keys}, mem.bytes()); !isProblem(err, ProblemUnsignedTail) {
			t.Fatalf("after a %s record of a SignAfter operation: %v, want %s", res, err, ProblemUnsignedTail)
		}
	}
	r := testRecord(2)
	r.Operation = "admin.audit.read"
	if err := l.Write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	sum, err := verifyBytes(VerifyOptions{Keys: keys}, mem.bytes())
	if err != nil || sum.Signed != 5 || sum.Checkpoints != 1 {
		t.Errorf("after a SignAfter record: %v %+v", err, sum)
	}
}

func isProblem(err error, kind ProblemKind) bool {
	var p *Problem
	return errors.As(err, &p) && p.Kind == kind
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWriteLifecycle(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, err := New(Config{Node: "n1", Signer: testSigner(t, 1), Sinks: []Sink{mem}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(context.Background(), testRecord(0)); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Write before Start: %v, want ErrNotStarted", err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
	closeLog(t, l)
	if err := l.Write(context.Background(), testRecord(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if h := l.Health(); h.Running || h.Ready {
		t.Errorf("health after Close %+v", h)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	mem := &memSink{name: "mem"}
	k := testSigner(t, 1)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no node", Config{Signer: k, Sinks: []Sink{mem}}},
		{"node with a space", Config{Node: "n 1", Signer: k, Sinks: []Sink{mem}}},
		{"no signer", Config{Node: "n1", Sinks: []Sink{mem}}},
		{"no sinks", Config{Node: "n1", Signer: k}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); err == nil {
				t.Error("New succeeded")
			}
		})
	}
}

func TestWriteRefusesInvalidRecord(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, _ := newLog(t, nil, mem)
	defer closeLog(t, l)
	r := testRecord(0)
	r.Operation = "Encrypt"
	err := l.Write(context.Background(), r)
	var fe *FieldError
	if !errors.Is(err, ErrInvalidRecord) || !errors.As(err, &fe) || fe.Field != "Operation" {
		t.Errorf("Write: %v, want a FieldError for Operation", err)
	}
}

func TestFailClosedWhenNoSinkAccepts(t *testing.T) {
	boom := errors.New("boom")
	a, b := &memSink{name: "a"}, &memSink{name: "b"}
	l, _ := newLog(t, nil, a, b)
	defer l.Close(context.Background())
	writeN(t, l, 0, 2)
	a.setFail(boom)
	b.setFail(boom)
	err := l.Write(context.Background(), testRecord(2))
	var we *WriteError
	if !errors.Is(err, ErrNoSink) || !errors.Is(err, boom) || !errors.As(err, &we) || len(we.Sinks) != 2 {
		t.Fatalf("Write: %v, want a WriteError for both sinks", err)
	}
	if h := l.Health(); h.Ready || h.Sinks[0].OK || h.Sinks[1].OK {
		t.Errorf("health %+v, want not ready", h)
	}
	// The failed batch is undone: the next record takes its seq, and
	// neither sink gets it later.
	a.setFail(nil)
	b.setFail(nil)
	writeN(t, l, 3, 1)
	closeLog(t, l)
	for _, s := range []*memSink{a, b} {
		sum, err := verifyBytes(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, s.bytes())
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if sum.Records != 3 || bytes.Contains(s.bytes(), []byte(`"req":"req-2"`)) {
			t.Errorf("%s: %d records, want 3 without req-2", s.name, sum.Records)
		}
	}
}

func TestPartialFailureKeepsEverySinkWhole(t *testing.T) {
	boom := errors.New("boom")
	good, flaky := &memSink{name: "good"}, &memSink{name: "flaky"}
	var logs bytes.Buffer
	var failures atomic.Int64
	var batches atomic.Int64
	var self atomic.Pointer[Log]
	l, _ := newLog(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))
		c.OnSinkFailure = func(sink string, err error) {
			if sink == "flaky" && errors.Is(err, boom) {
				failures.Add(1)
			}
			self.Load().Health() // a callback may ask for health
		}
		c.OnBatch = func(s BatchStats) {
			if s.Failed == 1 && s.Accepted == 1 {
				batches.Add(1)
			}
		}
	}, good, flaky)
	self.Store(l)
	writeN(t, l, 0, 3)
	flaky.setFail(boom)
	writeN(t, l, 3, 4) // succeed: good takes them
	h := l.Health()
	if !h.Ready || !h.Sinks[0].OK || h.Sinks[1].OK || h.Sinks[1].Failures != 4 || h.Sinks[1].Backlog == 0 || !errors.Is(h.Sinks[1].Err, boom) {
		t.Errorf("health %+v", h)
	}
	if failures.Load() != 4 || batches.Load() != 4 {
		t.Errorf("OnSinkFailure %d times, OnBatch with one failure %d times, want 4", failures.Load(), batches.Load())
	}
	if !strings.Contains(logs.String(), "sink failed") || !strings.Contains(logs.String(), "sink=flaky") {
		t.Errorf("log lacks the failure:\n%s", logs.String())
	}
	flaky.setFail(nil)
	writeN(t, l, 7, 2) // flaky gets what it missed first
	if h := l.Health(); !h.Sinks[1].OK || h.Sinks[1].Backlog != 0 {
		t.Errorf("health after recovery %+v", h)
	}
	closeLog(t, l)
	if !bytes.Equal(good.bytes(), flaky.bytes()) {
		t.Errorf("the sinks hold different chains:\n%s\n---\n%s", good.bytes(), flaky.bytes())
	}
	if _, err := verifyBytes(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, flaky.bytes()); err != nil {
		t.Error(err)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestBacklogLimitDisablesSink(t *testing.T) {
	good, flaky := &memSink{name: "good"}, &memSink{name: "flaky"}
	l, _ := newLog(t, func(c *Config) { c.MaxBacklog = 3 }, good, flaky)
	defer closeLog(t, l)
	flaky.setFail(errors.New("down"))
	writeN(t, l, 0, 5)
	flaky.setFail(nil)
	writeN(t, l, 5, 1)
	h := l.Health()
	if !h.Sinks[1].Disabled || h.Sinks[1].OK || !h.Ready {
		t.Errorf("health %+v, want flaky disabled and the log ready", h)
	}
	if bytes.Contains(flaky.bytes(), []byte(`"req":"req-5"`)) {
		t.Error("a disabled sink was written to")
	}
}

func TestQueueFullWaitsForContext(t *testing.T) {
	mem := &memSink{name: "mem"}
	l, _ := newLog(t, func(c *Config) { c.QueueSize, c.MaxBatch = 1, 1 }, mem)
	mem.mu.Lock()
	mem.block = make(chan struct{})
	mem.mu.Unlock()
	errs := make(chan error, 2)
	go func() { errs <- l.Write(context.Background(), testRecord(0)) }() // held in the sink
	waitFor(t, func() bool { return mem.blocked.Load() == 1 })
	go func() { errs <- l.Write(context.Background(), testRecord(1)) }() // fills the queue
	waitFor(t, func() bool { return len(l.queue) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := l.Write(ctx, testRecord(2))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNoSink) {
		t.Errorf("Write to a full queue: %v, want DeadlineExceeded", err)
	}
	close(mem.block)
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	closeLog(t, l)
	if bytes.Contains(mem.bytes(), []byte(`"req":"req-2"`)) {
		t.Error("the record refused for a full queue was written")
	}
}
