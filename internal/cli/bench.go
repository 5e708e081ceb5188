package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

func (a *app) benchVerify(ctx context.Context, args []string) error {
	var raw bool
	extra := func(fs *flagSet) {
		fs.BoolVar(&raw, "raw", false, "measure the standard-library primitive alone instead of jose (ES256 only:\n"+
			"crypto/ecdsa.VerifyASN1 over a fixed signing input with a pre-parsed key, the\n"+
			"per-request work of 'keygate bench server --mode es256')")
	}
	run := func(ctx context.Context, cfg bench.Config) ([]bench.Result, error) {
		if raw {
			return bench.VerifyRaw(ctx, cfg)
		}
		return bench.Verify(ctx, cfg)
	}
	check := func(fs *flagSet, cfg *bench.Config) error {
		if !raw {
			return nil
		}
		if len(cfg.Algs) == 0 {
			cfg.Algs = []jose.Alg{jose.ES256}
		}
		for _, alg := range cfg.Algs {
			if alg != jose.ES256 {
				return usageErrorf(fs.Name(), "--raw measures ES256 only, not %s", alg)
			}
		}
		return nil
	}
	return a.runBench(ctx, args, "verify", extra, check, run)
}

func (a *app) benchSign(ctx context.Context, args []string) error {
	return a.runBench(ctx, args, "sign", nil, nil, bench.Sign)
}

type benchFunc func(context.Context, bench.Config) ([]bench.Result, error)

func (a *app) runBench(ctx context.Context, args []string, op string,
	extra func(*flagSet), check func(*flagSet, *bench.Config) error, run benchFunc) error {
	fs := a.flags("keygate bench "+op, "[--alg ALG]... [--duration D] [--goroutines N]",
		"Measures jose's "+op+" throughput in this process, per algorithm, with a fresh key and\n"+
			"a token of about 300 bytes of claims. ns/op is the time one goroutine spends per\n"+
			"operation; allocs/op counts heap allocations of the whole process per operation.")
	var cfg bench.Config
	algs := (*algsFlag)(&cfg.Algs)
	fs.Var(algs, "alg", "`ALG` to measure (repeatable; default HS256,RS256,PS256,ES256,EdDSA)")
	fs.DurationVar(&cfg.Duration, "duration", 2*time.Second, "how long to run each algorithm")
	fs.IntVar(&cfg.Goroutines, "goroutines", runtime.GOMAXPROCS(0), "concurrent goroutines")
	if extra != nil {
		extra(fs)
	}
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if cfg.Duration <= 0 || cfg.Goroutines <= 0 {
		return usageErrorf(fs.Name(), "--duration and --goroutines must be positive")
	}
	if check != nil {
		if err := check(fs, &cfg); err != nil {
			return err
		}
	}
	results, err := run(ctx, cfg)
	if werr := bench.WriteTable(a.stdout, op, cfg, results); werr != nil && err == nil {
		err = werr
	}
	return err
}

