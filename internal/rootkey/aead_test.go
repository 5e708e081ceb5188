package rootkey

// AES-256-GCM conformance of the package's one AEAD construction (newGCM,
// through the single-layer helpers gcmSeal/gcmOpen) against Project
// Wycheproof's aes_gcm_test.json, from internal/testvectors.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/keygate/keygate/internal/testvectors"
)

type aeadVectors struct {
	Algorithm     string `json:"algorithm"`
	NumberOfTests int    `json:"numberOfTests"`
	TestGroups    []struct {
		KeySize int `json:"keySize"`
		IVSize  int `json:"ivSize"`
		TagSize int `json:"tagSize"`
		Tests   []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Flags   []string `json:"flags"`
			Key     string   `json:"key"`
			IV      string   `json:"iv"`
			AAD     string   `json:"aad"`
			Msg     string   `json:"msg"`
			CT      string   `json:"ct"`
			Tag     string   `json:"tag"`
			Result  string   `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

func TestWycheproofAESGCM(t *testing.T) {
	const path = "wycheproof/aes_gcm_test.json"
	var v aeadVectors
	if err := json.Unmarshal(testvectors.Read(t, path), &v); err != nil {
		t.Fatal(err)
	}
	if v.Algorithm != "AES-GCM" {
		t.Fatalf("%s: algorithm %q", path, v.Algorithm)
	}
	hx := func(id int, s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatalf("tcId %d: bad hex: %v", id, err)
		}
		return b
	}
	var valid, invalid, refused, total int
	for _, g := range v.TestGroups {
		for _, tc := range g.Tests {
			total++
			key, iv, aad := hx(tc.TcID, tc.Key), hx(tc.TcID, tc.IV), hx(tc.TcID, tc.AAD)
			msg, ct, tag := hx(tc.TcID, tc.Msg), hx(tc.TcID, tc.CT), hx(tc.TcID, tc.Tag)
			sealed := append(append([]byte{}, ct...), tag...)
			if g.KeySize != 256 || g.IVSize != 96 || g.TagSize != 128 {
				// Other sizes are not ours to use: the helpers must refuse
				// them outright rather than pick another variant.
				if _, err := gcmOpen(key, iv, sealed, aad); err == nil {
					t.Errorf("tcId %d: key %d bits, IV %d bits, tag %d bits accepted", tc.TcID, g.KeySize, g.IVSize, g.TagSize)
				}
				refused++
				continue
			}
			pt, err := gcmOpen(key, iv, sealed, aad)
			switch tc.Result {
			case "valid":
				valid++
				if err != nil {
					t.Errorf("tcId %d (%s %v): open: %v", tc.TcID, tc.Comment, tc.Flags, err)
				} else if !bytes.Equal(pt, msg) {
					t.Errorf("tcId %d: open gave %x, want %x", tc.TcID, pt, msg)
				}
				got, err := gcmSeal(key, iv, msg, aad)
				if err != nil {
					t.Errorf("tcId %d: seal: %v", tc.TcID, err)
				} else if !bytes.Equal(got, sealed) {
					t.Errorf("tcId %d: seal gave %x, want %x", tc.TcID, got, sealed)
				}
			case "invalid":
				invalid++
				if err == nil {
					t.Errorf("tcId %d (%s %v): invalid case decrypted to %x", tc.TcID, tc.Comment, tc.Flags, pt)
				} else if !errors.Is(err, ErrDecrypt) {
					t.Errorf("tcId %d: error %v, want ErrDecrypt", tc.TcID, err)
				}
			default:
				t.Errorf("tcId %d: result %q not handled", tc.TcID, tc.Result)
			}
		}
	}
	if total != v.NumberOfTests {
		t.Errorf("read %d cases, the file declares %d", total, v.NumberOfTests)
	}
	if valid == 0 || invalid == 0 {
		t.Errorf("ran %d valid and %d invalid AES-256/96-bit cases; want some of each", valid, invalid)
	}
	t.Logf("AES-256-GCM, 96-bit IV: %d valid, %d invalid cases; %d cases of other sizes refused", valid, invalid, refused)
}

// TestGCMHelpersRefuseOtherSizes: no AES-128/192 and no nonces other than
// 96 bits, ever.
func TestGCMHelpersRefuseOtherSizes(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := gcmSeal(make([]byte, n), make([]byte, 12), nil, nil); !errors.Is(err, ErrKeyLength) {
			t.Errorf("key of %d bytes: %v, want ErrKeyLength", n, err)
		}
	}
	for _, n := range []int{0, 8, 11, 13, 16} {
		if _, err := gcmSeal(make([]byte, 32), make([]byte, n), nil, nil); err == nil {
			t.Errorf("nonce of %d bytes accepted by seal", n)
		}
		if _, err := gcmOpen(make([]byte, 32), make([]byte, n), make([]byte, 16), nil); err == nil {
			t.Errorf("nonce of %d bytes accepted by open", n)
		}
	}
	if _, err := gcmOpen(make([]byte, 32), make([]byte, 12), make([]byte, 15), nil); !errors.Is(err, ErrDecrypt) {
		t.Errorf("15-byte ciphertext: %v, want ErrDecrypt", err)
	}
}
