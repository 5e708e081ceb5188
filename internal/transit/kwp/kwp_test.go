package kwp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/keygate/keygate/internal/testvectors"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 5649 §6: the two examples, wrapping a 20-octet and a 7-octet key under
// the same 192-bit key-encryption key.
func TestRFC5649Examples(t *testing.T) {
	kek := "5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8"
	for _, tc := range []struct {
		name, key, wrapped string
	}{
		{"20 octets", "c37b7e6492584340bed12207808941155068f738", "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a"},
		{"7 octets", "466f7250617369", "afbeb0f07dfbf5419200f2ccb50bb24f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, p, c := unhex(t, kek), unhex(t, tc.key), unhex(t, tc.wrapped)
			got, err := Wrap(k, p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c) {
				t.Fatalf("Wrap = %x, want %x", got, c)
			}
			back, err := Unwrap(k, c)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, p) {
				t.Fatalf("Unwrap = %x, want %x", back, p)
			}
		})
	}
}

type wycheproofKW struct {
	NumberOfTests int `json:"numberOfTests"`
	TestGroups    []struct {
		KeySize int `json:"keySize"`
		Tests   []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Flags   []string `json:"flags"`
			Key     string   `json:"key"`
			Msg     string   `json:"msg"`
			CT      string   `json:"ct"`
			Result  string   `json:"result"`
		} `json:"tests"`
	} `json:"testGroups"`
}

// TestWycheproof runs Wycheproof's aes_kwp_test.json (C2SP/wycheproof at
// dac1dd4729fd1f8dd9e1e9f3dce51d783da6c166, from internal/testvectors).
// Valid cases must wrap to ct and unwrap back to msg; invalid ones (modified
// padding) must not unwrap.
func TestWycheproof(t *testing.T) {
	var f wycheproofKW
	if err := json.Unmarshal(testvectors.Read(t, "wycheproof/aes_kwp_test.json"), &f); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range f.TestGroups {
		for _, tc := range g.Tests {
			n++
			k, msg, ct := unhex(t, tc.Key), unhex(t, tc.Msg), unhex(t, tc.CT)
			got, err := Unwrap(k, ct)
			switch tc.Result {
			case "valid":
				if err != nil {
					t.Errorf("tcId %d (%s): Unwrap: %v", tc.TcID, tc.Comment, err)
					continue
				}
				if !bytes.Equal(got, msg) {
					t.Errorf("tcId %d: Unwrap = %x, want %x", tc.TcID, got, msg)
				}
				w, err := Wrap(k, msg)
				if err != nil || !bytes.Equal(w, ct) {
					t.Errorf("tcId %d: Wrap = %x, %v, want %x", tc.TcID, w, err, ct)
				}
			case "invalid":
				if err == nil {
					t.Errorf("tcId %d (%s %v): Unwrap accepted an invalid ciphertext", tc.TcID, tc.Comment, tc.Flags)
				} else if !errors.Is(err, ErrUnwrap) {
					t.Errorf("tcId %d: error %v, want ErrUnwrap", tc.TcID, err)
				}
			default:
				t.Errorf("tcId %d: unexpected result %q", tc.TcID, tc.Result)
			}
		}
	}
	if n != f.NumberOfTests || n == 0 {
		t.Fatalf("ran %d tests, file says %d", n, f.NumberOfTests)
	}
}

func TestBadInput(t *testing.T) {
	kek := bytes.Repeat([]byte{7}, 32)
	good, err := Wrap(kek, []byte("0123456789abcdefXYZ"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kek  []byte
		ct   []byte
		want error
	}{
		{"empty", kek, nil, ErrUnwrap},
		{"one block", kek, good[:8], ErrUnwrap},
		{"not a multiple of 8", kek, good[:len(good)-1], ErrUnwrap},
		{"truncated by a block", kek, good[:len(good)-8], ErrUnwrap},
		{"extended by a block", kek, append(bytes.Clone(good), make([]byte, 8)...), ErrUnwrap},
		{"wrong kek", bytes.Repeat([]byte{8}, 32), good, ErrUnwrap},
		{"kek of 15 bytes", kek[:15], good, ErrKeySize},
		{"too long", kek, make([]byte, WrappedLen(MaxPlaintext)+8), ErrUnwrap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Unwrap(tc.kek, tc.ct); !errors.Is(err, tc.want) {
				t.Fatalf("Unwrap: %v, want %v", err, tc.want)
			}
		})
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x80
		if _, err := Unwrap(kek, bad); !errors.Is(err, ErrUnwrap) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	if _, err := Wrap(kek, nil); !errors.Is(err, ErrPlaintextSize) {
		t.Fatalf("Wrap(empty): %v", err)
	}
	if _, err := Wrap(kek, make([]byte, MaxPlaintext+1)); !errors.Is(err, ErrPlaintextSize) {
		t.Fatalf("Wrap(too long): %v", err)
	}
}

func TestRoundTripLengths(t *testing.T) {
	for _, kl := range []int{16, 24, 32} {
		kek := bytes.Repeat([]byte{byte(kl)}, kl)
		for n := 1; n <= 70; n++ {
			p := bytes.Repeat([]byte{byte(n)}, n)
			c, err := Wrap(kek, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(c) != WrappedLen(n) {
				t.Fatalf("len %d: wrapped %d bytes, want %d", n, len(c), WrappedLen(n))
			}
			back, err := Unwrap(kek, c)
			if err != nil || !bytes.Equal(back, p) {
				t.Fatalf("kek %d len %d: %x, %v", kl, n, back, err)
			}
		}
	}
}

// FuzzUnwrap feeds arbitrary ciphertexts to Unwrap under a fixed key: it never
// panics, anything it accepts wraps back to exactly the same bytes (KWP is
// deterministic, so acceptance means the ciphertext is the one Wrap makes),
// and a wrapped plaintext always unwraps.
func FuzzUnwrap(f *testing.F) {
	kek := unhex(f, "5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8")
	f.Add(unhex(f, "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a"), []byte("k"))
	f.Add(unhex(f, "afbeb0f07dfbf5419200f2ccb50bb24f"), []byte("0123456789abcdef0123456789abcdef"))
	f.Add([]byte{}, []byte{})
	f.Add(make([]byte, 24), make([]byte, 9))
	f.Fuzz(func(t *testing.T, ct, plain []byte) {
		if p, err := Unwrap(kek, ct); err == nil {
			again, err := Wrap(kek, p)
			if err != nil || !bytes.Equal(again, ct) {
				t.Fatalf("accepted %x as %x, which wraps to %x, %v", ct, p, again, err)
			}
		}
		if len(plain) == 0 || len(plain) > MaxPlaintext {
			return
		}
		c, err := Wrap(kek, plain)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unwrap(kek, c)
		if err != nil || !bytes.Equal(back, plain) {
			t.Fatalf("round trip of %x: %x, %v", plain, back, err)
		}
	})
}
