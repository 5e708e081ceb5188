package jose

import (
	"runtime"
	"testing"
)

var (
	sinkToken *Token
	sinkBuf   []byte
)

// allocBytes returns the bytes f allocates per call, as the allocator counts
// them (whole size classes): the least of three measurements, so that what
// the runtime allocates for itself meanwhile does not count.
func allocBytes(f func()) uint64 {
	const runs = 64
	least := ^uint64(0)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		least = min(least, (after.TotalAlloc-before.TotalAlloc)/runs)
	}
	return least
}

// TestNewTokenOneObject: a Token allocated with its buffer never takes more
// memory than the Token and its buffer allocated apart would, for buffers of
// any size; for the benchmark token's (344 bytes of payload, 32 of
// signature), one of 369 to 384 bytes, it is one object.
func TestNewTokenOneObject(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race (.ci/run runs them)")
	}
	for n := 0; n <= 9000; n += 1 + n/256 {
		objects := testing.AllocsPerRun(10, func() { sinkToken, sinkBuf = newToken(n) })
		tok, buf := newToken(n)
		if len(buf) != n || cap(buf) != n || tok.raw != "" || tok.Claims.members != nil {
			t.Fatalf("newToken(%d): buffer of length %d, capacity %d, or a Token that is not zero", n, len(buf), cap(buf))
		}
		for i, b := range buf {
			if b != 0 {
				t.Fatalf("newToken(%d): buffer byte %d is %d", n, i, b)
			}
		}
		together := allocBytes(func() { sinkToken, sinkBuf = newToken(n) })
		apart := allocBytes(func() { sinkToken, sinkBuf = new(Token), make([]byte, n) })
		if want1 := n > 368 && n <= 384 || n > 480 && n <= 504; want1 && objects != 1 {
			t.Errorf("newToken(%d): %.0f objects, want 1", n, objects)
		}
		if together > apart {
			t.Errorf("newToken(%d): %d bytes together, %d apart", n, together, apart)
		}
	}
}

// TestAllocSizeTables: the lookup tables give the smallest size class that
// holds every size up to 8 KiB, and nothing for zero bytes.
func TestAllocSizeTables(t *testing.T) {
	if allocSize(0) != 0 {
		t.Errorf("allocSize(0) = %d, want 0", allocSize(0))
	}
	for n := 1; n <= 8192; n++ {
		if got, want := allocSize(n), searchSizeClass(n); got != want {
			t.Fatalf("allocSize(%d) = %d, want %d", n, got, want)
		}
	}
}
