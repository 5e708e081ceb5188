package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run: a request template, how many connections send it,
// at what pace and for how long.
type Config struct {
	Request Request
	// Pool, when not empty, replaces Request: the requests of the run
	// are Pool's in turn (the k-th request any connection sends is
	// Pool[k mod len(Pool)]), so that, say, each carries its own token.
	// Every request of a pool must go to the same host and port.
	Pool []Request
	// PoolStart is the index of the pool's first request to send, so that
	// runs one after the other (the rounds of a comparison) go on through
	// the pool instead of sending its first requests again.
	PoolStart   uint64
	Connections int
	// Rate is the target requests per second over all connections (open
	// loop): connection i of N sends every N/Rate seconds, the connections'
	// schedules staggered evenly, and a request's latency runs from the
	// time the schedule meant to send it, so a stalled server is charged
	// for the requests it kept waiting. 0 means closed loop: each
	// connection sends its next request as soon as it has read an answer,
	// and latency runs from the write.
	Rate float64
	// Warmup runs before the measured window and is left out of the
	// result: a request is measured when it is (meant to be) sent at or
	// after the end of the warm-up.
	Warmup time.Duration
	// Duration bounds the measured window; 0 means only Requests does.
	Duration time.Duration
	// Requests bounds how many requests are measured; 0 means only
	// Duration does. At least one bound must be set.
	Requests int64
	// Timeout bounds each request (write to the end of the answer) and
	// each connect; 2 s when 0. A request that times out is an error and
	// its connection is closed and opened again.
	Timeout time.Duration
	// Progress, when set, is called about once a second from another
	// goroutine while the run lasts.
	Progress func(Progress)
}

// DefaultTimeout is Config.Timeout when 0.
const DefaultTimeout = 2 * time.Second

// Progress is a run's state as Config.Progress sees it.
type Progress struct {
	Elapsed   time.Duration // since the run began, warm-up included
	Measuring bool          // the warm-up is over
	Requests  int64         // answers measured so far
}

// ErrConfig is wrapped by the errors Run returns for a Config it refuses.
var ErrConfig = errors.New("invalid load configuration")

func (c *Config) validate() error {
	switch {
	case c.Connections <= 0:
		return fmt.Errorf("%w: connections must be positive", ErrConfig)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("%w: rate must be 0 (closed loop) or positive", ErrConfig)
	case c.Warmup < 0 || c.Duration < 0 || c.Requests < 0 || c.Timeout < 0:
		return fmt.Errorf("%w: warm-up, duration, requests and timeout must not be negative", ErrConfig)
	case c.Duration == 0 && c.Requests == 0:
		return fmt.Errorf("%w: set a duration, a request count or both", ErrConfig)
	}
	return nil
}

// rampPerConnection paces the opening of a closed-loop run's connections
// (at most 20,000 a second, over half the warm-up at most): thousands of
// connects at once overflow the target's accept queue (somaxconn, often
// 4096), and the dropped SYNs come back a second or more later, in the
// measured window.
const rampPerConnection = 50 * time.Microsecond

// connectRamp is how long a closed-loop run takes to open its connections.
func connectRamp(cfg Config) time.Duration {
	return min(cfg.Warmup/2, time.Duration(cfg.Connections)*rampPerConnection)
}

// readBufferSize is each connection's read buffer: an answer's status line
// and each header line must fit in it.
const readBufferSize = 4096

// connectBackoff is how long a connection waits after a failed connect
// before it tries again, so that a refused port is not a busy loop.
const connectBackoff = 10 * time.Millisecond

// run is the state the connections of one Run share; only stopped and
// remaining are written while they run.
type run struct {
	cfg      Config
	tpls     []*template   // one per request of the pool (one without a pool)
	next     atomic.Uint64 // the pool's next request
	timeout  time.Duration
	start    time.Time // warm-up begins
	measure  time.Time // measured window begins
	interval time.Duration
	ramp     time.Duration   // closed loop: connection i of N starts at start + ramp×i/N
	ctx      context.Context // done when the run must stop
	stopped  atomic.Bool     // set before the connections' deadlines are forced
	bounded  bool            // Requests bounds the run
	remain   atomic.Int64    // measured requests left to send, when bounded
}

// worker is one connection's loop and everything it counts; nothing in it
// is shared with another worker.
type worker struct {
	r  *run
	mu sync.Mutex // guards c against stop's deadline
	c  net.Conn
	br *bufio.Reader

	hist       Histogram
	status     StatusCounts
	errs       ErrorCounts
	reconnects int64
	done       atomic.Int64 // measured answers, read by Progress
}

// longAgo is a deadline in the past: it makes a blocked read or write
// return at once.
var longAgo = time.Unix(1, 0)

