package loadgen

import (
	"context"
	"runtime"
	"time"
)

// This file lets other generators (HTTP/2 here, gRPC in internal/grpcload)
// report in the same Result, counted and summarised the same way.

// CPUTime is the process's CPU time so far (getrusage RUSAGE_SELF), for
// Result.Summarize.
type CPUTime struct {
	t  cpuTimes
	at time.Time // when it was read
}

// ReadCPUTime returns the process's CPU time so far.
func ReadCPUTime() CPUTime { return CPUTime{readCPU(), time.Now()} }

// Summarize fills what r derives from r.Hist and r.Seconds (Requests,
// RequestsPerSec, Latency, Histogram) and the generator's CPU use between
// from and to, as a share of the time between those readings, as Run does.
func (r *Result) Summarize(from, to CPUTime) {
	if r.Hist == nil {
		r.Hist = new(Histogram)
	}
	r.fill(to.t.sub(from.t), max(to.at.Sub(from.at), 0), runtime.GOMAXPROCS(0))
}

// Count counts one answer of the given status.
func (s *StatusCounts) Count(status int) { s.count(status) }

// Add adds o's counts to s.
func (s *StatusCounts) Add(o *StatusCounts) { s.add(o) }

// Add adds o's counts to e.
func (e *ErrorCounts) Add(o *ErrorCounts) { e.add(o) }

// SleepUntil waits on timer until t; false means ctx ended first. It is
// how an open-loop sender waits for its next request's time.
func SleepUntil(ctx context.Context, timer *time.Timer, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer.Reset(d)
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ReportProgress calls progress about once a second with the answers
// measured so far (measured: the sum of each sender's count), until done
// is closed; then it closes exit. start and measure are the run's start
// and the end of its warm-up.
func ReportProgress(progress func(Progress), start, measure time.Time, measured func() int64, done <-chan struct{}, exit chan<- struct{}) {
	defer close(exit)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			progress(Progress{Elapsed: now.Sub(start), Measuring: !now.Before(measure), Requests: measured()})
		}
	}
}
