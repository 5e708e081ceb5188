package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

func TestBenchLoad(t *testing.T) {
	var posts, bad atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			posts.Add(1)
			var buf bytes.Buffer
			buf.ReadFrom(r.Body)
			if buf.String() != "from a file" || r.Header.Get("Authorization") != "Bearer s3cret" {
				bad.Add(1)
			}
		}
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer ts.Close()
	h := newHarness(t)

	out := h.must("bench", "load", "--url", ts.URL+"/", "--connections", "2,3", "--duration", "200ms", "--warmup", "0s")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The heading, the verdict and its findings (the server shares the
	// process, so the generator may be reported as busy), the header, then
	// a row per step.
	head := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "connections") })
	if head < 2 || len(lines) != head+3 || !strings.HasPrefix(lines[0], "bench load: GET "+ts.URL+"/, 200ms per step after 0s warm-up") ||
		!strings.HasPrefix(lines[1], "verdict: valid") {
		t.Fatalf("want a heading, a verdict, a header and 2 rows:\n%s", out)
	}
	for i, conns := range []string{"2", "3"} {
		if f := strings.Fields(lines[head+1+i]); len(f) != 11 || f[0] != conns || f[1] != "closed" || f[2] == "0" || f[8] != "0" || f[9] != "0" {
			t.Errorf("row %q", lines[head+1+i])
		}
	}

	body := h.write("body.txt", []byte("from a file"))
	out = h.must("bench", "load", "--url", ts.URL+"/missing", "--method", "POST", "-H", "Authorization: Bearer s3cret",
		"--body-file", body, "--connections", "2", "--rate", "200", "--requests", "20", "--duration", "0s",
		"--warmup", "0s", "--json")
	if strings.Contains(out, "s3cret") {
		t.Error("the output holds a header value")
	}
	var rep loadgen.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Schema != loadgen.Schema || len(rep.Steps) != 1 || rep.Target.Method != "POST" || rep.Target.BodyBytes != 11 {
		t.Fatalf("report %+v", rep)
	}
	s := rep.Steps[0]
	if s.Mode != loadgen.ModeOpen || s.TargetRate != 200 || s.Requests != 20 || s.Status.S4xx != 20 || s.Errors.Total() != 0 {
		t.Errorf("step %+v", s)
	}
	if posts.Load() != 20 || bad.Load() != 0 {
		t.Errorf("%d posts, %d not as sent", posts.Load(), bad.Load())
	}

	// A sweep over rates: one step per rate at each connection count.
	out = h.must("bench", "load", "--url", ts.URL+"/", "--connections", "2", "--rate", "100,200", "--requests", "10",
		"--duration", "0s", "--warmup", "0s", "--json")
	rep = loadgen.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Steps) != 2 || rep.Steps[0].TargetRate != 100 || rep.Steps[1].TargetRate != 200 || rep.Steps[1].Mode != loadgen.ModeOpen {
		t.Errorf("rate sweep: %d steps %+v", len(rep.Steps), rep.Steps)
	}
}

func TestBenchLoadUsage(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{nil, "--url is required"},
		{[]string{"--url", "https://example.com/"}, "https is not supported"},
		{[]string{"--url", "example.com"}, "not http://host"},
		{[]string{"--url", "http://x/", "--connections", "0"}, "not a positive integer"},
		{[]string{"--url", "http://x/", "--connections", "10,x"}, "not a positive integer"},
		{[]string{"--url", "http://x/", "-H", "NoColon"}, "is not \"Name: value\""},
		{[]string{"--url", "http://x/", "-H", "Content-Length: 3"}, "set by the generator"},
		{[]string{"--url", "http://x/", "--body", "a", "--body-file", "f"}, "exclude each other"},
		{[]string{"--url", "http://x/", "--rate", "-1"}, `"-1" is not a rate`},
		{[]string{"--url", "http://x/", "--rate", "1,2", "--compare-url", "http://y/"}, "takes one --rate"},
		{[]string{"--url", "http://x/", "--duration", "0s"}, "--duration, --requests or both"},
		{[]string{"--url", "http://x/", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"--url", "http://x/", "extra"}, "unexpected argument"},
	} {
		expect(t, h.run(append([]string{"bench", "load"}, tt.args...)...), ExitUsage, "", tt.err)
	}
	// More connections than the hard open-file limit allows: refused before any is opened.
	start := time.Now()
	expect(t, h.run("bench", "load", "--url", "http://127.0.0.1:1/", "--connections", "1000000000"), ExitFail, "",
		"hard limit (ulimit -Hn)")
	if time.Since(start) > 5*time.Second {
		t.Error("refusal took too long")
	}
	expect(t, h.run("bench", "load", "--url", "http://127.0.0.1:1/", "--body-file", h.path("nope")), ExitFail, "", "no such file")
}

