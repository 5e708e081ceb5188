package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Schema names the JSON document Report is; a change that breaks a reader
// gets a new version.
const Schema = "keygate.bench.load/v1"

// Report is the JSON document 'keygate bench load --json' prints: the
// settings the steps shared and one Result per step (one per connection
// count, in the order given).
//
//	{
//	  "schema": "keygate.bench.load/v1",
//	  "target": {"method": "GET", "url": "http://127.0.0.1:8081/", "header_names": [],
//	             "body_bytes": 0, "warmup_s": 2, "duration_s": 10, "requests": 0, "timeout_s": 2},
//	  "go": {"version": "go1.26.8", "os": "linux", "arch": "amd64", "gomaxprocs": 1},
//	  "steps": [{"mode": "closed", "connections": 50, "duration_s": 10.0003, "requests": 612345,
//	             "requests_per_s": 61232.6,
//	             "latency": {"mean_ns": 812000, "min_ns": 41000, "p50_ns": 790000, "p90_ns": 950000,
//	                         "p99_ns": 1300000, "p99_9_ns": 2100000, "max_ns": 9800000},
//	             "status": {"2xx": 612345, "3xx": 0, "4xx": 0, "5xx": 0, "other": 0},
//	             "errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0, "parse": 0},
//	             "reconnects": 0,
//	             "generator_cpu": {"user_s": 2.1, "system_s": 5.3, "gomaxprocs": 1, "percent": 74, "saturated": false}}]
//	}
//
// Header values are never written (they often carry a token); header_names
// lists their names. A step in open loop has "mode": "open" and
// "target_rate". Durations are seconds as numbers, latencies integer
// nanoseconds; see Result for each field.
type Report struct {
	Schema string    `json:"schema"`
	Name   string    `json:"name,omitempty"` // the series' name in a Document`
	Target Target    `json:"target"`
	Go     GoInfo    `json:"go"`
	Steps  []*Result `json:"steps"`
}

// Target is what every step of a Report sent, and its bounds.
type Target struct {
	Method      string   `json:"method"`
	URL         string   `json:"url"`
	HeaderNames []string `json:"header_names"`
	BodyBytes   int      `json:"body_bytes"`
	Warmup      float64  `json:"warmup_s"`
	Duration    float64  `json:"duration_s"` // 0: bounded by requests only
	Requests    int64    `json:"requests"`   // 0: bounded by duration only
	Timeout     float64  `json:"timeout_s"`
	// PoolSize is the number of distinct requests sent in turn (Config.Pool;
	// 0 or absent: one request, sent each time); Method, URL and header
	// names are then the first's.
	PoolSize int `json:"pool_size,omitempty"`
}

