package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/mint"
	"github.com/keygate/keygate/jose"
)

// The issuer and audience of the realistic claims, and so of the tokens
// WriteTokens mints unless told otherwise.
const (
	DefaultIssuer   = issuer
	DefaultAudience = audience
)

// RealisticClaims returns about 300 bytes of claims like an access token
// from a typical identity provider (iss DefaultIssuer, aud DefaultAudience,
// a one-hour lifetime): what every token in the benchmarks carries.
func RealisticClaims() mint.Claims { return realisticClaims() }

// TokensConfig says which tokens WriteTokens mints.
type TokensConfig struct {
	Signer  *jose.Signer
	Claims  mint.Claims // each token gets its own random jti on top
	N       int         // how many tokens
	Workers int         // signing goroutines; 0 means GOMAXPROCS
	Now     time.Time   // iat and nbf; zero means time.Now()
	Random  io.Reader   // jti source, shared by the workers; nil means crypto/rand
}

// tokenBatch is how many tokens a worker signs before handing them over.
const tokenBatch = 1024

// WriteTokens mints cfg.N distinct tokens (same claims, a fresh random
// 128-bit jti each) on cfg.Workers goroutines and writes them to w, one per
// line, in no particular order. It is for load tests that need every
// request to carry a token the server has not seen.
func WriteTokens(ctx context.Context, w io.Writer, cfg TokensConfig) error {
	if cfg.Signer == nil {
		return errors.New("bench tokens need a signer")
	}
	if cfg.N < 0 {
		return errors.New("negative bench token count")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.Now.IsZero() {
		cfg.Now = time.Now()
	}
	if cfg.Random == nil {
		cfg.Random = rand.Reader
	}
	// Fail on bad claims before starting the workers.
	if _, err := mint.Payload(cfg.Claims, cfg.Now, cfg.Random); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	out := make(chan []byte, cfg.Workers)
	errc := make(chan error, cfg.Workers)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for n := range jobs {
				buf, err := signBatch(cfg, n)
				if err != nil {
					errc <- err
					cancel()
					return
				}
				select {
				case out <- buf:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		defer close(jobs)
		for left := cfg.N; left > 0; left -= tokenBatch {
			select {
			case jobs <- min(left, tokenBatch):
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(out)
	}()
	var werr error
	for buf := range out {
		if werr == nil {
			if _, werr = w.Write(buf); werr != nil {
				cancel()
			}
		}
	}
	select {
	case err := <-errc:
		return fmt.Errorf("tokens: %w", err)
	default:
	}
	if werr != nil {
		return fmt.Errorf("write tokens: %w", werr)
	}
	return ctx.Err()
}

func signBatch(cfg TokensConfig, n int) ([]byte, error) {
	var buf []byte
	for range n {
		tok, err := mint.Sign(cfg.Signer, cfg.Claims, cfg.Now, cfg.Random)
		if err != nil {
			return nil, err
		}
		if buf == nil {
			buf = make([]byte, 0, n*(len(tok)+1))
		}
		buf = append(append(buf, tok...), '\n')
	}
	return buf, nil
}
