package audit

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// The threshold in force and whether the space is low, for the default
// (the smaller of 1 GiB and 5%), a configured threshold, and none.
func TestDiskSpaceThreshold(t *testing.T) {
	tests := []struct {
		name        string
		minFree     int64
		free, total uint64
		wantMin     uint64
		wantLow     bool
	}{
		{"default on a large disk, plenty free", 0, 10 * gib, 100 * gib, gib, false},
		{"default on a large disk, under 1 GiB free", 0, gib - 1, 100 * gib, gib, true},
		{"default on a small disk: 5%", 0, 600 * mib, 10 * gib, 512 * mib, false},
		{"default on a small disk, under 5% free", 0, 400 * mib, 10 * gib, 512 * mib, true},
		{"configured", 2 * gib, 1536 * mib, 100 * gib, 2 * gib, true},
		{"configured, more free", 2 * gib, 3 * gib, 100 * gib, 2 * gib, false},
		{"turned off", -1, 0, 100 * gib, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fileSink(t, t.TempDir(), func(c *FileConfig) {
				c.MinFree = tt.minFree
				c.Statfs = func(string) (uint64, uint64, error) { return tt.free, tt.total, nil }
			})
			ds, err := s.Space()
			if err != nil {
				t.Fatal(err)
			}
			if ds.MinFree != tt.wantMin || ds.Low != tt.wantLow || ds.Free != tt.free || ds.Total != tt.total {
				t.Errorf("Space() = %+v, want threshold %d, low %v", ds, tt.wantMin, tt.wantLow)
			}
		})
	}
}

// A disk that fills while the sink writes, with no one asking Space: the
// sink notices as it writes, and reports the space low (OnSpace) while
// writes still succeed; once space is freed, the next look reports it
// recovered.
func TestDiskSpaceLowBeforeWritesFail(t *testing.T) {
	var left atomic.Int64
	left.Store(4 * mib)
	var events []DiskSpace
	s := fileSink(t, t.TempDir(), func(c *FileConfig) {
		c.MinFree = 2 * mib
		c.Statfs = func(string) (uint64, uint64, error) { return uint64(max(left.Load(), 0)), 100 * gib, nil }
		c.OnSpace = func(ds DiskSpace) { events = append(events, ds) }
	})
	s.open = func(name string, flag int, perm fs.FileMode) (file, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return quotaFile{f, &left}, nil
	}
	defer s.Close()
	line := append(bytes.Repeat([]byte("x"), 64*kib-1), '\n')
	for seq := uint64(1); len(events) == 0; seq++ {
		if err := s.Write(context.Background(), []Line{{Seq: seq, Type: TypeRecord, Bytes: line}}); err != nil {
			t.Fatalf("write %d failed before the space was reported low (%d bytes left): %v", seq, left.Load(), err)
		}
	}
	if len(events) != 1 || !events[0].Low || events[0].Free < mib || events[0].Free >= 2*mib {
		t.Fatalf("events %+v: want one, low, with 1 to 2 MiB still free", events)
	}
	if err := s.Write(context.Background(), []Line{{Seq: 1000, Type: TypeRecord, Bytes: line}}); err != nil {
		t.Errorf("a write after the warning: %v", err)
	}
	left.Store(10 * mib) // an operator moved files away
	if ds, err := s.Space(); err != nil || ds.Low {
		t.Fatalf("Space after freeing: %+v, %v", ds, err)
	}
	if len(events) != 2 || events[1].Low {
		t.Errorf("events %+v: want the recovery reported", events)
	}
}

// Without a substitute, Space reads the real filesystem (statfs on Linux).
func TestDiskSpaceOfTheRealFilesystem(t *testing.T) {
	s := fileSink(t, t.TempDir(), nil)
	ds, err := s.Space()
	if runtime.GOOS != "linux" {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Space on %s: %v, want ErrUnsupported", runtime.GOOS, err)
		}
		return
	}
	if err != nil || ds.Total == 0 || ds.Free > ds.Total || ds.MinFree == 0 || ds.MinFree > DefaultMinFree {
		t.Errorf("Space() = %+v, %v", ds, err)
	}
	s = fileSink(t, "/nonexistent/keygate-audit", nil)
	if _, err := s.Space(); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Space of a missing directory: %v, want ENOENT", err)
	}
}
