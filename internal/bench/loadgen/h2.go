package loadgen

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// RunHTTP2 is Run over HTTP/2 without TLS, with prior knowledge (h2c, as
// Envoy or a gRPC-style proxy keeps a multiplexed connection to an
// authoriser): cfg.Connections connections, each carrying streams
// concurrent requests (streams >= 1), every one of the
// Connections × streams senders in a closed or open loop as Run's
// connections are. Config's Pool, Rate, Warmup, Duration, Requests and
// Timeout mean what they mean for Run; Rate is spread over all the
// senders. A connection that fails is dialled again by its transport;
// errors are counted by kind (connect, timeout, read: any other failure of
// a request, or of reading its answer's body). Unlike Run's client, this
// one is golang.org/x/net/http2's, which allocates per request: compare
// the generator's CPU share (Result.CPU) with Run's at the same load.
func RunHTTP2(ctx context.Context, cfg Config, streams int) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if streams <= 0 {
		return nil, fmt.Errorf("%w: streams per connection must be positive", ErrConfig)
	}
	tpls, err := cfg.templates() // validates each request as Run does
	if err != nil {
		return nil, err
	}
	reqs := cfg.Pool
	if len(reqs) == 0 {
		reqs = []Request{cfg.Request}
	}
	h2reqs := make([]*h2Request, len(reqs))
	for i := range reqs {
		if h2reqs[i], err = newH2Request(&reqs[i]); err != nil {
			return nil, err
		}
	}
	r := &run{cfg: cfg, tpls: tpls, timeout: cfg.Timeout, bounded: cfg.Requests > 0}
	if r.timeout == 0 {
		r.timeout = DefaultTimeout
	}
	senders := cfg.Connections * streams
	if cfg.Rate > 0 {
		r.interval = max(time.Duration(float64(senders)/cfg.Rate*float64(time.Second)), 1)
	}
	r.remain.Store(cfg.Requests)
	r.start = time.Now()
	r.measure = r.start.Add(cfg.Warmup)
	var cancel context.CancelFunc
	var end time.Time
	if cfg.Duration > 0 {
		end = r.measure.Add(cfg.Duration)
		r.ctx, cancel = context.WithDeadline(ctx, end)
	} else {
		r.ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	context.AfterFunc(r.ctx, func() { r.stopped.Store(true) })

	transports := make([]*http2.Transport, cfg.Connections)
	var dials atomic.Int64
	for i := range transports {
		transports[i] = &http2.Transport{
			AllowHTTP: true,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				dials.Add(1)
				d := net.Dialer{Timeout: r.timeout}
				return d.DialContext(ctx, network, addr)
			},
		}
	}
	defer func() {
		for _, t := range transports {
			t.CloseIdleConnections()
		}
	}()

	workers := make([]*h2Worker, senders)
	for i := range workers {
		workers[i] = &h2Worker{r: r, end: end, t: transports[i%cfg.Connections], reqs: h2reqs}
	}
	win := Drive(cfg, r.start, r.measure, len(workers), func() (n int64) {
		for _, w := range workers {
			n += w.done.Load()
		}
		return n
	}, func(i int) { workers[i].loop(i, senders) })
	res := win.NewResult(cfg)
	for _, w := range workers {
		res.Hist.Merge(&w.hist)
		res.Status.add(&w.status)
		res.Errors.add(&w.errs)
	}
	// Dials beyond the first of each connection are the transports'
	// reconnects (after an error, or a server that closed the connection).
	res.Reconnects = max(dials.Load()-int64(cfg.Connections), 0)
	res.Summarize(win)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// h2Request is a Request as net/http sends it; a shallow copy of req is
// sent each time (with a fresh body reader when there is a body).
type h2Request struct {
	req  *http.Request
	body []byte
}

func newH2Request(r *Request) (*h2Request, error) {
	method := r.Method
	if method == "" {
		method = "GET"
	}
	req, err := http.NewRequest(method, r.URL, nil)
	if err != nil {
		return nil, requestErrorf("%v", err)
	}
	for _, h := range r.Header {
		if strings.EqualFold(h.Name, "host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	if !marked(r.Header) {
		req.Header.Set(MarkerHeader, Marker())
	}
	if len(r.Body) > 0 || method == "POST" || method == "PUT" || method == "PATCH" {
		req.ContentLength = int64(len(r.Body))
	}
	return &h2Request{req: req, body: r.Body}, nil
}

// h2Worker is one sender: a stream at a time on its connection.
type h2Worker struct {
	r    *run
	end  time.Time // the measured window's end; zero: none
	t    *http2.Transport
	reqs []*h2Request

	hist   Histogram
	status StatusCounts
	errs   ErrorCounts
	done   atomic.Int64
}

func (w *h2Worker) pick() *h2Request {
	if len(w.reqs) == 1 {
		return w.reqs[0]
	}
	return w.reqs[(w.r.next.Add(1)-1)%uint64(len(w.reqs))]
}

func (w *h2Worker) loop(i, senders int) {
	r := w.r
	var next time.Time
	var timer *time.Timer
	if r.interval > 0 {
		next = r.start.Add(r.interval * time.Duration(i) / time.Duration(senders))
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	for !w.over() {
		var sent time.Time
		if r.interval > 0 {
			sent, next = next, next.Add(r.interval)
			if !SleepUntil(r.ctx, timer, sent) {
				return
			}
		} else {
			sent = time.Now()
		}
		measured := !sent.Before(r.measure)
		if measured && r.bounded && r.remain.Add(-1) < 0 {
			return
		}
		status, err := w.send(w.pick())
		if err != nil {
			if measured && !w.over() {
				w.countError(err)
			}
			continue
		}
		if lat := time.Since(sent); measured && Late(lat, r.timeout, r.interval > 0) {
			w.errs.Timeout++
		} else if measured {
			w.hist.Record(lat)
			w.status.count(status)
			w.done.Add(1)
		}
	}
}

// over reports whether the run is over: stopped, or past its end even if
// its context's timer has not fired yet.
func (w *h2Worker) over() bool {
	return w.r.stopped.Load() || w.r.ctx.Err() != nil || !w.end.IsZero() && !time.Now().Before(w.end)
}

// send sends one request and reads its whole answer.
func (w *h2Worker) send(h *h2Request) (int, error) {
	ctx, cancel := context.WithTimeout(w.r.ctx, w.r.timeout)
	defer cancel()
	req := h.req.WithContext(ctx)
	if h.body != nil {
		req.Body = io.NopCloser(bytes.NewReader(h.body))
	}
	resp, err := w.t.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, &bodyError{err}
	}
	return resp.StatusCode, nil
}

// bodyError is a failure to read an answer's body.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "read body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

func (w *h2Worker) countError(err error) {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		w.errs.Timeout++
	case errors.As(err, &oe) && oe.Op == "dial":
		w.errs.Connect++
	default:
		w.errs.Read++
	}
}
