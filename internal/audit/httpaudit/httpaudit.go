// Package httpaudit records every request to keygate's APIs in the audit
// log (package audit) before it is answered, and fails the request when the
// record cannot be kept.
//
// [Auditor.Handler] wraps an API's handler. It gives each request an id,
// sent back as X-Request-Id, and holds the handler's answer (status,
// headers and body; these APIs' bodies are small) until the request's
// record is written. Only then does the client get the answer; when no
// sink took the record, it gets 503 temporarily_unavailable "audit log
// unavailable" in the API's error envelope, with Retry-After, and nothing
// of the held answer: nothing is answered as if it had succeeded unless its
// record was kept.
//
// A long answer (a backup of the store) is the exception: its handler
// calls [Stream], which writes a pending record first and then sends the
// answer as it is written.
//
// Handlers tell the record what they know through the response writer, as
// they tell httperr their errors: [From](w) is the request's [Note], found
// through writers that wrap the Auditor's (an Unwrap() http.ResponseWriter
// method), and its methods set the operation, tenant, principal, key,
// reason and HMAC'd values. A Note of a writer the Auditor did not wrap is
// nil, and its methods do nothing, so a handler annotates unconditionally
// and runs the same without an audit log. The error code httperr answers
// is the record's reason unless the handler named one.
//
// A request that changes state calls [Note.Intent] before making the
// change: that writes a pending record (audit.ResultPending), so that no
// change is ever made unrecorded, and fails (ErrUnavailable, which the
// handler returns) when the record cannot be written. A request that only
// reads, or that hands out what it made only in its answer (a token of the
// client_credentials grant), needs no Intent: its one record is written
// before the answer, which is dropped if it cannot be.
//
// A refusal before authentication (no principal noted, no pending
// record) costs its sender nothing, so with [Config].Refusals such
// refusals are limited per client address: past the limit they are
// answered 429 and tallied, and [Auditor.Flush] writes the tallies as
// aggregate records, so that a flood cannot fill the audit log's disk.
//
// # Security
//
// A record holds no free text (see audit.Record): a value that must be
// matchable but never stored, such as a token's jti or a revoked subject,
// is given to [Note.Hash], which keeps only its HMAC under the deployment's
// audit key, and nothing at all while the node is sealed and has no such
// key. Nothing else of a request (its body, headers, a token) reaches the
// record, and a failure to write one is logged without the record.
package httpaudit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/httperr"
)

// RequestIDHeader carries the request's id back to the client.
const RequestIDHeader = "X-Request-Id"

// ErrUnavailable is the answer to a request whose record could not be
// written, and the error Note.Intent returns then.
var ErrUnavailable = &httperr.Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
	Description: "audit log unavailable", RetryAfter: time.Second}

// Config configures an Auditor.
type Config struct {
	// Log keeps the records; required.
	Log *audit.Log
	// Remote is the address a request came from, for the record (behind
	// trusted proxies, the client's); nil: the peer's address.
	Remote func(*http.Request) netip.Addr
	// Logger gets the failures to write a record, without the record;
	// nil discards them.
	Logger *slog.Logger
	// Rand seeds the request ids; crypto/rand when nil.
	Rand io.Reader
	// OnRecord, if set, is told of every record written (ok) or not.
	OnRecord func(ok bool)
	// Refusals limits the records of refusals before authentication
	// (see Flush); the zero value records each.
	Refusals RefusalConfig
}

// Auditor writes one record per request to the handlers it wraps (and a
// pending one before each change, Note.Intent). Create it with New.
type Auditor struct {
	cfg      Config
	log      *slog.Logger
	prefix   string        // request ids: prefix-counter
	seq      atomic.Uint64 // the last request id's counter
	pool     sync.Pool     // *recorder
	warned   atomic.Int64  // when the last write failure was logged (Unix nanoseconds)
	refusals *refusals     // nil: every refusal is recorded on its own
}

