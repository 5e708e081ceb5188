package runner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeProbe's CPU grows 0.5 s and its allocations 1,000 per read.
type fakeProbe struct {
	n       atomic.Int64
	fail    bool
	metrics bool
}

func (f *fakeProbe) Source() string {
	if f.metrics {
		return "metrics"
	}
	return "proc"
}

func (f *fakeProbe) Read(context.Context) (Sample, error) {
	if f.fail {
		return Sample{}, errors.New("unreachable")
	}
	n := float64(f.n.Add(1))
	return Sample{At: time.Now(), CPU: 0.5 * n, Mallocs: 1000 * n, AllocBytes: 64000 * n, HasAllocs: f.metrics, RSS: 1 << 20}, nil
}

func TestSampler(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: waits for one-second samples; run without -short")
	}
	for _, metrics := range []bool{true, false} {
		p := &fakeProbe{metrics: metrics}
		s := StartSampler(context.Background(), p, 10*time.Millisecond, 0, nil)
		time.Sleep(1100 * time.Millisecond) // the first sample, and the one a second later
		u, err := s.Finish(context.Background(), 500)
		if err != nil {
			t.Fatal(err)
		}
		reads := p.n.Load()
		if reads < 3 || u.CPUSeconds != 0.5*float64(reads-1) || u.RSSBytes != 1<<20 || len(u.Timeline) != int(reads-1) {
			t.Errorf("metrics %v: %d reads, usage %+v", metrics, reads, u)
		}
		if metrics && (u.Source != "metrics" || u.AllocsPerRequest != 1000*float64(reads-1)/500 || u.AllocsPerSec <= 0) {
			t.Errorf("metrics: %+v", u)
		}
		if !metrics && (u.Source != "proc" || u.AllocsPerSec != 0 || u.AllocsPerRequest != 0) {
			t.Errorf("proc: allocation figures from a probe without them: %+v", u)
		}
		if u.CPUPercent <= 0 {
			t.Errorf("cpu percent %v", u.CPUPercent)
		}
	}
	s := StartSampler(context.Background(), &fakeProbe{fail: true}, 0, 0, nil)
	time.Sleep(20 * time.Millisecond)
	if u, err := s.Finish(context.Background(), 1); err == nil || u != nil {
		t.Errorf("a probe that always fails: %+v, %v", u, err)
	}
}
