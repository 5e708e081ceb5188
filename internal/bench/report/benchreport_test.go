package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

func render(t *testing.T, d *loadgen.Document) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// allCharts is every chart: the first four are on every page, the rest
// only with the target's usage.
var allCharts = []string{"throughput", "latency", "errors", "distribution", "server-cpu", "server-allocs", "timeline-cpu", "timeline-allocs"}

// checkPage checks what every page must be: well-formed, loading nothing,
// exactly its two script elements, and a Content-Security-Policy whose
// hashes are those of its inline script and style.
func checkPage(t *testing.T, page string) {
	t.Helper()
	if !strings.HasPrefix(page, "<!DOCTYPE html>\n") || !strings.HasSuffix(page, "</html>\n") {
		t.Errorf("page does not start with <!DOCTYPE html> and end with </html>")
	}
	if err := wellFormed(page); err != nil {
		t.Errorf("not well-formed: %v", err)
	}
	lower := strings.ToLower(page)
	if n := strings.Count(lower, "<script"); n != 2 {
		t.Errorf("%d <script elements, want 2 (the data and the code)", n)
	}
	if strings.Contains(page, "<!--") {
		t.Error("page holds <!--")
	}
	for _, tag := range anyTag.FindAllString(page, -1) {
		// Only attribute names load: a title may quote " src=" as text.
		if m := loadingAttr.FindString(quotedValue.ReplaceAllString(tag, `""`)); m != "" {
			t.Errorf("tag %.80q has %s: the page must load nothing", tag, m)
		}
	}
	for _, bad := range []string{"<link", "<iframe", "<object", "<embed", "<img", "@import", "url(", "@font-face"} {
		if strings.Contains(lower, bad) {
			t.Errorf("page holds %q", bad)
		}
	}
	for _, bad := range []string{"fetch(", "XMLHttpRequest", "WebSocket", "import(", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(script, bad) {
			t.Errorf("the script uses %s", bad)
		}
	}
	js := between(t, page, "<script>", "</script>")
	css := between(t, page, "<style>", "</style>")
	if js != script || css != style {
		t.Error("the inline script or style is not the embedded file as is")
	}
	policy := between(t, page, `http-equiv="Content-Security-Policy" content="`, `"`)
	policy = strings.NewReplacer("&#39;", "'", "&#43;", "+").Replace(policy)
	for _, want := range []string{"default-src 'none'", "script-src " + sha(js), "style-src " + sha(css)} {
		if !strings.Contains(policy, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", policy, want)
		}
	}
}

var (
	anyTag      = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	loadingAttr = regexp.MustCompile(`(?i)\s(src|href|xlink:href|srcset|action|poster|background)\s*=`)
	quotedValue = regexp.MustCompile(`"[^"]*"`)
	startTag    = regexp.MustCompile(`^<(/?)([a-zA-Z][a-zA-Z0-9-]*)\b[^<>]*>`)
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

func between(t *testing.T, s, start, end string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, start)
	if !ok {
		t.Fatalf("page lacks %q", start)
	}
	in, _, ok := strings.Cut(after, end)
	if !ok {
		t.Fatalf("page lacks %q after %q", end, start)
	}
	return in
}

// wellFormed checks that every element is closed in order (void elements
// aside) and that script and style elements end where they should.
func wellFormed(page string) error {
	void := map[string]bool{"meta": true, "br": true, "hr": true, "img": true, "input": true, "link": true, "wbr": true}
	var stack []string
	for i := 0; i < len(page); {
		j := strings.IndexByte(page[i:], '<')
		if j < 0 {
			break
		}
		i += j
		if strings.HasPrefix(page[i:], "<!DOCTYPE html>") {
			i += len("<!DOCTYPE html>")
			continue
		}
		m := startTag.FindStringSubmatch(page[i:])
		if m == nil {
			return fmt.Errorf("stray '<' at %d: %.40q", i, page[i:])
		}
		name := strings.ToLower(m[2])
		i += len(m[0])
		switch {
		case m[1] == "/":
			if len(stack) == 0 || stack[len(stack)-1] != name {
				return fmt.Errorf("</%s> at %d closes %v", name, i, stack)
			}
			stack = stack[:len(stack)-1]
		case name == "script" || name == "style":
			// ASCII-only folding keeps byte offsets (strings.ToLower would
			// turn each invalid byte into three).
			end := strings.Index(asciiLower(page[i:]), "</"+name)
			if end < 0 {
				return fmt.Errorf("<%s> never ends", name)
			}
			i += end + len("</"+name+">")
		case !void[name]:
			stack = append(stack, name)
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed %v", stack)
	}
	return nil
}

// embedded is the document the page embeds, decoded.
func embedded(t *testing.T, page string) *loadgen.Document {
	t.Helper()
	var d loadgen.Document
	if err := json.Unmarshal([]byte(between(t, page, `<script type="application/json" id="report-data">`, "</script>")), &d); err != nil {
		t.Fatalf("embedded data: %v", err)
	}
	return &d
}

func sameJSON(t *testing.T, got, want *loadgen.Document) {
	t.Helper()
	// want goes through JSON and back first: invalid UTF-8 becomes U+FFFD
	// on the way, which is the document the page can embed.
	w, err1 := json.Marshal(want)
	var norm loadgen.Document
	err2 := json.Unmarshal(w, &norm)
	w, err3 := json.Marshal(&norm)
	g, err4 := json.Marshal(got)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		i := 0
		for i < min(len(g), len(w)) && g[i] == w[i] {
			i++
		}
		from := max(0, i-80)
		t.Errorf("embedded document differs at byte %d:\n got …%s\nwant …%s", i, g[from:min(len(g), i+80)], w[from:min(len(w), i+80)])
	}
}

