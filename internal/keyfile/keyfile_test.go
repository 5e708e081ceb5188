package keyfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/jose"
)

func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "k")
	if err := WriteNew(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteNew(p, []byte("two")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second write: %v", err)
	}
	data, _ := os.ReadFile(p)
	info, _ := os.Stat(p)
	if string(data) != "one" || info.Mode().Perm() != 0o600 {
		t.Errorf("content %q mode %v", data, info.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestReadCapsSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, make([]byte, MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v", err)
	}
}

func TestGenerate(t *testing.T) {
	for _, alg := range []jose.Alg{jose.ES256, jose.ES384, jose.ES512, jose.EdDSA, jose.RS256} {
		priv, err := Generate(alg, 0)
		if err != nil {
			t.Fatalf("%v: %v", alg, err)
		}
		if got, _ := DefaultAlg(priv.Public()); got != alg {
			t.Errorf("%v key implies %v", alg, got)
		}
		if _, err := jose.NewSigner(alg, "", priv); err != nil {
			t.Errorf("%v: %v", alg, err)
		}
	}
	for _, tc := range []struct {
		alg  jose.Alg
		bits int
	}{{jose.HS256, 0}, {jose.ES256, 2048}, {jose.RS256, 1024}, {0, 0}} {
		if _, err := Generate(tc.alg, tc.bits); err == nil {
			t.Errorf("Generate(%v, %d) succeeded", tc.alg, tc.bits)
		}
	}
	if _, err := GenerateSecret(jose.ES256); err == nil {
		t.Error("GenerateSecret(ES256) succeeded")
	}
}

func writeKey(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadKeys(t *testing.T) {
	priv, _ := Generate(jose.RS256, 0)
	privPEM, _ := jose.MarshalPrivatePEM(priv)
	pubPEM, _ := jose.MarshalPublicPEM(priv.Public())
	k, _ := jose.NewKey(jose.RS256, "set-kid", priv.Public())
	set, _ := jose.NewKeySet(k).MarshalJSON()
	jwk, _ := k.MarshalJSON()
	tests := []struct {
		name string
		data []byte
		algs []jose.Alg
		kid  string
		want []string // "alg kid" per key; "TP" stands for the thumbprint
	}{
		{"private PEM", privPEM, nil, "", []string{"RS256 TP"}},
		{"public PEM, two algs", pubPEM, []jose.Alg{jose.RS256, jose.PS256, jose.ES256}, "", []string{"RS256 TP", "PS256 TP"}},
		{"PEM with kid", pubPEM, []jose.Alg{jose.PS384}, "mine", []string{"PS384 mine"}},
		{"JWKS", set, nil, "", []string{"RS256 set-kid"}},
		{"JWK keeps kid", jwk, nil, "", []string{"RS256 set-kid"}},
		{"JWK renamed", jwk, nil, "new", []string{"RS256 new"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := LoadKeys(writeKey(t, "k", tt.data), tt.algs, tt.kid)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range keys {
				got = append(got, k.Alg().String()+" "+strings.ReplaceAll(k.KeyID(), k.Thumbprint(), "TP"))
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := LoadKeys(writeKey(t, "k", set), nil, "x"); err == nil {
		t.Error("a JWKS was renamed")
	}
	if _, err := LoadKeys(writeKey(t, "k", pubPEM), []jose.Alg{jose.ES256}, ""); err == nil {
		t.Error("RSA key bound to ES256")
	}
}

func TestLoadSigner(t *testing.T) {
	priv, _ := Generate(jose.ES384, 0)
	privPEM, _ := jose.MarshalPrivatePEM(priv)
	pubPEM, _ := jose.MarshalPublicPEM(priv.Public())
	p := writeKey(t, "k", privPEM)
	s, err := LoadSigner(p, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Alg() != jose.ES384 || s.KeyID() != s.Key().Thumbprint() {
		t.Errorf("alg %v kid %q", s.Alg(), s.KeyID())
	}
	if _, err := LoadSigner(p, jose.ES256, ""); err == nil {
		t.Error("P-384 key bound to ES256")
	}
	if _, err := LoadSigner(writeKey(t, "pub", pubPEM), 0, ""); err == nil {
		t.Error("signer from a public key")
	}
}
