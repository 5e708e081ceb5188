package audit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// encodeLine is the per-record work: the record's members (done by the
// caller's goroutine in Write), the header and the hash (by the writer,
// which keeps the hex of the last hash for the next line's prev, as here).
func encodeLine(buf []byte, r *Record, seq uint64, prev *Hash) ([]byte, Hash) {
	content := len(buf)
	buf = appendRecord(buf, r)
	start := len(buf)
	buf = appendHeaderHex(buf, "node-1", seq, benchPrevHex.of(prev))
	buf = append(buf, buf[content:start]...)
	buf, h := finishLine(buf, start)
	benchPrevHex.keep(h, buf)
	return buf, h
}

var benchPrevHex hashHex

func benchRecord(t testing.TB) Record {
	r := testRecord(1)
	r.Time = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	r.Hashed = map[string]Digest{"jti": testHMACKey(t).Sum("jti-1")}
	return r
}

// BenchmarkEncode is the CPU cost of one record's line: canonical encoding
// and SHA-256.
func BenchmarkEncode(b *testing.B) {
	r := benchRecord(b)
	var buf []byte
	var h Hash
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, h = encodeLine(buf[:0], &r, uint64(i+1), &h)
	}
	b.SetBytes(int64(len(buf) - len(appendRecord(nil, &r)))) // the line
}

func TestEncodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	r := benchRecord(t)
	var buf []byte
	var h Hash
	buf, h = encodeLine(buf, &r, 1, &h)
	if n := testing.AllocsPerRun(100, func() { buf, h = encodeLine(buf[:0], &r, 2, &h) }); n != 0 {
		t.Errorf("encoding a line allocates %v times, want 0", n)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { r.Validate() }); n != 0 {
		t.Errorf("Validate allocates %v times, want 0", n)
	}
}

// TestWriteAllocations: a Write allocates nothing in steady state, in the
// caller or in the writer goroutine: requests and their buffers are
// pooled, the writer's buffers reused, and a sink that needs no timeout
// gets no per-batch context.
func TestWriteAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	sinks := map[string]Sink{
		"discard":   discard{},
		"file sink": fileSink(t, t.TempDir(), func(c *FileConfig) { c.Sync = SyncNever }),
	}
	for name, sink := range sinks {
		t.Run(name, func(t *testing.T) {
			l, _ := newLog(t, func(c *Config) { c.CheckpointEvery = 1 << 30 }, sink)
			defer closeLog(t, l)
			r := benchRecord(t)
			ctx := context.Background()
			writeN(t, l, 0, 10)
			n := testing.AllocsPerRun(200, func() {
				if err := l.Write(ctx, r); err != nil {
					t.Fatal(err)
				}
			})
			if n != 0 {
				t.Errorf("Write allocates %v times, want 0", n)
			}
		})
	}
}

type discard struct{}

func (discard) Name() string                        { return "discard" }
func (discard) Write(context.Context, []Line) error { return nil }
func (discard) Close() error                        { return nil }

// BenchmarkWrite writes records from 1, 8 and 64 goroutines to a file sink
// that syncs every batch, or never, and to a sink that discards (the Log's
// own ceiling). ns/op is wall time per record; records/s and the mean
// batch size are reported too.
func BenchmarkWrite(b *testing.B) {
	sinks := []struct {
		name string
		sink func(b *testing.B) Sink
	}{
		{"file-sync-batch", func(b *testing.B) Sink { return fileSink(b, b.TempDir(), nil) }},
		{"file-sync-never", func(b *testing.B) Sink {
			return fileSink(b, b.TempDir(), func(c *FileConfig) { c.Sync = SyncNever })
		}},
		{"discard", func(b *testing.B) Sink { return discard{} }},
	}
	for _, s := range sinks {
		for _, writers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("sink=%s/writers=%d", s.name, writers), func(b *testing.B) {
				var batches, records atomic.Int64
				l, _ := newLog(b, func(c *Config) {
					c.Clock = SystemClock
					c.CheckpointEvery = DefaultCheckpointEvery
					c.OnBatch = func(s BatchStats) {
						if s.Records > 0 {
							batches.Add(1)
							records.Add(int64(s.Records))
						}
					}
				}, s.sink(b))
				r := benchRecord(b)
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				var next atomic.Int64
				var wg sync.WaitGroup
				for range writers {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							if err := l.Write(ctx, r); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
				if n := batches.Load(); n > 0 {
					b.ReportMetric(float64(records.Load())/float64(n), "records/batch")
				}
				closeLog(b, l)
			})
		}
	}
}
