package loadgen

import (
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
