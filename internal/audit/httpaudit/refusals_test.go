package httpaudit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/ratelimit"
)

// limitedFixture is a fixture whose Auditor limits refusals before
// authentication to burst per address (no refill: its clock stands
// still), and reads a request's address from its X-Addr header.
func limitedFixture(t *testing.T, burst, maxTallies int) (*fixture, *atomic.Int64) {
	t.Helper()
	f := newFixture(t, false)
	var now atomic.Int64
	now.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	lim, err := ratelimit.NewLocal(ratelimit.LocalConfig{Limit: ratelimit.Limit{Rate: 1.0 / 3600, Burst: burst}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	f.a, err = New(Config{Log: f.log, Remote: func(r *http.Request) netip.Addr { return netip.MustParseAddr(r.Header.Get("X-Addr")) },
		Refusals: RefusalConfig{Limiter: lim, MaxTallies: maxTallies, Now: clock}})
	if err != nil {
		t.Fatal(err)
	}
	return f, &now
}

// adminLike answers as the admin API does: 401 unless the request carries
// the token, then the admin as principal and 200, or 403 for X-Deny.
var adminLike = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer right" {
		httperr.Writer{}.Write(w, r, &httperr.Error{Status: http.StatusUnauthorized, Code: "unauthorized", Description: "a bearer token is required"})
		return
	}
	From(w).Admin()
	if r.Header.Get("X-Deny") != "" {
		httperr.Writer{}.Write(w, r, &httperr.Error{Status: http.StatusForbidden, Code: "forbidden", Description: "no"})
		return
	}
	w.Write([]byte(`{"ok":true}`))
})

