package loadgen

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// healthy is a closed-loop step that passes every check: a pinned target
// busy on its core, an unsaturated generator, nobody else on the machine.
func healthy() *Result {
	return &Result{Mode: ModeClosed, Connections: 100, Seconds: 8, Requests: 80000, RequestsPerSec: 10000,
		Timeout: int64(2 * time.Second), LatencyFrom: LatencyFromWrite, Latency: Latency{P99: 20e6, Max: 300e6},
		CPU: CPU{Percent: 60, GOMAXPROCS: 1},
		Server: &ServerUsage{CPUPercent: 98, CPUs: []int{0}, WindowSeconds: 8, Others: &OtherUsage{CPUPercent: 3},
			Timeline: []UsageSample{{At: 1}, {At: 2}, {At: 3}}}}
}

func TestCheckStep(t *testing.T) {
	for _, c := range []struct {
		name     string
		baseline bool
		edit     func(r *Result)
		want     []string // "check severity", in order
		text     string   // a phrase the first finding must hold
	}{
		{"healthy", false, func(*Result) {}, nil, ""},
		{"latency beyond the timeout", false, func(r *Result) { r.Latency.Max = int64(32 * time.Second) },
			[]string{"timeout invalid"}, "latencies up to 32 s, beyond the 2 s timeout"},
		{"open loop may exceed it", false, func(r *Result) {
			r.Mode, r.LatencyFrom, r.Latency.Max = ModeOpen, LatencyFromSchedule, int64(32*time.Second)
		}, nil, ""},
		{"timeouts", false, func(r *Result) { r.Errors.Timeout = 2000 },
			[]string{"errors warning"}, "2.4% of requests got no answer (2000 timeouts"},
		{"a few errors", false, func(r *Result) { r.Errors.Read = 10 }, nil, ""},
		{"generator saturated, compared side", false, func(r *Result) {
			r.CPU.Percent, r.CPU.Saturated, r.Server.CPUPercent = 97, true, 80
		}, []string{"generator warning"}, "lower bound"},
		{"generator saturated, baseline", true, func(r *Result) {
			r.CPU.Percent, r.CPU.Saturated, r.Server.CPUPercent = 97, true, 80
		}, []string{"generator invalid"}, "overstated"},
		{"generator saturated, target busy", true, func(r *Result) { r.CPU.Percent, r.CPU.Saturated = 97, true }, nil, ""},
		{"generator saturated, usage unknown", true, func(r *Result) { r.CPU.Percent, r.CPU.Saturated, r.Server = 97, true, nil },
			[]string{"generator invalid"}, ""},
		{"neighbour on the target's CPU", false, func(r *Result) {
			r.Server.CPUPercent, r.Server.Others = 52, &OtherUsage{CPUPercent: 49, OnTargetCPUsPercent: 47}
		}, []string{"neighbour invalid"}, "other processes took 47% of CPU 0, where the target is pinned (it used 52%)"},
		{"neighbour on the generator's CPU", false, func(r *Result) { r.Server.Others = &OtherUsage{CPUPercent: 45, OnTargetCPUsPercent: 2} },
			[]string{"neighbour invalid"}, "43% of the load generator's CPUs"},
		{"neighbour, nothing pinned", false, func(r *Result) {
			r.Server.CPUs, r.Server.Others = nil, &OtherUsage{CPUPercent: 45}
		}, []string{"neighbour invalid"}, "used 45% of a CPU"},
		{"idle target", false, func(r *Result) { r.Server.CPUPercent = 40 },
			[]string{"target-cpu warning"}, "the target used 40% of CPU 0"},
		{"idle target, generator the limit", false, func(r *Result) {
			r.Server.CPUPercent, r.CPU.Percent, r.CPU.Saturated = 40, 95, true
		}, []string{"generator warning"}, ""},
		{"idle target, two CPUs", false, func(r *Result) { r.Server.CPUs, r.Server.CPUPercent = []int{0, 1}, 120 },
			[]string{"target-cpu warning"}, "CPUs 0,1"},
		{"idle target, open loop", false, func(r *Result) { r.Mode, r.Server.CPUPercent = ModeOpen, 10 }, nil, ""},
		{"hole in the timeline", false, func(r *Result) { r.Server.Timeline[2] = UsageSample{At: 4.5, Gap: true} },
			[]string{"timeline warning"}, "1 hole in the usage timeline (up to 2.5 s"},
		{"window not covered", false, func(r *Result) { r.Server.WindowSeconds = 5 },
			[]string{"timeline invalid"}, "readings cover 62% of the measured window"},
		{"no usage", false, func(r *Result) { r.Server = nil }, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := healthy()
			c.edit(r)
			got := checkStep("keygate", c.baseline, 2, r)
			var kinds []string
			for _, f := range got {
				kinds = append(kinds, f.Check+" "+f.Severity)
				if f.Series != "keygate" || f.Step != 2 || !strings.HasPrefix(f.Text, "keygate at 100 connections: ") {
					t.Errorf("finding %+v does not name its step", f)
				}
			}
			if fmt.Sprint(kinds) != fmt.Sprint(c.want) {
				t.Fatalf("findings %v, want %v: %+v", kinds, c.want, got)
			}
			if c.text != "" && !strings.Contains(got[0].Text, c.text) {
				t.Errorf("text %q lacks %q", got[0].Text, c.text)
			}
		})
	}
}

