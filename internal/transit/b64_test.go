package transit

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

func TestB64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strict := base64.StdEncoding.Strict()
	for n := range 300 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		want := base64.StdEncoding.EncodeToString(src)
		got := appendB64([]byte("pre"), src)
		if string(got) != "pre"+want {
			t.Fatalf("encode %d bytes: %q, want %q", n, got, want)
		}
		back, ok := appendUnB64([]byte("pre"), want)
		if !ok || !bytes.Equal(back, append([]byte("pre"), src...)) {
			t.Fatalf("decode %d bytes", n)
		}
		// Corrupt one character at a time; the verdict must match the
		// standard library's strict decoder.
		for k := 0; k < 20 && len(want) > 0; k++ {
			b := []byte(want)
			b[r.IntN(len(b))] = byte(r.Uint32())
			if bytes.ContainsAny(b, "\r\n") {
				continue
			}
			_, err := strict.DecodeString(string(b))
			out, ok := appendUnB64(nil, b)
			if (err == nil) != ok {
				t.Fatalf("%q: strict says %v, appendUnB64 %v", b, err, ok)
			}
			if ok {
				std, _ := strict.DecodeString(string(b))
				if !bytes.Equal(out, std) {
					t.Fatalf("%q decodes differently", b)
				}
			}
		}
	}
	for _, s := range []string{"A", "AA", "AAA", "A===", "AA=A", "=AAA", "AB==", "AAB=", "AA==AA==", "\nAA="} {
		if _, ok := appendUnB64(nil, s); ok {
			t.Errorf("%q accepted", s)
		}
	}
}

// FuzzBase64: the decoder agrees with encoding/base64's strict standard
// decoder on every input without line breaks (which the standard library
// skips and transit refuses), and the encoder with its encoder.
func FuzzBase64(f *testing.F) {
	for _, s := range []string{"", "AA==", "AAA=", "AAAA", "AB==", "AAB=", "A===", "Zm9vYmFy", "Zm9vYmE=", "+/+/", "-_-_"} {
		f.Add([]byte(s))
	}
	strict := base64.StdEncoding.Strict()
	f.Fuzz(func(t *testing.T, b []byte) {
		if enc := appendB64(nil, b); string(enc) != base64.StdEncoding.EncodeToString(b) {
			t.Fatalf("encode %x: %q", b, enc)
		}
		if bytes.ContainsAny(b, "\r\n") {
			if _, ok := appendUnB64(nil, b); ok {
				t.Fatal("line break accepted")
			}
			return
		}
		want, err := strict.DecodeString(string(b))
		got, ok := appendUnB64(nil, b)
		if (err == nil) != ok || ok && !bytes.Equal(got, want) {
			t.Fatalf("%q: std %x %v, ours %x %v", b, want, err, got, ok)
		}
	})
}