func TestWriteHTML(t *testing.T) {
	d := sampleDocument()
	page := render(t, d)
	checkPage(t, page)
	sameJSON(t, embedded(t, page), d)
	for _, c := range allCharts {
		if !strings.Contains(page, `<figure class="chart" data-chart="`+c+`">`) {
			t.Errorf("no %s chart", c)
		}
	}
	for _, want := range []string{
		"<title>gateway-es256: ES256 forward-auth, naive vs keygate</title>",
		"<code>keygate bench reproduce gateway-es256</code>",
		"2 CPUs, AMD EPYC 7B13", "go1.26.8 linux/amd64, GOMAXPROCS=2",
		`<body data-x="connections">`,
		"<li>naive re-parses the PEM key on every request and caches nothing</li>",
		// The step tables: both series, every step.
		"<h3>naive</h3>", "<h3>keygate</h3>", "<td>15000</td><td>closed</td>",
		// The ratio table: keygate against naive at the first step.
		"<h2>Compared with naive</h2>", "<tr><td>100 connections</td><td>6.78×</td>",
		// Profiles, with their step.
		"<h3>keygate: cpu at 15000 connections</h3>", "<code>crypto/internal/fips140/nistec.p256OrdMul</code></td><td>21.5%</td>",
		"<h3>naive: heap at 5000 connections</h3>",
		// The verdict, and the step it is about marked where its figures are.
		`<section id="verdict" class="verdict invalid">` + "\n" + `<p class="verdict-line"><span class="badge">not valid</span> ` +
			"keygate ÷ naive: 6.8× requests/s, not valid: naive at 15000 connections: other processes took 48% of CPU 0",
		`<li class="flag-warning"><span class="mark">*</span> <span class="sev">warning</span> naive at 15000 connections: 1 hole`,
		`<tr class="flag-invalid" title="naive at 15000 connections: other processes took 48% of CPU 0`,
		`<td>15000 <span class="mark">!</span></td><td>closed</td>`,
		`<tr><td>15000 connections</td><td class="flag-invalid" title="naive at 15000 connections: other processes`,
		`<p class="latency-note">Latency runs from writing the request to its whole answer; answers later than the 90s timeout ` +
			"are counted as timeout errors, not as latencies.</p>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	rows := strings.Count(page, "<td>closed</td>")
	if rows != 10 {
		t.Errorf("%d step rows, want 10", rows)
	}
	if n := strings.Count(page, `<tr class="flag-`); n != 1 {
		t.Errorf("%d flagged step rows, want 1", n)
	}
	if v, h, n := strings.Index(page, `id="verdict"`), strings.Index(page, "</header>"), strings.Index(page, `id="notes"`); !(h < v && v < n) {
		t.Error("the verdict is not between the header and the notes")
	}
}

// The document's texts are attacker-influenced (a URL, a note, a series
// name): none of them may become markup or script.
func TestWriteHTMLHostileText(t *testing.T) {
	const evil = `</script><script>alert(1)</script><!-- <img src=x onerror=alert(2)> ]]> "'&amp; ` + "\u2028"
	d := sampleDocument()
	d.Title, d.Command, d.Host.Model = evil, evil, evil
	d.Notes = append(d.Notes, evil)
	d.Series[1].Name = evil
	d.Series[1].Target.URL = "http://x/" + evil
	d.Series[1].Target.HeaderNames = []string{evil}
	d.Profiles[0].Series, d.Profiles[0].File, d.Profiles[0].Kind = evil, evil, evil
	d.Profiles[0].Top[0].Function = evil
	d.Validity = &loadgen.Validity{Verdict: evil, Findings: []loadgen.Finding{
		{Check: evil, Severity: evil, Series: evil, Step: 0, Text: evil},
		{Severity: loadgen.SeverityInvalid, Series: "naive", Step: 1, Text: evil},
	}}
	page := render(t, d)
	checkPage(t, page)
	sameJSON(t, embedded(t, page), d)
	if got := embedded(t, page).Notes[2]; got != evil {
		t.Errorf("note came back as %q", got)
	}
	for _, bad := range []string{"alert(1)</script>", "<img"} {
		if strings.Contains(page, bad) {
			t.Errorf("page holds %q", bad)
		}
	}
	if data := between(t, page, `id="report-data">`, "</script>"); strings.ContainsAny(data, "<>&\u2028\u2029") {
		t.Errorf("the embedded JSON holds one of < > & U+2028 U+2029: %s", data)
	}
	if !strings.Contains(page, "<title>&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!-- &lt;img src=x") {
		t.Error("the title is not escaped text")
	}
}

func TestWriteHTMLEmpty(t *testing.T) {
	for name, d := range map[string]*loadgen.Document{
		"no series":        {Schema: loadgen.DocumentSchema},
		"a series, nil":    {Schema: loadgen.DocumentSchema, Series: []*loadgen.Report{nil}},
		"no steps":         {Schema: loadgen.DocumentSchema, Title: "t", Series: []*loadgen.Report{{Name: "a"}}},
		"nil steps":        {Schema: loadgen.DocumentSchema, Series: []*loadgen.Report{{Name: "a", Steps: []*loadgen.Result{nil}}}},
		"two, no steps":    {Schema: loadgen.DocumentSchema, Series: []*loadgen.Report{{Name: "a"}, {}}},
		"no profile steps": {Schema: loadgen.DocumentSchema, Profiles: []loadgen.Profile{{Series: "x", Step: 3, Kind: "cpu"}}},
	} {
		t.Run(name, func(t *testing.T) {
			page := render(t, d)
			checkPage(t, page)
			sameJSON(t, embedded(t, page), d)
			for _, c := range allCharts[:4] {
				if !strings.Contains(page, `data-chart="`+c+`"`) {
					t.Errorf("no %s chart", c)
				}
			}
			for _, c := range allCharts[4:] {
				if strings.Contains(page, `data-chart="`+c+`"`) {
					t.Errorf("a %s chart without server usage", c)
				}
			}
			if strings.Contains(page, "Compared with") {
				t.Error("a ratio table without steps to compare")
			}
		})
	}
}

func TestWriteHTMLErrors(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, nil); err == nil {
		t.Error("nil document: no error")
	}
	d := sampleDocument()
	d.Series[0].Steps[0].RequestsPerSec = math.NaN()
	if err := WriteHTML(&b, d); err == nil {
		t.Error("NaN: no error")
	}
	if b.Len() != 0 {
		t.Errorf("wrote %d bytes before failing", b.Len())
	}
}

