package loadgen

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Validity is a document's own judgement of whether its figures can be
// trusted: each step of each series is checked for what would make its
// figures misleading, and the verdict is one line for the top of every
// rendering ("keygate ÷ naive: 4.4–16× requests/s, valid").
type Validity struct {
	Valid    bool      `json:"valid"`
	Verdict  string    `json:"verdict"`
	Findings []Finding `json:"findings,omitempty"`
}

// Severities of a Finding.
const (
	// SeverityInvalid: the step's figures do not measure what they claim,
	// and the document is not valid.
	SeverityInvalid = "invalid"
	// SeverityWarning: the figures stand, read with the finding beside them
	// (a lower bound, a target that fell behind).
	SeverityWarning = "warning"
)

// Checks a Finding names.
const (
	CheckTimeout   = "timeout"   // latencies beyond the run's own timeout
	CheckErrors    = "errors"    // requests with no answer in time
	CheckGenerator = "generator" // the load generator used all its CPU
	CheckNeighbour = "neighbour" // another process took CPU from the run
	CheckTargetCPU = "target-cpu"
	CheckTimeline  = "timeline" // the usage probe could not run on time
)

// Thresholds of the checks.
const (
	// NeighbourLimit is the share of the CPUs given to the target, or to
	// the generator, that other processes may take before a step is not
	// valid (percent). On an idle machine the measure reads 0: the
	// interrupts that loopback traffic costs are left out of it.
	NeighbourLimit = 15
	// TargetBusyPercent is how busy a pinned target should be in a
	// closed-loop step (percent of its CPUs): below it, something other
	// than the target's CPU set the rate.
	TargetBusyPercent = 70
	// ErrorLimit is the share of requests without an answer in time above
	// which a step is flagged (percent).
	ErrorLimit = 1
	// CoverageLimit is the share of the measured window the usage figures
	// must cover (percent).
	CoverageLimit = 80
)

// Finding is one check that failed on one step.
type Finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Series   string `json:"series"`
	Step     int    `json:"step"` // index into the series' Steps
	Text     string `json:"text"` // a sentence for the reader, naming the step
}

// Check works out d's Validity from its series and sets it.
func (d *Document) Check() *Validity {
	v := &Validity{}
	for si, s := range d.Series {
		if s == nil {
			continue
		}
		for i, st := range s.Steps {
			if st != nil {
				v.Findings = append(v.Findings, checkStep(s.Name, si == 0 && len(d.Series) > 1, i, st)...)
			}
		}
	}
	v.Valid = true
	var invalid []string
	warnings := 0
	for _, f := range v.Findings {
		if f.Severity == SeverityInvalid {
			v.Valid = false
			invalid = append(invalid, f.Text)
		} else {
			warnings++
		}
	}
	verdict := d.ratioRange()
	switch {
	case !v.Valid:
		verdict += "not valid: " + invalid[0]
		if len(invalid) > 1 {
			verdict += fmt.Sprintf(" (and %d more)", len(invalid)-1)
		}
	case warnings > 0:
		verdict += fmt.Sprintf("valid, with %d warning%s", warnings, plural(warnings))
	default:
		verdict += "valid"
	}
	v.Verdict = verdict
	d.Validity = v
	return v
}

// Marks returns the worst severity found on each step of the named
// series ("" for none), by step index.
func (v *Validity) Marks(series string) map[int]string {
	m := map[int]string{}
	if v == nil {
		return m
	}
	for _, f := range v.Findings {
		if f.Series == series && m[f.Step] != SeverityInvalid {
			m[f.Step] = f.Severity
		}
	}
	return m
}

