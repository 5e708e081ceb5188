package jose

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestDecodeB64 checks the request-path decoder against encoding/base64's
// strict raw URL decoder on every length up to 64 and on hostile inputs.
func TestDecodeB64(t *testing.T) {
	var data [48]byte
	for i := range data {
		data[i] = byte(i*37 + 11)
	}
	for n := 0; n <= len(data); n++ {
		enc := base64.RawURLEncoding.EncodeToString(data[:n])
		dst := make([]byte, decodedLen(len(enc)))
		if !decodeB64(dst, enc) || string(dst) != string(data[:n]) {
			t.Errorf("length %d: %q did not round-trip", n, enc)
		}
	}
	for _, bad := range []string{"A", "AB", "ABC", "AAA=", "AA==", "A+AA", "A/AA", "AA AA", "AA\nA", "AA\rA", "AAA.", "AA\x00A", "AAé"} {
		l := decodedLen(len(bad))
		ok := l >= 0 && decodeB64(make([]byte, l), bad)
		_, stdErr := b64.DecodeString(bad)
		if ok {
			t.Errorf("%q: accepted (encoding/base64 strict says %v)", bad, stdErr)
		}
	}
}

// FuzzDecodeB64 compares decodeB64 with encoding/base64's strict decoder,
// which differs only in skipping CR and LF.
func FuzzDecodeB64(f *testing.F) {
	for _, s := range []string{"", "AB", "AA", "eyJhbGciOiJIUzI1NiJ9", "____", "A-_z", "AA\nAA", "AAA="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := decodedLen(len(s))
		var got []byte
		ok := false
		if l >= 0 {
			got = make([]byte, l)
			ok = decodeB64(got, s)
		}
		want, err := b64.DecodeString(s)
		wantOK := err == nil && !strings.ContainsAny(s, "\r\n")
		if ok != wantOK {
			t.Fatalf("%q: decodeB64 ok=%v, encoding/base64 err=%v", s, ok, err)
		}
		if ok && string(got) != string(want) {
			t.Fatalf("%q: decoded %x, want %x", s, got, want)
		}
	})
}
