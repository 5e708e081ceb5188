package loadgen

import "time"

// Modes of a run, as Result.Mode reports them.
const (
	ModeClosed = "closed" // each connection sends as soon as it has its answer
	ModeOpen   = "open"   // requests are sent at a fixed rate
)

// Where a Result's latencies start (Result.LatencyFrom).
const (
	LatencyFromWrite    = "write"
	LatencyFromSchedule = "schedule"
)

// Late reports whether a closed-loop answer (open is false) that took lat
// came after timeout. It then counts as a timeout error and not as a
// latency, so that what a run reports agrees with its timeout even when
// the generator read the answer late; an open-loop latency runs from the
// schedule and is never late in this sense.
func Late(lat, timeout time.Duration, open bool) bool { return !open && lat > timeout }

// SaturatedPercent is the share of the CPU time the generator may use
// (wall time × GOMAXPROCS) at or above which CPU.Saturated is set: the
// generator may then have been the limit, not the target.
const SaturatedPercent = 90

// Result is what one run measured. Its JSON form is part of the
// keygate.bench.load/v1 document (see Report); latencies are integers in
// nanoseconds.
type Result struct {
	Mode        string  `json:"mode"`                  // "closed" or "open"
	Connections int     `json:"connections"`           // connections the run kept open
	TargetRate  float64 `json:"target_rate,omitempty"` // open loop: requests/s asked for
	Seconds     float64 `json:"duration_s"`            // the measured window's wall time
	// Timeout is the per-request timeout the run used (nanoseconds).
	Timeout int64 `json:"timeout_ns"`
	// LatencyFrom says where a latency starts: LatencyFromWrite (closed
	// loop: no latency exceeds Timeout, a later answer is a timeout error)
	// or LatencyFromSchedule (open loop: from when the request was due,
	// corrected for coordinated omission as wrk2's are, so a server that
	// fell behind its schedule shows latencies beyond Timeout).
	LatencyFrom string `json:"latency_from"`
	// Requests counts the answers read in the measured window, whatever
	// their status; RequestsPerSec is Requests / Seconds.
	Requests       int64        `json:"requests"`
	RequestsPerSec float64      `json:"requests_per_s"`
	Latency        Latency      `json:"latency"`
	Status         StatusCounts `json:"status"`
	Errors         ErrorCounts  `json:"errors"`
	// Reconnects counts answers after which the server closed the
	// connection (Connection: close, HTTP/1.0, a body ending with the
	// connection); the generator then opens another. They are not errors.
	Reconnects int64 `json:"reconnects"`
	CPU        CPU   `json:"generator_cpu"`
	// Histogram is the latency distribution, in coarser buckets than Hist
	// (8 per power of two, about 9% wide), empty ones left out.
	Histogram []Bucket `json:"histogram,omitempty"`
	// Server is what the target used over the window, when known.
	Server *ServerUsage `json:"server,omitempty"`
	// PoolSent counts the requests taken from a pool of more than one,
	// warm-up included (the next run's Config.PoolStart goes on from it).
	PoolSent uint64 `json:"pool_sent,omitempty"`
	// Round is which round of an interleaved comparison the step was (1,
	// 2, ...; 0 outside one).
	Round int `json:"round,omitempty"`

	Hist *Histogram `json:"-"` // the latencies, all connections merged
}

// Latency summarises the measured latencies (nanoseconds; 0 when there are
// none). Percentiles are the nearest-rank ones, to within 1%; Max and Min
// are exact.
type Latency struct {
	Mean int64 `json:"mean_ns"`
	Min  int64 `json:"min_ns"`
	P50  int64 `json:"p50_ns"`
	P90  int64 `json:"p90_ns"`
	P99  int64 `json:"p99_ns"`
	P999 int64 `json:"p99_9_ns"`
	Max  int64 `json:"max_ns"`
}

