package verifykeys

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

func TestLoadFiles(t *testing.T) {
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
			s, err := LoadFiles(FilesConfig{Paths: paths, Algorithms: tt.algs})
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

func TestLoadFilesErrors(t *testing.T) {
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
			s, err := LoadFiles(FilesConfig{Paths: []string{good, tt.path}, Algorithms: tt.algs})
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
	if _, err := LoadFiles(FilesConfig{}); err == nil {
		t.Error("no files loaded")
	}
}

// loads records a Files source's LoadEvents.
type loads struct {
	mu sync.Mutex
	ev []LoadEvent
}

func (l *loads) add(ev LoadEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, ev)
}

func (l *loads) results() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rs []string
	for _, ev := range l.ev {
		rs = append(rs, ev.Result)
	}
	return strings.Join(rs, ",")
}

// TestFilesPoll: Poll reads the files again only when their content
// changed, whatever their size and modification time say, and a file
// that fails to load keeps the last good keys in force, reported once.
func TestFilesPoll(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, dir, "keys.json", jwks("a", "b"))
	var l loads
	var logs bytes.Buffer
	f, err := LoadFiles(FilesConfig{Paths: []string{path}, OnLoad: l.add,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	poll := func(wantKids string, wantErr bool) {
		t.Helper()
		if err := f.Poll(); (err != nil) != wantErr {
			t.Fatalf("Poll: %v, want error %v", err, wantErr)
		}
		if got := kids(f.Current()); got != wantKids {
			t.Fatalf("keys %q, want %q", got, wantKids)
		}
	}
	poll("a,b", false)
	if got := l.results(); got != "ok" {
		t.Fatalf("an unchanged file was loaded again: %s", got)
	}

	// Renamed into place.
	tmp := writeFile(t, dir, "new.json", jwks("b"))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	poll("b", false)

	// Same size, modification time put back: only the content differs.
	st, _ := os.Stat(path)
	same := jwks("c")
	if len(same) != int(st.Size()) {
		t.Fatalf("test set-up: sizes %d and %d", len(same), st.Size())
	}
	writeFile(t, dir, "keys.json", same)
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	poll("c", false)

	// Broken: the last good keys stay, Status says so, and the same broken
	// content is reported once however often it is polled.
	writeFile(t, dir, "keys.json", []byte(`{"keys":[{"kty":"EC",`))
	poll("c", true)
	poll("c", false)
	poll("c", false)
	if st := f.Status(); st.LastError == nil || !st.Stale || st.Keys != 1 || !strings.Contains(st.LastError.Error(), path) {
		t.Errorf("status while the file is broken: %+v", st)
	}
	if n := strings.Count(logs.String(), "key files failed to load"); n != 1 {
		t.Errorf("%d error lines for one broken file:\n%s", n, logs.String())
	}
	// Gone altogether: the same.
	os.Remove(path)
	poll("c", true)
	poll("c", false)

	// Fixed: loaded again, and the error clears.
	writeFile(t, dir, "keys.json", jwks("a"))
	poll("a", false)
	if st := f.Status(); st.LastError != nil || st.Stale {
		t.Errorf("status after the file was fixed: %+v", st)
	}
	if got, want := l.results(), "ok,ok,ok,error,error,ok"; got != want {
		t.Errorf("load events %s, want %s", got, want)
	}
}

// TestFilesReload: Reload reads the files even when they did not change,
// and a failure keeps the last good keys.
func TestFilesReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, dir, "keys.json", jwks("a", "b"))
	var l loads
	f, err := LoadFiles(FilesConfig{Paths: []string{path}, OnLoad: l.add})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "keys.json", jwks("b"))
	if err := f.Reload(); err != nil || kids(f.Current()) != "b" {
		t.Fatalf("Reload: %v, keys %q", err, kids(f.Current()))
	}
	writeFile(t, dir, "keys.json", []byte(`{"keys":[]}`))
	if err := f.Reload(); err == nil || kids(f.Current()) != "b" {
		t.Fatalf("Reload of a file without keys: %v, keys %q", err, kids(f.Current()))
	}
	if err := f.Reload(); err == nil {
		t.Fatal("the second Reload of the same broken file succeeded")
	}
	if got, want := l.results(), "ok,ok,ok,error,error"; got != want {
		t.Errorf("load events %s, want %s", got, want)
	}
}