// New returns an Auditor writing to cfg.Log.
func New(cfg Config) (*Auditor, error) {
	if cfg.Log == nil {
		return nil, errors.New("httpaudit.Config.Log is required")
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var seed [9]byte
	if _, err := io.ReadFull(cfg.Rand, seed[:]); err != nil {
		return nil, err
	}
	a := &Auditor{cfg: cfg, log: cfg.Logger, prefix: base64.RawURLEncoding.EncodeToString(seed[:])}
	if cfg.Refusals.Limiter != nil {
		a.refusals = newRefusals(cfg.Refusals)
	}
	a.pool.New = func() any { return new(recorder) }
	return a, nil
}

// Log returns the audit log the Auditor writes to.
func (a *Auditor) Log() *audit.Log { return a.cfg.Log }

// Handler serves h, recording every request as op unless the handler names
// another (Note.Op), and answering a request whose record cannot be
// written with ErrUnavailable in errs' envelope.
func (a *Auditor) Handler(op audit.Operation, errs httperr.Writer, h http.Handler) http.Handler {
	if !op.Valid() {
		panic("httpaudit: operation " + strconv.Quote(string(op)) + " is not a dotted lower-case name")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := a.pool.Get().(*recorder)
		rec.start(a, w, r, op)
		defer a.pool.Put(rec)
		defer rec.reset()
		finished := false
		defer func() {
			if !finished { // h panicked: record that, then let net/http see the panic
				rec.status, rec.note.code = http.StatusInternalServerError, "server_error"
				a.write(rec.detach(), rec.record())
			}
		}()
		h.ServeHTTP(rec, r)
		finished = true
		rec.finish(errs)
	})
}

// newID returns a request id unique to this process (a random prefix and
// a counter).
func (a *Auditor) newID() string {
	b := make([]byte, 0, len(a.prefix)+1+13)
	b = append(b, a.prefix...)
	b = append(b, '-')
	b = appendBase36(b, a.seq.Add(1))
	return string(b)
}

// appendBase36 is strconv.AppendUint(dst, v, 36), whose divisions by a
// base it does not know in advance cost every audited request more than
// the rest of its id: by the constant 36 they are multiplications.
func appendBase36(dst []byte, v uint64) []byte {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var b [13]byte // 36^13 > 2^64
	i := len(b)
	for v >= 36 {
		q := v / 36
		i--
		b[i] = digits[v-q*36]
		v = q
	}
	i--
	b[i] = digits[v]
	return append(dst, b[i:]...)
}

// write writes rec, reporting the outcome; a failure is logged (op and
// request id only), at most once a second.
func (a *Auditor) write(ctx context.Context, rec audit.Record) error {
	err := a.cfg.Log.Write(ctx, rec)
	if a.cfg.OnRecord != nil {
		a.cfg.OnRecord(err == nil)
	}
	if err != nil {
		now := time.Now().UnixNano()
		if last := a.warned.Load(); now-last >= int64(time.Second) && a.warned.CompareAndSwap(last, now) {
			a.log.Error("an audit record could not be written; the request fails (503)", "op", string(rec.Operation),
				"req", rec.RequestID, "result", rec.Result.String(), "err", err)
		}
	}
	return err
}

// recorder is the writer a wrapped handler gets: it holds the status and
// body, and the request's Note. Headers go straight to the real writer's
// map, which nothing sends before finish calls WriteHeader; finish clears
// them when it answers ErrUnavailable instead.
type recorder struct {
	w        http.ResponseWriter
	r        *http.Request
	status   int
	body     bytes.Buffer
	note     Note
	detached detached
	stream   streaming // see Stream
}

// detached is a request's context without its cancellation, as
// context.WithoutCancel makes it, but held in the pooled recorder so that
// detaching allocates nothing.
type detached struct{ context.Context }

func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detached) Done() <-chan struct{}       { return nil }
func (detached) Err() error                  { return nil }

// detach returns the request's context without its cancellation.
func (rec *recorder) detach() context.Context {
	rec.detached = detached{rec.r.Context()}
	return &rec.detached
}

func (rec *recorder) start(a *Auditor, w http.ResponseWriter, r *http.Request, op audit.Operation) {
	rec.w, rec.r = w, r
	rec.note.a = a
	rec.note.rec.RequestID = a.newID()
	rec.note.rec.Operation = op
	if a.cfg.Remote != nil {
		rec.note.rec.Remote = a.cfg.Remote(r).Unmap().WithZone("") // a record refuses zones
	} else {
		rec.note.rec.Remote = peer(r.RemoteAddr)
	}
}

