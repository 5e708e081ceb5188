package report

import (
	"math"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// sampleDocument is a realistic two-series document: naive and keygate
// verification at 5 connection counts, with latency histograms, the
// target's usage and its timelines, a CPU and a heap profile and notes.
// Naive's last step is not valid: another process took the CPU its target
// was pinned to, and the probe read late once (a hole in its timeline).
func sampleDocument() *loadgen.Document {
	conns := []int{100, 1000, 5000, 10000, 15000}
	naive := sampleSeries("naive", conns, 9000, 220, 310)
	keygate := sampleSeries("keygate", conns, 61000, 24, 9)
	crowd(naive.Steps[4])
	return &loadgen.Document{
		Schema:  loadgen.DocumentSchema,
		Title:   "gateway-es256: ES256 forward-auth, naive vs keygate",
		Command: "keygate bench reproduce gateway-es256",
		Created: time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC),
		Host:    loadgen.Host{CPUs: 2, Model: "AMD EPYC 7B13"},
		Series:  []*loadgen.Report{naive, keygate},
		Profiles: []loadgen.Profile{
			{Series: "keygate", Step: 4, Kind: "cpu", File: "keygate-cpu.pprof", Top: []loadgen.ProfileFunc{
				{Function: "crypto/internal/fips140/nistec.p256OrdMul", Flat: 21.5, Cum: 21.5},
				{Function: "syscall.Syscall6", Flat: 12.25, Cum: 14},
				{Function: "runtime.mallocgc", Flat: 4.5, Cum: 7.75},
			}},
			{Series: "naive", Step: 2, Kind: "heap", File: "naive-heap.pprof", Top: []loadgen.ProfileFunc{
				{Function: "encoding/pem.Decode", Flat: 33, Cum: 41},
				{Function: "crypto/x509.ParsePKIXPublicKey", Flat: 18, Cum: 52},
			}},
		},
		Notes: []string{"naive re-parses the PEM key on every request and caches nothing",
			"throughput falls past 10,000 connections as the generator and the target share 2 CPUs"},
	}
}

// sampleTimeout is long enough for the slowest answer of the sample (at
// 15000 connections, naive's take up to 75 s).
const sampleTimeout = 90 * time.Second

// sampleSeries is one series: throughput peaks at the third step and
// falls after; latency grows with the connections.
// cpuPerReq is the target's CPU time per request in µs.
func sampleSeries(name string, conns []int, peak, cpuPerReq, allocsPerReq float64) *loadgen.Report {
	rep := &loadgen.Report{
		Schema: loadgen.Schema,
		Name:   name,
		Target: loadgen.Target{Method: "GET", URL: "http://127.0.0.1:8080/auth", HeaderNames: []string{"Authorization"},
			Warmup: 2, Duration: 10, Timeout: sampleTimeout.Seconds()},
		Go: loadgen.GoInfo{Version: "go1.26.8", OS: "linux", Arch: "amd64", GOMAXPROCS: 2},
	}
	for i, c := range conns {
		shape := []float64{0.82, 0.97, 1, 0.93, 0.71}[i]
		rps := peak * shape
		median := float64(c) / rps * 1e9 // Little's law, in ns
		n := int64(rps * 10)
		sigma := 0.45 + 0.08*float64(i)
		hist := lognormal(median, sigma, n)
		at := func(z float64) int64 { return int64(median * math.Exp(z*sigma)) }
		st := &loadgen.Result{
			Mode: loadgen.ModeClosed, Connections: c, Seconds: 10.0003, Requests: n, RequestsPerSec: rps,
			Timeout: int64(sampleTimeout), LatencyFrom: loadgen.LatencyFromWrite,
			Latency: loadgen.Latency{Mean: int64(median * math.Exp(sigma*sigma/2)), Min: at(-4), P50: at(0),
				P90: at(1.2816), P99: at(2.3263), P999: at(3.0902), Max: at(4.5)},
			Status:    loadgen.StatusCounts{S2xx: n},
			CPU:       loadgen.CPU{UserSeconds: 2.1, SystemSeconds: 5.3, GOMAXPROCS: 2, Percent: 37 + 10*float64(i)},
			Histogram: hist,
			Server: &loadgen.ServerUsage{
				Source: "metrics", CPUSeconds: rps * cpuPerReq / 1e6 * 10, CPUPercent: math.Min(200, rps*cpuPerReq/1e4),
				AllocsPerSec: rps * allocsPerReq, AllocBytesPerSec: rps * allocsPerReq * 48, AllocsPerRequest: allocsPerReq,
				RSSBytes: int64(30e6 + float64(c)*12e3), WindowSeconds: 10.0003,
			},
		}
		for t := 1; t <= 10; t++ {
			wobble := 1 + 0.05*math.Sin(float64(t+i))
			st.Server.Timeline = append(st.Server.Timeline, loadgen.UsageSample{At: float64(t),
				CPUPercent: st.Server.CPUPercent * wobble, AllocsPerSec: st.Server.AllocsPerSec * wobble})
		}
		rep.Steps = append(rep.Steps, st)
	}
	return rep
}

// crowd makes st a step that shared its target's CPU with another process,
// seen by a probe that missed two readings.
func crowd(st *loadgen.Result) {
	u := st.Server
	u.CPUs = []int{0}
	u.Others = &loadgen.OtherUsage{CPUPercent: 61, OnTargetCPUsPercent: 48}
	var tl []loadgen.UsageSample
	for _, smp := range u.Timeline {
		switch smp.At {
		case 4, 5:
			continue
		case 6:
			smp.Gap = true
		}
		smp.OthersPercent = 40 + smp.At
		tl = append(tl, smp)
	}
	u.Timeline = tl
}

// lognormal is n latencies around median (ns) in buckets 8 to a power of
// two, as loadgen writes them, empty ones left out.
func lognormal(median, sigma float64, n int64) []loadgen.Bucket {
	var out []loadgen.Bucket
	prev := 0.0
	for k := 0; k < 8*40; k++ {
		le := math.Pow(2, float64(k)/8)
		cdf := 0.5 * math.Erfc(-(math.Log(le)-math.Log(median))/(sigma*math.Sqrt2))
		c := uint64(math.Round((cdf - prev) * float64(n)))
		if c > 0 {
			out = append(out, loadgen.Bucket{LE: int64(math.Ceil(le)), Count: c})
			prev = cdf
		}
	}
	return out
}
