// Package grpcload is the gRPC load generator behind 'keygate bench
// extauthz': it keeps N gRPC client connections (plaintext HTTP/2, as
// Envoy's ext_authz cluster speaks to an authoriser), each carrying M
// concurrent calls, sending Envoy's envoy.service.auth.v3.Authorization/
// Check closed loop, or open loop at a fixed rate with coordinated-omission
// correction as internal/loadgen does. Each CheckRequest is built the way
// Envoy's ext_authz filter builds it (attributes.request.http with the
// method, :path, :authority, lower-case header names, pseudo-headers
// included, and the source and destination addresses), each carrying the
// next token of a pool in its authorization header.
//
// It reports in loadgen's terms, so loadgen's table and JSON printers work
// unchanged: a Check answered with an OkHttpResponse counts as a 2xx, a
// denied one as the HTTP status Envoy would send the client (its
// DeniedHttpResponse's, 403 when it gives none), and a call that fails in
// gRPC (no CheckResponse) as an error: timeout (DEADLINE_EXCEEDED),
// connect (UNAVAILABLE: the connection could not be made or was lost),
// parse (an answer that is not a CheckResponse) or read (any other code).
//
// To keep the generator off the critical path, a request is marshalled
// once per token length and each call copies the next token into a copy of
// those bytes (no protobuf encoding per call); answers are scanned for the
// three fields that decide the verdict, not decoded in full.
package grpcload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// CheckMethod is the gRPC method every request calls.
const CheckMethod = "/envoy.service.auth.v3.Authorization/Check"

// MarkerKey is the gRPC metadata key of the benchmark marker every Check
// carries (loadgen.MarkerHeader in lower case, as gRPC wants it).
const MarkerKey = "keygate-bench"

// Config is one run.
type Config struct {
	// Target is the gRPC server's host:port (plaintext HTTP/2).
	Target string
	// Request is the HTTP request Envoy asks about, the same each time
	// but for its token.
	Request Request
	// Tokens, when not empty, are sent in turn, one per request, as
	// "authorization: Bearer <token>" (the k-th request any sender sends
	// carries Tokens[k mod len(Tokens)]). Empty: no authorization header
	// (unless Request.Header has one).
	Tokens []string
	// Connections is the number of gRPC client connections.
	Connections int
	// Streams is the number of concurrent calls each connection carries
	// (each its own sender, one call at a time); 0 means 1.
	Streams int
	// Rate, Warmup, Duration, Requests, Timeout and Progress mean what
	// they mean in loadgen.Config; Rate is spread over all the
	// Connections × Streams senders.
	Rate     float64
	Warmup   time.Duration
	Duration time.Duration
	Requests int64
	Timeout  time.Duration
	Progress func(loadgen.Progress)
}

// ErrConfig is wrapped by the errors Run returns for a Config it refuses.
var ErrConfig = loadgen.ErrConfig

func (c *Config) validate() error {
	switch {
	case c.Target == "":
		return fmt.Errorf("%w: no target address", ErrConfig)
	case c.Connections <= 0:
		return fmt.Errorf("%w: connections must be positive", ErrConfig)
	case c.Streams < 0:
		return fmt.Errorf("%w: streams per connection must not be negative", ErrConfig)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("%w: rate must be 0 (closed loop) or positive", ErrConfig)
	case c.Warmup < 0 || c.Duration < 0 || c.Requests < 0 || c.Timeout < 0:
		return fmt.Errorf("%w: warm-up, duration, requests and timeout must not be negative", ErrConfig)
	case c.Duration == 0 && c.Requests == 0:
		return fmt.Errorf("%w: set a duration, a request count or both", ErrConfig)
	}
	if _, _, err := net.SplitHostPort(c.Target); err != nil {
		return fmt.Errorf("%w: target %q is not host:port", ErrConfig, c.Target)
	}
	for i, t := range c.Tokens {
		if t == "" || strings.ContainsAny(t, "\r\n\x00") || !utf8.ValidString(t) {
			return fmt.Errorf("%w: token %d is empty, not UTF-8 or holds a line break or NUL", ErrConfig, i)
		}
	}
	return nil
}

// run is the state the senders of one Run share.
type run struct {
	cfg      Config
	msgs     *messages
	next     atomic.Uint64 // the pool's next token
	timeout  time.Duration
	start    time.Time
	measure  time.Time
	end      time.Time // the measured window's end; zero: none
	interval time.Duration
	senders  int
	ctx      context.Context
	stopped  atomic.Bool
	bounded  bool
	remain   atomic.Int64
}

// sender is one call at a time on one connection, and what it counts.
type sender struct {
	r    *run
	conn *grpc.ClientConn
	buf  []byte // the request being sent

	hist   loadgen.Histogram
	status loadgen.StatusCounts
	errs   loadgen.ErrorCounts
	done   atomic.Int64
}

