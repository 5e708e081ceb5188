package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// Each reproduction runs for real, briefly: its naive target and keygate,
// started as children of this test binary (TestMain), answer every
// request with 2xx, and the report holds both series, the targets' usage
// and, with --profile, profiles with their top functions.
func TestBenchReproduce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and loads them")
	}
	t.Setenv("KEYGATE_TEST_AS_CLI", "1")
	for _, name := range []string{"gateway-es256", "hs256-middleware", "aes-gcm-decrypt"} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			dir := h.path("out")
			args := []string{"bench", "reproduce", name, "--connections", "2,4", "--warmup", "300ms",
				"--tokens", "40", "--out", dir, "--no-pin"}
			switch name {
			case "gateway-es256": // a CPU profile lasts the step's duration less a second
				args = append(args, "--profile", "--duration", "2s", "--timeout", "1s")
			case "aes-gcm-decrypt": // scrypt per request, slower still under the race detector
				args = append(args, "--duration", "3s", "--timeout", "2s")
			default:
				args = append(args, "--duration", "1s", "--timeout", "900ms")
			}
			out := h.must(args...)
			if !strings.Contains(out, "keygate÷naive req/s") || !strings.Contains(out, filepath.Join(dir, "report.html")) {
				t.Errorf("table:\n%s", out)
			}
			if html, err := os.ReadFile(filepath.Join(dir, "report.html")); err != nil || !strings.Contains(string(html), `data-chart="throughput"`) {
				t.Errorf("report.html: %v", err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			var doc loadgen.Document
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Schema != loadgen.DocumentSchema || len(doc.Series) != 2 || doc.Series[0].Name != "naive" || doc.Series[1].Name != "keygate" {
				t.Fatalf("document %s with %d series", doc.Schema, len(doc.Series))
			}
			for _, s := range doc.Series {
				if len(s.Steps) != 2 {
					t.Fatalf("%s: %d steps", s.Name, len(s.Steps))
				}
				for _, st := range s.Steps {
					if st.Status.S2xx == 0 || st.Status.Non2xx() != 0 || st.Errors.Total() != 0 {
						t.Errorf("%s at %d connections: %+v, errors %+v", s.Name, st.Connections, st.Status, st.Errors)
					}
					if st.Server == nil || st.Server.CPUSeconds <= 0 {
						t.Errorf("%s at %d connections: no target usage: %+v", s.Name, st.Connections, st.Server)
					} else if st.Server.AllocsPerRequest <= 0 {
						t.Errorf("%s at %d connections: no allocations from /metrics: %+v", s.Name, st.Connections, st.Server)
					}
					if len(st.Histogram) == 0 {
						t.Errorf("%s: no latency histogram", s.Name)
					}
				}
			}
			if name != "gateway-es256" {
				return
			}
			kinds := map[string]bool{}
			for _, p := range doc.Profiles {
				kinds[p.Series+" "+p.Kind] = true
				if len(p.Top) == 0 {
					t.Errorf("%s %s profile: no functions", p.Series, p.Kind)
				}
				if _, err := os.Stat(filepath.Join(dir, p.File)); err != nil {
					t.Errorf("profile file: %v", err)
				}
			}
			for _, k := range []string{"naive cpu", "naive heap", "keygate cpu", "keygate heap"} {
				if !kinds[k] {
					t.Errorf("no %s profile (have %v)", k, kinds)
				}
			}
		})
	}
}

func TestBenchReproduceUsage(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nonesuch"}, `no reproduction "nonesuch"`},
		{[]string{"gateway-es256", "--duration", "10ms"}, "--duration must be at least 1s"},
		{[]string{"gateway-es256", "--tokens", "0"}, "--tokens must be positive"},
		{[]string{"gateway-es256", "--duration", "2s", "--timeout", "2s"}, "shorter than --duration"},
		{[]string{"gateway-es256", "--target-cpus", "0-999"}, "--target-cpus"},
	} {
		r := h.run(append([]string{"bench", "reproduce"}, c.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want usage error %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

func TestParseCPUs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0", []int{0}, true}, {"0-2", []int{0, 1, 2}, true}, {"3,1", []int{3, 1}, true}, {"1,1-2", []int{1, 2}, true},
		{"4", nil, false}, {"2-1", nil, false}, {"x", nil, false}, {"-1", nil, false}, {"", nil, false},
	} {
		got, err := parseCPUs(c.in, 4)
		if (err == nil) != c.ok || (c.ok && !slicesEqual(got, c.want)) {
			t.Errorf("%q: %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
