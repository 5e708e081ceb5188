package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
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

var allCharts = []string{"throughput", "latency", "distribution", "server-cpu", "server-allocs", "timeline-cpu", "timeline-allocs"}

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
		if m := loadingAttr.FindString(tag); m != "" {
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
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	rows := strings.Count(page, "<td>closed</td>")
	if rows != 10 {
		t.Errorf("%d step rows, want 10", rows)
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
			for _, c := range allCharts[:3] {
				if !strings.Contains(page, `data-chart="`+c+`"`) {
					t.Errorf("no %s chart", c)
				}
			}
			for _, c := range allCharts[3:] {
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
