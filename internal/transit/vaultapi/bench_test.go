package vaultapi_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"testing"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/transit"
	"github.com/keygate/keygate/internal/transit/vaultapi"
)

// discard is a ResponseWriter that keeps nothing but the status, reusing
// its header map, so that a benchmark measures the handler alone.
type discard struct {
	h      http.Header
	status int
	body   []byte
}

func (d *discard) Header() http.Header { return d.h }
func (d *discard) WriteHeader(s int)   { d.status = s }
func (d *discard) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK // as net/http answers a Write without WriteHeader
	}
	d.body = append(d.body[:0], b...)
	return len(b), nil
}

// inProcess is one request replayed against a handler without a network.
type inProcess struct {
	h    http.Handler
	req  *http.Request
	body *bytes.Reader
	raw  []byte
	w    discard
}

func newInProcess(t testing.TB, h http.Handler, tok, path string, body []byte) *inProcess {
	t.Helper()
	req, err := http.NewRequest("POST", "http://kg.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", tok)
	req.RemoteAddr = "127.0.0.1:40000" // as net/http sets it, for the audit record
	req.ContentLength = int64(len(body))
	return &inProcess{h: h, req: req, raw: body, body: bytes.NewReader(body), w: discard{h: http.Header{}}}
}

func (p *inProcess) do() int {
	p.body.Reset(p.raw)
	p.req.Body = io.NopCloser(p.body)
	clear(p.w.h)
	p.w.status = 0
	p.h.ServeHTTP(&p.w, p.req)
	return p.w.status
}

// benchServer is a server with the key "bench" and a token for it, and no
// audit log: the handler's own cost.
func benchServer(t testing.TB) (*env, string) {
	return benchServerAudit(t, config.Audit{Disabled: true})
}

// benchServerAudit is benchServer with the audit log a configures.
func benchServerAudit(t testing.TB, a config.Audit) (*env, string) {
	t.Helper()
	e := startAudit(t, nil, a)
	tok := e.token("default", allScopes...)
	if st, body := e.call(tok, "POST", "/v1/transit/keys/bench", ""); st != http.StatusOK {
		t.Fatalf("create: %d %s", st, body)
	}
	return e, tok
}

func encryptBody(n int) []byte {
	pt := make([]byte, n)
	rand.Read(pt)
	return []byte(`{"plaintext":"` + base64.StdEncoding.EncodeToString(pt) + `"}`)
}