// benchServer runs a reference server for load tests (scripts/loadtest.sh).
func (a *app) benchServer(ctx context.Context, args []string) error {
	fs := a.flags("keygate bench server", "--mode MODE [--listen ADDR]",
		"Runs a reference HTTP server to load-test keygate against, on the same net/http\n"+
			"settings as keygate's traffic listener, until interrupted. Every request of keygate's\n"+
			"load generators ('keygate bench load', 'bench extauthz', 'bench reproduce' and\n"+
			"'bench scenario', which send the run's marker in Keygate-Bench), whatever its method, path and\n"+
			"other headers, gets 200 with an empty body; mode es256 first does one raw ES256\n"+
			"verification (crypto/ecdsa.VerifyASN1 over a fixed signing input with a pre-parsed\n"+
			"key; see 'keygate bench verify --raw'). It is a measuring tool, not a service: it\n"+
			"checks no token, so it refuses (403) every request without the run's marker, a secret\n"+
			"from "+loadgen.MarkerEnv+" (drawn at random and printed when unset), names its\n"+
			"mode in the header Keygate-Bench-Server on every answer, and listens on loopback only\n"+
			"unless --allow-remote. Mode es256-sign reads the body, makes one raw ES256 signature\n"+
			"(crypto/ecdsa.SignASN1) and answers a token response of the size keygate's\n"+
			"/oauth2/token sends: the ceiling for the token endpoint. Mode aes-gcm reads the body\n"+
			"and answers one AES-256-GCM seal of 64 bytes (cached cipher, fresh nonce) as base64\n"+
			"in JSON: the ceiling for transit encrypt (scripts/loadtest-transit.sh). The gRPC modes\n"+
			"allow only Checks whose call metadata carries the marker, and their health service\n"+
			"reports only "+bench.ReadinessService+" as serving. Mode kv-read answers one AES-256-GCM open\n"+
			"of a 1 KiB secret held in memory; kv-write inserts the body as a row of --store, with the\n"+
			"durability of keygate's secret writes (the secret scenarios' references).")
	allModes := slices.Concat(bench.Modes, bench.NaiveModes, bench.GRPCModes, bench.KVModes)
	kvStore := fs.String("store", "", "kv-write's store: a postgres:// `URL`, or the path of a SQLite file")
	mode := fs.String("mode", "", "`MODE`: "+strings.Join(allModes, ", ")+
		" (required; grpc-noop and grpc-es256 serve Envoy's ext_authz Check over h2c, see 'keygate bench extauthz')")
	listen := fs.String("listen", "127.0.0.1:8081", "listen `address` (port 0 picks a free port)")
	key := fs.String("key", "", "the naive modes' key `FILE`: ES256 public key PEM (naive-es256), HMAC secret\n"+
		"(naive-hs256, middleware-hs256) or passphrase (naive-aes-gcm-decrypt)")
	profiling := fs.Bool("profiling", false, "also serve /debug/pprof/ and the Go runtime's Prometheus /metrics on the same listener,\n"+
		"unguarded (for 'bench reproduce' on loopback; not with --allow-remote)")
	remote := fs.Bool("allow-remote", false, "listen on an address other than loopback: the server checks no token, and anything\n"+
		"that reaches it and sends the run's marker is answered as if allowed")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	naive := slices.Contains(bench.NaiveModes, *mode)
	switch {
	case !slices.Contains(allModes, *mode):
		return usageErrorf(fs.Name(), "--mode must be one of %s", strings.Join(allModes, ", "))
	case naive && *key == "":
		return usageErrorf(fs.Name(), "--mode %s needs --key", *mode)
	case !naive && *key != "":
		return usageErrorf(fs.Name(), "--mode %s takes no --key", *mode)
	case *profiling && *remote:
		return usageErrorf(fs.Name(), "--profiling serves pprof and /metrics unguarded: it is for loopback, not with --allow-remote")
	case slices.Contains(bench.GRPCModes, *mode):
		return a.benchServerGRPC(ctx, *mode, *listen, *remote) // benchextauthz.go
	}
	var h http.Handler
	var err error
	switch {
	case slices.Contains(bench.KVModes, *mode):
		var closer io.Closer
		if h, closer, err = bench.KVHandler(ctx, *mode, *kvStore); err != nil {
			return err
		}
		defer closer.Close()
	case *kvStore != "":
		return usageErrorf(fs.Name(), "--store is for the kv-write mode")
	case naive:
		h, err = bench.NaiveHandler(*mode, *key)
	default:
		h, err = bench.Handler(*mode)
	}
	if err != nil {
		return err
	}
	if *profiling {
		h = bench.WithProfiling(h)
	}
	ln, err := a.benchListen(ctx, *mode, *listen, *remote)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "bench server (mode %s) listening on http://%s\n", *mode, ln.Addr())
	if a.ready != nil {
		a.ready(ln.Addr().String())
	}
	return bench.Serve(ctx, ln, h)
}