// GoInfo is the generator's runtime.
type GoInfo struct {
	Version    string `json:"version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// NewReport returns the Report of steps run with cfg (its Connections and
// Rate aside, which are each step's).
func NewReport(cfg Config, steps []*Result) *Report {
	req := cfg.Request
	if len(cfg.Pool) > 0 {
		req = cfg.Pool[0]
	}
	method := req.Method
	if method == "" {
		method = "GET"
	}
	names := make([]string, 0, len(req.Header))
	for _, h := range req.Header {
		names = append(names, h.Name)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if steps == nil {
		steps = []*Result{}
	}
	return &Report{
		Schema: Schema,
		Target: Target{
			Method: method, URL: req.URL, HeaderNames: names, BodyBytes: len(req.Body), PoolSize: len(cfg.Pool),
			Warmup: cfg.Warmup.Seconds(), Duration: cfg.Duration.Seconds(), Requests: cfg.Requests, Timeout: timeout.Seconds(),
		},
		Go:    GoInfo{Version: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, GOMAXPROCS: runtime.GOMAXPROCS(0)},
		Steps: steps,
	}
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r as a heading, the run's verdict on itself (see
// Document.Check) with its findings, one aligned row per step, then a line
// for each step that had errors or non-2xx answers (by kind and class).
func (r *Report) WriteTable(w io.Writer) error {
	t := r.Target
	bound := []string{}
	if t.Duration > 0 {
		bound = append(bound, fmt.Sprint(seconds(t.Duration)))
	}
	if t.Requests > 0 {
		bound = append(bound, fmt.Sprintf("%d requests", t.Requests))
	}
	fmt.Fprintf(w, "bench load: %s %s, %s per step after %s warm-up, timeout %s; %s %s/%s, GOMAXPROCS=%d\n",
		t.Method, t.URL, strings.Join(bound, " or "), seconds(t.Warmup), seconds(t.Timeout),
		r.Go.Version, r.Go.OS, r.Go.Arch, r.Go.GOMAXPROCS)
	named := *r
	if named.Name == "" {
		named.Name = "the target"
	}
	v := (&Document{Series: []*Report{&named}}).Check()
	fmt.Fprintf(w, "verdict: %s\n", v.Verdict)
	for _, f := range v.Findings {
		fmt.Fprintf(w, "  %s %s\n", findingMark(f.Severity), f.Text)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "connections\trate\trequests/s\tp50\tp90\tp99\tp99.9\tmax\terrors\tnon-2xx\tcpu%\t\n")
	for _, s := range r.Steps {
		rate := "closed"
		if s.Mode == ModeOpen {
			rate = fmt.Sprintf("%.0f/s", s.TargetRate)
		}
		l := s.Latency
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%.0f\t\n", s.Connections, rate, s.RequestsPerSec,
			lat(l.P50), lat(l.P90), lat(l.P99), lat(l.P999), lat(l.Max), s.Errors.Total(), s.Status.Non2xx(), s.CPU.Percent)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Steps {
		if e, st := s.Errors, s.Status; e.Total() > 0 || st.Non2xx() > 0 {
			fmt.Fprintf(w, "%d connections: errors connect %d, read %d, write %d, timeout %d, parse %d; "+
				"non-2xx 3xx %d, 4xx %d, 5xx %d, other %d\n",
				s.Connections, e.Connect, e.Read, e.Write, e.Timeout, e.Parse, st.S3xx, st.S4xx, st.S5xx, st.Other)
		}
		if s.Reconnects > 0 {
			fmt.Fprintf(w, "%d connections: the server closed the connection after %d answers (not errors)\n",
				s.Connections, s.Reconnects)
		}
	}
	return nil
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// lat formats a latency in nanoseconds to 3 significant digits.
func lat(ns int64) string {
	unit := int64(1)
	for v := ns; v >= 1000; v /= 10 {
		unit *= 10
	}
	return time.Duration(ns).Round(time.Duration(unit)).String()
}

// WriteLines writes one line per step of space-separated key=value pairs
// (latencies in microseconds), for shell scripts:
//
//	connections=50 mode=closed requests=612345 duration_s=10.000 rps=61232.6 p50_us=790 p90_us=950 p99_us=1300
//	p99_9_us=2100 max_us=9800 2xx=612345 3xx=0 4xx=0 5xx=0 errors=0 reconnects=0 generator_cpu_pct=74.0
//
// (one line each; wrapped here).
func (r *Report) WriteLines(w io.Writer) error {
	for _, s := range r.Steps {
		l := s.Latency
		us := func(ns int64) string { return fmt.Sprintf("%.0f", float64(ns)/1e3) }
		_, err := fmt.Fprintf(w, "connections=%d mode=%s requests=%d duration_s=%.3f rps=%.1f p50_us=%s p90_us=%s p99_us=%s "+
			"p99_9_us=%s max_us=%s 2xx=%d 3xx=%d 4xx=%d 5xx=%d errors=%d reconnects=%d generator_cpu_pct=%.1f\n",
			s.Connections, s.Mode, s.Requests, s.Seconds, s.RequestsPerSec, us(l.P50), us(l.P90), us(l.P99), us(l.P999), us(l.Max),
			s.Status.S2xx, s.Status.S3xx, s.Status.S4xx, s.Status.S5xx, s.Errors.Total(), s.Reconnects, s.CPU.Percent)
		if err != nil {
			return err
		}
	}
	return nil
}
