//go:build unix

package vaultapi_test

import (
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/config"
)

// processCPU is the CPU time of the whole process (every thread: the
// handlers, the audit writer, the garbage collector, system calls).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pairedChunk is how many requests one side of a pair serves.
const pairedChunk = 512

// runChunk serves pairedChunk requests through ps (one replayed request
// per goroutine) and returns the process's CPU time for them.
func runChunk(b *testing.B, ps []*inProcess) time.Duration {
	per := pairedChunk / len(ps)
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

// pairedCPU alternates chunks of requests to keygate's handler and to the
// reference's (keygate, reference, keygate, ...) from conc goroutines each,
// and reports the CPU time per request of each, and the median over the
// pairs of reference ÷ keygate: the share of the reference's request rate
// that keygate reaches on the same CPU, the ratio the loopback load test
// measures with the HTTP stack left out.
func pairedCPU(b *testing.B, conc int, kg, ref func() *inProcess) {
	b.Helper()
	mk := func(f func() *inProcess) []*inProcess {
		ps := make([]*inProcess, conc)
		for i := range ps {
			ps[i] = f()
		}
		return ps
	}
	kps, rps := mk(kg), mk(ref)
	runChunk(b, kps) // warm both (pools, caches, the audit writer)
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
	n := float64(b.N * pairedChunk)
	b.ReportMetric(float64(kt.Nanoseconds())/n, "keygate-cpu-ns/req")
	b.ReportMetric(float64(rt.Nanoseconds())/n, "ref-cpu-ns/req")
	if len(ratios) > 0 {
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "ref/keygate")
	}
}

// BenchmarkTransitEncryptHTTP pairs a 64-byte transit encrypt through the
// server's traffic handler (as `serve --dev` builds it: the token check,
// routing, scopes, the JSON body, the key from the cache, Vault's envelope,
// the metrics, and the audit log as each case configures it) with the
// loopback load test's reference handler (`keygate bench server --mode
// aes-gcm`: the body read, one AES-256-GCM seal, the base64 in JSON), each
// called directly with the same request headers. The metric ref/keygate is
// what keygate reaches of the reference's rate on the same CPU, net/http
// and the kernel left out (they cost both the same).
func BenchmarkTransitEncryptHTTP(b *testing.B) {
	refH, err := bench.Handler(bench.ModeAESGCM)
	if err != nil {
		b.Fatal(err)
	}
	body := encryptBody(64)
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
		{"audit-batch-32", config.Audit{File: config.AuditFile{Sync: "batch"}}, 32},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e, tok := benchServerAudit(b, tc.audit)
			h := e.srv.Handler()
			pairedCPU(b, tc.conc, func() *inProcess {
				return newInProcess(b, h, tok, "/v1/transit/encrypt/bench", body)
			}, func() *inProcess {
				p := newInProcess(b, refH, tok, "/v1/transit/encrypt/bench", body)
				p.req.Header.Set(loadgen.MarkerHeader, loadgen.Marker())
				return p
			})
		})
	}
}