// benchListen opens a reference server's listener, refusing an address
// other than loopback unless remote, and says on stderr what the server
// is: an authorizer's port is where one is most easily mistaken for one.
func (a *app) benchListen(ctx context.Context, mode, listen string, remote bool) (net.Listener, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	loopback := loopbackAddr(ln.Addr())
	if !loopback && !remote {
		ln.Close()
		return nil, fmt.Errorf("refusing to serve the bench server on %s (%s), off loopback: it checks no token, and "+
			"anything that reaches it could take it for an authorizer; keep it on 127.0.0.1, or pass --allow-remote", listen, ln.Addr())
	}
	fmt.Fprintf(a.stderr, "*** keygate bench server (mode %s) on %s: a BENCHMARK REFERENCE, NOT AN AUTHORIZER. It checks no token;\n"+
		"*** it answers only requests carrying this run's marker, refuses all others, and names itself in %s\n"+
		"*** on every answer. keygate's load generators send the marker given them in the environment:\n"+
		"***   export %s=%s\n", mode, ln.Addr(), bench.ServerHeader, loadgen.MarkerEnv, loadgen.Marker())
	if !loopback {
		fmt.Fprintf(a.stderr, "*** WARNING: --allow-remote: it listens off loopback, where any client that sends the marker in %s is answered as if allowed.\n",
			loadgen.MarkerHeader)
	}
	return ln, nil
}

// benchTokens mints distinct tokens for load tests.
func (a *app) benchTokens(ctx context.Context, args []string) error {
	fs := a.flags("keygate bench tokens", "--key FILE --n N [--out FILE] [flags]",
		"Mints N distinct signed JWTs, one per line, for load tests that need a token the\n"+
			"server has not seen on every request. Every token carries the same realistic claims\n"+
			"(about 300 bytes, as 'keygate bench verify' uses) and its own random 128-bit jti.\n"+
			"Tokens are signed on all cores and written in no particular order, to stdout or to\n"+
			"a new FILE created with mode 0600 (an existing file is never overwritten).")
	key := fs.String("key", "", "private key `FILE` (PEM or private JWK; required)")
	var alg algFlag
	fs.Var(&alg, "alg", "signing `ALG` (default: the one the key implies)")
	kid := fs.String("kid", "", "header `KID` (default: the JWK's kid, else the key's thumbprint)")
	n := fs.Int("n", 0, "how many tokens (required)")
	out := fs.String("out", "", "write to this new `FILE` instead of stdout")
	claims := bench.RealisticClaims()
	fs.StringVar(&claims.Issuer, "iss", claims.Issuer, "issuer claim")
	var aud stringsFlag
	fs.Var(&aud, "aud", "audience claim (repeatable; default "+bench.DefaultAudience+")")
	fs.StringVar(&claims.Subject, "sub", claims.Subject, "subject claim")
	fs.StringVar(&claims.Scope, "scope", claims.Scope, "space-separated scope claim")
	fs.DurationVar(&claims.TTL, "ttl", claims.TTL, "lifetime: exp is now+ttl")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "signing goroutines")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	switch {
	case *key == "":
		return usageErrorf(fs.Name(), "--key is required")
	case *n <= 0:
		return usageErrorf(fs.Name(), "--n must be positive")
	case *workers <= 0:
		return usageErrorf(fs.Name(), "--workers must be positive")
	case claims.TTL <= 0:
		return usageErrorf(fs.Name(), "--ttl must be positive")
	}
	if len(aud) > 0 {
		claims.Audience = aud
	}
	signer, err := keyfile.LoadSigner(*key, jose.Alg(alg), *kid)
	if err != nil {
		return err
	}
	cfg := bench.TokensConfig{Signer: signer, Claims: claims, N: *n, Workers: *workers, Now: a.now(), Random: a.random}
	if *out == "" {
		bw := bufio.NewWriterSize(a.stdout, 1<<16)
		return errors.Join(bench.WriteTokens(ctx, bw, cfg), bw.Flush())
	}
	return a.writeTokensFile(ctx, *out, cfg)
}

func (a *app) writeTokensFile(ctx context.Context, path string, cfg bench.TokensConfig) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("tokens: %w", cerr)
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	start := time.Now()
	bw := bufio.NewWriterSize(f, 1<<16)
	if err := bench.WriteTokens(ctx, bw, cfg); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	fmt.Fprintf(a.stdout, "wrote %d %s tokens (kid %s) to %s in %s\n",
		cfg.N, cfg.Signer.Alg(), cfg.Signer.KeyID(), path, time.Since(start).Round(time.Millisecond))
	return nil
}

// loopbackAddr reports whether a is a TCP address on loopback (an
// IPv4-mapped one included).
func loopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ok && ip.Unmap().IsLoopback()
}
