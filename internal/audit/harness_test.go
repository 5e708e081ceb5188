package audit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a Clock whose time and tickers the test drives.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) NewTicker(time.Duration) Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTicker{c: make(chan time.Time, 1)}
	c.tickers = append(c.tickers, t)
	return t
}

// Tick fires every ticker once.
func (c *fakeClock) Tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.tickers {
		select {
		case t.c <- c.now:
		default:
		}
	}
}

type fakeTicker struct{ c chan time.Time }

func (t *fakeTicker) C() <-chan time.Time { return t.c }
func (t *fakeTicker) Stop()               {}

// memSink keeps lines in memory and fails while fail is set.
type memSink struct {
	name    string
	mu      sync.Mutex
	buf     bytes.Buffer
	fail    error
	block   chan struct{} // if set, Write waits for it
	blocked atomic.Int32  // Writes waiting for block
	calls   int
}

func (m *memSink) Name() string { return m.name }

func (m *memSink) Write(ctx context.Context, lines []Line) error {
	m.mu.Lock()
	block := m.block
	m.mu.Unlock()
	if block != nil {
		m.blocked.Add(1)
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.fail != nil {
		return m.fail
	}
	for _, l := range lines {
		m.buf.Write(l.Bytes)
	}
	return nil
}

func (m *memSink) Close() error { return nil }

func (m *memSink) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func (m *memSink) bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.buf.Bytes())
}

// newLog starts a Log over sinks with a fake clock; mod adjusts the
// configuration first. Close is the test's to call.
func newLog(t testing.TB, mod func(*Config), sinks ...Sink) (*Log, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	cfg := Config{Node: "n1", Signer: testSigner(t, 1), Sinks: sinks, Clock: clock, CheckpointEvery: 5}
	if mod != nil {
		mod(&cfg)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		l.Close(context.Background())
		t.Fatal(err)
	}
	return l, clock
}

func fileSink(t testing.TB, dir string, mod func(*FileConfig)) *FileSink {
	t.Helper()
	cfg := FileConfig{Dir: dir}
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewFileSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeN(t testing.TB, l *Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := l.Write(context.Background(), testRecord(i)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
}

func closeLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// dirFiles returns the sink's files in a directory, in order.
func dirFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
