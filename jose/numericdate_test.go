package jose

import (
	"encoding/binary"
	"strconv"
	"testing"
)

// TestEightDigits: eightDigits accepts exactly the eight-byte strings of
// ASCII digits, and reads them as strconv does; the bytes next to the
// digits ('/' and ':') and those that differ only in the high nibble are
// refused.
func TestEightDigits(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		v, ok := eightDigits(binary.LittleEndian.Uint64(b))
		w, err := strconv.ParseUint(string(b), 10, 64)
		if ok != (err == nil) || ok && v != w {
			t.Fatalf("%q: eightDigits %d %v, strconv %d %v", b, v, ok, w, err)
		}
	}
	for _, s := range []string{"00000000", "12345678", "99999999", "18000036", "1234567a", "1234/678",
		"12345:78", "0000000\xb0", "\x00\x00\x00\x00\x00\x00\x00\x00", "+1234567", "9999999\x39", "1_345678"} {
		check([]byte(s))
	}
	var b [8]byte
	x := uint64(1)
	for i := range 1 << 20 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[:], x)
		for j := range b {
			switch i % 3 {
			case 0: // all digits
				b[j] = '0' + b[j]%10
			case 1: // around the digits
				b[j] = '/' + b[j]%12
			}
		}
		check(b[:])
	}
}

// TestNumericDateFastPath: a date of up to 15 plain digits, read in one
// pass, comes out as the general path reads it, with the same bytes
// consumed, whatever follows it.
func TestNumericDateFastPath(t *testing.T) {
	for _, num := range []string{"1", "9", "10", "1800003600", "12345678", "123456789", "253402300799",
		"253402300800", "999999999999999", "1000000000000000", "12345678901234567", "0", "00", "01", "-1",
		"1.5", "1e3", "12345678.5", "12345678e1", "123456789012345.0", "1E2"} {
		for _, tail := range []string{"", ",", "}", " ", "x", "0", ".", "e", "E"} {
			in := []byte(num + tail)
			fast := scanner{b: in}
			got, gotErr := parseNumericDate(&fast)
			slow := scanner{b: in}
			want, wantErr := slowNumericDate(&slow)
			if got != want || (gotErr == nil) != (wantErr == nil) || gotErr == nil && fast.i != slow.i {
				t.Errorf("%q: %+v %v at %d, general path %+v %v at %d", in, got, gotErr, fast.i, want, wantErr, slow.i)
			}
		}
	}
}

// slowNumericDate is parseNumericDate's general path alone.
func slowNumericDate(s *scanner) (NumericDate, error) {
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return NumericDate{}, errClaimType
	}
	return generalNumericDate(s)
}
