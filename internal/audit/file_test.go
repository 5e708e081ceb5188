package audit

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestFileSinkRotationContinuesTheChain(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLog(t, func(c *Config) { c.CheckpointEvery = 1000 }, fileSink(t, dir, func(c *FileConfig) { c.MaxSize = 2048 }))
	writeN(t, l, 0, 60)
	closeLog(t, l)

	files := dirFiles(t, dir)
	if len(files) < 4 {
		t.Fatalf("%d files, want at least 4", len(files))
	}
	sum, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1)), Node: "n1"}, files...)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 60 || sum.Rotations != len(files)-1 || len(sum.Warnings) != 0 {
		t.Errorf("summary %+v", sum)
	}
	for i, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, info.Mode().Perm())
		}
		lines := splitLines(readFile(t, f))
		first, last := parse(t, lines[0]), parse(t, lines[len(lines)-1])
		if filepath.Base(f) != FileName(first.Seq) {
			t.Errorf("%s begins with seq %d", f, first.Seq)
		}
		if last.Type != TypeCheckpoint {
			t.Errorf("%s does not end with a checkpoint", f)
		}
		if i > 0 && (first.Start != StartRotate || first.PrevFile != filepath.Base(files[i-1])) {
			t.Errorf("%s begins with %s", f, lines[0])
		}
	}
}

func TestFileSinkCreatesItsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "audit")
	l, _ := newLog(t, nil, fileSink(t, dir, nil))
	closeLog(t, l)
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("dir: %v %v", info, err)
	}
}

func TestRestartContinuesTheChain(t *testing.T) {
	dir := t.TempDir()
	for run := range 3 {
		l, _ := newLog(t, nil, fileSink(t, dir, nil))
		writeN(t, l, run*10, 7)
		closeLog(t, l)
	}
	files := dirFiles(t, dir)
	sum, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, files...)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || sum.Records != 21 || sum.Restarts != 2 || sum.Adopted != 0 {
		t.Errorf("%d files, summary %+v", len(files), sum)
	}
}

// copyDir copies the sink's files, as a crash would leave them.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	for _, f := range dirFiles(t, from) {
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), readFile(t, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func TestRestartAfterACrashAdoptsTheUnsignedTail(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLog(t, nil, fileSink(t, dir, nil))
	writeN(t, l, 0, 8) // a checkpoint after 5; three records after it
	crashed := copyDir(t, dir)
	closeLog(t, l)

	l, _ = newLog(t, nil, fileSink(t, crashed, nil))
	writeN(t, l, 8, 2)
	closeLog(t, l)
	files := dirFiles(t, crashed)
	var p *Problem
	_, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, files...)
	if !errors.As(err, &p) || p.Kind != ProblemUnsignedRestart || p.Seq != 10 || p.Since == nil || p.Since.Seq != 8 {
		t.Fatalf("Verify without CrashTails: %v, want %s at seq 10 since seq 8", err, ProblemUnsignedRestart)
	}
	sum, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1)), CrashTails: []string{filepath.Base(files[0])}}, files...)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 10 || sum.Signed != 7 || sum.Restarts != 1 || sum.Adopted != 3 || len(sum.Runs) != 1 || sum.ByFile[0].Signed != 7 {
		t.Errorf("summary %+v", sum)
	}
}

