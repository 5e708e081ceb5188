package httpaudit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/httperr"
)

// sink keeps lines in memory and fails while fail is set.
type sink struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	fail bool
}

func (s *sink) Name() string { return "mem" }
func (s *sink) Close() error { return nil }
func (s *sink) Write(_ context.Context, lines []audit.Line) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("disk full")
	}
	for _, l := range lines {
		s.buf.Write(l.Bytes)
	}
	return nil
}

func (s *sink) setFail(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = v
}

// records returns the record lines written so far, parsed.
func (s *sink) records(t *testing.T) []audit.Record {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []audit.Record
	for _, line := range bytes.Split(bytes.TrimSuffix(s.buf.Bytes(), []byte("\n")), []byte("\n")) {
		e, err := audit.ParseLine(line)
		if err != nil {
			t.Fatalf("ParseLine(%s): %v", line, err)
		}
		if e.Type == audit.TypeRecord {
			out = append(out, e.Record)
		}
	}
	return out
}

type fixture struct {
	sink *sink
	log  *audit.Log
	a    *Auditor
	mac  *audit.HMACKey
	ok   []bool // OnRecord's reports
	mu   sync.Mutex
}

func newFixture(t testing.TB, sealed bool) *fixture {
	t.Helper()
	f := &fixture{sink: &sink{}}
	cfg := audit.Config{Node: "n1", Sinks: []audit.Sink{f.sink}, Sealed: sealed}
	if !sealed {
		sk, err := audit.NewSigningKey(bytes.Repeat([]byte{1}, audit.SeedSize))
		if err != nil {
			t.Fatal(err)
		}
		f.mac, _ = audit.NewHMACKey(bytes.Repeat([]byte{2}, 32))
		cfg.Signer, cfg.HMAC = sk, f.mac
	}
	var err error
	if f.log, err = audit.New(cfg); err != nil {
		t.Fatal(err)
	}
	if err := f.log.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.log.Close(context.Background()) })
	f.a, err = New(Config{Log: f.log, OnRecord: func(ok bool) { f.mu.Lock(); f.ok = append(f.ok, ok); f.mu.Unlock() },
		Remote: func(*http.Request) netip.Addr { return netip.MustParseAddr("::ffff:10.0.0.7") }})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func serve(h http.Handler, method string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, "/v1/admin/clients", nil))
	return w
}

