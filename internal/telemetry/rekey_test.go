package telemetry

import (
	"sync/atomic"
	"testing"
)

// TestRekeyMetrics: the rotation's gauges show what stats returns at each
// scrape, read once per scrape, and are left out of a scrape whose stats
// cannot tell.
func TestRekeyMetrics(t *testing.T) {
	var calls atomic.Int32
	var now struct {
		st RekeyStats
		ok bool
	}
	m := New()
	m.Rekey(func() (RekeyStats, bool) { calls.Add(1); return now.st, now.ok })
	names := []string{"keygate_rekey_rewrapping", "keygate_rekey_records", "keygate_rekey_records_done"}
	for _, c := range []struct {
		name string
		st   RekeyStats
		ok   bool
		want []float64 // in the order of names; nil: absent
	}{
		{"no rotation yet", RekeyStats{}, true, []float64{0, 0, 0}},
		{"under way", RekeyStats{Rewrapping: true, Done: 3, Total: 12}, true, []float64{1, 12, 3}},
		{"done", RekeyStats{Done: 12, Total: 12}, true, []float64{0, 12, 12}},
		{"the store does not answer", RekeyStats{Rewrapping: true, Total: 99}, false, nil},
	} {
		now.st, now.ok = c.st, c.ok
		before := calls.Load()
		got := gather(t, m)
		if n := calls.Load() - before; n != 1 {
			t.Errorf("%s: stats read %d times in one scrape, want once", c.name, n)
		}
		for i, name := range names {
			v, present := got[name]
			switch {
			case c.want == nil && present:
				t.Errorf("%s: %s = %v, want it left out", c.name, name, v)
			case c.want != nil && (!present || v != c.want[i]):
				t.Errorf("%s: %s = %v (present %v), want %v", c.name, name, v, present, c.want[i])
			}
		}
	}
}
