package loadgen

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Comparison is one series against the document's first at one step (a
// connection count, or a count at a rate) over the rounds of an
// interleaved run: the median of the rounds' ratios, each round's two
// figures having been measured back to back.
type Comparison struct {
	Series  string `json:"series"`
	Against string `json:"against"`
	Step    string `json:"step"` // "100", or "100 @ 5000/s"
	Rounds  int    `json:"rounds"`
	// RequestsRatio is the median over rounds of Series' requests/s ÷
	// Against's; RequestsRatios are the rounds' own.
	RequestsRatio  float64   `json:"requests_ratio"`
	RequestsRatios []float64 `json:"requests_ratios"`
	// CPU per answered request, in microseconds, median over rounds, and
	// the median of the rounds' ratios (Series ÷ Against); absent when the
	// targets' CPU was not readable.
	CPUPerRequestUS        float64 `json:"cpu_per_request_us,omitempty"`
	AgainstCPUPerRequestUS float64 `json:"against_cpu_per_request_us,omitempty"`
	CPUPerRequestRatio     float64 `json:"cpu_per_request_ratio,omitempty"`
}

// CPUPerRequest is the target's CPU time per answered request in
// microseconds (0 when unknown).
func (r *Result) CPUPerRequest() float64 {
	if r == nil || r.Server == nil || r.Requests <= 0 {
		return 0
	}
	return 1e6 * r.Server.CPUSeconds / float64(r.Requests)
}

// Compare works out d's Comparisons: every later series against the first,
// steps matched by position and grouped by step label.
func (d *Document) Compare() []Comparison {
	if len(d.Series) < 2 || d.Series[0] == nil {
		return nil
	}
	first := d.Series[0]
	var out []Comparison
	for _, s := range d.Series[1:] {
		if s == nil {
			continue
		}
		var labels []string
		rq, cpuA, cpuB, cpuR := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
		for i := range min(len(first.Steps), len(s.Steps)) {
			a, b := first.Steps[i], s.Steps[i]
			if a == nil || b == nil || a.RequestsPerSec <= 0 {
				continue
			}
			l := stepLabel(a)
			if _, seen := rq[l]; !seen {
				labels = append(labels, l)
			}
			rq[l] = append(rq[l], b.RequestsPerSec/a.RequestsPerSec)
			if ca, cb := a.CPUPerRequest(), b.CPUPerRequest(); ca > 0 && cb > 0 {
				cpuA[l], cpuB[l], cpuR[l] = append(cpuA[l], ca), append(cpuB[l], cb), append(cpuR[l], cb/ca)
			}
		}
		for _, l := range labels {
			c := Comparison{Series: s.Name, Against: first.Name, Step: l, Rounds: len(rq[l]),
				RequestsRatio: Median(rq[l]), RequestsRatios: rq[l]}
			if len(cpuR[l]) > 0 {
				c.CPUPerRequestUS, c.AgainstCPUPerRequestUS = Median(cpuB[l]), Median(cpuA[l])
				c.CPUPerRequestRatio = Median(cpuR[l])
			}
			out = append(out, c)
		}
	}
	d.Comparisons = out
	return out
}

// writeComparisons prints the medians over rounds, when the run had rounds.
func (d *Document) writeComparisons(w io.Writer) error {
	cs := d.Comparisons
	if cs == nil {
		cs = d.Compare()
	}
	if len(cs) == 0 || cs[0].Rounds < 2 {
		return nil
	}
	fmt.Fprintf(w, "\nmedians over %d interleaved rounds (each round measures both back to back, in alternating order):\n", cs[0].Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "step\tcompared\treq/s ratio\trounds' ratios\tCPU µs/request\tCPU/request ratio\t\n")
	for _, c := range cs {
		rs := make([]string, len(c.RequestsRatios))
		for i, r := range c.RequestsRatios {
			rs[i] = fmt.Sprintf("%.2f", r)
		}
		cpu, cpuRatio := "-", "-"
		if c.CPUPerRequestRatio > 0 {
			cpu = fmt.Sprintf("%.1f vs %.1f", c.CPUPerRequestUS, c.AgainstCPUPerRequestUS)
			cpuRatio = fmt.Sprintf("%.2f", c.CPUPerRequestRatio)
		}
		fmt.Fprintf(tw, "%s\t%s÷%s\t%.2f\t%s\t%s\t%s\t\n", c.Step, c.Series, c.Against, c.RequestsRatio,
			strings.Join(rs, " "), cpu, cpuRatio)
	}
	return tw.Flush()
}
