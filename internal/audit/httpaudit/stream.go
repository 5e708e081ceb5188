package httpaudit

import (
	"context"
	"net/http"
	"time"
)

// streaming is a recorder's state once its handler called Stream.
type streaming struct {
	on     bool
	failed bool // an error status after the answer began: nothing more is sent
}

// Stream lets the handler behind w send a long answer as it makes it (a
// backup of the store), instead of its being held until the request's
// record is written: it writes the pending record, as Note.Intent does,
// and from then on what the handler writes goes to the client. The final
// record is written when the handler returns, with the status it sent; an
// error the handler answers after it began (httperr writing a status of
// 400 or more) is not sent, since the client already has the start of
// another answer, and makes the record's result an error. The answer must
// therefore carry its own end, for the client to tell a cut one.
//
// Call Stream once nothing can refuse the request any more, before its
// first byte. Its error is ErrUnavailable when the pending record cannot
// be written, and the handler returns it. For a w no Auditor wraps, it
// does nothing.
func Stream(ctx context.Context, w http.ResponseWriter) error {
	rec := recorderOf(w)
	if rec == nil {
		return nil
	}
	if err := rec.note.Intent(ctx); err != nil {
		return err
	}
	rec.w.Header().Set(RequestIDHeader, rec.note.rec.RequestID)
	rec.stream.on = true
	if rec.status != 0 { // a status held before the call
		rec.w.WriteHeader(rec.status)
	}
	return nil
}

// recorderOf finds the recorder under w, as From does.
func recorderOf(w http.ResponseWriter) *recorder {
	for range 8 {
		if rec, ok := w.(*recorder); ok {
			return rec
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

func (rec *recorder) streamHeader(code int) {
	switch {
	case code < 200 || rec.stream.failed:
	case rec.status == 0:
		rec.status = code
		rec.w.WriteHeader(code)
	case code >= 400: // an error after the answer began
		rec.status, rec.stream.failed = code, true
	}
}

func (rec *recorder) streamWrite(b []byte) (int, error) {
	if rec.stream.failed {
		return len(b), nil
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.w.Write(b)
}

// FlushError sends what a streaming handler wrote so far; it is what
// http.ResponseController's Flush calls. A held answer cannot be sent
// before its record: http.ErrNotSupported.
func (rec *recorder) FlushError() error {
	if !rec.stream.on || rec.stream.failed {
		return http.ErrNotSupported
	}
	return http.NewResponseController(rec.w).Flush()
}

// finishStream writes the final record of a streamed answer; the answer
// is sent, so a failure is only logged (Auditor.write).
func (rec *recorder) finishStream() {
	rec.note.a.write(rec.detach(), rec.record()) //nolint:errcheck // logged; the pending record stands
}

// SetWriteDeadline sets the connection's write deadline; it is what
// http.ResponseController's SetWriteDeadline calls, so that a streaming
// handler can outlast the server's WriteTimeout while its client reads.
func (rec *recorder) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(rec.w).SetWriteDeadline(t)
}