func call(h http.Handler, addr string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/v1/admin/clients", nil)
	r.Header.Set("X-Addr", addr)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A flood of refusals before authentication from one address: the first
// burst are recorded one by one; the rest are answered 429 with
// Retry-After and tallied, and Flush writes one aggregate record counting
// them. An authenticated request in the middle, and an authenticated
// caller's refusal, are recorded one by one and never throttled.
func TestRefusalsLimitedAndAggregated(t *testing.T) {
	const n, burst = 1000, 5
	f, now := limitedFixture(t, burst, 0)
	h := f.a.Handler("admin.request", httperr.Writer{}, adminLike)
	codes := map[int]int{}
	for i := range n {
		if i == n/2 {
			if w := call(h, "192.0.2.1", "Authorization", "Bearer right"); w.Code != 200 {
				t.Fatalf("authenticated request in the flood: %d %s", w.Code, w.Body)
			}
			if w := call(h, "192.0.2.1", "Authorization", "Bearer right", "X-Deny", "1"); w.Code != 403 {
				t.Fatalf("authenticated refusal in the flood: %d %s", w.Code, w.Body)
			}
		}
		now.Add(int64(time.Millisecond))
		w := call(h, "192.0.2.1", "Authorization", "Bearer wrong")
		codes[w.Code]++
		if w.Code == http.StatusTooManyRequests {
			if w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"error":"slow_down"`) || w.Header().Get(RequestIDHeader) != "" {
				t.Fatalf("a throttled refusal: %v %s (no record holds its id, so none is sent)", w.Header(), w.Body)
			}
		}
	}
	if codes[401] != burst || codes[429] != n-burst {
		t.Fatalf("answers %v, want %d 401s then 429s", codes, burst)
	}
	if got := len(f.sink.records(t)); got != burst+2 {
		t.Fatalf("%d records before Flush, want the %d refusals within the limit and 2 authenticated requests", got, burst)
	}
	if err := f.a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs := f.sink.records(t)
	if len(recs) != burst+3 {
		t.Fatalf("%d records after Flush, want %d: %+v", len(recs), burst+3, recs)
	}
	var admin int
	for _, r := range recs[:len(recs)-1] {
		if r.Count != 0 {
			t.Errorf("an aggregate before the last record: %+v", r)
		}
		if r.Principal.Kind == audit.PrincipalAdmin {
			admin++
		}
	}
	if admin != 2 {
		t.Errorf("%d records of the admin, want 2 (the 200 and the 403)", admin)
	}
	agg := recs[len(recs)-1]
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if agg.Count != n-burst || agg.Operation != "admin.request" || agg.Reason != "unauthorized" || agg.Status != 429 ||
		agg.Result != audit.ResultRefused || agg.Remote != netip.MustParseAddr("192.0.2.1") || agg.RequestID != "" ||
		!agg.Since.Equal(t0.Add((burst+1)*time.Millisecond)) || !agg.Time.Equal(t0.Add(n*time.Millisecond)) {
		t.Errorf("aggregate %+v: want %d unauthorized refusals of 192.0.2.1 from the %dth to the %dth ms", agg, n-burst, burst+1, n)
	}
	if err := f.a.Flush(t.Context()); err != nil || len(f.sink.records(t)) != len(recs) {
		t.Errorf("a second Flush with nothing tallied wrote records: %v", err)
	}
}

// Which requests count as refusals before authentication, and which are
// recorded one by one even from an address past its limit.
func TestRefusalsWhatCounts(t *testing.T) {
	tests := []struct {
		name      string
		h         http.HandlerFunc
		throttled bool
	}{
		{"refused without a principal", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) }, true},
		{"failed without a principal (sealed)", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, true},
		{"ok without a principal", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }, false},
		{"refused with a client", func(w http.ResponseWriter, r *http.Request) { From(w).Client("kgc_x"); w.WriteHeader(400) }, false},
		{"refused with a user", func(w http.ResponseWriter, r *http.Request) { From(w).User("kgu_x"); w.WriteHeader(401) }, false},
		{"refused after its pending record", func(w http.ResponseWriter, r *http.Request) {
			if From(w).Intent(r.Context()) == nil {
				w.WriteHeader(400)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := limitedFixture(t, 1, 0)
			call(f.a.Handler("admin.request", httperr.Writer{}, adminLike), "192.0.2.1") // spends the burst
			h := f.a.Handler("admin.request", httperr.Writer{}, tt.h)
			before := len(f.sink.records(t))
			w := call(h, "192.0.2.1")
			if got := w.Code == http.StatusTooManyRequests; got != tt.throttled {
				t.Errorf("answered %d; throttled %v, want %v", w.Code, got, tt.throttled)
			}
			if recorded := len(f.sink.records(t)) > before; recorded == tt.throttled {
				t.Errorf("recorded on its own: %v, want %v", recorded, !tt.throttled)
			}
		})
	}
}

// Each address has its own limit, refusals of each reason their own
// aggregate, and at most MaxTallies tallies with an address are kept:
// past that, refusals are tallied per operation without an address, and
// every one is still counted.
func TestRefusalsBoundedTally(t *testing.T) {
	const addrs, maxTallies = 200, 16
	f, _ := limitedFixture(t, 1, maxTallies)
	h := f.a.Handler("admin.request", httperr.Writer{}, adminLike)
	other := f.a.Handler("admin.request", httperr.Writer{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		From(w).Reason("invalid_request")
		w.WriteHeader(400)
	}))
	for i := range addrs {
		addr := netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}).String()
		for j, want := range []int{401, 429, 429} {
			if w := call(h, addr); w.Code != want {
				t.Fatalf("%s, request %d: %d, want %d", addr, j, w.Code, want)
			}
		}
		if i == 0 {
			call(other, addr) // another reason: a tally of its own
		}
	}
	if got := len(f.a.refusals.tally); got > maxTallies+1 {
		t.Errorf("%d tallies for %d addresses, want at most %d", got, addrs, maxTallies+1)
	}
	before := len(f.sink.records(t))
	if err := f.a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	aggs := f.sink.records(t)[before:]
	var total uint64
	var withAddr, reasons int
	for _, r := range aggs {
		total += r.Count
		if r.Remote.IsValid() {
			withAddr++
		}
		if r.Reason == "invalid_request" {
			reasons++
		}
	}
	if total != 2*addrs+1 || withAddr != maxTallies || reasons != 1 || len(aggs) != maxTallies+1 {
		t.Errorf("%d aggregates (%d with an address, %d of invalid_request) counting %d: want %d counting %d",
			len(aggs), withAddr, reasons, total, maxTallies+1, 2*addrs+1)
	}
}

// Aggregates that cannot be written (no sink takes them) are kept, and the
// next Flush writes them with nothing lost.
func TestRefusalsFlushKeepsWhatFailed(t *testing.T) {
	f, _ := limitedFixture(t, 1, 0)
	h := f.a.Handler("admin.request", httperr.Writer{}, adminLike)
	for range 10 {
		call(h, "192.0.2.1")
		call(h, "192.0.2.2")
	}
	f.sink.setFail(true)
	if err := f.a.Flush(t.Context()); !errors.Is(err, audit.ErrNoSink) || !strings.Contains(err.Error(), "18 refused requests") {
		t.Fatalf("Flush with no sink: %v", err)
	}
	f.sink.setFail(false)
	before := len(f.sink.records(t))
	if err := f.a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var total uint64
	aggs := f.sink.records(t)[before:]
	for _, r := range aggs {
		total += r.Count
	}
	if len(aggs) != 2 || total != 18 {
		t.Errorf("after the sink recovered: %d aggregates counting %d, want 2 counting 18", len(aggs), total)
	}
}

// Note.Attempt charges an address before a credential is tried whose
// every attempt writes a pending record: past the limit it refuses with
// 429 before anything is written, and the request is tallied.
func TestAttempt(t *testing.T) {
	f, _ := limitedFixture(t, 2, 0)
	tried := 0
	h := f.a.Handler("sys.unseal", httperr.Writer{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := From(w)
		if err := n.Attempt(r.Context()); err != nil {
			httperr.Writer{}.Write(w, r, err)
			return
		}
		if err := n.Intent(r.Context()); err != nil {
			httperr.Writer{}.Write(w, r, err)
			return
		}
		tried++
		w.WriteHeader(400) // a wrong key
	}))
	var codes []int
	for range 5 {
		codes = append(codes, call(h, "192.0.2.1").Code)
	}
	if want := []int{400, 400, 429, 429, 429}; !slices.Equal(codes, want) || tried != 2 {
		t.Fatalf("answers %v after %d attempts, want %v after 2", codes, tried, want)
	}
	if err := f.a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs := f.sink.records(t)
	if len(recs) != 5 || recs[4].Count != 3 || recs[4].Reason != "slow_down" {
		t.Errorf("records %+v: want two attempts, each pending then refused, and an aggregate of 3", recs)
	}
	var nilNote *Note
	if err := nilNote.Attempt(context.Background()); err != nil {
		t.Errorf("a nil Note's Attempt: %v", err)
	}
}

// Other refusals from an address do not spend the budget of its
// attempts: a sealed node's clients, refused before authentication from
// the operator's address, leave the operator's unseal its turn.
func TestAttemptOwnBudget(t *testing.T) {
	f, _ := limitedFixture(t, 2, 0)
	refused := f.a.Handler("admin.request", httperr.Writer{}, adminLike)
	tried := 0
	unseal := f.a.Handler("sys.unseal", httperr.Writer{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := From(w)
		if err := n.Attempt(r.Context()); err != nil {
			httperr.Writer{}.Write(w, r, err)
			return
		}
		tried++
		w.WriteHeader(200)
	}))
	var codes []int
	for range 4 {
		codes = append(codes, call(refused, "192.0.2.1").Code)
	}
	codes = append(codes, call(unseal, "192.0.2.1").Code)
	if want := []int{401, 401, 429, 429, 200}; !slices.Equal(codes, want) || tried != 1 {
		t.Fatalf("answers %v after %d attempts, want %v after 1", codes, tried, want)
	}
}

// A flood from many addresses, each within its own limit: past the limit
// of every address together (Total) the refusals are answered 429 and
// tallied in one aggregate without an address, not one per address; the
// addresses' attempts (Note.Attempt) are not charged to it.
func TestRefusalsTotal(t *testing.T) {
	f, _ := limitedFixture(t, 5, 0)
	total, err := ratelimit.NewLocal(ratelimit.LocalConfig{Limit: ratelimit.Limit{Rate: 1.0 / 3600, Burst: 3}, Now: f.a.refusals.cfg.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.a.refusals.cfg.Total = total
	h := f.a.Handler("admin.request", httperr.Writer{}, adminLike)
	var codes []int
	for i := range 6 {
		codes = append(codes, call(h, fmt.Sprintf("2001:db8:%x::1", i)).Code)
	}
	if want := []int{401, 401, 401, 429, 429, 429}; !slices.Equal(codes, want) {
		t.Fatalf("answers %v, want %v", codes, want)
	}
	tried := 0
	unseal := f.a.Handler("sys.unseal", httperr.Writer{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := From(w).Attempt(r.Context()); err != nil {
			httperr.Writer{}.Write(w, r, err)
			return
		}
		tried++
		w.WriteHeader(200)
	}))
	if w := call(unseal, "2001:db8:ffff::1"); w.Code != 200 || tried != 1 {
		t.Fatalf("an attempt past the limit of every address: %d", w.Code)
	}
	if err := f.a.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs := f.sink.records(t)
	if len(recs) != 5 || recs[4].Count != 3 || recs[4].Remote.IsValid() {
		t.Errorf("records %+v: want three refusals, the attempt, and one aggregate of 3 without an address", recs)
	}
}
