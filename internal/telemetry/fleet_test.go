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
	st := FleetStats{Staleness: 1500 * time.Millisecond, Limiter: true, LimiterRedis: 4, LimiterFallback: 2, LimiterDegraded: true}
	m.Fleet(func() FleetStats { return st })
	got := gather(t, m)
	for name, want := range map[string]float64{
		"keygate_revocations_staleness_seconds":        1.5,
		"keygate_revocations_fail_closed":              0,
		"keygate_login_limit_redis_decisions_total":    4,
		"keygate_login_limit_fallback_decisions_total": 2,
		"keygate_login_limit_degraded":                 1,
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
}
