package report

import (
	"bytes"
	"fmt"
	"html"
	"strings"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// markup is HTML written as is. Only constants convert to it implicitly,
// so no text from a document reaches the page unescaped by accident; the
// page is built by hand rather than with html/template, which would bring
// text/template into keygate's binary (internal/server's TestDependencies).
type markup string

// pageWriter builds the page: markup as is, every text escaped.
type pageWriter struct{ bytes.Buffer }

func (w *pageWriter) m(ms ...markup) {
	for _, s := range ms {
		w.WriteString(string(s))
	}
}

// t writes text, escaped for an element's content or a quoted attribute.
// t writes text escaped, and as valid UTF-8 (the page declares UTF-8; a
// document's text may hold any bytes).
func (w *pageWriter) t(text string) {
	w.WriteString(html.EscapeString(strings.ToValidUTF8(text, "\uFFFD")))
}

// f writes fmt.Sprintf(format, args...) as text.
func (w *pageWriter) f(format string, args ...any) { w.t(fmt.Sprintf(format, args...)) }

// el writes <tag>text</tag>; open may carry constant attributes.
func (w *pageWriter) el(open markup, text string) {
	w.m("<", open, ">")
	w.t(text)
	name, _, _ := strings.Cut(string(open), " ")
	w.WriteString("</" + name + ">")
}

func (v *view) write(w *pageWriter) {
	x := "connections"
	if v.XKind == "rate" {
		x = "target rate"
	}
	d := v.Doc
	w.m("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	w.m(`<meta http-equiv="Content-Security-Policy" content="`)
	w.t(csp)
	w.m("\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	w.m("<meta name=\"generator\" content=\"keygate bench report\">\n")
	w.el("title", v.Title)
	w.m("\n<style>")
	w.WriteString(style) // a file of this package, not data
	w.m("</style>\n</head>\n<body data-x=\"")
	w.t(v.XKind)
	w.m("\">\n<header>\n")
	w.el("h1", v.Title)
	w.m("\n<dl class=\"meta\">\n")
	if d.Command != "" {
		w.m("<dt>command</dt><dd><code>")
		w.t(d.Command)
		w.m("</code></dd>\n")
	}
	if v.Created != "" {
		w.m("<dt>measured</dt>")
		w.el("dd", v.Created)
		w.m("\n")
	}
	if h := d.Host; h.CPUs > 0 || h.Model != "" {
		w.m("<dt>host</dt><dd>")
		if h.CPUs > 0 {
			w.f("%d CPUs", h.CPUs)
		}
		if h.CPUs > 0 && h.Model != "" {
			w.m(", ")
		}
		w.t(h.Model)
		w.m("</dd>\n")
	}
	names := make([]string, len(v.Series))
	for i, s := range v.Series {
		names[i] = s.Name
	}
	if len(names) == 0 {
		names = []string{"none"}
	}
	w.m("<dt>series</dt>")
	w.el("dd", strings.Join(names, ", "))
	w.m("\n</dl>\n</header>\n")
	writeVerdict(w, v.Verdict)
	w.m("<noscript><p class=\"note\">The charts are drawn by the page's script, which is off; " +
		"the tables below hold every figure.</p></noscript>\n")

	if len(d.Notes) > 0 {
		w.m("<section id=\"notes\">\n<h2>Notes</h2>\n<ul>\n")
		for _, n := range d.Notes {
			w.el("li", n)
			w.m("\n")
		}
		w.m("</ul>\n</section>\n")
	}

	w.m("<section id=\"charts\">\n<h2>Charts</h2>\n<div class=\"grid\">\n")
	chart := func(name markup, caption string, note ...string) {
		w.m(`<figure class="chart" data-chart="`, name, `">`)
		w.el("figcaption", caption)
		for _, n := range note {
			w.el(`p class="chart-note"`, n)
		}
		w.m("</figure>\n")
	}
	chart("throughput", "Throughput against "+x)
	chart("latency", "Latency percentiles against "+x, v.LatencyNote...)
	chart("errors", "Errors and non-2xx answers per second against "+x,
		"Errors are requests with no answer (connect, read, write, timeout or parse errors); "+
			"non-2xx are answers whose status is not 2xx. A flat line at zero: none.")
	chart("distribution", "Latency distribution (percentile spectrum) of one step")
	if v.Server {
		chart("server-cpu", "Target CPU against "+x)
		chart("server-allocs", "Target allocation rate against "+x)
	}
	if v.Timeline {
		chart("timeline-cpu", "Target CPU over one step's measured window")
		chart("timeline-allocs", "Target allocation rate over one step's measured window")
	}
	w.m("</div>\n</section>\n")

	if len(v.Ratios) > 0 {
		base := v.Series[0].Name
		w.m("<section id=\"ratios\">\n")
		w.el("h2", "Compared with "+base)
		w.m("\n<p>Each series' throughput and p99 latency divided by those of <b>")
		w.t(base)
		w.m("</b> at the same ")
		w.t(x)
		w.m(": above 1× is more throughput, or a longer p99.</p>\n")
		w.m("<table class=\"data\">\n<thead>\n<tr><th rowspan=\"2\">step</th>")
		for _, o := range v.Others {
			w.el(`th colspan="2"`, o)
		}
		w.m("</tr>\n<tr>")
		for range v.Others {
			w.m("<th>throughput</th><th>p99</th>")
		}
		w.m("</tr>\n</thead>\n<tbody>\n")
		for _, r := range v.Ratios {
			w.m("<tr>")
			w.el("td", r.X)
			for _, c := range r.Cells {
				flagged(w, c.Flag, cmpOr(c.Throughput, "—"))
				flagged(w, c.Flag, cmpOr(c.P99, "—"))
			}
			w.m("</tr>\n")
		}
		w.m("</tbody>\n</table>\n")
		if ratiosFlagged(v.Ratios) {
			w.m("<p class=\"key\">A ratio marked ! (not valid) or * (a warning) divides figures of which one " +
				"or both have a finding: see the verdict at the top and the steps' tables.</p>\n")
		}
		w.m("</section>\n")
	}

	w.m("<section id=\"steps\">\n<h2>Steps</h2>\n")
	for _, s := range v.Series {
		w.m("<section class=\"series\">\n")
		w.el("h3", s.Name)
		w.m("\n")
		writeTarget(w, s.Report)
		if len(s.Steps) == 0 {
			w.m("<p class=\"empty\">No steps.</p>\n")
		} else {
			writeSteps(w, s)
			writeFindings(w, s.Findings)
			for _, n := range s.LatencyNotes {
				w.el(`p class="latency-note"`, n)
				w.m("\n")
			}
		}
		w.m("</section>\n")
	}
	if len(v.Series) == 0 {
		w.m("<p class=\"empty\">The document holds no series.</p>\n")
	}
	w.m("</section>\n")

	if len(v.Profiles) > 0 {
		w.m("<section id=\"profiles\">\n<h2>Profiles</h2>\n")
		for _, p := range v.Profiles {
			writeProfile(w, p)
		}
		w.m("</section>\n")
	}

	w.m("<footer>Written by <code>keygate bench report</code> from a ")
	w.t(d.Schema)
	w.m(" document, which is embedded below as JSON.</footer>\n")
	w.m(`<script type="application/json" id="report-data">`)
	w.WriteString(string(v.Data)) // JSON with no '<', '>' or '&' (embedJSON)
	w.m("</script>\n<script>")
	w.WriteString(script) // a file of this package, not data
	w.m("</script>\n</body>\n</html>\n")
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// writeTarget is the line under a series' heading: what it sent, how
// long, and the generator's runtime.
func writeTarget(w *pageWriter, r *loadgen.Report) {
	t := r.Target
	w.m("<p class=\"target\"><code>")
	w.t(t.Method + " " + t.URL)
	w.m("</code>")
	for i, h := range t.HeaderNames {
		if i == 0 {
			w.m(", headers ")
		} else {
			w.m(", ")
		}
		w.el("code", h)
	}
	if t.BodyBytes > 0 {
		w.f(", %d-byte body", t.BodyBytes)
	}
	w.m(";")
	if t.Duration > 0 {
		w.f(" %g s per step", t.Duration)
	}
	if t.Requests > 0 {
		w.f(" (at most %d requests)", t.Requests)
	}
	w.f(" after %g s warm-up, timeout %g s.", t.Warmup, t.Timeout)
	if g := r.Go; g.Version != "" {
		w.f(" Generator: %s %s/%s, GOMAXPROCS=%d.", g.Version, g.OS, g.Arch, g.GOMAXPROCS)
	}
	w.m("</p>\n")
}

// writeSteps is a series' table: one row per step, with the target's
// usage when some step has it.
func writeSteps(w *pageWriter, s seriesView) {
	w.m("<table class=\"data\">\n<thead>\n<tr><th>connections</th><th>loop</th><th>seconds</th><th>requests</th>" +
		"<th>requests/s</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>errors</th>" +
		"<th>non-2xx</th><th>generator CPU</th>")
	if s.Server {
		w.m("<th>target CPU</th><th>allocs/s</th><th>alloc bytes/s</th><th>allocs/request</th><th>target RSS</th>")
	}
	w.m("</tr>\n</thead>\n<tbody>\n")
	for i, st := range s.Steps {
		writeRowStart(w, s.Flags[i], fmt.Sprint(st.Connections))
		if st.Mode == loadgen.ModeOpen {
			w.el("td", "open, "+si(st.TargetRate)+"/s")
		} else {
			w.el("td", st.Mode)
		}
		w.el("td", fmt.Sprintf("%.1f", st.Seconds))
		w.el("td", fmt.Sprint(st.Requests))
		w.el("td", fmt.Sprintf("%.0f", st.RequestsPerSec))
		l := st.Latency
		for _, ns := range []int64{l.P50, l.P90, l.P99, l.P999, l.Max} {
			w.el("td", latency(ns))
		}
		e, sc, cpu := st.Errors, st.Status, st.CPU
		bad(w, e.Total() > 0, fmt.Sprintf("connect %d, read %d, write %d, timeout %d, parse %d",
			e.Connect, e.Read, e.Write, e.Timeout, e.Parse), fmt.Sprint(e.Total()))
		bad(w, sc.Non2xx() > 0, fmt.Sprintf("3xx %d, 4xx %d, 5xx %d, other %d", sc.S3xx, sc.S4xx, sc.S5xx, sc.Other),
			fmt.Sprint(sc.Non2xx()))
		if cpu.Saturated {
			bad(w, true, "the generator used most of the CPU it may use: it, not the target, may have been the limit",
				fmt.Sprintf("%.0f%% (saturated)", cpu.Percent))
		} else {
			w.el("td", fmt.Sprintf("%.0f%%", cpu.Percent))
		}
		if s.Server {
			writeUsage(w, st.Server)
		}
		w.m("</tr>\n")
	}
	w.m("</tbody>\n</table>\n")
}

// writeVerdict is the banner: the document's verdict and every finding,
// each with its severity in words and the mark the tables use for it.
func writeVerdict(w *pageWriter, v verdictView) {
	w.m(`<section id="verdict" class="verdict `, v.Class, `">`+"\n<p class=\"verdict-line\">")
	w.el(`span class="badge"`, v.Label)
	w.m(" ")
	w.t(cmpOr(v.Line, "(the document states no verdict)"))
	w.m("</p>\n")
	writeFindings(w, v.Findings)
	if len(v.Findings) > 0 {
		w.m("<p class=\"key\">The figures of a step with a finding carry its mark in the tables " +
			"(! not valid, * a warning) and a ring on the charts.</p>\n")
	}
	w.m("</section>\n")
}

// writeRowStart opens a step's row with its first cell, marked when the
// step has a finding; the row's title holds the findings for a pointer.
func writeRowStart(w *pageWriter, f flag, first string) {
	if f.Severity == "" {
		w.m("<tr>")
		w.el("td", first)
		return
	}
	w.m(`<tr class="`, flagClass(f.Severity), `" title="`)
	w.t(strings.Join(f.Texts, "\n"))
	w.m(`"><td>`)
	w.t(first)
	w.m(` <span class="mark">`, mark(f.Severity), "</span></td>")
}

// flagged is a cell marked, with the findings as its title, when f has any.
func flagged(w *pageWriter, f flag, text string) {
	if f.Severity == "" {
		w.el("td", text)
		return
	}
	w.m(`<td class="`, flagClass(f.Severity), `" title="`)
	w.t(strings.Join(f.Texts, "\n"))
	w.m(`">`)
	w.t(text)
	w.m(` <span class="mark">`, mark(f.Severity), "</span></td>")
}

func ratiosFlagged(rows []ratioRow) bool {
	for _, r := range rows {
		for _, c := range r.Cells {
			if c.Flag.Severity != "" {
				return true
			}
		}
	}
	return false
}

// writeFindings lists findings in full, each with its mark: the banner's
// list, and the footnotes of a series' table (where a title would show
// them only to a pointer).
func writeFindings(w *pageWriter, fs []loadgen.Finding) {
	if len(fs) == 0 {
		return
	}
	w.m("<ul class=\"findings\">\n")
	for _, f := range fs {
		sev := severity(f.Severity)
		w.m(`<li class="`, flagClass(sev), `"><span class="mark">`, mark(sev), "</span> ")
		w.el(`span class="sev"`, sevLabel(sev))
		w.m(" ")
		w.t(f.Text)
		w.m("</li>\n")
	}
	w.m("</ul>\n")
}

// bad is a cell, marked and explained by title when cond holds.
func bad(w *pageWriter, cond bool, title, text string) {
	if !cond {
		w.el("td", text)
		return
	}
	w.m(`<td class="bad" title="`)
	w.t(title)
	w.m(`">`)
	w.t(text)
	w.m("</td>")
}

func writeUsage(w *pageWriter, u *loadgen.ServerUsage) {
	if u == nil {
		w.m(`<td colspan="5">not measured</td>`)
		return
	}
	w.el("td", fmt.Sprintf("%.0f%%", u.CPUPercent))
	dash := func(ok bool, s string) string {
		if !ok {
			return "—"
		}
		return s
	}
	w.el("td", dash(u.AllocsPerSec > 0, si(u.AllocsPerSec)))
	w.el("td", dash(u.AllocBytesPerSec > 0, bytesIEC(u.AllocBytesPerSec)+"/s"))
	w.el("td", dash(u.AllocsPerRequest > 0, fmt.Sprintf("%.1f", u.AllocsPerRequest)))
	w.el("td", dash(u.RSSBytes > 0, bytesIEC(u.RSSBytes)))
}

func writeProfile(w *pageWriter, p profileView) {
	w.m("<section class=\"profile\">\n")
	heading := p.Series + ": " + p.Kind
	if p.Step != "" {
		heading += " at " + p.Step
	}
	w.el("h3", heading)
	w.m("\n<p>Saved as <code>")
	w.t(p.File)
	w.m("</code>")
	switch p.Kind {
	case "cpu":
		w.m("; shares of the CPU time sampled")
	case "heap":
		w.m("; shares of the bytes allocated")
	}
	w.m(".</p>\n")
	if len(p.Top) == 0 {
		w.m("<p class=\"empty\">No functions summarised.</p>\n</section>\n")
		return
	}
	w.m("<table class=\"data profile-top\">\n<thead><tr><th>#</th><th>function</th><th>flat</th><th>cum</th></tr></thead>\n<tbody>\n")
	for i, f := range p.Top {
		w.m("<tr>")
		w.el("td", fmt.Sprint(i+1))
		w.m(`<td class="fn"><code>`)
		w.t(f.Function)
		w.m("</code></td>")
		w.el("td", fmt.Sprintf("%.1f%%", f.Flat))
		w.el("td", fmt.Sprintf("%.1f%%", f.Cum))
		w.m("</tr>\n")
	}
	w.m("</tbody>\n</table>\n</section>\n")
}