// Run sends cfg's Checks until a bound is reached or ctx is done, and
// reports what it measured in loadgen's Result (Connections is the number
// of connections, not of concurrent calls). When ctx ends the run early,
// Run returns what was measured so far together with ctx's error.
func Run(ctx context.Context, cfg Config) (*loadgen.Result, error) {
	if cfg.Streams == 0 {
		cfg.Streams = 1
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	msgs, err := newMessages(&cfg.Request, cfg.Tokens)
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, msgs: msgs, timeout: cfg.Timeout, bounded: cfg.Requests > 0,
		senders: cfg.Connections * cfg.Streams}
	if r.timeout == 0 {
		r.timeout = loadgen.DefaultTimeout
	}
	if cfg.Rate > 0 {
		r.interval = max(time.Duration(float64(r.senders)/cfg.Rate*float64(time.Second)), 1)
	}
	r.remain.Store(cfg.Requests)

	conns := make([]*grpc.ClientConn, cfg.Connections)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := grpc.NewClient("passthrough:///"+cfg.Target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec{})))
		if err != nil {
			return nil, err
		}
		c.Connect()
		conns[i] = c
	}

	r.start = time.Now()
	r.measure = r.start.Add(cfg.Warmup)
	var cancel context.CancelFunc
	if cfg.Duration > 0 {
		r.end = r.measure.Add(cfg.Duration)
		r.ctx, cancel = context.WithDeadline(ctx, r.end)
	} else {
		r.ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	// Every Check carries the benchmark marker as gRPC metadata, which a
	// proxy's ext_authz client never forwards from the request it asks
	// about: 'keygate bench server' allows only Checks that carry it.
	r.ctx = metadata.AppendToOutgoingContext(r.ctx, MarkerKey, loadgen.Marker())
	stop := context.AfterFunc(r.ctx, func() { r.stopped.Store(true) })
	defer stop()

	senders := make([]*sender, r.senders)
	for i := range senders {
		senders[i] = &sender{r: r, conn: conns[i%cfg.Connections]}
	}
	lcfg := loadgen.Config{Connections: cfg.Connections, Rate: cfg.Rate, Duration: cfg.Duration, Timeout: r.timeout,
		Progress: cfg.Progress}
	win := loadgen.Drive(lcfg, r.start, r.measure, len(senders), func() (n int64) {
		for _, s := range senders {
			n += s.done.Load()
		}
		return n
	}, func(i int) { senders[i].loop(i) })
	res := win.NewResult(lcfg)
	for _, s := range senders {
		res.Hist.Merge(&s.hist)
		res.Status.Add(&s.status)
		res.Errors.Add(&s.errs)
	}
	res.Summarize(win)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// over reports whether the run is over: stopped, or past its end even if
// its context's timer has not fired yet (a call made then fails at once
// with DEADLINE_EXCEEDED, which is not the server's doing).
func (r *run) over() bool {
	return r.stopped.Load() || r.ctx.Err() != nil || !r.end.IsZero() && !time.Now().Before(r.end)
}

// pick returns the index of the next token.
func (r *run) pick() int {
	if r.msgs.n <= 1 {
		return 0
	}
	return int((r.next.Add(1) - 1) % uint64(r.msgs.n))
}

// loop is sender i's life: send, record, until the run stops.
func (s *sender) loop(i int) {
	r := s.r
	var next time.Time
	var timer *time.Timer
	if r.interval > 0 {
		next = r.start.Add(r.interval * time.Duration(i) / time.Duration(r.senders))
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	var v verdict
	for !r.over() {
		var sent time.Time
		if r.interval > 0 {
			sent, next = next, next.Add(r.interval)
			if !loadgen.SleepUntil(r.ctx, timer, sent) {
				return
			}
		} else {
			sent = time.Now()
		}
		measured := !sent.Before(r.measure)
		if measured && r.bounded && r.remain.Add(-1) < 0 {
			return
		}
		s.buf = r.msgs.build(s.buf, r.pick())
		err := s.call(&v)
		if err != nil {
			// The call may have ended with the request still queued
			// in the transport: its buffer is not reused.
			s.buf = nil
			if measured && !r.over() {
				s.countError(err)
			}
			continue
		}
		if lat := time.Since(sent); measured && loadgen.Late(lat, r.timeout, r.interval > 0) {
			s.errs.Timeout++
		} else if measured {
			s.hist.Record(lat)
			s.status.Count(v.status)
			s.done.Add(1)
		}
	}
}

func (s *sender) call(v *verdict) error {
	ctx, cancel := context.WithTimeout(s.r.ctx, s.r.timeout)
	defer cancel()
	*v = verdict{}
	return s.conn.Invoke(ctx, CheckMethod, rawRequest(s.buf), v)
}

func (s *sender) countError(err error) {
	switch st, _ := status.FromError(err); {
	case errors.Is(err, context.DeadlineExceeded) || st.Code() == codes.DeadlineExceeded:
		s.errs.Timeout++
	case st.Code() == codes.Unavailable:
		s.errs.Connect++
	case errors.Is(err, errNotCheckResponse) || st.Code() == codes.Internal && strings.Contains(st.Message(), errNotCheckResponse.Error()):
		s.errs.Parse++
	default:
		s.errs.Read++
	}
}
