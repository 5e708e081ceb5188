package gateway

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
)

// AccessLog writes one structured line per decision of a front end:
// time, front end, method, host, path (without its query), status,
// reason, issuer, subject, kid, the decision's latency and the W3C trace
// id of a traceparent header. It never writes a token, a header or any
// claim but iss and sub; a path is as the request named it, so a path
// that carries a secret is the application's to avoid. Refusals are
// always written, allowed decisions at SampleAllowed. A nil *AccessLog
// writes nothing and costs a front end nothing, not even a clock read.
type AccessLog struct {
	log    *slog.Logger
	sample float64 // the share of allowed decisions written
}

// NewAccessLog writes JSON lines to w, allowed decisions at
// sampleAllowed (0 to 1).
func NewAccessLog(w io.Writer, sampleAllowed float64) *AccessLog {
	return &AccessLog{log: slog.New(slog.NewJSONHandler(w, nil)), sample: min(max(sampleAllowed, 0), 1)}
}

// start is the time a decision begins, read only when there is a log.
func (l *AccessLog) start() time.Time {
	if l == nil {
		return time.Time{}
	}
	return time.Now()
}

// write writes the line of one decision (see AccessLog).
func (l *AccessLog) write(frontend, method, host, path string, h http.Header, dec *Decision, start time.Time) {
	if l == nil || (dec.Allowed() && l.sample < 1 && rand.Float64() >= l.sample) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("frontend", frontend), slog.String("method", method), slog.String("host", host),
		slog.String("path", path), slog.Int("status", dec.Status))
	if dec.Reason != "" {
		attrs = append(attrs, slog.String("reason", dec.Reason))
	}
	if r := dec.Result; r != nil {
		attrs = append(attrs, slog.String("issuer", r.Issuer), slog.String("subject", r.Subject), slog.String("kid", r.KeyID))
	}
	attrs = append(attrs, slog.Int64("latency_us", time.Since(start).Microseconds()))
	if id := traceID(h.Get("Traceparent")); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "decision", attrs...)
}

// traceID is the trace id of a W3C traceparent value
// ("00-<32 hex>-<16 hex>-<2 hex>"), or "" when the value is not one: a
// client's header is copied only in that exact shape, lower-case hex, so
// nothing else it sends reaches the log through it.
func traceID(tp string) string {
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	id := tp[3:35]
	zero := true
	for i := 0; i < len(tp); i++ {
		if i == 2 || i == 35 || i == 52 {
			continue
		}
		c := tp[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
		if i >= 3 && i < 35 && c != '0' {
			zero = false
		}
	}
	if zero || tp[:2] == "ff" {
		return "" // an all-zero trace id and version ff are invalid
	}
	return id
}