func TestStartRefusesATailThatDoesNotVerify(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"torn last line", func(t *testing.T, path string) {
			b := readFile(t, path)
			os.WriteFile(path, b[:len(b)-20], 0o600)
		}},
		{"edited line", func(t *testing.T, path string) {
			os.WriteFile(path, bytes.Replace(readFile(t, path), []byte(`"req":"req-1"`), []byte(`"req":"req-X"`), 1), 0o600)
		}},
		{"checkpoint of another key", func(t *testing.T, path string) {
			l, _ := newLog(t, func(c *Config) { c.Signer = testSigner(t, 9) }, fileSink(t, t.TempDir(), nil))
			closeLog(t, l)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			signer := testSigner(t, 1)
			if tt.name == "checkpoint of another key" {
				signer = testSigner(t, 9)
			}
			l, _ := newLog(t, func(c *Config) { c.Signer = signer }, fileSink(t, dir, nil))
			writeN(t, l, 0, 3)
			closeLog(t, l)
			damaged := dirFiles(t, dir)[0]
			if tt.name != "checkpoint of another key" {
				tt.damage(t, damaged)
			}
			before := readFile(t, damaged)

			l, err := New(Config{Node: "n1", Signer: testSigner(t, 1), Sinks: []Sink{fileSink(t, dir, nil)}})
			if err != nil {
				t.Fatal(err)
			}
			err = l.Start(context.Background())
			var te *TailError
			if !errors.Is(err, ErrBadTail) || !errors.As(err, &te) || te.File != damaged {
				t.Fatalf("Start: %v, want ErrBadTail for %s", err, damaged)
			}
			if err := l.Close(context.Background()); err != nil {
				t.Fatal(err)
			}

			// With NewSegment it begins a new chain in a new file and
			// leaves the damaged one as it was.
			l, _ = newLog(t, func(c *Config) { c.NewSegment = true }, fileSink(t, dir, nil))
			writeN(t, l, 10, 2)
			closeLog(t, l)
			files := dirFiles(t, dir)
			if len(files) != 2 || !bytes.Equal(readFile(t, damaged), before) {
				t.Fatalf("files %v", files)
			}
			sum, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, files[1])
			if err != nil || sum.Segments != 1 || sum.Records != 2 || sum.FirstSeq != 6 {
				t.Errorf("new segment: %v %+v", err, sum)
			}
			first := parse(t, splitLines(readFile(t, files[1]))[0])
			if first.Start != StartSegment || first.PrevFile != filepath.Base(damaged) {
				t.Errorf("segment begins %+v", first)
			}
		})
	}
}