// StatusCounts counts measured answers by status class.
type StatusCounts struct {
	S2xx  int64 `json:"2xx"`
	S3xx  int64 `json:"3xx"`
	S4xx  int64 `json:"4xx"`
	S5xx  int64 `json:"5xx"`
	Other int64 `json:"other"` // 600 to 999
}

func (s *StatusCounts) count(status int) {
	switch status / 100 {
	case 2:
		s.S2xx++
	case 3:
		s.S3xx++
	case 4:
		s.S4xx++
	case 5:
		s.S5xx++
	default:
		s.Other++
	}
}

func (s *StatusCounts) add(o *StatusCounts) {
	s.S2xx += o.S2xx
	s.S3xx += o.S3xx
	s.S4xx += o.S4xx
	s.S5xx += o.S5xx
	s.Other += o.Other
}

// Non2xx returns the answers whose status is not 2xx.
func (s StatusCounts) Non2xx() int64 { return s.S3xx + s.S4xx + s.S5xx + s.Other }

// Total returns all the answers counted.
func (s StatusCounts) Total() int64 { return s.S2xx + s.Non2xx() }

// ErrorCounts counts measured requests that got no answer, by kind (wrk's
// "socket errors"). After each the connection is closed and opened again.
type ErrorCounts struct {
	Connect int64 `json:"connect"` // a connect failed
	Read    int64 `json:"read"`    // reading the answer failed, or the server closed before it was whole
	Write   int64 `json:"write"`   // writing the request failed
	// Timeout counts requests with no whole answer within the timeout,
	// and (closed loop) answers read after it.
	Timeout int64 `json:"timeout"`
	Parse   int64 `json:"parse"` // the answer was not HTTP/1.x as the generator reads it
}

func (e *ErrorCounts) add(o *ErrorCounts) {
	e.Connect += o.Connect
	e.Read += o.Read
	e.Write += o.Write
	e.Timeout += o.Timeout
	e.Parse += o.Parse
}

// Total returns all the errors counted.
func (e ErrorCounts) Total() int64 { return e.Connect + e.Read + e.Write + e.Timeout + e.Parse }

// CPU is the generator process's own CPU time over the measured window
// (getrusage RUSAGE_SELF: every goroutine of the process, so a target
// served from the same process counts too).
type CPU struct {
	UserSeconds   float64 `json:"user_s"`
	SystemSeconds float64 `json:"system_s"`
	GOMAXPROCS    int     `json:"gomaxprocs"`
	// Percent is (user + system) / (wall time × GOMAXPROCS): the share of
	// the CPU the generator may use that it used.
	Percent float64 `json:"percent"`
	// Saturated is Percent >= SaturatedPercent: the generator, not the
	// target, may have been the limit.
	Saturated bool `json:"saturated"`
}

func (r *Result) fill(cpu cpuTimes, cpuWall time.Duration, procs int) {
	h := r.Hist
	r.Requests = int64(h.Count())
	if r.Seconds > 0 {
		r.RequestsPerSec = float64(r.Requests) / r.Seconds
	}
	r.Latency = Latency{
		Mean: int64(h.Mean()), Min: int64(h.Min()),
		P50: int64(h.Quantile(0.5)), P90: int64(h.Quantile(0.9)), P99: int64(h.Quantile(0.99)),
		P999: int64(h.Quantile(0.999)), Max: int64(h.Max()),
	}
	r.Histogram = h.Buckets(3)
	r.CPU = CPU{UserSeconds: cpu.user.Seconds(), SystemSeconds: cpu.sys.Seconds(), GOMAXPROCS: procs}
	if wall := cpuWall.Seconds() * float64(procs); wall > 0 {
		r.CPU.Percent = 100 * (cpu.user + cpu.sys).Seconds() / wall
		r.CPU.Saturated = r.CPU.Percent >= SaturatedPercent
	}
}

// cpuTimes is the process's CPU time so far.
type cpuTimes struct{ user, sys time.Duration }

func (c cpuTimes) sub(o cpuTimes) cpuTimes { return cpuTimes{c.user - o.user, c.sys - o.sys} }