// Run sends cfg's requests until a bound is reached or ctx is done, and
// reports what it measured. When ctx ends the run early, Run returns what
// was measured so far together with ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tpls, err := cfg.templates()
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, tpls: tpls, timeout: cfg.Timeout, bounded: cfg.Requests > 0}
	if r.timeout == 0 {
		r.timeout = DefaultTimeout
	}
	if cfg.Rate > 0 {
		r.interval = time.Duration(float64(cfg.Connections) / cfg.Rate * float64(time.Second))
		r.interval = max(r.interval, 1)
	} else {
		r.ramp = connectRamp(cfg)
	}
	r.remain.Store(cfg.Requests)
	r.next.Store(cfg.PoolStart)
	r.start = time.Now()
	r.measure = r.start.Add(cfg.Warmup)
	var cancel context.CancelFunc
	if cfg.Duration > 0 {
		r.ctx, cancel = context.WithDeadline(ctx, r.measure.Add(cfg.Duration))
	} else {
		r.ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	workers := make([]*worker, cfg.Connections)
	for i := range workers {
		workers[i] = &worker{r: r}
	}
	stopAll := context.AfterFunc(r.ctx, func() {
		r.stopped.Store(true)
		for _, w := range workers {
			w.mu.Lock()
			if w.c != nil {
				w.c.SetDeadline(longAgo) //nolint:errcheck // a closed connection needs no deadline
			}
			w.mu.Unlock()
		}
	})
	defer stopAll()

	win := Drive(cfg, r.start, r.measure, len(workers), func() (n int64) {
		for _, w := range workers {
			n += w.done.Load()
		}
		return n
	}, func(i int) { workers[i].loop(i) })
	res := win.NewResult(cfg)
	for _, w := range workers {
		w.close()
		res.Hist.Merge(&w.hist)
		res.Status.add(&w.status)
		res.Errors.add(&w.errs)
		res.Reconnects += w.reconnects
	}
	res.Summarize(win)
	if len(tpls) > 1 {
		res.PoolSent = r.next.Load() - cfg.PoolStart
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// templates builds the run's requests: Request's, or Pool's.
func (c *Config) templates() ([]*template, error) {
	if len(c.Pool) == 0 {
		t, err := c.Request.build()
		if err != nil {
			return nil, err
		}
		return []*template{t}, nil
	}
	tpls := make([]*template, len(c.Pool))
	for i := range c.Pool {
		t, err := c.Pool[i].build()
		if err != nil {
			return nil, fmt.Errorf("pool request %d: %w", i, err)
		}
		if t.addr != tpls[0].addrOr(t.addr) {
			return nil, requestErrorf("pool request %d goes to %s, not %s like the first", i, t.addr, tpls[0].addr)
		}
		tpls[i] = t
	}
	return tpls, nil
}

// pick returns the template of the next request to send.
func (r *run) pick() *template {
	if len(r.tpls) == 1 {
		return r.tpls[0]
	}
	return r.tpls[(r.next.Add(1)-1)%uint64(len(r.tpls))]
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// loop is connection i's life: connect, send, read, record, until the run
// stops.
func (w *worker) loop(i int) {
	r := w.r
	var next time.Time // open loop: when the next request is meant to be sent
	var timer *time.Timer
	if r.interval > 0 || r.ramp > 0 {
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	if r.interval > 0 {
		next = r.start.Add(r.interval * time.Duration(i) / time.Duration(r.cfg.Connections))
	} else if r.ramp > 0 && !SleepUntil(r.ctx, timer, r.start.Add(r.ramp*time.Duration(i)/time.Duration(r.cfg.Connections))) {
		return
	}
	for !r.stopped.Load() {
		var sent time.Time // latency runs from here
		if r.interval > 0 {
			sent, next = next, next.Add(r.interval)
			if !SleepUntil(r.ctx, timer, sent) {
				return
			}
		}
		if r.interval == 0 {
			sent = time.Now()
		}
		measured := !sent.Before(r.measure)
		if measured && r.bounded && r.remain.Add(-1) < 0 {
			return
		}
		if w.c == nil && !w.connect(measured) {
			continue
		}
		tpl := r.pick()
		now := time.Now()
		if r.interval == 0 {
			sent = now // closed loop: the latency is the request's, not the connect's
		}
		w.c.SetDeadline(now.Add(r.timeout)) //nolint:errcheck // fails only on a closed connection, which the write reports
		if r.stopped.Load() {               // after the deadline, so stop's forced deadline cannot be overwritten
			return
		}
		if _, err := w.c.Write(tpl.bytes); err != nil {
			w.fail(measured, err, &w.errs.Write)
			continue
		}
		resp, err := readResponse(w.br, tpl.head)
		if err != nil {
			w.fail(measured, err, &w.errs.Read)
			continue
		}
		if lat := time.Since(sent); measured && Late(lat, r.timeout, r.interval > 0) {
			w.errs.Timeout++
		} else if measured {
			w.hist.Record(lat)
			w.status.count(resp.status)
			w.done.Add(1)
		}
		if resp.close {
			if measured {
				w.reconnects++
			}
			w.close()
		}
	}
}

// connect opens the connection; after a failure it counts a connect error
// (when measured) and waits connectBackoff.
func (w *worker) connect(measured bool) bool {
	r := w.r
	d := net.Dialer{Timeout: r.timeout}
	c, err := d.DialContext(r.ctx, "tcp", r.tpls[0].addr)
	if err != nil {
		if r.stopped.Load() || r.ctx.Err() != nil {
			return false
		}
		if measured {
			w.errs.Connect++
		}
		t := time.NewTimer(connectBackoff)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.ctx.Done():
		}
		return false
	}
	w.mu.Lock()
	w.c = c
	w.mu.Unlock()
	if w.br == nil {
		w.br = bufio.NewReaderSize(c, readBufferSize)
	} else {
		w.br.Reset(c)
	}
	return true
}

// fail counts a failed request (unless the run is stopping, which is what
// failed it) and closes the connection.
func (w *worker) fail(measured bool, err error, kind *int64) {
	if !w.r.stopped.Load() && measured {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			w.errs.Timeout++
		case errors.Is(err, ErrMalformed):
			w.errs.Parse++
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			w.errs.Read++ // the server closed the connection without (all of) an answer
		default:
			*kind++
		}
	}
	w.close()
}

func (w *worker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c != nil {
		w.c.Close()
		w.c = nil
	}
}
