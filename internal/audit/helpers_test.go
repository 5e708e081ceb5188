package audit

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"net/netip"
	"testing"
)

func testSigner(t testing.TB, b byte) *SigningKey {
	t.Helper()
	k, err := NewSigningKey(bytes.Repeat([]byte{b}, SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testHMACKey(t testing.TB) *HMACKey {
	t.Helper()
	k, err := NewHMACKey(bytes.Repeat([]byte{0x5a}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testRecord is the i-th record of a test.
func testRecord(i int) Record {
	return Record{
		RequestID: fmt.Sprintf("req-%d", i),
		Tenant:    "acme",
		Principal: Principal{Kind: PrincipalClient, ID: "kgc_orders"},
		Operation: "transit.encrypt",
		Key:       KeyRef{Name: "orders", Version: 3},
		Result:    ResultOK,
		Status:    200,
		Remote:    netip.MustParseAddr("10.0.0.7"),
	}
}

// verifyBytes verifies files given as contents.
func verifyBytes(opts VerifyOptions, files ...[]byte) (*Summary, error) {
	v, err := NewVerifier(opts)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		if err := v.File(fmt.Sprintf("f%d", i+1), bytes.NewReader(f)); err != nil {
			return v.Summary(), err
		}
	}
	return v.Finish()
}

func keysOf(ks ...*SigningKey) []ed25519.PublicKey {
	var out []ed25519.PublicKey
	for _, k := range ks {
		out = append(out, k.Public())
	}
	return out
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return append(out, b)
		}
		out, b = append(out, b[:i+1:i+1]), b[i+1:]
	}
	return out
}

func parse(t *testing.T, line []byte) *Entry {
	t.Helper()
	e, err := ParseLine(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		t.Fatalf("ParseLine(%s): %v", line, err)
	}
	return e
}
