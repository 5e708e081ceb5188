package loadgen

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// This file lets other generators (HTTP/2 here, gRPC in internal/grpcload)
// report in the same Result, counted and summarised the same way.

// cpuReading is the process's CPU time (getrusage RUSAGE_SELF) and when
// it was read, which on a busy generator may be late.
type cpuReading struct {
	t  cpuTimes
	at time.Time
}

func readCPUNow() cpuReading { return cpuReading{readCPU(), time.Now()} }

// Window is what Drive measured of a run: the measured window's length and
// the generator's CPU time over it.
type Window struct {
	seconds  float64
	from, to cpuReading
}

// Drive runs send(i) for each of n senders, each until the run stops, and
// measures the window: it begins at measure, the end of the warm-up (the
// requests measured are those sent from then on, however late the timer
// fires), or when the senders are done if that comes first; it ends when
// they are done, at measure+cfg.Duration at the latest. With
// cfg.Progress, measured (the answers counted so far) is reported about
// once a second. Run, RunHTTP2 and internal/grpcload all run this way.
func Drive(cfg Config, start, measure time.Time, n int, measured func() int64, send func(i int)) Window {
	var w Window
	var t0 time.Time
	done := make(chan struct{})
	began := make(chan struct{})
	go func() {
		defer close(began)
		t := time.NewTimer(time.Until(measure))
		defer t.Stop()
		select {
		case <-t.C:
			w.from, t0 = readCPUNow(), measure
		case <-done:
			w.from = readCPUNow()
			t0 = w.from.at
		}
	}()
	progressDone := make(chan struct{})
	if cfg.Progress != nil {
		go reportProgress(cfg.Progress, start, measure, measured, done, progressDone)
	} else {
		close(progressDone)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { send(i) })
	}
	wg.Wait()
	w.to = readCPUNow()
	t1 := w.to.at
	if cfg.Duration > 0 {
		t1 = minTime(t1, measure.Add(cfg.Duration))
	}
	close(done)
	<-began
	<-progressDone
	w.seconds = max(t1.Sub(t0), 0).Seconds()
	return w
}

// NewResult returns the Result of a run of cfg over window w, for the
// caller to add its senders' counts to and then Summarize.
func (w Window) NewResult(cfg Config) *Result {
	r := &Result{Mode: ModeClosed, Connections: cfg.Connections, TargetRate: cfg.Rate, Seconds: w.seconds, Hist: new(Histogram),
		Timeout: int64(cfg.Timeout), LatencyFrom: LatencyFromWrite}
	if cfg.Timeout == 0 {
		r.Timeout = int64(DefaultTimeout)
	}
	if cfg.Rate > 0 {
		r.Mode, r.LatencyFrom = ModeOpen, LatencyFromSchedule
	}
	return r
}

// Summarize fills what r derives from r.Hist and r.Seconds (Requests,
// RequestsPerSec, Latency, Histogram) and the generator's CPU use over w,
// as a share of the time between its two readings (not the window's: with
// thousands of connections on one CPU either reading can come late, and a
// share over the window would then pass 100%).
func (r *Result) Summarize(w Window) {
	if r.Hist == nil {
		r.Hist = new(Histogram)
	}
	r.fill(w.to.t.sub(w.from.t), max(w.to.at.Sub(w.from.at), 0), runtime.GOMAXPROCS(0))
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

// reportProgress calls progress about once a second with the answers
// measured so far (measured: the sum of each sender's count), until done
// is closed; then it closes exit. start and measure are the run's start
// and the end of its warm-up.
func reportProgress(progress func(Progress), start, measure time.Time, measured func() int64, done <-chan struct{}, exit chan<- struct{}) {
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
