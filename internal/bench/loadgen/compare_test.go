package loadgen

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestCompareMediansOverRounds(t *testing.T) {
	step := func(conns, round int, rps float64, cpuS float64, reqs int64) *Result {
		r := &Result{Mode: ModeClosed, Connections: conns, Round: round, RequestsPerSec: rps, Requests: reqs}
		if cpuS > 0 {
			r.Server = &ServerUsage{CPUSeconds: cpuS}
		}
		return r
	}
	ref := &Report{Name: "ref", Steps: []*Result{
		step(100, 1, 1000, 1, 10000), step(100, 2, 800, 1, 10000), step(100, 3, 1000, 1, 10000),
		step(10, 1, 500, 0, 100),
	}}
	kg := &Report{Name: "kg", Steps: []*Result{
		step(100, 1, 900, 1.2, 10000), step(100, 2, 800, 1.1, 10000), step(100, 3, 500, 2, 10000),
		step(10, 1, 250, 0.5, 100),
	}}
	d := NewDocument("t", "", ref, kg)
	cs := d.Compare()
	if len(cs) != 2 {
		t.Fatalf("comparisons %+v, want one per connection count", cs)
	}
	c := cs[0]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// Rounds' ratios 0.9, 1.0, 0.5: the median 0.9 (not the ratio of medians).
	if c.Step != "100" || c.Rounds != 3 || !near(c.RequestsRatio, 0.9) {
		t.Errorf("100 connections: %+v", c)
	}
	// CPU per request 120, 110, 200 µs against 100: median ratio 1.2.
	if !near(c.CPUPerRequestRatio, 1.2) || !near(c.CPUPerRequestUS, 120) || !near(c.AgainstCPUPerRequestUS, 100) {
		t.Errorf("100 connections CPU: %+v", c)
	}
	// The reference's CPU unknown at 10: no CPU figures, the rate still compared.
	if c := cs[1]; c.Step != "10" || c.Rounds != 1 || !near(c.RequestsRatio, 0.5) || c.CPUPerRequestRatio != 0 {
		t.Errorf("10 connections: %+v", c)
	}
	var buf bytes.Buffer
	if err := d.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"100 (round 2)", "medians over 3 interleaved rounds", "0.90 1.00 0.50", "120.0 vs 100.0"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}