func TestStartRefusesSinksThatDisagree(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	l, _ := newLog(t, nil, fileSink(t, a, nil))
	writeN(t, l, 0, 2)
	closeLog(t, l)
	l, _ = newLog(t, nil, fileSink(t, b, nil))
	writeN(t, l, 0, 3)
	closeLog(t, l)

	l, err := New(Config{Node: "n1", Signer: testSigner(t, 1), Sinks: []Sink{fileSink(t, a, nil), fileSink(t, b, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); !errors.Is(err, ErrChainMismatch) {
		t.Errorf("Start: %v, want ErrChainMismatch", err)
	}
	l.Close(context.Background())

	// A file that disagrees with the anchor kept elsewhere: with NewSegment,
	// a new segment after the newest seq either names.
	l, _ = newLog(t, func(c *Config) {
		c.After = &Anchor{Seq: 9, Hash: Hash{1}}
		c.NewSegment = true
	}, fileSink(t, a, nil))
	writeN(t, l, 0, 1)
	closeLog(t, l)
	files := dirFiles(t, a)
	first := parse(t, splitLines(readFile(t, files[len(files)-1]))[0])
	if len(files) != 2 || first.Start != StartSegment || first.Seq != 10 || first.PrevFile != filepath.Base(files[0]) {
		t.Errorf("files %v, the last beginning %+v", files, first)
	}
}

func TestStartRefusesAnotherNodesFiles(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLog(t, func(c *Config) { c.Node = "n2" }, fileSink(t, dir, nil))
	closeLog(t, l)
	l, err := New(Config{Node: "n1", Signer: testSigner(t, 1), Sinks: []Sink{fileSink(t, dir, nil)}, NewSegment: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err == nil || errors.Is(err, ErrBadTail) || !strings.Contains(err.Error(), "another node") {
		t.Errorf("Start: %v, want a refusal even with NewSegment", err)
	}
	l.Close(context.Background())
}

func TestAfterContinuesAChainKeptElsewhere(t *testing.T) {
	mem := &memSink{name: "store"}
	l, _ := newLog(t, nil, mem)
	writeN(t, l, 0, 2)
	closeLog(t, l)
	sum, err := verifyBytes(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, mem.bytes())
	if err != nil {
		t.Fatal(err)
	}
	l, _ = newLog(t, func(c *Config) { c.After = &Anchor{Seq: sum.LastSeq, Hash: sum.LastHash} }, mem)
	writeN(t, l, 2, 2)
	closeLog(t, l)
	sum, err = verifyBytes(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, mem.bytes())
	if err != nil || sum.Records != 4 || sum.Restarts != 1 {
		t.Errorf("%v %+v", err, sum)
	}
}

// quotaFile is a file on a disk that fills: writes past the quota write
// what fits and fail with ENOSPC.
type quotaFile struct {
	*os.File
	left *atomic.Int64
}

func (f quotaFile) Write(p []byte) (int, error) {
	left := f.left.Load()
	if int64(len(p)) <= left {
		f.left.Add(-int64(len(p)))
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:max(left, 0)])
	f.left.Add(-int64(n))
	return n, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

func TestFileSinkOnAFullDiskUndoesPartialWrites(t *testing.T) {
	dir := t.TempDir()
	var left atomic.Int64
	left.Store(1 << 30)
	s := fileSink(t, dir, nil)
	s.open = func(name string, flag int, perm fs.FileMode) (file, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return quotaFile{f, &left}, nil
	}
	l, _ := newLog(t, nil, s)
	defer l.Close(context.Background())
	writeN(t, l, 0, 3)
	left.Store(100) // the disk fills in the middle of the next line
	err := l.Write(context.Background(), testRecord(3))
	if !errors.Is(err, ErrNoSink) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write on a full disk: %v, want ErrNoSink wrapping ENOSPC", err)
	}
	if h := l.Health(); h.Ready || h.Sinks[0].OK {
		t.Errorf("health %+v", h)
	}
	left.Store(1 << 30) // space again
	writeN(t, l, 4, 2)
	closeLog(t, l)
	sum, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, dirFiles(t, dir)...)
	if err != nil || sum.Records != 5 {
		t.Errorf("after the disk filled: %v, %+v", err, sum)
	}
}

func TestFailClosedSinks(t *testing.T) {
	tests := []struct {
		name string
		sink func(t *testing.T) Sink
		// break, if set, breaks the sink after Start.
		breakIt func(t *testing.T, s Sink)
	}{
		{"a sink that returns errors", func(t *testing.T) Sink {
			return &memSink{name: "mem"}
		}, func(t *testing.T, s Sink) { s.(*memSink).setFail(errors.New("unavailable")) }},
		{"a writer on a full device", func(t *testing.T) Sink {
			f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Skip("no /dev/full:", err)
			}
			t.Cleanup(func() { f.Close() })
			return &switchSink{Sink: NewWriterSink("full", f)}
		}, func(t *testing.T, s Sink) { s.(*switchSink).on.Store(true) }},
		{"a file sink on a read-only directory", func(t *testing.T) Sink {
			if os.Geteuid() == 0 {
				t.Skip("root writes to read-only directories; the next case covers an unwritable path")
			}
			return fileSink(t, t.TempDir(), func(c *FileConfig) { c.MaxSize = 1 })
		}, func(t *testing.T, s Sink) {
			dir := s.(*FileSink).cfg.Dir
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
		}},
		{"a file sink whose directory is replaced by a file", func(t *testing.T) Sink {
			return fileSink(t, filepath.Join(t.TempDir(), "audit"), func(c *FileConfig) { c.MaxSize = 1 })
		}, func(t *testing.T, s Sink) {
			dir := s.(*FileSink).cfg.Dir
			if err := os.Rename(dir, dir+".gone"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.sink(t)
			l, _ := newLog(t, nil, s)
			defer l.Close(context.Background())
			writeN(t, l, 0, 1)
			tt.breakIt(t, s)
			for i := range 3 {
				if err := l.Write(context.Background(), testRecord(i)); !errors.Is(err, ErrNoSink) {
					t.Fatalf("Write %d: %v, want ErrNoSink", i, err)
				}
			}
			if h := l.Health(); h.Ready {
				t.Errorf("health %+v, want not ready", h)
			}
		})
	}
}

// switchSink passes writes through once on is set, and takes them
// without writing before, so that Start succeeds.
type switchSink struct {
	Sink
	on atomic.Bool
}

func (s *switchSink) Write(ctx context.Context, lines []Line) error {
	if !s.on.Load() {
		return nil
	}
	return s.Sink.Write(ctx, lines)
}

func TestStartFailsOnAnUnusablePath(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	l, err := New(Config{Node: "n1", Signer: testSigner(t, 1), Sinks: []Sink{fileSink(t, filepath.Join(notDir, "audit"), nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err == nil {
		t.Error("Start succeeded")
	}
	l.Close(context.Background())
}

func TestSyncPolicies(t *testing.T) {
	for _, p := range []SyncPolicy{SyncBatch, SyncInterval, SyncNever} {
		dir := t.TempDir()
		clock := newFakeClock()
		l, _ := newLog(t, nil, fileSink(t, dir, func(c *FileConfig) { c.Sync, c.Clock = p, clock }))
		writeN(t, l, 0, 3)
		clock.Tick()
		writeN(t, l, 3, 3)
		closeLog(t, l)
		if _, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, dirFiles(t, dir)...); err != nil {
			t.Errorf("policy %d: %v", p, err)
		}
	}
}

func TestConcurrentWritersLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: a stress test of concurrent writers; run without -short")
	}
	dir := t.TempDir()
	var batches, records atomic.Int64
	l, _ := newLog(t, func(c *Config) {
		c.CheckpointEvery = 100
		c.OnBatch = func(s BatchStats) {
			if s.Records > 0 {
				batches.Add(1)
				records.Add(int64(s.Records))
			}
		}
	}, fileSink(t, dir, func(c *FileConfig) { c.MaxSize = 64 << 10 }))
	const writers, each = 32, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() { writeN(t, l, w*each, each) })
	}
	wg.Wait()
	closeLog(t, l)
	sum, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, dirFiles(t, dir)...)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != writers*each || records.Load() != writers*each {
		t.Errorf("%d records in the files, %d in batches, want %d", sum.Records, records.Load(), writers*each)
	}
	t.Logf("%d batches, %.1f records per batch", batches.Load(), float64(records.Load())/float64(batches.Load()))
	content := string(bytes.Join(filesContent(t, dirFiles(t, dir)), nil))
	for i := range writers * each {
		if !strings.Contains(content, `"req":"req-`+strconv.Itoa(i)+`"`) {
			t.Fatalf("req-%d missing", i)
		}
	}
}

func filesContent(t *testing.T, files []string) [][]byte {
	var out [][]byte
	for _, f := range files {
		out = append(out, readFile(t, f))
	}
	return out
}

func TestCloseRacingWrites(t *testing.T) {
	for range 5 {
		dir := t.TempDir()
		l, _ := newLog(t, nil, fileSink(t, dir, func(c *FileConfig) { c.Sync = SyncNever }))
		var ok atomic.Int64
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := 0; ; i++ {
					err := l.Write(context.Background(), testRecord(w*100000+i))
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("Write: %v", err)
						return
					}
					ok.Add(1)
				}
			})
		}
		for ok.Load() < 200 {
			waitFor(t, func() bool { return ok.Load() >= 200 })
		}
		if err := l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		sum, err := Verify(VerifyOptions{Keys: keysOf(testSigner(t, 1))}, dirFiles(t, dir)...)
		if err != nil {
			t.Fatal(err)
		}
		if int64(sum.Records) != ok.Load() {
			t.Fatalf("%d records written, %d Writes succeeded", sum.Records, ok.Load())
		}
	}
}

