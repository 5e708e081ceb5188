//go:build unix

package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/issuer"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/store"
)

// replay is one request served again and again without a network, into a
// writer that keeps only the status and the last body written.
type replay struct {
	h    http.Handler
	req  *http.Request
	body string
	w    sink
}

type sink struct {
	h      http.Header
	status int
	body   []byte
}

func (s *sink) Header() http.Header { return s.h }
func (s *sink) WriteHeader(c int) {
	if s.status == 0 {
		s.status = c
	}
}

func (s *sink) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	s.body = append(s.body[:0], b...)
	return len(b), nil
}

func (p *replay) do() int {
	p.req.Body = &stringBody{Reader: strings.NewReader(p.body)}
	p.req.Form, p.req.PostForm = nil, nil
	clear(p.w.h)
	p.w.status = 0
	p.h.ServeHTTP(&p.w, p.req)
	return p.w.status
}

type stringBody struct{ *strings.Reader }

func (stringBody) Close() error { return nil }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// chunk is how many requests one side of a pair serves.
const chunk = 256

func runChunk(b *testing.B, ps []*replay) time.Duration {
	per := chunk / len(ps)
	c0 := processCPU()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(func() {
			for range per {
				if st := p.do(); st != http.StatusOK {
					b.Errorf("status %d: %s", st, p.w.body)
					return
				}
			}
		})
	}
	wg.Wait()
	return processCPU() - c0
}

// BenchmarkIssueHTTP pairs a client_credentials request through the
// server's traffic handler (as `serve --dev` builds it: routing, the
// per-client rate limit, client authentication, claims, one ES256 sign,
// the token response, the metrics, and the audit log as each case has it)
// with the loopback load test's sign reference (`keygate bench server
// --mode es256-sign`: the body read, one raw ES256 sign, a token response),
// chunk by chunk from conc goroutines, each called directly with the same
// request. It reports the process's CPU time a request for each, and the
// median over the pairs of reference ÷ keygate: the share of the sign
// reference's rate that issuance reaches on the same CPU, net/http and the
// kernel left out.
func BenchmarkIssueHTTP(b *testing.B) {
	refH, err := bench.Handler(bench.ModeSign)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		audit config.Audit
		conc  int
	}{
		{"audit-off", config.Audit{Disabled: true}, 1},
		{"audit-off-32", config.Audit{Disabled: true}, 32},
		// Records are written in groups: requests in flight at once, as
		// on a server under load, share one write (and sync).
		{"audit-interval-32", config.Audit{File: config.AuditFile{Sync: "interval"}}, 32},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			// As the load test runs it: the per-client limit out of the way
			// (its local token bucket stays on the path).
			limit := 1e6
			cfg := server.Config{Node: &node.Config{DataDir: filepath.Join(b.TempDir(), "data"), Issuer: "https://kg.test",
				Audience: "api", Dev: true, Audit: tc.audit, TokenService: config.TokenService{TokenRateLimit: &limit}}}
			s, err := server.New(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			secret, err := issuer.NewSecret(rand.Reader)
			if err != nil {
				b.Fatal(err)
			}
			d := issuer.SecretDigest(secret)
			if err := s.Node().Store().CreateClient(ctx, store.Client{ID: "kgc_bench", Name: "bench", SecretDigest: d[:],
				Scopes: []string{"read"}, CreatedAt: time.Now()}); err != nil {
				b.Fatal(err)
			}
			auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("kgc_bench:"+secret))
			mk := func(h http.Handler, marker bool) *replay {
				req, err := http.NewRequest(http.MethodPost, "http://kg.test/oauth2/token", nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Authorization", auth)
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if marker {
					req.Header.Set(loadgen.MarkerHeader, loadgen.Marker())
				}
				req.RemoteAddr = "127.0.0.1:40000"
				const body = "grant_type=client_credentials"
				req.ContentLength = int64(len(body))
				return &replay{h: h, req: req, body: body, w: sink{h: http.Header{}}}
			}
			kps, rps := make([]*replay, tc.conc), make([]*replay, tc.conc)
			for i := range kps {
				kps[i], rps[i] = mk(s.Handler(), false), mk(refH, true)
			}
			runChunk(b, kps)
			runChunk(b, rps)
			var kt, rt time.Duration
			var ratios []float64
			b.ReportAllocs()
			for b.Loop() {
				k := runChunk(b, kps)
				r := runChunk(b, rps)
				kt, rt = kt+k, rt+r
				if k > 0 {
					ratios = append(ratios, float64(r)/float64(k))
				}
			}
			n := float64(b.N * chunk)
			b.ReportMetric(float64(kt.Nanoseconds())/n, "keygate-cpu-ns/req")
			b.ReportMetric(float64(rt.Nanoseconds())/n, "ref-cpu-ns/req")
			if len(ratios) > 0 {
				slices.Sort(ratios)
				b.ReportMetric(ratios[len(ratios)/2], "ref/keygate")
			}
		})
	}
}
