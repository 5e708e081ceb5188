package keys

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keygate/keygate/jose"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadStatic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	privPEM, _ := jose.MarshalPrivatePEM(priv)
	pubPEM, _ := jose.MarshalPublicPEM(&priv.PublicKey)
	jwk, _ := key("a").MarshalJSON()
	pemKey, _ := jose.NewKey(jose.ES256, "", &priv.PublicKey)
	files := map[string]string{
		"public PEM":  writeFile(t, dir, "pub.pem", pubPEM),
		"private PEM": writeFile(t, dir, "priv.pem", privPEM),
		"JWK":         writeFile(t, dir, "a.jwk", jwk),
		"JWKS":        writeFile(t, dir, "set.json", jwks("b", "c", "d")),
	}
	for _, tt := range []struct {
		name  string
		files []string
		algs  []jose.Alg
		want  string // kids; TP stands for the PEM key's thumbprint
	}{
		{"public PEM", []string{"public PEM"}, nil, "TP"},
		{"private PEM gives its public key", []string{"private PEM"}, nil, "TP"},
		{"JWK", []string{"JWK"}, nil, "a"},
		{"JWKS", []string{"JWKS"}, nil, "b,c,d"},
		{"JWKS filtered by alg", []string{"JWKS"}, []jose.Alg{jose.ES256}, "b,c"},
		{"several files", []string{"public PEM", "JWK", "JWKS"}, []jose.Alg{jose.ES256, jose.ES384}, "TP,a,b,c,d"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var paths []string
			for _, f := range tt.files {
				paths = append(paths, files[f])
			}
			s, err := LoadStatic(paths, tt.algs)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.ReplaceAll(kids(s.Current()), pemKey.Thumbprint(), "TP"); got != tt.want {
				t.Errorf("keys %q, want %q", got, tt.want)
			}
			if s.Refetch(context.Background()) != s.Current() {
				t.Error("Refetch is not Current")
			}
			if st := s.Status(); !st.Ready() || st.Keys != s.Current().Len() || st.LastSuccess.IsZero() || st.LastError != nil || st.Stale {
				t.Errorf("status %+v", st)
			}
		})
	}
}

func TestLoadStaticErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM, _ := jose.MarshalPublicPEM(&rsaKey.PublicKey)
	good := writeFile(t, dir, "good.json", jwks("a"))
	for _, tt := range []struct {
		name string
		path string
		algs []jose.Alg
		is   error
	}{
		{"missing file", filepath.Join(dir, "nope.pem"), nil, fs.ErrNotExist},
		{"garbage", writeFile(t, dir, "garbage.pem", []byte("not a key")), nil, nil},
		{"truncated PEM", writeFile(t, dir, "trunc.pem", rsaPEM[:len(rsaPEM)/2]), nil, nil},
		{"bad JSON", writeFile(t, dir, "bad.json", []byte(`{"kty":`)), nil, nil},
		{"JWKS without a usable key", writeFile(t, dir, "enc.json", unusable), []jose.Alg{jose.ES256}, nil},
		{"RSA key for ES256", writeFile(t, dir, "rsa.pem", rsaPEM), []jose.Alg{jose.ES256}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := LoadStatic([]string{good, tt.path}, tt.algs)
			if err == nil {
				t.Fatalf("loaded %q", kids(s.Current()))
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("error does not name the file: %v", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("%v is not %v", err, tt.is)
			}
		})
	}
	if _, err := LoadStatic(nil, nil); err == nil {
		t.Error("no files loaded")
	}
}

func TestNewStatic(t *testing.T) {
	t.Parallel()
	s := NewStatic(nil)
	if set := s.Current(); set == nil || set.Len() != 0 || s.Status().Ready() {
		t.Errorf("nil set: %v, %+v", set, s.Status())
	}
	set := jose.NewKeySet(key("a"))
	if s := NewStatic(set); s.Current() != set || s.Refetch(context.Background()) != set || s.Status().Keys != 1 {
		t.Error("NewStatic does not serve its set")
	}
}