// ratioRange is "b ÷ a: lo–hi× requests/s; " for every later series b of
// the first a, over the steps both measured. When the steps repeat a
// number of connections (three or more pairs, measured A, B, A, B, ...)
// it adds the median of the per-step ratios: "lo–hi× (median m×)".
func (d *Document) ratioRange() string {
	if len(d.Series) < 2 {
		return ""
	}
	first := d.Series[0]
	if first == nil {
		return ""
	}
	var parts []string
	for _, s := range d.Series[1:] {
		if s == nil {
			continue
		}
		var rs []float64
		conns := map[int]bool{}
		for i := range min(len(first.Steps), len(s.Steps)) {
			if first.Steps[i] == nil || s.Steps[i] == nil {
				continue
			}
			if a := first.Steps[i].RequestsPerSec; a > 0 {
				rs = append(rs, s.Steps[i].RequestsPerSec/a)
				conns[s.Steps[i].Connections] = true
			}
		}
		if len(rs) == 0 {
			continue
		}
		lo, hi := slices.Min(rs), slices.Max(rs)
		span := times(lo)
		if times(hi) != span {
			span += "–" + times(hi)
		}
		span += "×"
		if len(rs) >= 3 && len(conns) < len(rs) && times(lo) != times(hi) {
			span += " (median " + times(Median(rs)) + "×)"
		}
		parts = append(parts, fmt.Sprintf("%s ÷ %s: %s requests/s", s.Name, first.Name, span))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + ", "
}

// Median is the median of rs (the mean of the middle two for an even
// count); rs is left as it is.
func Median(rs []float64) float64 {
	if len(rs) == 0 {
		return math.NaN()
	}
	c := slices.Clone(rs)
	slices.Sort(c)
	if n := len(c); n%2 == 1 {
		return c[n/2]
	} else {
		return (c[n/2-1] + c[n/2]) / 2
	}
}

func times(r float64) string {
	switch {
	case r >= 10:
		return fmt.Sprintf("%.0f", r)
	case r >= 0.1:
		return fmt.Sprintf("%.1f", r)
	default:
		return fmt.Sprintf("%.2g", r)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// checkStep runs every check on one step; baseline is true for the first
// series of a comparison, whose figures are the ratios' denominators.
func checkStep(series string, baseline bool, i int, st *Result) []Finding {
	var out []Finding
	where := fmt.Sprintf("%s at %s", series, stepName(st))
	add := func(check, sev, format string, args ...any) {
		out = append(out, Finding{Check: check, Severity: sev, Series: series, Step: i,
			Text: where + ": " + fmt.Sprintf(format, args...)})
	}
	timeout := float64(st.Timeout)
	if st.LatencyFrom != LatencyFromSchedule && st.Timeout > 0 && float64(st.Latency.Max) > timeout {
		add(CheckTimeout, SeverityInvalid, "latencies up to %s, beyond the %s timeout", ms(float64(st.Latency.Max)), ms(timeout))
	}
	attempts := st.Requests + st.Errors.Total()
	if e := st.Errors.Total(); attempts > 0 && 100*float64(e) > ErrorLimit*float64(attempts) {
		add(CheckErrors, SeverityWarning, "%.1f%% of requests got no answer (%d timeouts, %d other errors); "+
			"the rate counts answers only", 100*float64(e)/float64(attempts), st.Errors.Timeout, e-st.Errors.Timeout)
	}
	u := st.Server
	if st.CPU.Saturated && !targetBusy(u) { // a target busy on its own CPUs set the rate, whatever the generator did
		if baseline {
			add(CheckGenerator, SeverityInvalid, "the load generator used %.0f%% of its CPU, so it may have set this rate: "+
				"the ratios to it may be overstated", st.CPU.Percent)
		} else {
			add(CheckGenerator, SeverityWarning, "the load generator used %.0f%% of its CPU, so the rate is a lower bound", st.CPU.Percent)
		}
	}
	if u == nil {
		return out
	}
	neighbour := false
	if o := u.Others; o != nil {
		if n := len(u.CPUs); n > 0 && o.OnTargetCPUsPercent > NeighbourLimit*float64(n) {
			neighbour = true
			add(CheckNeighbour, SeverityInvalid, "other processes took %.0f%% of %s, where the target is pinned (it used %.0f%%)",
				o.OnTargetCPUsPercent, cpuList(u.CPUs), u.CPUPercent)
		}
		gen := float64(st.CPU.GOMAXPROCS)
		if len(u.CPUs) == 0 {
			gen = 0 // not pinned: every CPU is shared, judged as a whole below
		}
		if elsewhere := o.CPUPercent - o.OnTargetCPUsPercent; gen > 0 && elsewhere > NeighbourLimit*gen {
			neighbour = true
			add(CheckNeighbour, SeverityInvalid, "other processes took %.0f%% of the load generator's CPUs", elsewhere)
		}
		if len(u.CPUs) == 0 && o.CPUPercent > NeighbourLimit {
			neighbour = true
			add(CheckNeighbour, SeverityInvalid, "other processes used %.0f%% of a CPU while it ran", o.CPUPercent)
		}
	}
	if n := len(u.CPUs); n > 0 && st.Mode == ModeClosed && !neighbour && !st.CPU.Saturated &&
		u.CPUPercent < TargetBusyPercent*float64(n) {
		add(CheckTargetCPU, SeverityWarning, "the target used %.0f%% of %s and the generator %.0f%% of its CPU: "+
			"something else set the rate (too few connections, or waiting on I/O or locks)", u.CPUPercent, cpuList(u.CPUs), st.CPU.Percent)
	}
	gaps, longest := 0, 0.0
	prev := 0.0
	for _, smp := range u.Timeline {
		if smp.Gap {
			gaps++
			longest = max(longest, smp.At-prev)
		}
		prev = smp.At
	}
	covered := 100.0
	if st.Seconds > 0 && u.WindowSeconds > 0 {
		covered = 100 * u.WindowSeconds / st.Seconds
	}
	switch {
	case covered < CoverageLimit:
		add(CheckTimeline, SeverityInvalid, "the target's usage readings cover %.0f%% of the measured window: the "+
			"generator fell behind its own timers, which also inflates the latencies it measures", covered)
	case gaps > 0:
		add(CheckTimeline, SeverityWarning, "%d hole%s in the usage timeline (up to %.1f s between readings): "+
			"the generator's machine was busy", gaps, plural(gaps), longest)
	}
	return out
}

// BusyPercent is how busy a pinned target must be (percent of its CPUs)
// for its own CPU, not the generator, to have set a step's rate.
const BusyPercent = 90

func targetBusy(u *ServerUsage) bool {
	return u != nil && len(u.CPUs) > 0 && u.CPUPercent >= BusyPercent*float64(len(u.CPUs))
}

func stepName(st *Result) string {
	if st.Mode == ModeOpen {
		return fmt.Sprintf("%d connections, %.0f requests/s", st.Connections, st.TargetRate)
	}
	return fmt.Sprintf("%d connections", st.Connections)
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = fmt.Sprint(c)
	}
	if len(s) == 1 {
		return "CPU " + s[0]
	}
	return "CPUs " + strings.Join(s, ",")
}

func ms(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2g s", ns/1e9)
	default:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	}
}
