package telemetry

import (
	"math"
	"testing"
	"time"
)

func TestFleet(t *testing.T) {
	m := New()
	if _, ok := gather(t, m)["keygate_revocations_staleness_seconds"]; ok {
		t.Error("staleness gauge registered before Fleet")
	}
	st := FleetStats{Staleness: 1500 * time.Millisecond, Limiters: []LimiterStats{
		{Name: "login", Redis: 4, Fallback: 2, Degraded: true},
		{Name: "token", Redis: 7},
	}}
	m.Fleet(func() FleetStats { return st })
	got := gather(t, m)
	for name, want := range map[string]float64{
		"keygate_revocations_staleness_seconds":                                     1.5,
		"keygate_revocations_fail_closed":                                           0,
		`keygate_rate_limit_decisions_total{decided_by="redis",limiter="login"}`:    4,
		`keygate_rate_limit_decisions_total{decided_by="fallback",limiter="login"}`: 2,
		`keygate_rate_limit_degraded{limiter="login"}`:                              1,
		`keygate_rate_limit_decisions_total{decided_by="redis",limiter="token"}`:    7,
		`keygate_rate_limit_decisions_total{decided_by="fallback",limiter="token"}`: 0,
		`keygate_rate_limit_degraded{limiter="token"}`:                              0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	// Read at scrape time; a second Fleet replaces the source rather than
	// registering twice.
	m.Fleet(func() FleetStats { return FleetStats{Staleness: math.MaxInt64, FailClosed: true} })
	got = gather(t, m)
	if v := got["keygate_revocations_staleness_seconds"]; !math.IsInf(v, 1) {
		t.Errorf("staleness before the first sync = %v, want +Inf", v)
	}
	if v := got["keygate_revocations_fail_closed"]; v != 1 {
		t.Errorf("fail_closed = %v, want 1", v)
	}
	if _, ok := got[`keygate_rate_limit_degraded{limiter="login"}`]; ok {
		t.Error("a limiter the new source does not report is still exported")
	}
}