func TestCheckVerdict(t *testing.T) {
	doc := func(naive, keygate []float64, edit func(d *Document)) *Document {
		series := func(name string, rates []float64) *Report {
			r := &Report{Name: name}
			for i, rate := range rates {
				st := healthy()
				st.Connections, st.RequestsPerSec = 100*(i+1), rate
				r.Steps = append(r.Steps, st)
			}
			return r
		}
		d := NewDocument("t", "", series("naive", naive), series("keygate", keygate))
		if edit != nil {
			edit(d)
		}
		return d
	}
	for _, c := range []struct {
		name  string
		doc   *Document
		valid bool
		want  string
	}{
		{"valid range", doc([]float64{1000, 500}, []float64{4400, 8000}, nil), true,
			"keygate ÷ naive: 4.4–16× requests/s, valid"},
		{"one ratio", doc([]float64{1000}, []float64{3000}, nil), true, "keygate ÷ naive: 3.0× requests/s, valid"},
		{"repeated steps: the median", doc([]float64{1000, 1000, 1000, 1000}, []float64{800, 700, 1000, 2000}, func(d *Document) {
			for _, s := range d.Series {
				for _, st := range s.Steps {
					st.Connections = 50
				}
			}
		}), true, "keygate ÷ naive: 0.7–2.0× (median 0.9×) requests/s, valid"},
		{"distinct steps: no median", doc([]float64{1000, 1000, 1000}, []float64{800, 700, 2000}, nil), true,
			"keygate ÷ naive: 0.7–2.0× requests/s, valid"},
		{"warnings", doc([]float64{1000, 500}, []float64{4400, 8000}, func(d *Document) {
			d.Series[1].Steps[1].Errors.Timeout = 5000
		}), true, "keygate ÷ naive: 4.4–16× requests/s, valid, with 1 warning"},
		{"not valid", doc([]float64{1000, 500}, []float64{4400, 8000}, func(d *Document) {
			d.Series[0].Steps[1].Server.Others = &OtherUsage{CPUPercent: 50, OnTargetCPUsPercent: 48}
			d.Series[1].Steps[0].Latency.Max = int64(3 * time.Second)
		}), false, "keygate ÷ naive: 4.4–16× requests/s, not valid: naive at 200 connections: other processes took 48% of CPU 0"},
		{"a missing step", doc([]float64{1000, 0}, []float64{2000}, nil), true, "keygate ÷ naive: 2.0× requests/s, valid"},
		{"one series", NewDocument("t", "", &Report{Name: "auth", Steps: []*Result{healthy()}}), true, "valid"},
		{"nil series and steps", NewDocument("t", "", nil, &Report{Steps: []*Result{nil}}), true, "valid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := c.doc.Check()
			if c.doc.Validity != v || v.Valid != c.valid || !strings.HasPrefix(v.Verdict, c.want) {
				t.Errorf("valid %v, verdict %q; want %v, %q", v.Valid, v.Verdict, c.valid, c.want)
			}
			if !c.valid && !strings.Contains(v.Verdict, "(and 1 more)") {
				t.Errorf("verdict %q does not count the other invalid step", v.Verdict)
			}
		})
	}
}

func TestMarks(t *testing.T) {
	v := &Validity{Findings: []Finding{
		{Series: "a", Step: 0, Severity: SeverityWarning}, {Series: "a", Step: 0, Severity: SeverityInvalid},
		{Series: "a", Step: 1, Severity: SeverityWarning}, {Series: "b", Step: 2, Severity: SeverityInvalid},
	}}
	if m := v.Marks("a"); len(m) != 2 || m[0] != SeverityInvalid || m[1] != SeverityWarning {
		t.Errorf("marks of a: %v", m)
	}
	if m := (*Validity)(nil).Marks("a"); len(m) != 0 {
		t.Errorf("nil validity: %v", m)
	}
}

func TestLate(t *testing.T) {
	for _, c := range []struct {
		lat  time.Duration
		open bool
		want bool
	}{
		{time.Second, false, false}, {2 * time.Second, false, false}, {2*time.Second + 1, false, true},
		{30 * time.Second, true, false},
	} {
		if got := Late(c.lat, 2*time.Second, c.open); got != c.want {
			t.Errorf("Late(%v, 2s, open %v) = %v", c.lat, c.open, got)
		}
	}
}
