package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// reportData is the JSON a report page embeds, decoded.
func reportData(t *testing.T, path string) *loadgen.Document {
	t.Helper()
	b := mustRead(t, path)
	const open = `<script type="application/json" id="report-data">`
	_, rest, ok := strings.Cut(string(b), open)
	data, _, ok2 := strings.Cut(rest, "</script>")
	if !ok || !ok2 {
		t.Fatalf("%s embeds no document", path)
	}
	var d loadgen.Document
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestBenchReport(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ts.Close()
	h := newHarness(t)

	// What 'bench load --json' prints becomes a document of one series.
	load := h.write("load.json", []byte(h.must("bench", "load", "--url", ts.URL+"/x", "--connections", "1,2",
		"--requests", "20", "--duration", "0s", "--warmup", "0s", "--json")))
	out := h.path("load.html")
	expect(t, h.run("bench", "report", "--in", load, "--out", out), ExitOK, "wrote "+out+": 1 series, 2 steps", "")
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o644 != 0o644 || fi.Mode().Perm()&0o133 != 0 {
		t.Errorf("mode %v, want 0644 (less the umask)", fi.Mode())
	}
	page, _ := os.ReadFile(out)
	for _, want := range []string{"<title>bench load: GET " + ts.URL + "/x</title>", `data-chart="throughput"`, `id="verdict"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The step's row; on a busy machine the run may flag it (a generator
	// at full CPU), which marks its first cell.
	if !regexp.MustCompile(`<td>2( <span class="mark">[!*]</span>)?</td><td>closed</td>`).Match(page) {
		t.Errorf("page lacks the 2-connection step's row")
	}
	d := reportData(t, out)
	if d.Schema != loadgen.DocumentSchema || len(d.Series) != 1 || d.Series[0].Name != "GET "+ts.URL+"/x" || len(d.Series[0].Steps) != 2 ||
		d.Series[0].Steps[1].Connections != 2 || len(d.Series[0].Steps[1].Histogram) == 0 {
		t.Errorf("embedded document %+v", d)
	}

	// An existing file is kept unless --force.
	expect(t, h.run("bench", "report", "--in", load, "--out", out), ExitFail, "", out+" exists; give --force to overwrite it")
	if again, _ := os.ReadFile(out); string(again) != string(page) {
		t.Error("the refused run changed the file")
	}

	// A keygate.bench.report/v1 document, from standard input, over the
	// old file.
	var rep loadgen.Report
	if err := json.Unmarshal(mustRead(t, load), &rep); err != nil {
		t.Fatal(err)
	}
	a, b := rep, rep
	a.Name, b.Name = "before", "after"
	doc := &loadgen.Document{Schema: loadgen.DocumentSchema, Title: "before and after <b>", Created: time.Now().UTC(),
		Series: []*loadgen.Report{&a, &b}, Notes: []string{"</script><script>alert(1)</script>"}}
	var js strings.Builder
	if err := doc.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	h.stdin = js.String()
	expect(t, h.run("bench", "report", "--in", "-", "--out", out, "--force"), ExitOK, "wrote "+out+": 2 series, 4 steps", "")
	page, _ = os.ReadFile(out)
	if !strings.Contains(string(page), "<title>before and after &lt;b&gt;</title>") || !strings.Contains(string(page), "Compared with before") {
		t.Error("the page is not the two-series document's")
	}
	if got := reportData(t, out); got.Notes[0] != doc.Notes[0] || len(got.Series) != 2 {
		t.Errorf("embedded document %+v", got)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode after --force: %v %v", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(h.dir); len(ents) != 2 {
		t.Errorf("%d files in the directory, want 2 (no temporary left behind)", len(ents))
	}
}

func TestBenchReportErrors(t *testing.T) {
	h := newHarness(t)
	out := h.path("r.html")
	for _, tt := range []struct {
		in, err string
	}{
		{"{", "not a JSON document: unexpected end of JSON input"},
		{"[1]", "not a JSON document"},
		{`{"title": "x"}`, `no "schema"; want keygate.bench.load/v1 (bench load --json) or keygate.bench.report/v1`},
		{`{"schema": "keygate.bench.load/v2"}`, `schema "keygate.bench.load/v2"; want keygate.bench.load/v1`},
		{`{"schema": "keygate.bench.report/v1", "series": "x"}`, "keygate.bench.report/v1: json: cannot unmarshal string"},
		{`{"schema": "keygate.bench.load/v1", "steps": [{"requests": "many"}]}`, "keygate.bench.load/v1: json: cannot unmarshal string"},
	} {
		in := h.write("in.json", []byte(tt.in))
		expect(t, h.run("bench", "report", "--in", in, "--out", out), ExitFail, "", "bench report: "+in+": "+tt.err)
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: wrote %s", tt.in, out)
		}
	}
	expect(t, h.run("bench", "report", "--out", out), ExitUsage, "", "--in is required")
	expect(t, h.run("bench", "report", "--in", "x.json"), ExitUsage, "", "--out is required")
	expect(t, h.run("bench", "report", "--in", h.path("nope.json"), "--out", out), ExitFail, "", "no such file")
	expect(t, h.run("bench", "report", "--in", "a", "--out", out, "extra"), ExitUsage, "", `unexpected argument "extra"`)
	ok := h.write("ok.json", []byte(`{"schema": "keygate.bench.report/v1"}`))
	expect(t, h.run("bench", "report", "--in", ok, "--out", h.path("missing-dir/r.html")), ExitFail, "", "no such file")
}
