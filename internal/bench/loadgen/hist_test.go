package loadgen

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is Histogram.Quantile's definition over the raw values.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestHistogramBuckets(t *testing.T) {
	// Every value falls in the bucket whose range holds it, buckets are
	// contiguous, and no bucket is wider than 1/64 of its low end.
	prevEnd := int64(0)
	for i := range bucket(time.Hour.Nanoseconds()) + 1 {
		low, width := bucketRange(i)
		if low != prevEnd {
			t.Fatalf("bucket %d starts at %d, want %d", i, low, prevEnd)
		}
		if low >= subCount && width*subCount > low {
			t.Fatalf("bucket %d: width %d too wide for %d", i, width, low)
		}
		for _, v := range []int64{low, low + width/2, low + width - 1} {
			if got := bucket(v); got != i {
				t.Fatalf("bucket(%d) = %d, want %d", v, got, i)
			}
		}
		prevEnd = low + width
	}
}

func TestHistogramQuantiles(t *testing.T) {
	us := time.Microsecond
	ms := time.Millisecond
	tests := []struct {
		name   string
		values []time.Duration
		want   map[float64]time.Duration // exact answers, for inputs the buckets hold exactly
	}{
		{"one", []time.Duration{42 * ns}, map[float64]time.Duration{0.5: 42 * ns, 0.999: 42 * ns, 1: 42 * ns}},
		{"small exact", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
			map[float64]time.Duration{0: 1, 0.5: 5, 0.9: 9, 0.91: 10, 0.99: 10, 1: 10}},
		{"one slow among 1000", append(slices.Repeat([]time.Duration{10 * ns}, 999), 200*ms),
			map[float64]time.Duration{0.5: 10 * ns, 0.99: 10 * ns, 0.999: 10 * ns, 1: 200 * ms}},
		{"two slow among 1000", append(slices.Repeat([]time.Duration{10 * ns}, 998), 200*ms, 300*ms),
			map[float64]time.Duration{0: 10 * ns, 0.998: 10 * ns, 1: 300 * ms}},
		{"uniform 1..10000 µs", seq(1*us, 10000*us, 1*us), nil},
		{"wide 1 µs .. 60 s", geometric(1*us, 60*time.Second, 1.01), nil},
		{"negative counts as 0", []time.Duration{-5, 0, 7}, map[float64]time.Duration{0: 0, 0.5: 0, 1: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			for _, v := range tt.values {
				h.Record(v)
			}
			sorted := slices.Clone(tt.values)
			for i := range sorted {
				sorted[i] = max(sorted[i], 0)
			}
			slices.Sort(sorted)
			if h.Count() != uint64(len(sorted)) || h.Max() != sorted[len(sorted)-1] || h.Min() != sorted[0] {
				t.Fatalf("count %d min %v max %v", h.Count(), h.Min(), h.Max())
			}
			for q, want := range tt.want {
				if got := h.Quantile(q); got != want {
					t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
				}
			}
			for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), exactQuantile(sorted, q)
				if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.01 {
					t.Errorf("Quantile(%v) = %v, exact %v (%.2f%% off)", q, got, want, 100*rel)
				}
			}
			var sum float64
			for _, v := range sorted {
				sum += float64(v)
			}
			if mean := time.Duration(math.Round(sum / float64(len(sorted)))); h.Mean() != mean {
				t.Errorf("Mean %v, want %v", h.Mean(), mean)
			}
		})
	}
}

const ns = time.Nanosecond

func seq(from, to, step time.Duration) []time.Duration {
	var s []time.Duration
	for v := from; v <= to; v += step {
		s = append(s, v)
	}
	return s
}

func geometric(from, to time.Duration, factor float64) []time.Duration {
	var s []time.Duration
	for v := float64(from); v <= float64(to); v *= factor {
		s = append(s, time.Duration(v))
	}
	return s
}

func TestHistogramMerge(t *testing.T) {
	// Merging per-connection histograms gives the histogram of all values.
	rng := rand.New(rand.NewPCG(1, 2))
	var all Histogram
	parts := make([]Histogram, 5)
	for i := range 20000 {
		v := time.Duration(rng.ExpFloat64() * float64(time.Millisecond))
		if i%1000 == 0 {
			v = time.Duration(rng.Int64N(int64(10 * time.Second)))
		}
		all.Record(v)
		parts[i%len(parts)].Record(v)
	}
	var merged Histogram
	merged.Merge(&Histogram{}) // an empty one changes nothing
	for i := range parts {
		merged.Merge(&parts[i])
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
		if merged.Quantile(q) != all.Quantile(q) {
			t.Errorf("Quantile(%v): merged %v, direct %v", q, merged.Quantile(q), all.Quantile(q))
		}
	}
	if merged.Count() != all.Count() || merged.Min() != all.Min() || merged.Max() != all.Max() ||
		merged.Mean() != all.Mean() {
		t.Errorf("merged %d/%v/%v/%v, direct %d/%v/%v/%v", merged.Count(), merged.Min(), merged.Max(), merged.Mean(),
			all.Count(), all.Min(), all.Max(), all.Mean())
	}
	if got := merged.CountAtLeast(time.Second); got != all.CountAtLeast(time.Second) || got == 0 || got > 20 {
		t.Errorf("CountAtLeast(1s) = %d", got)
	}
}

func TestHistogramEmpty(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Max() != 0 || h.Mean() != 0 || h.CountAtLeast(0) != 0 {
		t.Error("empty histogram reports values")
	}
}

func TestHistogramRecordAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	var h Histogram
	h.Record(time.Minute) // grow once
	if n := testing.AllocsPerRun(1000, func() { h.Record(123 * time.Microsecond) }); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	for i := range b.N {
		h.Record(time.Duration(i&0xfffff) * 100)
	}
}

func TestBuckets(t *testing.T) {
	var h Histogram
	for i := range 100000 {
		h.Record(time.Duration(i*37%5_000_000) + time.Microsecond)
	}
	h.Record(3 * time.Second)
	for _, nb := range []int{0, 3, 6} {
		bs := h.Buckets(nb)
		var n uint64
		for i, b := range bs {
			n += b.Count
			if b.Count == 0 {
				t.Errorf("bits %d: bucket %d is empty", nb, i)
			}
			if i > 0 && b.LE <= bs[i-1].LE {
				t.Errorf("bits %d: bucket %d's bound %d is not above %d", nb, i, b.LE, bs[i-1].LE)
			}
		}
		if n != h.Count() {
			t.Errorf("bits %d: buckets count %d, want %d", nb, n, h.Count())
		}
		if last := bs[len(bs)-1].LE; last != int64(h.Max()) {
			t.Errorf("bits %d: last bound %d, want the max %d", nb, last, h.Max())
		}
		// Each power of two holds at most 2^bits buckets.
		perOctave := map[int]int{}
		for _, b := range bs {
			if b.LE >= subCount {
				perOctave[63-bits.LeadingZeros64(uint64(b.LE))]++
			}
		}
		for o, c := range perOctave {
			if c > 1<<nb+1 {
				t.Errorf("bits %d: %d buckets in octave %d", nb, c, o)
			}
		}
	}
	var empty Histogram
	if b := empty.Buckets(3); len(b) != 0 {
		t.Errorf("empty histogram: %v", b)
	}
}
