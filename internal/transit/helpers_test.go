package transit

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)

// lockedReader makes a deterministic stream safe for the concurrent use an
// Engine makes of its random source.
type lockedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}

func seededRand(seed byte) io.Reader {
	var s [32]byte
	s[0] = seed
	return &lockedReader{r: rand.NewChaCha8(s)}
}

// testEngine has a deterministic random source and a fixed clock.
func testEngine(t testing.TB) *Engine {
	t.Helper()
	return New(Options{Rand: seededRand(1), Now: func() time.Time { return testNow }})
}

// RSA keys take long to generate, so the tests load fixed ones from
// testdata (TestCreateRSA generates one).
func rsaTestVersion(t testing.TB, typ KeyType, num int) *Version {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", fmt.Sprintf("rsa-%d.pem", typ.rsaBits())))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	v, err := versionFromImport(typ, num, testNow, blk.Bytes, false, false, seededRand(9))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// newKey returns a fresh key of type typ (for RSA types, one holding a
// fixed test key).
func newKey(t testing.TB, e *Engine, typ KeyType, o CreateOptions) *Key {
	t.Helper()
	o.Type = typ
	if typ.isRSA() {
		cfg := Config{Name: "rsa", Type: typ, LatestVersion: 1, MinDecryptionVersion: 1,
			Exportable: o.Exportable, AllowPlaintextBackup: o.AllowPlaintextBackup, AutoRotatePeriod: o.AutoRotatePeriod}
		k, err := LoadKey(cfg, rsaTestVersion(t, typ, 1))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k, err := e.CreateKey(ctx, "k", o)
	if err != nil {
		t.Fatalf("CreateKey(%v): %v", typ, err)
	}
	return k
}

func wantReason(t testing.TB, err error, r Reason) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", r)
	}
	if got := ReasonOf(err); got != r {
		t.Fatalf("error %v has reason %v, want %v", err, got, r)
	}
	var te *Error
	if !errors.As(err, &te) || !errors.Is(err, &Error{Reason: r}) {
		t.Fatalf("error %v does not match errors.Is/As for %v", err, r)
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func sprintf(format string, v any) string { return fmt.Sprintf(format, v) }
