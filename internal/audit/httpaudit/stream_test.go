package httpaudit

import (
	"bufio"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/httperr"
)

// TestStream: a streamed answer reaches the client while the handler is
// still writing it, after its pending record; its final record follows
// with the status sent. An error after the answer began is not sent and
// makes the result an error. When the pending record cannot be written
// nothing is streamed: 503. Without an Auditor, Stream does nothing.
func TestStream(t *testing.T) {
	f := newFixture(t, false)
	errs := httperr.Writer{}
	firstSeen := make(chan struct{})
	var fail atomic.Bool
	h := f.a.Handler("admin.backup", errs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = unwrapper{w}
		From(w).Admin()
		if err := Stream(r.Context(), w); err != nil {
			errs.Write(w, r, err)
			return
		}
		if recs := f.sink.records(t); len(recs) == 0 || recs[len(recs)-1].Result != audit.ResultPending {
			t.Errorf("no pending record before the first byte: %+v", recs)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("first line\n"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		<-firstSeen
		if fail.Load() {
			errs.Write(w, r, errors.New("the store went away"))
			return
		}
		w.Write([]byte("second line\n"))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func() (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		first, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("first line: %v", err)
		}
		firstSeen <- struct{}{} // the handler is still running: it was streamed
		rest, _ := br.ReadString(0)
		return resp, first + rest
	}
	resp, body := get()
	if resp.StatusCode != 200 || body != "first line\nsecond line\n" || resp.Header.Get(RequestIDHeader) == "" {
		t.Errorf("streamed answer: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	recs := f.sink.records(t)
	if len(recs) != 2 || recs[0].Result != audit.ResultPending || recs[1].Result != audit.ResultOK || recs[1].Status != 200 ||
		recs[0].RequestID != recs[1].RequestID || recs[1].RequestID != resp.Header.Get(RequestIDHeader) || recs[1].Operation != "admin.backup" {
		t.Errorf("records %+v", recs)
	}

	fail.Store(true)
	resp, body = get()
	if resp.StatusCode != 200 || body != "first line\n" {
		t.Errorf("an error after the answer began: %d %q", resp.StatusCode, body)
	}
	if recs := f.sink.records(t); len(recs) != 4 || recs[3].Result != audit.ResultError || recs[3].Status != 500 {
		t.Errorf("the failed stream's record: %+v", recs[len(recs)-1])
	}

	f.sink.setFail(true)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream without its pending record: %d", resp.StatusCode)
	}

	// A held answer is not flushed.
	held := f.a.Handler("admin.request", errs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).Flush(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("Flush of a held answer: %v", err)
		}
	}))
	f.sink.setFail(false)
	serve(held, http.MethodGet)

	w := httptest.NewRecorder()
	if err := Stream(t.Context(), w); err != nil {
		t.Errorf("Stream without an Auditor: %v", err)
	}
	w.Write([]byte("x"))
	if w.Body.String() != "x" || !strings.Contains(w.Header().Get("Content-Type"), "text/plain") {
		t.Errorf("a writer no Auditor wraps: %q %v", w.Body, w.Header())
	}
}
