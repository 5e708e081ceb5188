package runner

import (
	"bytes"
	"crypto/sha256"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

//go:noinline
func burnSHA256(d time.Duration) {
	var sum [32]byte
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 1000 {
			sum = sha256.Sum256(sum[:])
		}
	}
}

func TestTopFunctionsCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a second of CPU")
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skipf("CPU profiling unavailable: %v", err)
	}
	burnSHA256(time.Second)
	pprof.StopCPUProfile()
	top, err := TopFunctions(buf.Bytes(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var flatSHA, cumBurn float64
	for _, f := range top {
		if strings.Contains(f.Function, "sha256") {
			flatSHA += f.Flat
		}
		if strings.HasSuffix(f.Function, "burnSHA256") {
			cumBurn = f.Cum
		}
		if f.Flat > f.Cum+1e-9 || f.Cum > 100+1e-9 {
			t.Errorf("%s: flat %.1f%%, cum %.1f%%", f.Function, f.Flat, f.Cum)
		}
	}
	// Only burnSHA256 calls sha256 here: every sample in a sha256 function
	// is also under burnSHA256. How much of the second it shows varies: a
	// loaded machine adds runtime._System, and under the race detector
	// the samples taken in its C runtime (racecall, __tsan_*) have no Go
	// caller, so burnSHA256's share fell to 24% in one CI run.
	if flatSHA <= 5 || cumBurn+1e-9 < flatSHA || cumBurn < 10 {
		t.Errorf("sha256 functions flat %.1f%%, burnSHA256 cum %.1f%%: %+v", flatSHA, cumBurn, top)
	}
	for i := 1; i < len(top); i++ {
		if top[i].Flat > top[i-1].Flat {
			t.Errorf("not sorted by flat share: %+v", top)
		}
	}
}

var sink [][]byte

func TestTopFunctionsHeap(t *testing.T) {
	for range 2000 {
		sink = append(sink, make([]byte, 4096))
	}
	runtime.GC() // the profile shows allocations as of the last completed GC
	var buf bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
		t.Fatal(err)
	}
	sink = nil
	top, err := TopFunctions(buf.Bytes(), 50)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range top {
		if strings.HasSuffix(f.Function, "TestTopFunctionsHeap") && f.Flat > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("the allocating test is not among the heap profile's functions: %+v", top)
	}
}

func TestTopFunctionsRefuses(t *testing.T) {
	for _, b := range [][]byte{{0x1f, 0x8b, 0, 0}, {0x0a, 0xff}, {0x32, 0x05, 0x0a}} {
		if _, err := TopFunctions(b, 5); err == nil {
			t.Errorf("%x: no error", b)
		}
	}
}

func FuzzTopFunctions(f *testing.F) {
	var buf bytes.Buffer
	pprof.Lookup("allocs").WriteTo(&buf, 0) //nolint:errcheck // a seed only
	f.Add(buf.Bytes())
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		top, err := TopFunctions(b, 10)
		if err != nil {
			return
		}
		for _, fn := range top {
			if fn.Flat < -1e-9 && fn.Cum >= 0 {
				continue // negative sample values are the profile's own
			}
		}
	})
}

func TestParseStat(t *testing.T) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc")
	}
	burnSHA256(200 * time.Millisecond)
	cpu, rss, err := parseStat(b)
	if err != nil || cpu < 0 || rss <= 0 {
		t.Fatalf("cpu %v, rss %d, %v", cpu, rss, err)
	}
	// A command name with spaces and parentheses.
	line := []byte("123 (a (b) c) S 1 1 1 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 1 0 100 1000000 300 18446744073709551615")
	cpu, rss, err = parseStat(line)
	if err != nil || cpu != 4 || rss != 300*4096 {
		t.Errorf("cpu %v rss %d err %v, want 4 s and 300 pages", cpu, rss, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S 1 1 1 0 -1 4194560 100 0 0 0 zz 150 0 0 20 0 1 0 100 1 3"} {
		if _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
go_memstats_mallocs_total 1.5e+06
go_memstats_alloc_bytes_total 9.1e+07
process_resident_memory_bytes 2.5e+07
keygate_decisions_total{front="auth",reason="ok"} 17
`
	s, err := parseMetrics(strings.NewReader(text))
	if err != nil || s.CPU != 12.5 || s.Mallocs != 1.5e6 || s.AllocBytes != 9.1e7 || s.RSS != 25e6 {
		t.Errorf("%+v, %v", s, err)
	}
	if _, err := parseMetrics(strings.NewReader("up 1\n")); err == nil {
		t.Error("a page without the process metrics: no error")
	}
	if _, err := parseMetrics(strings.NewReader("process_cpu_seconds_total \n")); err == nil {
		t.Error("a series with no value: no error")
	}
	if _, err := parseMetrics(strings.NewReader("process_cpu_seconds_total x\n")); err == nil {
		t.Error("a bad value: no error")
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add("process_cpu_seconds_total 1\n")
	f.Add("go_memstats_mallocs_total 1e3 1700000000\n")
	f.Fuzz(func(t *testing.T, s string) {
		parseMetrics(strings.NewReader(s)) //nolint:errcheck // only must not panic
	})
}
