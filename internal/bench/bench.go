// Package bench measures keygate's own throughput in process: how many
// tokens per second package jose signs or verifies per algorithm, with a
// fresh key and realistic claims, across several goroutines. It also holds
// what the loopback load test (scripts/loadtest.sh) needs besides keygate
// itself: reference servers on the same HTTP stack (a no-op, and a no-op
// plus one raw ES256 verification per request), the raw primitive's rate,
// and bulk minting of distinct tokens. It is a measuring tool; nothing on
// the serve path imports it.
package bench

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/jose"
)

// DefaultAlgs are the algorithms measured when Config.Algs is empty.
var DefaultAlgs = []jose.Alg{jose.HS256, jose.RS256, jose.PS256, jose.ES256, jose.EdDSA}

// Config says what to measure.
type Config struct {
	Algs       []jose.Alg    // empty means DefaultAlgs
	Duration   time.Duration // per algorithm
	Goroutines int           // 0 means GOMAXPROCS
}

// Result is one algorithm's measurement.
type Result struct {
	Alg        jose.Alg
	Ops        uint64
	Elapsed    time.Duration
	Goroutines int
	Mallocs    uint64 // heap allocations during the run, all goroutines
}

// PerSecond is the throughput across all goroutines.
func (r Result) PerSecond() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// NsPerOp is the time one goroutine spends on one operation.
func (r Result) NsPerOp() float64 {
	return float64(r.Elapsed.Nanoseconds()) * float64(r.Goroutines) / float64(r.Ops)
}

// AllocsPerOp is heap allocations per operation.
func (r Result) AllocsPerOp() float64 { return float64(r.Mallocs) / float64(r.Ops) }

// ErrNoOps is returned when a run completed no operation at all.
var ErrNoOps = errors.New("the benchmark completed no operation")

func (c Config) withDefaults() (Config, error) {
	if len(c.Algs) == 0 {
		c.Algs = DefaultAlgs
	}
	if c.Goroutines == 0 {
		c.Goroutines = runtime.GOMAXPROCS(0)
	}
	if c.Goroutines < 0 || c.Duration <= 0 {
		return c, errors.New("duration and goroutines must be positive")
	}
	return c, nil
}

// Verify measures jose.Verifier.Verify for each algorithm.
func Verify(ctx context.Context, cfg Config) ([]Result, error) {
	return each(ctx, cfg, verifyOp)
}

// Sign measures jose.Signer.Sign of a fixed payload for each algorithm.
func Sign(ctx context.Context, cfg Config) ([]Result, error) {
	return each(ctx, cfg, signOp)
}

// an opMaker builds the operation to time for one algorithm.
type opMaker func(*fixture) (func() error, error)

func each(ctx context.Context, cfg Config, makeOp opMaker) ([]Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var results []Result
	for _, alg := range cfg.Algs {
		f, err := newFixture(alg)
		if err != nil {
			return results, err
		}
		op, err := makeOp(f)
		if err != nil {
			return results, fmt.Errorf("%s: %w", alg, err)
		}
		r, err := run(ctx, cfg, op)
		if err != nil {
			return results, fmt.Errorf("%s: %w", alg, err)
		}
		r.Alg = alg
		results = append(results, r)
	}
	return results, nil
}

// run calls op from cfg.Goroutines goroutines until cfg.Duration passes or
// ctx is done.
func run(ctx context.Context, cfg Config, op func() error) (Result, error) {
	var stop atomic.Bool
	var ops atomic.Uint64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range cfg.Goroutines {
		wg.Go(func() {
			var n uint64
			for !stop.Load() {
				if err := op(); err != nil {
					once.Do(func() { firstErr = err })
					stop.Store(true)
				}
				n++
			}
			ops.Add(n)
		})
	}
	wait(ctx, cfg.Duration, &stop)
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	r := Result{Ops: ops.Load(), Elapsed: elapsed, Goroutines: cfg.Goroutines, Mallocs: after.Mallocs - before.Mallocs}
	switch {
	case firstErr != nil:
		return r, firstErr
	case ctx.Err() != nil:
		return r, ctx.Err()
	case r.Ops == 0:
		return r, ErrNoOps
	}
	return r, nil
}

func wait(ctx context.Context, d time.Duration, stop *atomic.Bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	stop.Store(true)
}

func verifyOp(f *fixture) (func() error, error) {
	v, err := jose.NewVerifier(f.signer.Key(), []jose.Alg{f.signer.Alg()}, f.expected())
	if err != nil {
		return nil, err
	}
	if _, err := v.Verify(f.token); err != nil {
		return nil, fmt.Errorf("fixture token does not verify: %w", err)
	}
	return func() error {
		_, err := v.Verify(f.token)
		return err
	}, nil
}

func signOp(f *fixture) (func() error, error) {
	return func() error {
		_, err := f.signer.Sign(f.payload)
		return err
	}, nil
}

// fixture is a fresh key and one token of realistic size for an algorithm.
type fixture struct {
	signer  *jose.Signer
	priv    crypto.Signer // nil for HMAC
	payload []byte
	token   string
}

const (
	issuer   = "https://auth.example.com/"
	audience = "https://api.example.com"
)

func newFixture(alg jose.Alg) (*fixture, error) {
	signer, priv, err := newSigner(alg)
	if err != nil {
		return nil, fmt.Errorf("%s key: %w", alg, err)
	}
	payload, err := mint.Payload(realisticClaims(), time.Now(), rand.Reader)
	if err != nil {
		return nil, err
	}
	token, err := signer.Sign(payload)
	if err != nil {
		return nil, fmt.Errorf("%s sign: %w", alg, err)
	}
	return &fixture{signer: signer, priv: priv, payload: payload, token: token}, nil
}

func (f *fixture) expected() jose.Expected {
	return jose.Expected{Issuer: issuer, Audience: []string{audience}, Require: []string{"exp", "sub"}, Leeway: time.Minute}
}

func newSigner(alg jose.Alg) (*jose.Signer, crypto.Signer, error) {
	if keyfile.IsHMAC(alg) {
		secret, err := keyfile.GenerateSecret(alg)
		if err != nil {
			return nil, nil, err
		}
		s, err := jose.NewSigner(alg, "bench-hmac", secret)
		return s, nil, err
	}
	priv, err := keyfile.Generate(alg, 0)
	if err != nil {
		return nil, nil, err
	}
	s, err := jose.NewSigner(alg, "bench-"+alg.String(), priv)
	return s, priv, err
}

// realisticClaims are about 300 bytes of JSON, like an access token from a
// typical identity provider.
func realisticClaims() mint.Claims {
	return mint.Claims{
		Issuer:   issuer,
		Subject:  "user-7f3c9a2e-41d8-4b6a-9e15-2c8d0f6b1a47",
		Audience: []string{audience},
		Scope:    "openid profile orders:read orders:write",
		TTL:      time.Hour,
		Extra: map[string]json.RawMessage{
			"client_id": json.RawMessage(`"web-frontend"`),
			"email":     json.RawMessage(`"jane.doe@example.com"`),
			"roles":     json.RawMessage(`["customer","beta-tester"]`),
			"tenant":    json.RawMessage(`"acme-eu-west"`),
		},
	}
}
