package issuer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/audittest"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/issuer/signingkeys"
	"github.com/keygate/keygate/internal/issuer/signingkeys/signingkeystest"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/sqlite"
)

// BenchmarkClientCredentials measures a whole client_credentials request
// (form parsing, client lookup in SQLite, secret check, ES256 signing,
// JSON response) in process, beside the raw ES256 sign it is bounded by;
// the -audit variants wrap it as the server does, with an audit log
// writing to a file sink that fsyncs every group commit (the default),
// one request at a time and from 16 goroutines per GOMAXPROCS (as many
// connections at once as a loaded server has), whose records the log
// commits in groups:
//
//	go test -run '^$' -bench BenchmarkClientCredentials -benchmem ./internal/issuer
func BenchmarkClientCredentials(b *testing.B) {
	svc, secret := clientCredentialsService(b)
	h := svc.Handler()
	body := url.Values{"grant_type": {"client_credentials"}, "client_id": {"svc"}, "client_secret": {secret}}.Encode()

	issue := func(b *testing.B, h http.Handler) {
		req := httptest.NewRequest(http.MethodPost, "/oauth2/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body.String())
		}
	}
	serial := func(h http.Handler) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				issue(b, h)
			}
		}
	}
	parallel := func(h http.Handler) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					issue(b, h)
				}
			})
		}
	}
	audited := func(b *testing.B) http.Handler {
		fs, err := audit.NewFileSink(audit.FileConfig{Dir: filepath.Join(b.TempDir(), "audit")})
		if err != nil {
			b.Fatal(err)
		}
		log, _ := audittest.NewLog(b, fs)
		a, err := httpaudit.New(httpaudit.Config{Log: log})
		if err != nil {
			b.Fatal(err)
		}
		return a.Handler("oauth2.token", httperr.Writer{}, h)
	}
	b.Run("keygate", serial(h))
	b.Run("keygate-audit", func(b *testing.B) { serial(audited(b))(b) })
	b.Run("keygate-parallel", parallel(h))
	b.Run("keygate-audit-parallel", func(b *testing.B) { parallel(audited(b))(b) })
	b.Run("raw-ES256-sign", func(b *testing.B) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		msg := sha256.Sum256([]byte(body))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ecdsa.SignASN1(rand.Reader, k, msg[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// clientCredentialsService is a token service on a fresh SQLite store
// with one signing key and one client, "svc", whose secret it returns.
func clientCredentialsService(tb testing.TB) (*Service, string) {
	tb.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "keygate.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	secret, _ := NewSecret(rand.Reader)
	d := SecretDigest(secret)
	if err := st.CreateClient(ctx, store.Client{ID: "svc", Name: "svc", SecretDigest: d[:], Scopes: []string{"read"},
		CreatedAt: time.Now()}); err != nil {
		tb.Fatal(err)
	}
	km := signingkeys.New(st, signingkeystest.NewSealer(tb), signingkeys.Policy{}, nil)
	if err := km.Load(ctx); err != nil {
		tb.Fatal(err)
	}
	svc, err := New(Config{Issuer: "https://auth.example.com/", Store: st, Keys: km})
	if err != nil {
		tb.Fatal(err)
	}
	return svc, secret
}
