// Package report draws a keygate.bench.report/v1 document
// (loadgen.Document) as one self-contained HTML file: the document's
// verdict on its own validity first, tables of every step that read
// without JavaScript (the figures of a step with a finding marked), and
// SVG charts of throughput, latency percentiles, errors, the latency
// distribution and the target's CPU and allocations, drawn by a small
// inline script from the document embedded as JSON.
//
// The file loads nothing: no script, style, font or image comes from
// elsewhere, and its Content-Security-Policy allows only its own inline
// script and style (by hash), so it opens offline and cannot call out.
// Every text of the document (URLs, names, notes, function names) is
// treated as hostile: the page's tables escape it as HTML text, the
// embedded JSON has '<', '>' and '&' as \u escapes so it cannot end its
// script element, and the script puts data into the page with textContent
// only.
package report

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

var (
	//go:embed report.js
	script string
	//go:embed report.css
	style string
)

// csp is the page's Content-Security-Policy: nothing from anywhere but the
// inline script and style whose hashes it names.
var csp = "default-src 'none'; script-src " + hash(script) + "; style-src " + hash(style) +
	"; img-src data:; base-uri 'none'; form-action 'none'"

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// WriteHTML writes d as one self-contained HTML page. It builds the whole
// page before writing, so w gets all of it or nothing.
func WriteHTML(w io.Writer, d *loadgen.Document) error {
	if d == nil {
		return errors.New("no bench document to report")
	}
	if d.Validity == nil {
		d.Check() // a document from before validity was recorded
	}
	data, err := embedJSON(d)
	if err != nil {
		return err
	}
	v := newView(d)
	v.Data = data
	var pw pageWriter // the whole page, then one Write
	v.write(&pw)
	_, err = w.Write(pw.Bytes())
	return err
}

