package report

import (
	"bytes"
	"context"
	"maps"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// chromium is Debian's chromium, or the test skips; with
// KEYGATE_REQUIRE_CHROMIUM set (as .ci/run sets it) it fails instead.
// Under -short it skips whatever is installed.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration: headless Chromium; run without -short")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	if os.Getenv("KEYGATE_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is required (KEYGATE_REQUIRE_CHROMIUM is set) but not installed")
	}
	t.Skip("chromium not installed; apt-get install chromium, or run .ci/run")
	return ""
}

// chromiumFlags run a headless Chromium that reaches no network (every
// host name fails to resolve, every proxied request goes to a closed
// port), keeps its profile in a fresh directory, and prints the DOM once
// the page's scripts have run, with the page's console on stderr.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
	"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
	"--disable-background-networking", "--disable-component-update", "--metrics-recording-only",
	"--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
	"--enable-logging=stderr", "--v=0",
	"--virtual-time-budget=5000", "--dump-dom",
}

// dumpDOM opens file in headless Chromium and returns the DOM after its
// scripts ran and the console messages the page logged.
func dumpDOM(t *testing.T, bin, file string) (dom string, console []string) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := url.URL{Scheme: "file", Path: file}
	cmd := exec.CommandContext(ctx, bin, append(slices.Clone(chromiumFlags), "--user-data-dir="+filepath.Join(home, "profile"), u.String())...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	return stdout.String(), console
}

// charts is the data-* attributes of every chart element in dom, by its
// data-chart name.
func charts(t *testing.T, dom string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	attr := regexp.MustCompile(`([a-z][a-z0-9-]*)="([^"]*)"`)
	for _, tag := range regexp.MustCompile(`<figure\b[^>]*>`).FindAllString(dom, -1) {
		attrs := map[string]string{}
		for _, m := range attr.FindAllStringSubmatch(tag, -1) {
			attrs[m[1]] = m[2]
		}
		if name := attrs["data-chart"]; name != "" {
			out[name] = attrs
		}
	}
	return out
}