// BenchmarkEncrypt64 sets the HTTP handler for a 64-byte encrypt (the
// token from the verified-token cache, routing, scopes, the JSON body, the
// key from the cache, the answer in Vault's envelope) beside the engine's
// call alone and AES-256-GCM alone with a cached cipher.
func BenchmarkEncrypt64(b *testing.B) {
	e, tok := benchServer(b)
	b.Run("handler", func(b *testing.B) {
		p := newInProcess(b, e.srv.Handler(), tok, "/v1/transit/encrypt/bench", encryptBody(64))
		if st := p.do(); st != http.StatusOK {
			b.Fatalf("%d %s", st, p.w.body)
		}
		b.ReportAllocs()
		for b.Loop() {
			p.do()
		}
	})
	b.Run("handler-decrypt", func(b *testing.B) {
		_, body := e.call(tok, "POST", "/v1/transit/encrypt/bench", string(encryptBody(64)))
		ct := data(b, body)["ciphertext"].(string)
		p := newInProcess(b, e.srv.Handler(), tok, "/v1/transit/decrypt/bench", []byte(`{"ciphertext":"`+ct+`"}`))
		if st := p.do(); st != http.StatusOK {
			b.Fatalf("%d %s", st, p.w.body)
		}
		b.ReportAllocs()
		for b.Loop() {
			p.do()
		}
	})
	// With the audit log (file sink, one write and fsync per group of
	// records): requests from many goroutines at once, as a server sees
	// them, so that records are committed in groups; one at a time, each
	// would wait for its own fsync.
	for _, sync := range []string{"batch", "never"} {
		b.Run("handler-audited-sync-"+sync, func(b *testing.B) {
			ea, tok := benchServerAudit(b, config.Audit{File: config.AuditFile{Sync: sync}})
			h := ea.srv.Handler()
			body := encryptBody(64)
			if st := newInProcess(b, h, tok, "/v1/transit/encrypt/bench", body).do(); st != http.StatusOK {
				b.Fatalf("%d", st)
			}
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				p := newInProcess(b, h, tok, "/v1/transit/encrypt/bench", body)
				for pb.Next() {
					if st := p.do(); st != http.StatusOK {
						b.Errorf("status %d", st)
						return
					}
				}
			})
		})
	}
	eng := transit.New(transit.Options{})
	k, err := eng.CreateKey(b.Context(), "bench", transit.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pt := make([]byte, 64)
	b.Run("engine", func(b *testing.B) {
		dst := make([]byte, 0, 256)
		b.ReportAllocs()
		for b.Loop() {
			dst, _, _ = eng.AppendEncrypt(b.Context(), dst[:0], k, pt, transit.EncryptOptions{})
		}
	})
	b.Run("aes-gcm", func(b *testing.B) {
		key := make([]byte, 32)
		block, _ := aes.NewCipher(key)
		gcm, _ := cipher.NewGCM(block)
		dst := make([]byte, 0, 256)
		nonce := make([]byte, 12)
		b.ReportAllocs()
		for b.Loop() {
			rand.Read(nonce)
			dst = gcm.Seal(dst[:0], nonce, pt, nil)
		}
	})
}

// BenchmarkEncryptBatch100 is the handler for a batch of 100 64-byte
// encrypts.
func BenchmarkEncryptBatch100(b *testing.B) {
	e, tok := benchServer(b)
	body := []byte(`{"batch_input":[`)
	for i := range 100 {
		if i > 0 {
			body = append(body, ',')
		}
		pt := make([]byte, 64)
		rand.Read(pt)
		body = append(body, `{"plaintext":"`+base64.StdEncoding.EncodeToString(pt)+`"}`...)
	}
	body = append(body, "]}"...)
	p := newInProcess(b, e.srv.Handler(), tok, "/v1/transit/encrypt/bench", body)
	if st := p.do(); st != http.StatusOK {
		b.Fatalf("%d %s", st, p.w.body)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.do()
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "items/s")
}

// TestHandlerAllocations pins what the handler allocates for a 64-byte
// encrypt and decrypt, on top of what net/http allocates per request.
func TestHandlerAllocations(t *testing.T) {
	if vaultapi.RaceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	for _, audited := range []bool{false, true} {
		a := config.Audit{Disabled: !audited, File: config.AuditFile{Sync: "never"}}
		e, tok := benchServerAudit(t, a)
		_, body := e.call(tok, "POST", "/v1/transit/encrypt/bench", string(encryptBody(64)))
		ct := data(t, body)["ciphertext"].(string)
		// The test's io.NopCloser; audited, the request id and its
		// X-Request-Id header too.
		max := 1.0
		if audited {
			max += 2
		}
		for _, tc := range []struct {
			path string
			body []byte
		}{
			{"/v1/transit/encrypt/bench", encryptBody(64)},
			{"/v1/transit/decrypt/bench", []byte(`{"ciphertext":"` + ct + `"}`)},
		} {
			p := newInProcess(t, e.srv.Handler(), tok, tc.path, tc.body)
			if st := p.do(); st != http.StatusOK {
				t.Fatalf("%s: %d %s", tc.path, st, p.w.body)
			}
			if n := testing.AllocsPerRun(200, func() { p.do() }); n > max {
				t.Errorf("%s (audited %v): %v allocations per request, want at most %v", tc.path, audited, n, max)
			} else {
				t.Logf("%s (audited %v): %v allocations per request", tc.path, audited, n)
			}
		}
	}
}
