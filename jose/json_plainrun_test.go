package jose

import "testing"

// TestPlainRunEveryByte: plainRun stops exactly at the first byte that is
// not plain string content, for every pair of byte values at every position
// of a word and across the boundary between two words, as a byte-by-byte
// scan with plainByte does.
func TestPlainRunEveryByte(t *testing.T) {
	want := func(b []byte) int {
		n := 0
		for len(b)-n >= 8 {
			for i := range 8 {
				if !plainByte[b[n+i]] {
					return n + i
				}
			}
			n += 8
		}
		return n
	}
	buf := make([]byte, 24)
	for p := range 16 {
		for c := range 256 {
			for d := range 256 {
				for i := range buf {
					buf[i] = 'a'
				}
				buf[p], buf[p+1] = byte(c), byte(d)
				if got, w := plainRun(buf), want(buf); got != w {
					t.Fatalf("plainRun with %#x, %#x at %d: %d, want %d", c, d, p, got, w)
				}
			}
		}
	}
}