func TestBenchLoadProgress(t *testing.T) {
	var b bytes.Buffer
	writeProgress(&b, 100, loadgen.Progress{Elapsed: 3400 * time.Millisecond, Measuring: true, Requests: 12345})
	if got, want := b.String(), "\r\033[K100 connections: measuring, 3s elapsed, 12345 requests measured"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	// Not a terminal (a buffer here, a pipe or file in use): no progress at all.
	if (&app{stderr: &b}).progressLine() != nil {
		t.Error("progress on a non-terminal")
	}
}

// --values sends one request per line, each line in place of {{value}};
// --format line prints one key=value line; --compare-url loads a second
// target with the same requests and prints the ratios.
func TestBenchLoadValuesCompareLine(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	handler := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path+" "+r.Header.Get("Authorization")]++
		mu.Unlock()
	}
	a := httptest.NewServer(http.HandlerFunc(handler))
	defer a.Close()
	var bHits atomic.Int64
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bHits.Add(1)
		if r.Header.Get("Authorization") == "Bearer t2" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer b.Close()
	h := newHarness(t)
	vals := h.write("values.txt", []byte("t1\nt2\r\n\nt3\n"))
	out := h.must("bench", "load", "--url", a.URL+"/u/{{value}}", "-H", "Authorization: Bearer {{value}}", "--values", vals,
		"--connections", "1", "--requests", "30", "--duration", "0s", "--warmup", "0s", "--format", "line")
	if !strings.HasPrefix(out, "connections=1 mode=closed requests=30 ") || !strings.Contains(out, " 2xx=30 ") || strings.Count(out, "\n") != 1 {
		t.Errorf("line output %q", out)
	}
	mu.Lock()
	for _, v := range []string{"t1", "t2", "t3"} {
		if n := seen["/u/"+v+" Bearer "+v]; n != 10 {
			t.Errorf("value %s sent %d times, want 10 (%v)", v, n, seen)
		}
	}
	mu.Unlock()

	out = h.must("bench", "load", "--url", a.URL+"/x", "-H", "Authorization: Bearer {{value}}", "--values", vals,
		"--compare-url", b.URL, "--connections", "1,2", "--rounds", "1", "--requests", "30", "--duration", "0s", "--warmup", "0s", "--json")
	var doc loadgen.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Schema != loadgen.DocumentSchema || len(doc.Series) != 2 || len(doc.Series[1].Steps) != 2 {
		t.Fatalf("document %+v", doc)
	}
	for i, st := range doc.Series[1].Steps {
		if st.Status.S4xx != 10 || st.Status.S2xx != 20 {
			t.Errorf("compared target, step %d: %+v (one value in three is refused there)", i, st.Status)
		}
	}
	if bHits.Load() < 60 {
		t.Errorf("the compared target got %d requests", bHits.Load())
	}

	// By default the comparison runs in rounds, here three of 300 ms.
	out = h.must("bench", "load", "--url", a.URL+"/x", "--compare-url", b.URL, "--connections", "1,2", "--rounds", "3",
		"--duration", "300ms", "--warmup", "0s", "--json")
	doc = loadgen.Document{}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.Series) != 2 || len(doc.Series[1].Steps) != 6 {
		t.Fatalf("document %+v", doc)
	}
	for i, st := range doc.Series[0].Steps {
		if want := []int{1, 1, 1, 2, 2, 2}[i]; st.Connections != want || st.Round != i%3+1 {
			t.Errorf("step %d: %d connections, round %d; want %d connections, round %d", i, st.Connections, st.Round, want, i%3+1)
		}
	}
	// Both targets listen in this process, so their CPU per request is
	// readable from /proc and the comparison carries it.
	if len(doc.Comparisons) != 2 {
		t.Fatalf("comparisons %+v, want one per connection count", doc.Comparisons)
	}
	for _, c := range doc.Comparisons {
		if c.Rounds != 3 || len(c.RequestsRatios) != 3 || c.RequestsRatio <= 0 || c.Against != hostOf(a.URL) {
			t.Errorf("comparison %+v", c)
		}
		if runtime.GOOS == "linux" && (c.CPUPerRequestUS <= 0 || c.CPUPerRequestRatio <= 0) {
			t.Errorf("comparison %+v: no CPU per request", c)
		}
	}
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"--url", a.URL, "--values", vals}, "no {{value}}"},
		{[]string{"--url", a.URL + "/{{value}}", "--values", h.write("empty", []byte("\n\n"))}, "holds no value"},
		{[]string{"--url", a.URL, "--compare-url", a.URL}, "same host and port"},
		{[]string{"--url", a.URL, "--compare-url", "https://x"}, "is not http://host"},
		{[]string{"--url", a.URL, "--compare-url", b.URL, "--format", "line"}, "one target"},
		{[]string{"--url", a.URL, "--format", "xml"}, "--format must be"},
		{[]string{"--url", a.URL, "--rounds", "3"}, "--rounds needs --compare-url"},
		{[]string{"--url", a.URL, "--compare-url", b.URL, "--rounds", "0"}, "at least 1"},
	} {
		expect(t, h.run(append([]string{"bench", "load", "--requests", "1", "--duration", "0s"}, tt.args...)...), ExitUsage, "", tt.err)
	}
}
