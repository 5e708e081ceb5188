//go:build linux

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/bench/runner"
)

// A reproduction run with a CPU hog pinned to the targets' CPU must say it
// is not valid: in the verdict at the top of the table, with its figures
// marked, in report.json and in report.html. Whatever the machine is doing
// besides, the hog alone takes a large share of CPU 0, so the test cannot
// pass by luck; it does not assert the converse (a valid run), which a
// busy CI machine could not promise.
func TestBenchReproduceFlagsCPUHog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a CPU hog and loads them")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs: one for the targets and the hog, one for the load generator")
	}
	t.Setenv("KEYGATE_TEST_AS_CLI", "1")
	h := newHarness(t)
	// Three spinning processes: the scheduler favours a target that wakes
	// on the network over one that never sleeps, so a single hog may take
	// less of CPU 0 than it would from a busier target.
	for i := range 3 {
		hog, err := runner.Start(runner.Spec{Name: "hog", Exe: "/bin/sh", Args: []string{"-c", "while :; do :; done"},
			CPUs: []int{0}, Log: h.path(fmt.Sprintf("hog%d.log", i))})
		if err != nil {
			t.Fatal(err)
		}
		defer hog.Stop()
	}

	dir := h.path("out")
	out := h.must("bench", "reproduce", "hs256-middleware", "--connections", "20", "--duration", "3s", "--warmup", "500ms",
		"--timeout", "1s", "--tokens", "40", "--target-cpus", "0", "--out", dir)
	lines := strings.Split(out, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "verdict: keygate ÷ naive: ") || !strings.Contains(lines[1], "not valid: ") ||
		!strings.Contains(lines[1], "where the target is pinned") {
		t.Errorf("the verdict does not come first or does not name the neighbour:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^\s+20\s+\d+!\s`).MatchString(out) {
		t.Errorf("the step's figures are not marked:\n%s", out)
	}
	doc := readDocument(t, dir)
	if doc.Validity == nil || doc.Validity.Valid {
		t.Fatalf("validity %+v", doc.Validity)
	}
	for _, s := range doc.Series {
		if marks := doc.Validity.Marks(s.Name); marks[0] != loadgen.SeverityInvalid {
			t.Errorf("%s's step is not marked invalid: %+v", s.Name, doc.Validity.Findings)
		}
		for _, st := range s.Steps {
			if st.Server == nil || st.Server.Others == nil || st.Server.Others.OnTargetCPUsPercent < loadgen.NeighbourLimit {
				t.Errorf("%s: the hog's share of CPU 0 was not measured: %+v", s.Name, st.Server)
			}
			if st.Latency.Max > st.Timeout || st.Timeout != int64(time.Second) {
				t.Errorf("%s: latency up to %v with a %v timeout", s.Name, time.Duration(st.Latency.Max), time.Duration(st.Timeout))
			}
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !strings.Contains(string(page), "not valid: ") {
		t.Errorf("report.html does not carry the verdict: %v", err)
	}
}
