package telemetry

import (
	"testing"
	"time"
)

func TestTransitMetrics(t *testing.T) {
	m := New()
	tm := m.Transit([]string{"transit.encrypt", "transit.decrypt"})
	for _, c := range []struct {
		op            string
		status        int
		reason        string
		items, failed int
	}{
		{"transit.encrypt", 200, "", 0, 0},
		{"transit.encrypt", 200, "", 0, 0},
		{"transit.encrypt", 200, "", 100, 2}, // a batch, two items failed, answered 200
		{"transit.decrypt", 400, "batch_errors", 3, 3},
		{"transit.decrypt", 403, "permission_denied", 0, 0},
		{"transit.decrypt", 503, "sealed", 0, 0},
		{"transit.unheard_of", 200, "", 0, 0}, // counted as "transit", not as a new series
		{"transit", 404, "not_found", 0, 0},
	} {
		tm.Observe(c.op, c.status, c.reason, c.items, c.failed, 30*time.Microsecond)
	}
	var none *TransitMetrics
	none.Observe("transit.encrypt", 200, "", 0, 0, time.Millisecond) // a nil *TransitMetrics counts nothing

	got := gather(t, m)
	for k, v := range map[string]float64{
		`keygate_transit_requests_total{op="transit.encrypt",reason="",result="ok"}`:                       3,
		`keygate_transit_requests_total{op="transit.decrypt",reason="batch_errors",result="refused"}`:      1,
		`keygate_transit_requests_total{op="transit.decrypt",reason="permission_denied",result="refused"}`: 1,
		`keygate_transit_requests_total{op="transit.decrypt",reason="sealed",result="error"}`:              1,
		`keygate_transit_requests_total{op="transit",reason="",result="ok"}`:                               1,
		`keygate_transit_requests_total{op="transit",reason="not_found",result="refused"}`:                 1,
		`keygate_transit_requests_total{op="transit.decrypt",reason="",result="ok"}`:                       0, // exists from the start
		`keygate_transit_batch_items_total{op="transit.encrypt",result="ok"}`:                              98,
		`keygate_transit_batch_items_total{op="transit.encrypt",result="error"}`:                           2,
		`keygate_transit_batch_items_total{op="transit.decrypt",result="error"}`:                           3,
		`keygate_transit_request_seconds_count{op="transit.encrypt"}`:                                      3,
		`keygate_transit_request_seconds_count{op="transit"}`:                                              2,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if k == `keygate_transit_requests_total{op="transit.unheard_of",reason="",result="ok"}` {
			t.Errorf("an operation Transit was not given made its own series: %s", k)
		}
	}
}
