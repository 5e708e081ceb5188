package verify

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
)

// gcFootprint is what a full cache costs the garbage collector, per cached
// entry: the heap the collector must scan, the objects it must mark, and
// the live heap; and how long a forced collection takes with the cache
// full and with it empty.
type gcFootprint struct {
	entries               int
	scanPerEntry          float64 // "/gc/scan/heap:bytes"
	objectsPerEntry       float64 // "/gc/heap/objects:objects"
	liveBytesPerEntry     float64 // "/gc/heap/live:bytes"
	gcFull, gcEmpty       time.Duration
	gcCPUFull, gcCPUEmpty time.Duration // "/cpu/classes/gc/total:cpu-seconds"
}

func (f gcFootprint) String() string {
	return fmt.Sprintf("%d entries: %.0f scannable heap bytes, %.2f heap objects, %.0f live bytes per entry; "+
		"runtime.GC %v full, %v empty (GC CPU %v, %v)",
		f.entries, f.scanPerEntry, f.objectsPerEntry, f.liveBytesPerEntry,
		f.gcFull, f.gcEmpty, f.gcCPUFull, f.gcCPUEmpty)
}

var gcMetrics = []string{
	"/gc/scan/heap:bytes",
	"/gc/heap/objects:objects",
	"/gc/heap/live:bytes",
	"/cpu/classes/gc/total:cpu-seconds",
}

type gcReading struct {
	scan, objects, live float64
	wall, cpu           time.Duration // of the median forced collection
}

// readGC forces collections and reads the heap's state after them, with
// the median wall and GC CPU time of one collection.
func readGC() gcReading {
	runtime.GC()
	samples := make([]metrics.Sample, len(gcMetrics))
	for i, name := range gcMetrics {
		samples[i].Name = name
	}
	var walls, cpus []time.Duration
	for range 5 {
		metrics.Read(samples)
		cpu0 := samples[3].Value.Float64()
		start := time.Now()
		runtime.GC()
		walls = append(walls, time.Since(start))
		metrics.Read(samples)
		cpus = append(cpus, time.Duration((samples[3].Value.Float64()-cpu0)*1e9))
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	return gcReading{
		scan:    float64(samples[0].Value.Uint64()),
		objects: float64(samples[1].Value.Uint64()),
		live:    float64(samples[2].Value.Uint64()),
		wall:    walls[len(walls)/2],
		cpu:     cpus[len(cpus)/2],
	}
}

// measureCacheGC fills a pipeline's cache with n distinct tokens, through
// Verify, shaped like the benchmarks' (audience, scope, two mapped
// headers), and measures what the filled cache costs the collector. The
// tokens are HS256, so that minting and verifying tens of thousands takes
// a moment; an entry's layout does not depend on the algorithm. No token
// is kept outside the pipeline.
func measureCacheGC(tb testing.TB, n int) gcFootprint {
	s := hmacSigner(tb, "h", strings.Repeat("s", 32))
	p := mustNew(tb, Config{
		Policies: []Policy{{
			Issuer: issA, Keys: newSource(s.Key()), Algorithms: []jose.Alg{jose.HS256},
			Audiences: []string{"https://api.example.com"}, Scopes: []string{"read:orders"},
			Headers: []HeaderMapping{{"X-User", "sub"}, {"X-Roles", "roles"}},
		}},
		Cache: CacheConfig{MaxEntries: n, MaxBytes: 1 << 40},
		Now:   func() time.Time { return t0 },
	})
	ctx := context.Background()
	empty := readGC()
	for i := range n {
		tok := mint(tb, s, distinctClaims(i))
		if _, err := p.Verify(ctx, tok); err != nil {
			tb.Fatal(err)
		}
	}
	st := p.Stats()
	if st.Entries < n*9/10 {
		tb.Fatalf("only %d of %d tokens cached", st.Entries, n)
	}
	full := readGC()
	runtime.KeepAlive(p)
	per := func(a, b float64) float64 { return (a - b) / float64(st.Entries) }
	return gcFootprint{
		entries:           st.Entries,
		scanPerEntry:      per(full.scan, empty.scan),
		objectsPerEntry:   per(full.objects, empty.objects),
		liveBytesPerEntry: per(full.live, empty.live),
		gcFull:            full.wall,
		gcEmpty:           empty.wall,
		gcCPUFull:         full.cpu,
		gcCPUEmpty:        empty.cpu,
	}
}

// TestCacheGCFootprintReport prints what a cache of KEYGATE_GC_ENTRIES
// (default 50,000) entries costs the collector:
//
//	KEYGATE_GC_REPORT=1 go test -run CacheGCFootprintReport -v ./internal/verify
func TestCacheGCFootprintReport(t *testing.T) {
	if os.Getenv("KEYGATE_GC_REPORT") == "" {
		t.Skip("set KEYGATE_GC_REPORT=1 to print the cache's GC footprint")
	}
	n := 50_000
	if v := os.Getenv("KEYGATE_GC_ENTRIES"); v != "" {
		fmt.Sscan(v, &n)
	}
	t.Log(measureCacheGC(t, n))
}