// embedJSON is d as JSON that is safe inside a <script> element: no '<',
// '>' or '&' (so neither "</script" nor "<!--" can occur), and no U+2028 or
// U+2029.
func embedJSON(d *loadgen.Document) (string, error) {
	b, err := json.Marshal(d) // escapes <, >, &, U+2028, U+2029 inside strings already
	if err != nil {
		return "", err
	}
	s := strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`).Replace(string(b))
	return s, nil
}

// view is what the page shows, worked out from the document (page.go
// writes it).
type view struct {
	Doc      *loadgen.Document
	Title    string
	Created  string
	XKind    string // "connections" or "rate": the charts' x axis
	Series   []seriesView
	Ratios   []ratioRow // empty with fewer than 2 series
	Others   []string   // the names of series 1.. (the ratio table's groups)
	Server   bool       // some step has Server usage
	Timeline bool       // some step has a usage timeline
	Profiles []profileView
	Verdict  verdictView
	// LatencyNote says where the latencies run from, for the latency chart.
	LatencyNote []string

	Data string // the document as JSON, safe in a script element
}

type seriesView struct {
	Name   string
	Report *loadgen.Report
	Steps  []*loadgen.Result
	Flags  []flag // what the checks found on each of Steps
	Server bool
	// Findings are the document's findings on this series' steps, for the
	// footnotes of its table.
	Findings []loadgen.Finding
	// LatencyNotes say where its latencies run from (one per kind of step).
	LatencyNotes []string
}

type ratioRow struct {
	X     string
	Cells []ratioCell // one per series after the first
}

type ratioCell struct {
	Throughput, P99 string
	Flag            flag // either step's findings: the ratio is only as good as both
}

type profileView struct {
	loadgen.Profile
	Step string // the step's x, when the series and step are known
}

// seriesName is a series' name in the tables, legend and ratio table: its
// own, or "series N" (counting from 1 among the non-nil series). The script
// names them the same way.
func seriesName(r *loadgen.Report, i int) string {
	if r.Name != "" {
		return r.Name
	}
	return fmt.Sprintf("series %d", i+1)
}

func newView(d *loadgen.Document) *view {
	v := &view{Doc: d, Title: d.Title}
	if v.Title == "" {
		v.Title = "keygate bench report"
	}
	if !d.Created.IsZero() {
		v.Created = d.Created.UTC().Format(time.RFC3339)
	}
	for _, r := range d.Series {
		if r == nil {
			continue
		}
		sv := seriesView{Name: seriesName(r, len(v.Series)), Report: r}
		flags := stepFlags(d.Validity, r)
		sv.Findings = seriesFindings(d.Validity, r)
		for i, s := range r.Steps {
			if s == nil {
				continue
			}
			sv.Steps = append(sv.Steps, s)
			sv.Flags = append(sv.Flags, flags[i])
			if u := s.Server; u != nil {
				sv.Server, v.Server = true, true
				v.Timeline = v.Timeline || len(u.Timeline) > 0
			}
		}
		sv.LatencyNotes = latencyNotes(r, sv.Steps)
		v.Series = append(v.Series, sv)
	}
	v.Verdict = verdictOf(d.Validity)
	v.LatencyNote = chartLatencyNote(v.Series)
	v.XKind = xKind(v.Series)
	if len(v.Series) >= 2 {
		for _, s := range v.Series[1:] {
			v.Others = append(v.Others, s.Name)
		}
		v.Ratios = ratios(v.Series, v.XKind)
	}
	byName := map[string]seriesView{}
	for _, s := range v.Series {
		if _, dup := byName[s.Name]; !dup {
			byName[s.Name] = s
		}
	}
	for _, p := range d.Profiles {
		pv := profileView{Profile: p}
		if s, ok := byName[p.Series]; ok && p.Step >= 0 && p.Step < len(s.Report.Steps) && s.Report.Steps[p.Step] != nil {
			pv.Step = xLabel(s.Report.Steps[p.Step], v.XKind)
		}
		v.Profiles = append(v.Profiles, pv)
	}
	return v
}

// xKind is "rate" when every step ran open loop and the steps differ by
// rate (or all share one connection count), else "connections". The
// script reads it from the page (<body data-x>).
func xKind(series []seriesView) string {
	rates, conns := map[float64]bool{}, map[int]bool{}
	for _, s := range series {
		for _, st := range s.Steps {
			if st.Mode != loadgen.ModeOpen {
				return "connections"
			}
			rates[st.TargetRate], conns[st.Connections] = true, true
		}
	}
	if len(rates) == 0 || (len(rates) == 1 && len(conns) > 1) {
		return "connections"
	}
	return "rate"
}

func xOf(s *loadgen.Result, kind string) float64 {
	if kind == "rate" {
		return s.TargetRate
	}
	return float64(s.Connections)
}

func xLabel(s *loadgen.Result, kind string) string {
	if kind == "rate" {
		return fmt.Sprintf("%s requests/s", si(s.TargetRate))
	}
	return fmt.Sprintf("%d connections", s.Connections)
}

// ratios compares every series with the first at each of the first's
// steps, matching steps by their x.
func ratios(series []seriesView, kind string) []ratioRow {
	var rows []ratioRow
	for bi, base := range series[0].Steps {
		row := ratioRow{X: xLabel(base, kind)}
		for _, s := range series[1:] {
			var c ratioCell
			for i, st := range s.Steps {
				if xOf(st, kind) == xOf(base, kind) {
					c = ratioCell{Throughput: ratio(st.RequestsPerSec, base.RequestsPerSec),
						P99:  ratio(float64(st.Latency.P99), float64(base.Latency.P99)),
						Flag: series[0].Flags[bi].merge(s.Flags[i])}
					break
				}
			}
			row.Cells = append(row.Cells, c)
		}
		rows = append(rows, row)
	}
	return rows
}

// ratio is a/b as "1.83×", or "—" when it is not a number.
func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) || math.IsInf(a/b, 0) {
		return "—"
	}
	r := a / b
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f×", r)
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	default:
		return fmt.Sprintf("%.2f×", r)
	}
}

// latency formats nanoseconds to 3 significant digits, as the terminal
// table does: 812µs, 1.3ms, 2.05s.
func latency(ns int64) string {
	if ns <= 0 {
		return "0"
	}
	unit := int64(1)
	for v := ns; v >= 1000; v /= 10 {
		unit *= 10
	}
	return time.Duration(ns).Round(time.Duration(unit)).String()
}

// si formats a count with an SI prefix to 3 significant digits: 950, 12.3k,
// 1.5M.
func si(f float64) string {
	a := math.Abs(f)
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "—"
	case a >= 1e9:
		return trim(f/1e9) + "G"
	case a >= 1e6:
		return trim(f/1e6) + "M"
	case a >= 1e4:
		return trim(f/1e3) + "k"
	case a >= 100 || a == 0:
		return fmt.Sprintf("%.0f", f)
	default:
		return trim(f)
	}
}

func trim(f float64) string {
	var s string
	switch a := math.Abs(f); {
	case a >= 100:
		s = fmt.Sprintf("%.0f", f)
	case a >= 10:
		s = fmt.Sprintf("%.1f", f)
	default:
		s = fmt.Sprintf("%.2f", f)
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// bytesIEC formats a byte count (an int64 or a float64): 512 B, 3.4 MiB.
func bytesIEC(v any) string {
	var f float64
	switch v := v.(type) {
	case int64:
		f = float64(v)
	case float64:
		f = v
	default:
		return fmt.Sprint(v)
	}
	const k = 1024
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(f) >= k && i < len(units)-1 {
		f /= k
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", f)
	}
	return trim(f) + " " + units[i]
}