// TestHTMLReportInChromium opens reports in a real browser with the
// network disabled and checks from the DOM that every chart was drawn with
// the data it should have, that a chart without data says so, that no
// script error or policy violation was logged, and that hostile text in
// the document stayed text.
func TestHTMLReportInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	const pwn = `</script><script>document.documentElement.setAttribute('data-pwned','script')</script>` +
		`<img src=x onerror="document.documentElement.setAttribute('data-pwned','img')">`

	full := sampleDocument()
	full.Notes = append(full.Notes, pwn)
	full.Series[1].Target.URL += "?q=" + pwn
	// A longer first step: the timeline of the last must keep its own window.
	full.Series[0].Steps[0].Seconds, full.Series[0].Steps[0].Server.WindowSeconds = 30, 30
	// A finding's text is hostile too: it reaches the charts as a tooltip.
	full.Check().Findings = append(full.Validity.Findings,
		loadgen.Finding{Severity: loadgen.SeverityWarning, Series: "keygate", Step: 0, Text: "keygate at 100 connections: " + pwn})
	lastBuckets := len(full.Series[0].Steps[4].Histogram) + len(full.Series[1].Steps[4].Histogram)

	// Measured from /proc: CPU but no allocation rate or timeline, and
	// steps without histograms.
	proc := sampleDocument()
	proc.Series = proc.Series[:1]
	for _, st := range proc.Series[0].Steps {
		st.Histogram = nil
		st.Server = &loadgen.ServerUsage{Source: "proc", CPUSeconds: 9, CPUPercent: 90}
	}

	// Open loop at falling rates: the x axis is the rate, and the
	// distribution shows the last step (the lowest rate) at first.
	open := sampleDocument()
	open.Series = open.Series[1:]
	for i, st := range open.Series[0].Steps {
		st.Mode, st.Connections, st.TargetRate = loadgen.ModeOpen, 500, math.Ldexp(5000, i)
		st.LatencyFrom = loadgen.LatencyFromSchedule
		st.Server.Timeline = nil
	}
	slices.Reverse(open.Series[0].Steps)
	open.Profiles = nil
	if len(open.Series[0].Steps[0].Histogram) == len(open.Series[0].Steps[4].Histogram) {
		t.Fatal("the first and last steps' histograms have as many buckets: the test cannot tell which is drawn")
	}

	for _, tt := range []struct {
		name  string
		doc   *loadgen.Document
		want  map[string]string // chart: data-points, or "empty"
		attrs map[string]string // "chart data-attribute": its value
		dom   []string          // what the DOM holds once drawn
	}{
		{"full", full, map[string]string{
			// errors: errors/s and non-2xx/s of each step; timeline-cpu:
			// the target's CPU (naive missed 2 readings) and naive's
			// other processes.
			"throughput": "10", "latency": "40", "errors": "20", "distribution": strconv.Itoa(lastBuckets),
			"server-cpu": "10", "server-allocs": "10", "timeline-cpu": "26", "timeline-allocs": "18",
		}, map[string]string{
			"throughput data-flags": "2", "latency data-flags": "2",
			"timeline-cpu data-holes": "1", "timeline-allocs data-holes": "1",
			"timeline-cpu data-x-span": "0 10.0003", "timeline-allocs data-x-span": "0 10.0003",
			"timeline-cpu polylines": "5", "timeline-allocs polylines": "3",
		}, []string{
			`<title>not valid: naive at 15000 connections: other processes took 48% of CPU 0`,
			"<title>warning: keygate at 100 connections: &lt;/script&gt;&lt;script&gt;document",
			`>timeout</text>`, "<p class=\"chart-note\">Latency runs from writing the request", ">naive: no reading</text>",
			"<span>other processes</span>",
		}},
		{"proc", proc, map[string]string{
			"throughput": "5", "latency": "20", "errors": "10", "distribution": "empty", "server-cpu": "5", "server-allocs": "empty",
		}, map[string]string{"throughput data-flags": "0", "latency data-flags": "0"}, nil},
		{"open", open, map[string]string{
			"throughput": "5", "latency": "20", "errors": "10", "distribution": strconv.Itoa(len(open.Series[0].Steps[4].Histogram)),
			"server-cpu": "5", "server-allocs": "5",
		}, nil, []string{">timeout</text>", "<p class=\"chart-note\">Latency runs from when each request was due"}},
		{"empty", &loadgen.Document{Schema: loadgen.DocumentSchema, Title: "nothing measured",
			Series: []*loadgen.Report{{Schema: loadgen.Schema, Name: "a", Steps: []*loadgen.Result{}}}},
			map[string]string{"throughput": "empty", "latency": "empty", "errors": "empty", "distribution": "empty"}, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, tt.name+".html")
			var b bytes.Buffer
			if err := WriteHTML(&b, tt.doc); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			dom, console := dumpDOM(t, bin, file)
			if !strings.Contains(dom, "</html>") {
				t.Fatalf("no DOM dumped:\n%s", dom)
			}
			for _, line := range console {
				t.Errorf("console: %s", line)
			}
			if html := regexp.MustCompile(`<html\b[^>]*>`).FindString(dom); html == "" || strings.Contains(html, "data-pwned") {
				t.Errorf("hostile text in the document ran as script: %q", html)
			}
			if tt.name == "full" && !strings.Contains(dom, "setAttribute('data-pwned','img')") {
				t.Error("the hostile note is not shown as text")
			}
			if x := map[string]string{"open": "rate"}[tt.name]; x != "" && !strings.Contains(dom, `<body data-x="`+x+`">`) {
				t.Errorf("the x axis is not %s", x)
			}
			got := charts(t, dom)
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, slices.Sorted(maps.Keys(tt.want))) {
				t.Errorf("charts %v, want %v", names, slices.Sorted(maps.Keys(tt.want)))
			}
			for name, want := range tt.want {
				a := got[name]
				switch {
				case a == nil:
				case want == "empty":
					if a["data-rendered"] != "empty" || a["data-points"] != "0" {
						t.Errorf("%s: data-rendered=%q data-points=%q, want empty and 0 (%s)", name, a["data-rendered"], a["data-points"], a["data-error"])
					}
				default:
					if a["data-rendered"] != "true" || a["data-points"] != want {
						t.Errorf("%s: data-rendered=%q data-points=%q, want true and %s (%s)", name, a["data-rendered"], a["data-points"], want, a["data-error"])
					}
				}
			}
			figs := regexp.MustCompile(`(?s)<figure\b.*?</figure>`).FindAllString(dom, -1)
			for key, want := range tt.attrs {
				name, attr, _ := strings.Cut(key, " ")
				got := got[name][attr]
				if attr == "polylines" {
					got = strconv.Itoa(strings.Count(figure(figs, name), "<polyline"))
				}
				if got != want {
					t.Errorf("%s: %s is %q, want %q", name, attr, got, want)
				}
			}
			for _, want := range tt.dom {
				if !strings.Contains(dom, want) {
					t.Errorf("the DOM lacks %q", want)
				}
			}
			// A drawn chart is an SVG with a path or polyline in it; an
			// empty one says so in words.
			for _, fig := range figs {
				drawn := strings.Contains(fig, `data-rendered="true"`)
				if drawn && (!strings.Contains(fig, "<svg") || !strings.Contains(fig, "<polyline")) {
					t.Errorf("a drawn chart without an SVG line: %.200s", fig)
				}
				if !drawn && !strings.Contains(fig, `<p class="nodata">No data`) {
					t.Errorf("an empty chart that does not say so: %.300s", fig)
				}
			}
		})
	}
}

// figure is the chart named name among figs.
func figure(figs []string, name string) string {
	for _, f := range figs {
		if strings.Contains(f, `data-chart="`+name+`"`) {
			return f
		}
	}
	return ""
}