func TestXAxis(t *testing.T) {
	open := func(conns int, rate float64) *loadgen.Result {
		return &loadgen.Result{Mode: loadgen.ModeOpen, Connections: conns, TargetRate: rate, RequestsPerSec: rate}
	}
	closed := &loadgen.Result{Mode: loadgen.ModeClosed, Connections: 10}
	for _, tt := range []struct {
		steps []*loadgen.Result
		want  string
	}{
		{[]*loadgen.Result{open(50, 1000), open(50, 2000)}, "rate"},
		{[]*loadgen.Result{open(50, 1000)}, "rate"},
		{[]*loadgen.Result{open(50, 1000), open(100, 1000)}, "connections"},
		{[]*loadgen.Result{open(50, 1000), closed}, "connections"},
		{nil, "connections"},
	} {
		d := &loadgen.Document{Series: []*loadgen.Report{{Steps: tt.steps}}}
		if page := render(t, d); !strings.Contains(page, `<body data-x="`+tt.want+`">`) {
			t.Errorf("%d steps: x is not %s", len(tt.steps), tt.want)
		}
	}
}

func TestRatios(t *testing.T) {
	step := func(conns int, rps float64, p99 int64) *loadgen.Result {
		return &loadgen.Result{Mode: loadgen.ModeClosed, Connections: conns, RequestsPerSec: rps, Latency: loadgen.Latency{P99: p99}}
	}
	d := &loadgen.Document{Series: []*loadgen.Report{
		{Name: "before", Steps: []*loadgen.Result{step(10, 1000, 4e6), step(20, 1000, 0)}},
		{Name: "after", Steps: []*loadgen.Result{step(20, 2500, 1e6), step(10, 3000, 1e6)}},
		{Name: "other", Steps: []*loadgen.Result{step(10, 150000, 1e5)}},
	}}
	page := render(t, d)
	checkPage(t, page)
	for _, want := range []string{
		"<h2>Compared with before</h2>",
		"<tr><td>10 connections</td><td>3.00×</td><td>0.25×</td><td>150×</td><td>0.03×</td></tr>",
		"<tr><td>20 connections</td><td>2.50×</td><td>—</td><td>—</td><td>—</td></tr>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{latency(812345), "812µs"}, {latency(1_234_567), "1.23ms"}, {latency(0), "0"}, {latency(999), "999ns"},
		{si(950), "950"}, {si(12345), "12.3k"}, {si(1_500_000), "1.5M"}, {si(2.5), "2.5"}, {si(0), "0"},
		{bytesIEC(int64(512)), "512 B"}, {bytesIEC(3.5 * 1024 * 1024), "3.5 MiB"},
		{ratio(3, 2), "1.50×"}, {ratio(1, 0), "—"}, {ratio(250, 2), "125×"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// FuzzWriteHTML puts arbitrary text where a document carries text and
// checks that the page stays well-formed, loads nothing, has only its own
// two script elements, and embeds the document unchanged.
func FuzzWriteHTML(f *testing.F) {
	for _, s := range []string{"", "plain", "</script><script>alert(1)</script>", "<!--", "</SCRIPT >", "]]>",
		"<img src=x onerror=alert(1)>", `"'&amp;&#60;`, "\u2028\u2029", "\x00\xff"} {
		f.Add(s, s, s, s)
	}
	d := sampleDocument() // made once, small, for speed; each run sets the same fields
	for _, s := range d.Series {
		s.Steps = s.Steps[:2]
		for _, st := range s.Steps {
			st.Histogram, st.Server.Timeline = st.Histogram[:4], st.Server.Timeline[:2]
		}
	}
	f.Fuzz(func(t *testing.T, title, note, name, fn string) {
		d.Title, d.Command, d.Notes = title, note, []string{note, title}
		d.Validity = &loadgen.Validity{Verdict: title, Findings: []loadgen.Finding{
			{Severity: fn, Series: name, Step: 1, Text: note}, {Severity: loadgen.SeverityInvalid, Series: name, Step: 0, Text: fn}}}
		d.Series[0].Name, d.Series[1].Target.URL = name, "http://h/"+name
		d.Series[1].Target.HeaderNames = []string{fn}
		d.Profiles[0].Series, d.Profiles[0].Top[0].Function = name, fn
		page := render(t, d)
		checkPage(t, page)
		if !utf8.ValidString(page) {
			t.Error("the page is not valid UTF-8")
		}
		sameJSON(t, embedded(t, page), d)
	})
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// The banner reads the document's validity as the worst it says: a
// finding that is not valid makes it red whatever Valid says, and an
// unknown severity is a warning, never a class of its own.
func TestVerdictBanner(t *testing.T) {
	invalid := loadgen.Finding{Severity: loadgen.SeverityInvalid, Series: "naive", Step: 1, Text: "naive at 1000 connections: bad"}
	warning := loadgen.Finding{Severity: loadgen.SeverityWarning, Series: "keygate", Step: 2, Text: "keygate at 5000 connections: meh"}
	odd := loadgen.Finding{Severity: `x" onclick="alert(1)`, Series: "keygate", Step: 0, Text: "keygate at 100 connections: odd"}
	for _, tt := range []struct {
		name    string
		v       *loadgen.Validity
		class   string
		label   string
		marked  []string // the first cells of the rows marked, with their marks
		unknown bool     // no row is marked
	}{
		{"valid", &loadgen.Validity{Valid: true, Verdict: "all good, valid"}, "valid", "valid", nil, true},
		{"warning", &loadgen.Validity{Valid: true, Verdict: "valid, with 1 warning", Findings: []loadgen.Finding{warning}},
			"warning", "valid, with warnings", []string{`<tr class="flag-warning" title="keygate at 5000 connections: meh"><td>5000 <span class="mark">*</span></td>`}, false},
		{"invalid", &loadgen.Validity{Verdict: "not valid: bad", Findings: []loadgen.Finding{invalid, warning}},
			"invalid", "not valid", []string{`<td>1000 <span class="mark">!</span></td>`, `<td>5000 <span class="mark">*</span></td>`}, false},
		{"says valid, is not", &loadgen.Validity{Valid: true, Verdict: "valid", Findings: []loadgen.Finding{invalid}},
			"invalid", "not valid", []string{`<td>1000 <span class="mark">!</span></td>`}, false},
		{"unknown severity", &loadgen.Validity{Valid: true, Verdict: "valid", Findings: []loadgen.Finding{odd}},
			"warning", "valid, with warnings", []string{`<tr class="flag-warning" title="keygate at 100 connections: odd"><td>100 <span class="mark">*</span></td>`}, false},
		{"finding on no step", &loadgen.Validity{Valid: true, Verdict: "valid",
			Findings: []loadgen.Finding{{Severity: loadgen.SeverityWarning, Series: "nobody", Step: 99, Text: "lost"}}},
			"warning", "valid, with warnings", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := sampleDocument()
			d.Validity = tt.v
			page := render(t, d)
			checkPage(t, page)
			banner := between(t, page, `<section id="verdict"`, "</section>")
			want := ` class="verdict ` + tt.class + `">` + "\n" + `<p class="verdict-line"><span class="badge">` + tt.label + `</span> ` + html.EscapeString(tt.v.Verdict) + "</p>"
			if !strings.HasPrefix(banner, want) {
				t.Errorf("banner %q does not start %q", banner, want)
			}
			for _, f := range tt.v.Findings {
				if !strings.Contains(banner, "</span> "+f.Text+"</li>") {
					t.Errorf("banner lacks finding %q", f.Text)
				}
			}
			for _, m := range tt.marked {
				if !strings.Contains(page, m) {
					t.Errorf("page lacks the marked row %q", m)
				}
			}
			if rows := strings.Count(page, `<tr class="flag-`); rows != len(tt.marked) {
				t.Errorf("%d rows marked, want %d", rows, len(tt.marked))
			}
			if strings.Contains(page, ` onclick="`) {
				t.Error("a severity became markup")
			}
		})
	}
}

// A finding's text is hostile like any other: it stays text in the
// banner, the table's footnotes and the titles of marked rows and ratios.
func TestWriteHTMLHostileFinding(t *testing.T) {
	const evil = `"><script>alert(1)</script><b title='x` + "\n"
	d := sampleDocument()
	d.Validity = &loadgen.Validity{Verdict: evil, Findings: []loadgen.Finding{
		{Severity: loadgen.SeverityInvalid, Series: "naive", Step: 0, Text: evil},
		{Severity: loadgen.SeverityWarning, Series: "keygate", Step: 0, Text: evil},
	}}
	page := render(t, d)
	checkPage(t, page)
	esc := html.EscapeString(evil)
	for _, want := range []string{
		`<span class="badge">not valid</span> ` + esc + "</p>",
		`<span class="sev">not valid</span> ` + esc + "</li>",
		`<tr class="flag-invalid" title="` + esc + `"><td>100 <span class="mark">!</span></td>`,
		`<td class="flag-invalid" title="` + esc + "\n" + esc + `">6.78× <span class="mark">!</span></td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<b ") || strings.Contains(page, "alert(1)</script>") {
		t.Error("a finding's text became markup")
	}
}

func TestLatencyNote(t *testing.T) {
	step := func(from string, timeout time.Duration) *loadgen.Result {
		return &loadgen.Result{Mode: loadgen.ModeClosed, Connections: 10, LatencyFrom: from, Timeout: int64(timeout)}
	}
	const (
		write2s = "Latency runs from writing the request to its whole answer; answers later than the 2s timeout " +
			"are counted as timeout errors, not as latencies."
		schedule2s = "Latency runs from when each request was due (corrected for coordinated omission, as wrk2's), " +
			"so it may exceed the 2s timeout."
	)
	for _, tt := range []struct {
		name   string
		series []*loadgen.Report
		chart  []string // the notes under the latency chart
	}{
		{"closed loop", []*loadgen.Report{{Name: "a", Steps: []*loadgen.Result{step(loadgen.LatencyFromWrite, 2*time.Second)}}},
			[]string{write2s}},
		{"open loop", []*loadgen.Report{{Name: "a", Steps: []*loadgen.Result{step(loadgen.LatencyFromSchedule, 2*time.Second)}}},
			[]string{schedule2s}},
		{"both in one series", []*loadgen.Report{{Name: "a", Steps: []*loadgen.Result{
			step(loadgen.LatencyFromWrite, 2*time.Second), step(loadgen.LatencyFromSchedule, 2*time.Second), step(loadgen.LatencyFromWrite, 2*time.Second)}}},
			[]string{write2s, schedule2s}},
		{"series that differ", []*loadgen.Report{
			{Name: "a", Steps: []*loadgen.Result{step(loadgen.LatencyFromWrite, 2*time.Second)}},
			{Name: "b", Steps: []*loadgen.Result{step(loadgen.LatencyFromSchedule, 2*time.Second)}}},
			[]string{"a: " + write2s, "b: " + schedule2s}},
		{"series that agree", []*loadgen.Report{
			{Name: "a", Steps: []*loadgen.Result{step(loadgen.LatencyFromWrite, 2*time.Second)}},
			{Name: "b", Steps: []*loadgen.Result{step(loadgen.LatencyFromWrite, 2*time.Second)}}},
			[]string{write2s}},
		{"before it was recorded", []*loadgen.Report{{Name: "a", Target: loadgen.Target{Timeout: 1.5}, Steps: []*loadgen.Result{step("", 0)}}},
			[]string{"The document does not say where latency runs from; the run used a 1.5s timeout."}},
		{"no timeout either", []*loadgen.Report{{Name: "a", Steps: []*loadgen.Result{step(loadgen.LatencyFromWrite, 0)}}},
			[]string{"Latency runs from writing the request to its whole answer; answers later than the timeout " +
				"(its length not recorded) are counted as timeout errors, not as latencies."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			page := render(t, &loadgen.Document{Schema: loadgen.DocumentSchema, Series: tt.series})
			checkPage(t, page)
			fig := between(t, page, `data-chart="latency">`, "</figure>")
			var notes []string
			for _, m := range regexp.MustCompile(`<p class="chart-note">([^<]*)</p>`).FindAllStringSubmatch(fig, -1) {
				notes = append(notes, html.UnescapeString(m[1]))
			}
			if !slices.Equal(notes, tt.chart) {
				t.Errorf("under the latency chart:\n%q\nwant\n%q", notes, tt.chart)
			}
			for _, s := range tt.series {
				for _, st := range s.Steps {
					if n := html.EscapeString(latencyNote(s, st)); !strings.Contains(page, `<p class="latency-note">`+n+"</p>") {
						t.Errorf("series %s: no note %q beside its table", s.Name, n)
					}
				}
			}
		})
	}
}

// A ratio is marked when either of the steps it divides has a finding.
func TestRatioFlags(t *testing.T) {
	for _, tt := range []struct {
		name     string
		findings []loadgen.Finding
		want     string // the row at 100 connections
	}{
		{"neither", nil, "<tr><td>100 connections</td><td>6.78×</td><td>0.15×</td></tr>"},
		{"the base", []loadgen.Finding{{Severity: loadgen.SeverityWarning, Series: "naive", Step: 0, Text: "w"}},
			`<tr><td>100 connections</td><td class="flag-warning" title="w">6.78× <span class="mark">*</span></td>`},
		{"the other", []loadgen.Finding{{Severity: loadgen.SeverityInvalid, Series: "keygate", Step: 0, Text: "i"}},
			`<tr><td>100 connections</td><td class="flag-invalid" title="i">6.78× <span class="mark">!</span></td>`},
		{"both, worst wins", []loadgen.Finding{{Severity: loadgen.SeverityWarning, Series: "naive", Step: 0, Text: "w"},
			{Severity: loadgen.SeverityInvalid, Series: "keygate", Step: 0, Text: "i"}},
			`<td class="flag-invalid" title="w` + "\n" + `i">0.15× <span class="mark">!</span></td></tr>`},
		{"another step", []loadgen.Finding{{Severity: loadgen.SeverityInvalid, Series: "keygate", Step: 1, Text: "i"}},
			"<tr><td>100 connections</td><td>6.78×</td><td>0.15×</td></tr>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := sampleDocument()
			d.Validity = &loadgen.Validity{Valid: true, Findings: tt.findings}
			page := render(t, d)
			if !strings.Contains(page, tt.want) {
				t.Errorf("ratio table lacks %q:\n%s", tt.want, between(t, page, `<section id="ratios">`, "</section>"))
			}
		})
	}
}