// unwrapper wraps a writer the way issuer's metrics writer does.
type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// A request's answer is sent once its record is written; the record holds
// what the handler noted, through a writer that wraps the Auditor's.
func TestRecordThenAnswer(t *testing.T) {
	f := newFixture(t, false)
	var id string
	h := f.a.Handler("admin.request", httperr.Writer{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = unwrapper{w}
		n := From(w)
		id = n.RequestID()
		n.Op("admin.clients.create")
		n.Admin()
		n.Tenant("acme")
		n.Key("kid-1", 0)
		n.Hash("client_id", "kgc_new")
		if len(f.sink.records(t)) != 0 {
			t.Error("a record was written before the handler finished")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"client_id":"kgc_new"}`))
	}))
	w := serve(h, http.MethodPost)
	if w.Code != 201 || w.Body.String() != `{"client_id":"kgc_new"}` || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d %q %v", w.Code, w.Body, w.Header())
	}
	if got := w.Header().Get(RequestIDHeader); got == "" || got != id {
		t.Errorf("X-Request-Id %q, the handler saw %q", got, id)
	}
	recs := f.sink.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	if r.RequestID != id || r.Operation != "admin.clients.create" || r.Principal.Kind != audit.PrincipalAdmin ||
		r.Tenant != "acme" || r.Key.Name != "kid-1" || r.Result != audit.ResultOK || r.Status != 201 ||
		r.Remote != netip.MustParseAddr("10.0.0.7") || !r.Hashed["client_id"].Equal(f.mac.Sum("kgc_new")) {
		t.Errorf("record %+v", r)
	}
	if len(f.ok) != 1 || !f.ok[0] {
		t.Errorf("OnRecord told %v", f.ok)
	}
}

// httperr's code is the reason of a refusal, unless the handler named
// one; the result follows the status.
func TestReasonAndResult(t *testing.T) {
	f := newFixture(t, false)
	errs := httperr.Writer{}
	for _, c := range []struct {
		err    error
		reason string
		result audit.Result
		status int
	}{
		{&httperr.Error{Status: 401, Code: "invalid_client", Description: "d"}, "invalid_client", audit.ResultRefused, 401},
		{errors.New("boom"), "server_error", audit.ResultError, 500},
		{&httperr.Error{Status: 400, Code: "invalid_grant", Description: "d"}, "refresh_reused", audit.ResultRefused, 400},
	} {
		h := f.a.Handler("oauth2.token", errs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.reason == "refresh_reused" {
				From(w).Reason("refresh_reused")
			}
			errs.Write(unwrapper{w}, r, c.err)
		}))
		if w := serve(h, http.MethodPost); w.Code != c.status {
			t.Errorf("%v: status %d", c.err, w.Code)
		}
	}
	recs := f.sink.records(t)
	for i, c := range []string{"invalid_client", "server_error", "refresh_reused"} {
		if string(recs[i].Reason) != c || recs[i].Status == 0 {
			t.Errorf("record %d: %+v, want reason %s", i, recs[i], c)
		}
	}
	if recs[0].Result != audit.ResultRefused || recs[1].Result != audit.ResultError {
		t.Errorf("results %v %v", recs[0].Result, recs[1].Result)
	}
}

// When no sink takes the record, the client gets 503 in the API's
// envelope with Retry-After, and nothing of the held answer; a change
// behind a failed Intent is not made.
func TestFailClosed(t *testing.T) {
	f := newFixture(t, false)
	f.sink.setFail(true)
	changed := false
	errs := httperr.Writer{}
	h := f.a.Handler("admin.clients.create", errs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Secret-Answer", "1")
		if err := From(w).Intent(r.Context()); err != nil {
			errs.Write(w, r, err)
			return
		}
		changed = true
		w.WriteHeader(201)
		w.Write([]byte(`{"client_secret":"kgs_x"}`))
	}))
	w := serve(h, http.MethodPost)
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || w.Header().Get("X-Secret-Answer") != "" ||
		!strings.Contains(w.Body.String(), `"error":"temporarily_unavailable"`) || !strings.Contains(w.Body.String(), "audit log unavailable") {
		t.Errorf("answer %d %v %s", w.Code, w.Header(), w.Body)
	}
	if changed {
		t.Error("the change was made although its pending record was not written")
	}
	if w.Header().Get(RequestIDHeader) == "" {
		t.Error("no X-Request-Id on the 503")
	}

	// A read: its answer is dropped when its record cannot be written.
	read := f.a.Handler("admin.clients.list", errs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Listing", "1")
		w.Write([]byte(`{"clients":[]}`))
	}))
	if w := serve(read, http.MethodGet); w.Code != 503 || strings.Contains(w.Body.String(), "clients") || w.Header().Get("X-Listing") != "" {
		t.Errorf("read answered %d %v %s with no record", w.Code, w.Header(), w.Body)
	}
	for _, ok := range f.ok {
		if ok {
			t.Error("OnRecord told of a record written")
		}
	}

	f.sink.setFail(false)
	w = serve(h, http.MethodPost)
	if w.Code != 201 || !changed {
		t.Fatalf("after the sink recovered: %d %v", w.Code, changed)
	}
	recs := f.sink.records(t)
	if len(recs) != 2 || recs[0].Result != audit.ResultPending || recs[1].Result != audit.ResultOK ||
		recs[0].RequestID != recs[1].RequestID || recs[0].Status != 0 {
		t.Errorf("records %+v, want pending then ok, one request id", recs)
	}
}

// A client that goes away after a change was made does not take the
// change's outcome record with it: the record is written although the
// request's context is cancelled.
func TestOutcomeRecordedAfterTheClientLeft(t *testing.T) {
	f := newFixture(t, false)
	errs := httperr.Writer{}
	h := f.a.Handler("admin.clients.create", errs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := From(w).Intent(r.Context()); err != nil {
			errs.Write(w, r, err)
			return
		}
		r.Context().Value(cancelKey{}).(context.CancelFunc)() // the client disconnects mid-change
		w.WriteHeader(201)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := httptest.NewRequestWithContext(context.WithValue(ctx, cancelKey{}, cancel), http.MethodPost, "/v1/admin/clients", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if ctx.Err() == nil {
		t.Fatal("the handler did not cancel the request's context")
	}
	recs := f.sink.records(t)
	if len(recs) != 2 || recs[0].Result != audit.ResultPending || recs[1].Result != audit.ResultOK || recs[1].Status != 201 {
		t.Fatalf("records %+v, want pending then ok (201)", recs)
	}
	if w.Code != 201 {
		t.Errorf("answer %d, want 201", w.Code)
	}
}

type cancelKey struct{}

// Sealed (no HMAC key), hashed values are left out; values that break the
// record's rules are left out rather than failing the request.
func TestNotesLeftOut(t *testing.T) {
	f := newFixture(t, true)
	h := f.a.Handler("oauth2.token", httperr.Writer{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := From(w)
		n.Hash("jti", "abc")
		n.Op("Not An Op")
		n.Tenant("two words")
		n.Client(strings.Repeat("x", audit.MaxIDLen+1))
		n.Key("", 3)
		n.Reason("Bad Reason")
		n.Hash("Bad.Name", "x")
		w.WriteHeader(204)
	}))
	if w := serve(h, http.MethodPost); w.Code != 204 {
		t.Fatalf("status %d", w.Code)
	}
	r := f.sink.records(t)[0]
	if r.Operation != "oauth2.token" || r.Tenant != "" || r.Principal.Kind != audit.PrincipalNone || r.Key.Name != "" ||
		r.Reason != "" || len(r.Hashed) != 0 || r.Status != 204 {
		t.Errorf("record %+v", r)
	}
}

// Without an Auditor, From is nil and every Note method does nothing.
func TestNilNote(t *testing.T) {
	n := From(httptest.NewRecorder())
	if n != nil {
		t.Fatal("From found a Note without an Auditor")
	}
	n.Op("a.b")
	n.Client("c")
	n.User("u")
	n.Admin()
	n.Tenant("t")
	n.Key("k", 1)
	n.Reason("r")
	n.Hash("jti", "x")
	if n.Intent(context.Background()) != nil || n.RequestID() != "" {
		t.Error("a nil Note did something")
	}
}

// A handler that panics is recorded as a 500 error before net/http sees
// the panic.
func TestPanicRecorded(t *testing.T) {
	f := newFixture(t, false)
	h := f.a.Handler("admin.keys.rotate", httperr.Writer{}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	}))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		serve(h, http.MethodPost)
	}()
	recs := f.sink.records(t)
	if len(recs) != 1 || recs[0].Result != audit.ResultError || recs[0].Status != 500 {
		t.Errorf("records %+v", recs)
	}
}

// Records of a run verify as a chain, and request ids are unique.
func TestRequestIDsUnique(t *testing.T) {
	f := newFixture(t, false)
	h := f.a.Handler("oauth2.token", httperr.Writer{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				serve(h, http.MethodPost)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, r := range f.sink.records(t) {
		if seen[r.RequestID] {
			t.Fatalf("request id %s twice", r.RequestID)
		}
		seen[r.RequestID] = true
	}
	if len(seen) != 400 {
		t.Errorf("%d records, want 400", len(seen))
	}
	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, audit.SeedSize)).Public().(ed25519.PublicKey)
	f.log.Close(context.Background())
	v, _ := audit.NewVerifier(audit.VerifyOptions{Keys: []ed25519.PublicKey{pub}})
	if err := v.File("mem", bytes.NewReader(f.sink.buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestAppendBase36MatchesStrconv(t *testing.T) {
	vals := []uint64{0, 1, 35, 36, 37, 1295, 1296, 1<<32 - 1, 1 << 63, ^uint64(0)}
	rng := mrand.New(mrand.NewPCG(5, 6))
	for range 1000 {
		vals = append(vals, rng.Uint64()>>rng.UintN(64))
	}
	for _, v := range vals {
		if got, want := string(appendBase36([]byte("x"), v)), "x"+strconv.FormatUint(v, 36); got != want {
			t.Fatalf("%d: got %q, want %q", v, got, want)
		}
	}
}
