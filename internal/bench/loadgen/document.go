package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// DocumentSchema names the JSON document Document is.
const DocumentSchema = "keygate.bench.report/v1"

// Document is what 'keygate bench reproduce', compare mode and the HTML
// report work on: one or more series, each a Report (a keygate.bench.load/v1
// document with a Name) measured over the same steps, and what was learned
// about the targets while they ran (profiles, notes).
//
//	{
//	  "schema": "keygate.bench.report/v1",
//	  "title": "gateway-es256: ES256 forward-auth, naive vs keygate",
//	  "command": "keygate bench reproduce gateway-es256",
//	  "created": "2026-11-26T15:00:00Z",
//	  "host": {"cpus": 2, "model": "AMD EPYC 7B13"},
//	  "series": [{"name": "naive", "schema": "keygate.bench.load/v1", ...}, {"name": "keygate", ...}],
//	  "profiles": [{"series": "keygate", "kind": "cpu", "file": "keygate-cpu.pprof",
//	                "top": [{"function": "crypto/internal/fips140/nistec.p256OrdMul", "flat_percent": 21.5, "cum_percent": 21.5}]}],
//	  "notes": ["..."]
//	}
type Document struct {
	Schema   string    `json:"schema"`
	Title    string    `json:"title"`
	Command  string    `json:"command,omitempty"`
	Created  time.Time `json:"created"`
	Host     Host      `json:"host"`
	Series   []*Report `json:"series"`
	Profiles []Profile `json:"profiles,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
	// Validity is the document's check of itself (see Check).
	Validity *Validity `json:"validity,omitempty"`
	// Comparisons are the later series against the first, medians over
	// the rounds of an interleaved run (see Compare).
	Comparisons []Comparison `json:"comparisons,omitempty"`
}

// Host is the machine a Document was measured on.
type Host struct {
	CPUs  int    `json:"cpus"`
	Model string `json:"model,omitempty"`
}

// Profile is one pprof profile taken from a target during a measured
// window ('--profile'), saved beside the report.
type Profile struct {
	Series string        `json:"series"` // the Report.Name it was taken under
	Step   int           `json:"step"`   // that report's step (index into Steps)
	Kind   string        `json:"kind"`   // "cpu" or "heap"
	File   string        `json:"file"`   // file name, relative to the report
	Top    []ProfileFunc `json:"top"`    // the heaviest functions, heaviest first
}

// ProfileFunc is one function's share of a profile's total (CPU time, or
// bytes allocated for a heap profile).
type ProfileFunc struct {
	Function string  `json:"function"`
	Flat     float64 `json:"flat_percent"` // in the function itself
	Cum      float64 `json:"cum_percent"`  // in it and what it calls
}

// ServerUsage is what the target process used during a step's measured
// window, when the generator could see it: for a target it started, CPU
// and RSS from /proc and allocations from the target's Prometheus /metrics
// (go_memstats_mallocs_total, go_memstats_alloc_bytes_total) when that
// answers in time; for a running target, all of it from /metrics
// (process_cpu_seconds_total and process_resident_memory_bytes too).
type ServerUsage struct {
	Source     string  `json:"source"`      // "proc" or "metrics", as above
	CPUSeconds float64 `json:"cpu_s"`       // user + system over the window
	CPUPercent float64 `json:"cpu_percent"` // 100 is one core busy the whole window
	// Allocation rates come from /metrics only (absent when it did not answer in time).
	AllocsPerSec     float64 `json:"allocs_per_s,omitempty"`
	AllocBytesPerSec float64 `json:"alloc_bytes_per_s,omitempty"`
	AllocsPerRequest float64 `json:"allocs_per_request,omitempty"`
	RSSBytes         int64   `json:"rss_bytes,omitempty"` // at the end of the window
	// WindowSeconds is the time the figures cover: the measured window,
	// unless the probe could not read it on time.
	WindowSeconds float64 `json:"window_s"`
	// CPUs are the CPUs the target was pinned to (none: not pinned).
	CPUs []int `json:"cpus,omitempty"`
	// Others is what the rest of the machine used meanwhile (absent when
	// the generator could not see it: a target it did not start).
	Others *OtherUsage `json:"others,omitempty"`
	// Timeline samples the same figures about once a second.
	Timeline []UsageSample `json:"timeline,omitempty"`
}

// OtherUsage is the CPU that processes other than the run's own (the
// target, what was started beside it, and the generator) used during a
// step's window: a neighbour that takes the target's CPU makes the
// target's figures understate it.
type OtherUsage struct {
	CPUPercent          float64 `json:"cpu_percent"`            // on every CPU; 100 is one core busy the whole window
	OnTargetCPUsPercent float64 `json:"on_target_cpus_percent"` // the part on the target's CPUs (0 when not pinned)
}

// UsageSample is the target's usage over one sampling interval of a step.
type UsageSample struct {
	At           float64 `json:"t_s"` // seconds since the measured window began, at the interval's end
	CPUPercent   float64 `json:"cpu_percent"`
	AllocsPerSec float64 `json:"allocs_per_s,omitempty"`
	// OthersPercent is the CPU other processes used meanwhile, on the
	// target's CPUs when it is pinned, else on every CPU.
	OthersPercent float64 `json:"others_cpu_percent,omitempty"`
	// Gap marks an interval longer than it should be (the probe ran
	// late): a chart draws no line across it.
	Gap bool `json:"gap,omitempty"`
}

// Bucket is one non-empty bucket of a step's latency histogram: Count
// latencies at most LE nanoseconds and above the previous bucket's LE.
type Bucket struct {
	LE    int64  `json:"le_ns"`
	Count uint64 `json:"count"`
}

// NewDocument returns a Document with the given title and series.
func NewDocument(title, command string, series ...*Report) *Document {
	return &Document{Schema: DocumentSchema, Title: title, Command: command, Created: time.Now().UTC(),
		Host: hostInfo(), Series: series}
}

// WriteJSON writes d as indented JSON.
func (d *Document) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

// WriteTable writes d as one row per step: each series' requests/s, p99
// and, when known, the target's CPU, then the ratio of every later series
// to the first (requests/s and p99). Steps are matched by position.
func (d *Document) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "%s\n", d.Title)
	if len(d.Series) == 0 {
		return nil
	}
	v := d.Validity
	if v == nil {
		v = d.Check()
	}
	fmt.Fprintf(w, "verdict: %s\n", v.Verdict)
	for _, f := range v.Findings {
		fmt.Fprintf(w, "  %s %s\n", findingMark(f.Severity), f.Text)
	}
	if len(v.Findings) > 0 {
		fmt.Fprintf(w, "  (%s: not valid; %s: a warning; the figures of those steps carry the mark)\n",
			findingMark(SeverityInvalid), findingMark(SeverityWarning))
	}
	first := d.Series[0]
	marks := make([]map[int]string, len(d.Series))
	for i, s := range d.Series {
		marks[i] = v.Marks(s.Name)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"connections"}
	for _, s := range d.Series {
		head = append(head, s.Name+" req/s", s.Name+" p99", s.Name+" cpu%", s.Name+" errors")
	}
	for _, s := range d.Series[1:] {
		head = append(head, s.Name+"÷"+first.Name+" req/s", s.Name+"÷"+first.Name+" p99")
	}
	fmt.Fprint(tw, strings.Join(head, "\t")+"\t\n")
	for i := range first.Steps {
		row := []string{rowLabel(first.Steps[i])}
		for si, s := range d.Series {
			if i >= len(s.Steps) {
				row = append(row, "-", "-", "-", "-")
				continue
			}
			st := s.Steps[i]
			mark := ""
			if m := marks[si][i]; m != "" {
				mark = findingMark(m)
			}
			cpu := "-"
			if st.Server != nil {
				cpu = fmt.Sprintf("%.0f", st.Server.CPUPercent)
			}
			row = append(row, fmt.Sprintf("%.0f%s", st.RequestsPerSec, mark), lat(st.Latency.P99), cpu,
				fmt.Sprint(st.Errors.Total()+st.Status.Non2xx()))
		}
		for _, s := range d.Series[1:] {
			if i >= len(s.Steps) {
				row = append(row, "-", "-")
				continue
			}
			a, b := first.Steps[i], s.Steps[i]
			row = append(row, ratio(b.RequestsPerSec, a.RequestsPerSec), ratio(float64(b.Latency.P99), float64(a.Latency.P99)))
		}
		fmt.Fprint(tw, strings.Join(row, "\t")+"\t\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "errors counts requests with no answer and answers other than 2xx; cpu% is the target's (100 = one core)")
	if st := first.Steps; len(st) > 0 {
		fmt.Fprintln(w, latencyNote(st[0]))
	}
	if err := d.writeComparisons(w); err != nil {
		return err
	}
	for _, p := range d.Profiles {
		fmt.Fprintf(w, "\n%s %s profile (%s), top functions by flat share:\n", p.Series, p.Kind, p.File)
		for _, f := range p.Top[:min(len(p.Top), 8)] {
			fmt.Fprintf(w, "  %5.1f%% flat %5.1f%% cum  %s\n", f.Flat, f.Cum, f.Function)
		}
	}
	return nil
}

// rowLabel is stepLabel with the round, for a table's row.
func rowLabel(r *Result) string {
	if r.Round > 0 {
		return stepLabel(r) + fmt.Sprintf(" (round %d)", r.Round)
	}
	return stepLabel(r)
}

func stepLabel(r *Result) string {
	if r.Mode == ModeOpen {
		return fmt.Sprintf("%d @ %.0f/s", r.Connections, r.TargetRate)
	}
	return fmt.Sprint(r.Connections)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// findingMark is how a table marks the figures of a step with a finding.
func findingMark(severity string) string {
	if severity == SeverityInvalid {
		return "!"
	}
	return "*"
}

// latencyNote says what a latency figure measures, beside the figures.
func latencyNote(st *Result) string {
	t := time.Duration(st.Timeout).String()
	if st.LatencyFrom == LatencyFromSchedule {
		return "latency runs from when each request was due (corrected for coordinated omission, as wrk2's): " +
			"a server that fell behind shows latencies beyond the " + t + " timeout"
	}
	return "latency runs from writing a request to reading its whole answer; an answer later than the " + t +
		" timeout is a timeout error, so no latency exceeds it"
}
