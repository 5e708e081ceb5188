package transit

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseCiphertext(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		version int
		data    []byte
		reason  Reason
	}{
		{"one byte", "vault:v1:AA==", 1, []byte{0}, 0},
		{"large version", "vault:v2147483647:AAEC", MaxVersion, []byte{0, 1, 2}, 0},
		{"version 10", "vault:v10:AAEC", 10, []byte{0, 1, 2}, 0},
		{"no prefix", "vault:1:AA==", 0, nil, ReasonMalformed},
		{"empty", "", 0, nil, ReasonMalformed},
		{"other prefix", "vaulx:v1:AA==", 0, nil, ReasonMalformed},
		{"upper case", "VAULT:v1:AA==", 0, nil, ReasonMalformed},
		{"v0", "vault:v0:AA==", 0, nil, ReasonMalformed},
		{"v-1", "vault:v-1:AA==", 0, nil, ReasonMalformed},
		{"v+1", "vault:v+1:AA==", 0, nil, ReasonMalformed},
		{"leading zero", "vault:v01:AA==", 0, nil, ReasonMalformed},
		{"over MaxVersion", "vault:v2147483648:AA==", 0, nil, ReasonMalformed},
		{"huge version", "vault:v99999999999999999999999:AA==", 0, nil, ReasonMalformed},
		{"no version", "vault:v:AA==", 0, nil, ReasonMalformed},
		{"no separator", "vault:v1", 0, nil, ReasonMalformed},
		{"space", "vault:v1 :AA==", 0, nil, ReasonMalformed},
		{"empty payload", "vault:v1:", 0, nil, ReasonMalformed},
		{"not base64", "vault:v1:!!!!", 0, nil, ReasonMalformed},
		{"url alphabet", "vault:v1:-_-_", 0, nil, ReasonMalformed},
		{"missing padding", "vault:v1:AA", 0, nil, ReasonMalformed},
		{"line break", "vault:v1:AAEC\nAAEC", 0, nil, ReasonMalformed},
		{"carriage return", "vault:v1:AAEC\r", 0, nil, ReasonMalformed},
		{"non-zero padding bits", "vault:v1:AB==", 0, nil, ReasonMalformed},
		{"trailing colon data", "vault:v1:AA==:x", 0, nil, ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCiphertext(tc.in)
			if tc.reason != 0 {
				wantReason(t, err, tc.reason)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != tc.version || !bytes.Equal(c.Data, tc.data) {
				t.Fatalf("got v%d %x", c.Version, c.Data)
			}
			if c.String() != tc.in {
				t.Fatalf("round trip %q", c.String())
			}
		})
	}
}

func TestPrefixLen(t *testing.T) {
	for _, v := range []int{1, 9, 10, 99, 100, 12345, MaxVersion} {
		if got, want := prefixLen(v), len(appendPrefix(nil, v)); got != want {
			t.Fatalf("prefixLen(%d) = %d, want %d", v, got, want)
		}
	}
}

// FuzzParseCiphertext: ParseCiphertext never panics, what it accepts it
// writes back byte for byte, and the allocation-free splitter agrees with
// it on []byte and string input.
func FuzzParseCiphertext(f *testing.F) {
	for _, s := range []string{
		"vault:v1:AA==", "vault:v0:AA==", "vault:v-1:AA==", "vault:v2147483647:AAEC",
		"vault:v2147483648:AA==", "vault:v1:", "vault:v1:AAEC\n", "vault:v01:AA==", "vault:v1:AB==",
	} {
		f.Add(s)
	}
	// Real texts: ciphertexts of each AEAD type, a derived one, an ECDSA
	// signature in both marshalings and an HMAC.
	e := testEngine(f)
	for _, typ := range []KeyType{AES128GCM96, AES256GCM96, ChaCha20Poly1305, XChaCha20Poly1305} {
		k := newKey(f, e, typ, CreateOptions{})
		for _, pt := range []string{"", "x", "hello, world"} {
			f.Add(must[Result](f)(e.Encrypt(ctx, k, []byte(pt), EncryptOptions{})).Text)
		}
		f.Add(must[Result](f)(e.HMAC(k, []byte("m"), HMACOptions{})).Text)
	}
	dk := newKey(f, e, AES256GCM96, CreateOptions{Derived: true, ConvergentEncryption: true})
	f.Add(must[Result](f)(e.Encrypt(ctx, dk, []byte("p"), EncryptOptions{Context: []byte("c")})).Text)
	ek := newKey(f, e, ECDSAP256, CreateOptions{})
	f.Add(must[SignResult](f)(e.Sign(ctx, ek, []byte("m"), SignOptions{})).Signature)
	f.Add(must[SignResult](f)(e.Sign(ctx, ek, []byte("m"), SignOptions{Marshaling: MarshalJWS})).Signature)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCiphertext(s)
		vs, ps, errS := splitText(s)
		vb, pb, errB := splitText([]byte(s))
		if (errS == nil) != (errB == nil) || vs != vb || ps != string(pb) {
			t.Fatalf("splitText disagrees on string and []byte: %v %v", errS, errB)
		}
		if err != nil {
			if ReasonOf(err) != ReasonMalformed {
				t.Fatalf("error %v is not malformed", err)
			}
			return
		}
		if errS != nil || vs != c.Version {
			t.Fatalf("ParseCiphertext accepted what splitText refuses: %v", errS)
		}
		if got := c.String(); got != s {
			t.Fatalf("round trip: %q became %q", s, got)
		}
		if c.Version < 1 || c.Version > MaxVersion || len(c.Data) == 0 || !strings.HasPrefix(s, "vault:v") {
			t.Fatalf("accepted out of range: %+v", c)
		}
	})
}
