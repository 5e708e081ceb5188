package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// subBits sets the histogram's precision: each power of two above
// subCount nanoseconds is split into subCount equal buckets, so a bucket
// is at most 1/64 of its values wide and its midpoint is within 0.8% of
// any value in it. Values below subCount ns are counted exactly.
const (
	subBits  = 6
	subCount = 1 << subBits
)

// Histogram counts latencies in log-linear buckets (HDR-style): exact
// below 64 ns, then 64 buckets per power of two, which is better than 1%
// precision from 1 µs to hours. The zero value is empty and ready to use.
// It is not safe for concurrent use: each connection records into its own
// and the run merges them at the end (Merge), so nothing is shared or
// locked while requests are measured. Its bucket array grows to the
// largest value recorded (about 7 KiB for latencies up to 10 ms, 16 KiB
// up to a minute).
type Histogram struct {
	counts []uint64
	n      uint64
	sum    float64 // nanoseconds, for the mean
	min    int64
	max    int64
}

// bucket returns the index of the bucket that counts v nanoseconds (v >= 0).
func bucket(v int64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits - 1 // v>>e is in [subCount, 2*subCount)
	return subCount + e*subCount + int(v>>e) - subCount
}

// bucketRange returns the lowest value bucket i counts and its width.
func bucketRange(i int) (low, width int64) {
	if i < subCount {
		return int64(i), 1
	}
	e := (i - subCount) / subCount
	sub := (i - subCount) % subCount
	return int64(subCount+sub) << e, 1 << e
}

// Record counts one latency; a negative one counts as 0.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	i := bucket(v)
	if i >= len(h.counts) {
		h.grow(i)
	}
	h.counts[i]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

func (h *Histogram) grow(i int) {
	n := max(i+1, 2*len(h.counts), 16*subCount) // 16 powers of two: up to 4 ms at once
	c := make([]uint64, n)
	copy(c, h.counts)
	h.counts = c
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if len(o.counts) > len(h.counts) {
		h.grow(len(o.counts) - 1)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count returns the number of latencies recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest latency recorded, exactly (0 when empty).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Min returns the smallest latency recorded, exactly (0 when empty).
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Mean returns the mean latency (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.n)))
}

// Quantile returns the latency at quantile q in [0, 1]: the smallest
// recorded value v such that at least q of all values are <= v (the
// nearest-rank definition), approximated by the midpoint of its bucket and
// kept within [Min, Max]; the smallest and largest ranks are Min and Max
// exactly. It is 0 when the histogram is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	switch {
	case rank >= h.n:
		return time.Duration(h.max)
	case rank <= 1:
		return time.Duration(h.min)
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			low, width := bucketRange(i)
			v := low + (width-1)/2
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max) // not reached: the counts add up to n
}

// CountAtLeast returns how many recorded latencies are at least d, to the
// histogram's precision (every value in d's bucket counts).
func (h *Histogram) CountAtLeast(d time.Duration) uint64 {
	var n uint64
	for i := bucket(max(int64(d), 0)); i < len(h.counts); i++ {
		n += h.counts[i]
	}
	return n
}

// Buckets returns the non-empty buckets of h merged to 2^bits buckets per
// power of two (bits at most 6, the recording precision), lowest first,
// each with its inclusive upper bound.
func (h *Histogram) Buckets(bits int) []Bucket {
	bits = min(max(bits, 0), subBits)
	shift := subBits - bits
	var out []Bucket
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		low, width := bucketRange(i)
		le := low + width - 1
		if i >= subCount && shift > 0 {
			// The coarse bucket holding i ends where its group of 2^shift fine buckets ends.
			last := subCount + ((i-subCount)>>shift+1)<<shift - 1
			l, w := bucketRange(last)
			le = l + w - 1
		}
		le = min(le, h.max)
		if n := len(out); n > 0 && out[n-1].LE == le {
			out[n-1].Count += c
			continue
		}
		out = append(out, Bucket{LE: le, Count: c})
	}
	return out
}
