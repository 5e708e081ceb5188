//go:build !race

package verify

import "testing"

// TestCacheGCFootprint pins what a full cache costs the garbage collector:
// an entry is one allocation it marks and does not scan, referred to from
// one clock slot, so per entry the scannable heap grows by that slot (8
// bytes, with the clock slice's spare capacity at most 16) and the heap by
// one object. The bounds leave room for noise; the pointer-rich entries
// this replaced measured 1,163 scannable bytes and 4.0 objects an entry.
func TestCacheGCFootprint(t *testing.T) {
	f := measureCacheGC(t, 20_000)
	t.Log(f)
	if f.scanPerEntry > 48 {
		t.Errorf("%.0f scannable heap bytes per cached entry, want at most 48", f.scanPerEntry)
	}
	if f.objectsPerEntry > 1.2 {
		t.Errorf("%.2f heap objects per cached entry, want at most 1.2", f.objectsPerEntry)
	}
}
