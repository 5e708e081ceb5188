package transit

import (
	"strconv"
	"testing"
)

// BenchmarkDeriveKey is the cost of a derived-key cache miss: HKDF, the
// key's construction and the self-wiping buffer it lives in.
func BenchmarkDeriveKey(b *testing.B) {
	e := New(Options{})
	for _, tc := range []struct {
		name string
		k    *Key
	}{
		{"ed25519", newKey(b, e, Ed25519, CreateOptions{Derived: true})},
		{"aes256-gcm96-convergent", newKey(b, e, AES256GCM96, CreateOptions{Derived: true, ConvergentEncryption: true})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			v, conv := tc.k.latest(), tc.k.cfg.ConvergentEncryption
			ctx := []byte("context-0")
			for i := 0; b.Loop(); i++ {
				ctx = strconv.AppendInt(ctx[:len("context-")], int64(i), 10)
				if _, err := deriveKey(v, ctx, conv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