// maxPooledBody is the largest held body whose buffer is kept for the
// next request; a larger one (a big batch answer) goes to the collector.
const maxPooledBody = 64 << 10

func (rec *recorder) reset() {
	rec.detached = detached{}
	rec.w, rec.r, rec.status = nil, nil, 0
	rec.stream = streaming{}
	rec.body.Reset()
	if rec.body.Cap() > maxPooledBody {
		rec.body = bytes.Buffer{}
	}
	hashed := rec.note.hashed
	clear(hashed)
	rec.note = Note{hashed: hashed}
}

// Header returns the answer's header: the real writer's, not yet sent.
func (rec *recorder) Header() http.Header { return rec.w.Header() }

// WriteHeader holds the status; informational ones are not answers.
func (rec *recorder) WriteHeader(code int) {
	if rec.stream.on {
		rec.streamHeader(code)
		return
	}
	if rec.status == 0 && code >= 200 {
		rec.status = code
	}
}

// Write holds body bytes.
func (rec *recorder) Write(b []byte) (int, error) {
	if rec.stream.on {
		return rec.streamWrite(b)
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.body.Write(b)
}

// NoteErrorCode takes the code httperr answered, as the record's reason
// unless the handler named one.
func (rec *recorder) NoteErrorCode(code string) { rec.note.code = code }

var _ httperr.CodeNoter = (*recorder)(nil)

// record is the record of the request as answered so far.
func (rec *recorder) record() audit.Record {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n := &rec.note
	r := n.rec
	r.Status = rec.status
	switch {
	case rec.status >= 500:
		r.Result = audit.ResultError
	case rec.status >= 400:
		r.Result = audit.ResultRefused
	default:
		r.Result = audit.ResultOK
	}
	if r.Reason == "" && n.code != "" && audit.Reason(n.code).Valid() {
		r.Reason = audit.Reason(n.code)
	}
	if len(n.hashed) > 0 {
		r.Hashed = n.hashed
	}
	return r
}

// finish writes the record and sends the held answer, or ErrUnavailable
// if the record could not be written. The record is written even when the
// client has gone (the operation happened): the request's cancellation
// does not reach the write (detach), whose sinks bound their own time. A
// refusal before authentication past its address's limit is tallied
// instead, and answered 429 (see Flush).
func (rec *recorder) finish(errs httperr.Writer) {
	if rec.stream.on {
		rec.finishStream()
		return
	}
	h := rec.w.Header()
	r := rec.record()
	if wait, ok := rec.throttle(&r); ok {
		clear(h)
		h.Set("Cache-Control", "no-store")
		errs.Write(rec.w, rec.r, errThrottled(wait))
		return
	}
	if err := rec.note.a.write(rec.detach(), r); err != nil {
		clear(h) // nothing of the held answer
		h.Set(RequestIDHeader, rec.note.rec.RequestID)
		h.Set("Cache-Control", "no-store")
		errs.Write(rec.w, rec.r, ErrUnavailable)
		return
	}
	h[RequestIDHeader] = []string{rec.note.rec.RequestID} // canonical already: Set would check it again
	rec.w.WriteHeader(rec.status)
	if rec.body.Len() > 0 {
		rec.w.Write(rec.body.Bytes()) //nolint:errcheck // the client has gone; nothing to do
	}
}

// throttle tallies r, a refusal before authentication past its address's
// limit or the limit of all addresses together (charged here, or by
// Note.Attempt), and says how long the address should wait; ok is false
// for a request to record on its own.
func (rec *recorder) throttle(r *audit.Record) (wait time.Duration, ok bool) {
	rf, n := rec.note.a.refusals, &rec.note
	if rf == nil || !unauthenticated(r, n.intent) {
		return 0, false
	}
	remote := r.Remote
	if !n.throttled {
		ctx := rec.r.Context()
		var allowed bool
		if n.wait, allowed = rf.allow(ctx, budgetRefusals, r.Remote); allowed {
			if n.wait, allowed = rf.allowTotal(ctx); allowed {
				return 0, false
			}
			remote = netip.Addr{} // past every address's limit, not its own
		}
	}
	rf.add(r, remote)
	return n.wait, true
}

func peer(addr string) netip.Addr {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, _ := netip.ParseAddr(host)
	return ip.Unmap().WithZone("")
}