// syncFile is a file whose Sync waits for release and then fails with err
// (when set), telling entered when it begins.
type syncFile struct {
	*os.File
	entered chan struct{}
	release chan struct{}
	err     *atomic.Pointer[error]
}

func (f syncFile) Sync() error {
	select {
	case f.entered <- struct{}{}:
	default:
	}
	<-f.release
	if e := f.err.Load(); e != nil {
		return *e
	}
	return f.File.Sync()
}

// The interval syncer does not hold the sink while the disk works: a
// Write goes through during a slow sync; a sync that fails breaks the sink.
func TestIntervalSyncDoesNotStallWrites(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock()
	sf := syncFile{entered: make(chan struct{}, 1), release: make(chan struct{}), err: new(atomic.Pointer[error])}
	s := fileSink(t, dir, func(c *FileConfig) { c.Sync, c.Clock = SyncInterval, clock })
	s.open = func(name string, flag int, perm fs.FileMode) (file, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		sf.File = f
		return sf, nil
	}
	l, _ := newLog(t, nil, s)
	writeN(t, l, 0, 3)
	clock.Tick() // the syncer begins a sync that takes until release
	select {
	case <-sf.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the interval syncer did not sync")
	}
	done := make(chan error, 1)
	go func() { done <- l.Write(context.Background(), testRecord(3)) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Write during a sync: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(sf.release)
		t.Fatal("a Write waited for the interval sync")
	}
	eio := error(syscall.EIO)
	sf.err.Store(&eio)
	close(sf.release) // the sync in progress fails
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.broken != nil
	})
	if err := l.Write(context.Background(), testRecord(4)); !errors.Is(err, ErrNoSink) || !errors.Is(err, ErrSinkBroken) {
		t.Errorf("Write after a failed sync: %v, want ErrNoSink and ErrSinkBroken", err)
	}
	l.Close(context.Background())
}
