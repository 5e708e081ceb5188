package cli

import (
	"context"
	"runtime"
	"time"

	"github.com/keygate/keygate/internal/bench"
)

func (a *app) benchVerify(ctx context.Context, args []string) error {
	return a.runBench(ctx, args, "verify", bench.Verify)
}

func (a *app) benchSign(ctx context.Context, args []string) error {
	return a.runBench(ctx, args, "sign", bench.Sign)
}

type benchFunc func(context.Context, bench.Config) ([]bench.Result, error)

func (a *app) runBench(ctx context.Context, args []string, op string, run benchFunc) error {
	fs := a.flags("keygate bench "+op, "[--alg ALG]... [--duration D] [--goroutines N]",
		"Measures jose's "+op+" throughput in this process, per algorithm, with a fresh key and\n"+
			"a token of about 300 bytes of claims. ns/op is the time one goroutine spends per\n"+
			"operation; allocs/op counts heap allocations of the whole process per operation.")
	var cfg bench.Config
	algs := (*algsFlag)(&cfg.Algs)
	fs.Var(algs, "alg", "`ALG` to measure (repeatable; default HS256,RS256,PS256,ES256,EdDSA)")
	fs.DurationVar(&cfg.Duration, "duration", 2*time.Second, "how long to run each algorithm")
	fs.IntVar(&cfg.Goroutines, "goroutines", runtime.GOMAXPROCS(0), "concurrent goroutines")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if cfg.Duration <= 0 || cfg.Goroutines <= 0 {
		return usageErrorf(fs.Name(), "--duration and --goroutines must be positive")
	}
	results, err := run(ctx, cfg)
	if werr := bench.WriteTable(a.stdout, op, cfg, results); werr != nil && err == nil {
		err = werr
	}
	return err
}
