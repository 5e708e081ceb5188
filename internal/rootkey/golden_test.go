package rootkey

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/v1.json")

// golden is a format-version-1 ciphertext made from a fixed root key and a
// fixed random stream (ChaCha8 seeded with Seed). Ciphertexts in stores
// outlive builds: a change to the format must fail this test, and must come
// with a new version byte rather than a new golden file.
type golden struct {
	Key        hexBytes `json:"root_key"`
	Seed       hexBytes `json:"chacha8_seed"`
	AAD        hexBytes `json:"aad"`
	Plaintext  hexBytes `json:"plaintext"`
	Ciphertext hexBytes `json:"ciphertext"`
}

// hexBytes reads and writes as a hex string, so the file can be checked by
// eye against the layout in format.go.
type hexBytes []byte

func (h hexBytes) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h)), nil }

func (h *hexBytes) UnmarshalText(b []byte) (err error) {
	*h, err = hex.DecodeString(string(b))
	return err
}

var goldenPath = filepath.Join("testdata", "v1.json")

func readGolden() (*golden, error) {
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		return nil, err
	}
	var g golden
	return &g, json.Unmarshal(data, &g)
}

func TestGoldenV1(t *testing.T) {
	g := &golden{
		Key:       bytes.Repeat([]byte{0x42}, KeySize),
		Seed:      bytes.Repeat([]byte{0x5e}, 32),
		AAD:       []byte("signing-key:golden"),
		Plaintext: []byte("-----BEGIN PRIVATE KEY-----\n(not really)\n-----END PRIVATE KEY-----\n"),
	}
	root, err := NewRootKey(g.Key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := New(Options{Root: root, Rand: mrand.NewChaCha8([32]byte(g.Seed))})
	if err != nil {
		t.Fatal(err)
	}
	ct, err := k.Encrypt(g.Plaintext, g.AAD)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		g.Ciphertext = ct
		data, _ := json.MarshalIndent(g, "", "  ")
		if err := os.WriteFile(goldenPath, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := readGolden()
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenV1 -update to create it)", err)
	}
	got, err := k.Decrypt(want.Ciphertext, want.AAD)
	if err != nil {
		t.Fatalf("the stored version-1 ciphertext no longer decrypts: %v", err)
	}
	if !bytes.Equal(got, want.Plaintext) {
		t.Fatalf("the stored version-1 ciphertext decrypts to %q", got)
	}
	if !bytes.Equal(ct, want.Ciphertext) {
		t.Errorf("Encrypt with the same key and random stream no longer gives the stored ciphertext:\n got %x\nwant %x", ct, want.Ciphertext)
	}
	if id, _ := CiphertextKeyID(want.Ciphertext); id != root.ID() {
		t.Errorf("golden key ID %v, want %v", id, root.ID())
	}
	// The layout documented in format.go, decrypted by hand with the
	// standard library and literal offsets.
	c := []byte(want.Ciphertext)
	if c[0] != 1 || binary.BigEndian.Uint32(c[1:5]) != uint32(root.ID()) {
		t.Fatalf("header %x", c[:5])
	}
	open := func(key, nonce, sealed, aad []byte) []byte {
		b, err := aes.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := cipher.NewGCM(b)
		pt, err := a.Open(nil, nonce, sealed, aad)
		if err != nil {
			t.Fatalf("by hand: %v", err)
		}
		return pt
	}
	dk := open(want.Key, c[5:17], c[17:65], c[0:5])
	if pt := open(dk, c[65:77], c[77:], want.AAD); !bytes.Equal(pt, want.Plaintext) {
		t.Errorf("by hand: %q", pt)
	}
}
