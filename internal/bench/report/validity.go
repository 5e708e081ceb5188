package report

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// flag is what the document's checks found on one step: the worst
// severity ("" for none) and the findings' texts.
type flag struct {
	Severity string
	Texts    []string
}

func (f flag) add(severity, text string) flag {
	if f.Severity != loadgen.SeverityInvalid {
		f.Severity = severity
	}
	f.Texts = append(slices.Clip(f.Texts), text)
	return f
}

func (f flag) merge(o flag) flag {
	for _, t := range o.Texts {
		f = f.add(o.Severity, t)
	}
	return f
}

// severity reads a finding's severity; anything but "invalid" is a
// warning, so a document cannot put its own words into a class name or
// hide a finding by misspelling it.
func severity(s string) string {
	if s == loadgen.SeverityInvalid {
		return loadgen.SeverityInvalid
	}
	return loadgen.SeverityWarning
}

// mark is how a table, the banner and the charts mark a finding, as the
// terminal table does.
func mark(sev string) markup {
	if sev == loadgen.SeverityInvalid {
		return "!"
	}
	return "*"
}

// flagClass is a flagged row's or cell's class.
func flagClass(sev string) markup {
	if sev == loadgen.SeverityInvalid {
		return "flag-invalid"
	}
	return "flag-warning"
}

func sevLabel(sev string) string {
	if sev == loadgen.SeverityInvalid {
		return "not valid"
	}
	return "warning"
}

// stepFlags is the flags of r's steps by index into r.Steps. Findings are
// matched by the series' own name, as Document.Check names them.
func stepFlags(v *loadgen.Validity, r *loadgen.Report) []flag {
	flags := make([]flag, len(r.Steps))
	for _, f := range seriesFindings(v, r) {
		flags[f.Step] = flags[f.Step].add(severity(f.Severity), f.Text)
	}
	return flags
}

// seriesFindings is v's findings on steps r has.
func seriesFindings(v *loadgen.Validity, r *loadgen.Report) []loadgen.Finding {
	if v == nil {
		return nil
	}
	var out []loadgen.Finding
	for _, f := range v.Findings {
		if f.Series == r.Name && f.Step >= 0 && f.Step < len(r.Steps) && r.Steps[f.Step] != nil {
			out = append(out, f)
		}
	}
	return out
}

// verdictView is the banner at the top of the page.
type verdictView struct {
	Class    markup // "valid", "warning" or "invalid"
	Label    string
	Line     string
	Findings []loadgen.Finding
}

// verdictOf reads v as the banner shows it. An invalid finding makes the
// banner "not valid" even if the document says valid: the page must not
// show green beside a red row.
func verdictOf(v *loadgen.Validity) verdictView {
	if v == nil {
		v = &loadgen.Validity{}
	}
	vv := verdictView{Class: "valid", Label: "valid", Line: v.Verdict, Findings: v.Findings}
	invalid := !v.Valid
	for _, f := range v.Findings {
		invalid = invalid || severity(f.Severity) == loadgen.SeverityInvalid
	}
	switch {
	case invalid:
		vv.Class, vv.Label = "invalid", "not valid"
	case len(v.Findings) > 0:
		vv.Class, vv.Label = "warning", "valid, with warnings"
	}
	return vv
}

// latencyNote says where st's latencies run from and what its timeout
// does to them; r's timeout stands in for a step that did not record its
// own.
func latencyNote(r *loadgen.Report, st *loadgen.Result) string {
	timeout := "timeout (its length not recorded)"
	if d := timeoutOf(r, st); d > 0 {
		timeout = seconds(d) + " timeout"
	}
	switch st.LatencyFrom {
	case loadgen.LatencyFromWrite:
		return "Latency runs from writing the request to its whole answer; answers later than the " + timeout +
			" are counted as timeout errors, not as latencies."
	case loadgen.LatencyFromSchedule:
		return "Latency runs from when each request was due (corrected for coordinated omission, as wrk2's), " +
			"so it may exceed the " + timeout + "."
	}
	return "The document does not say where latency runs from; the run used a " + timeout + "."
}

func timeoutOf(r *loadgen.Report, st *loadgen.Result) time.Duration {
	if st.Timeout > 0 {
		return time.Duration(st.Timeout)
	}
	return time.Duration(r.Target.Timeout * float64(time.Second))
}

// seconds is d as "2s" or "90s" rather than "1m30s", as timeouts are given.
func seconds(d time.Duration) string {
	if d >= time.Second && d%time.Millisecond == 0 {
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	return d.String()
}

// latencyNotes is the distinct notes of a series' steps, in step order.
func latencyNotes(r *loadgen.Report, steps []*loadgen.Result) []string {
	var notes []string
	for _, st := range steps {
		if n := latencyNote(r, st); !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	return notes
}

// chartLatencyNote is the note under the latency chart: the series'
// notes, named by series only when they differ.
func chartLatencyNote(series []seriesView) []string {
	var first []string
	same := true
	for _, s := range series {
		switch {
		case len(s.LatencyNotes) == 0:
		case first == nil:
			first = s.LatencyNotes
		case !slices.Equal(s.LatencyNotes, first):
			same = false
		}
	}
	if same {
		return first
	}
	var out []string
	for _, s := range series {
		if len(s.LatencyNotes) > 0 {
			out = append(out, s.Name+": "+strings.Join(s.LatencyNotes, " "))
		}
	}
	return out
}
