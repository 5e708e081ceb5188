package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/bench"
	"github.com/keygate/keygate/internal/bench/grpcload"
	"github.com/keygate/keygate/internal/bench/loadgen"
)

// benchServerGRPC runs 'keygate bench server --mode grpc-noop|grpc-es256'.
func (a *app) benchServerGRPC(ctx context.Context, mode, listen string, remote bool) error {
	srv, err := bench.NewGRPCServer(mode)
	if err != nil {
		return err
	}
	ln, err := a.benchListen(ctx, mode, listen, remote)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "bench server (mode %s) listening on h2c://%s (gRPC, envoy.service.auth.v3.Authorization)\n", mode, ln.Addr())
	if a.ready != nil {
		a.ready(ln.Addr().String())
	}
	return bench.ServeGRPC(ctx, ln, srv)
}

// readTokens reads a token file as 'keygate bench tokens' writes it: one
// token per line (blank lines and surrounding spaces ignored).
func readTokens(path string) ([]string, error) { return readLines(path, "token") }

// readLines returns the file's lines, white space trimmed, empty ones left
// out; a file without any is an error naming what it should hold.
func readLines(path, what string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s holds no %s", path, what)
	}
	return lines, nil
}

// benchExtauthz is 'keygate bench extauthz': a gRPC load generator for
// Envoy's ext_authz Check.
func (a *app) benchExtauthz(ctx context.Context, args []string) error {
	fs := a.flags("keygate bench extauthz", "--target HOST:PORT [--token T | --token-file F] [--method M] [--host H] [--path P]\n"+
		"    [-H 'Name: value']... [--connections N[,N...]] [--streams M] [--rate R] [--duration D] [--warmup D]\n"+
		"    [--requests N] [--timeout D] [--json]",
		"Sends Envoy's ext_authz Check (envoy.service.auth.v3.Authorization, plaintext HTTP/2)\n"+
			"on N gRPC connections, M concurrent calls on each, and reports Checks/s, latency\n"+
			"percentiles, the verdicts as the HTTP statuses Envoy would answer (allowed: 2xx; denied:\n"+
			"the denial's status, 401/403 as 4xx) and failed calls as errors (timeout, connect:\n"+
			"UNAVAILABLE, parse, read: any other gRPC error), with the generator's own CPU use. Each\n"+
			"CheckRequest is built as Envoy's filter builds it for a plain HTTP/1.1 request (method,\n"+
			"path, host, lower-case headers with the pseudo-headers); with --token-file each request\n"+
			"carries the file's next token (one per line, as 'keygate bench tokens' writes them) in\n"+
			"'authorization: Bearer'. Without --rate it runs closed loop; with it, open loop with\n"+
			"latency from each call's intended start. Token values are never printed. The targets to\n"+
			"compare with are 'keygate bench server --mode grpc-noop|grpc-es256'. See docs/bench-load.md.")
	target := fs.String("target", "", "gRPC server `HOST:PORT` (required; keygate serve --envoy-grpc-listen)")
	token := fs.String("token", "", "send this bearer `TOKEN` in every request")
	tokenFile := fs.String("token-file", "", "send the tokens of `FILE` in turn, one per request (one per line)")
	method := fs.String("method", "GET", "the HTTP `method` Envoy asks about")
	host := fs.String("host", "api.example.com", "the HTTP request's `host` (:authority)")
	path := fs.String("path", "/", "the HTTP request's `path` (:path, query included)")
	var headers headersFlag
	fs.Var(&headers, "H", "another request header `'Name: value'` (repeatable)")
	conns := intsFlag{10}
	fs.Var(&conns, "connections", "`N[,N...]` gRPC connections; each count is a step, run in turn")
	streams := fs.Int("streams", 1, "concurrent calls per connection")
	rate := fs.Float64("rate", 0, "open loop: `Checks/s` over all connections and streams (0: closed loop)")
	duration := fs.Duration("duration", 10*time.Second, "measured time per step (0: --requests alone bounds it)")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured time before each step's measurement")
	requests := fs.Int64("requests", 0, "stop each step after `N` measured Checks (0: no bound)")
	timeout := fs.Duration("timeout", loadgen.DefaultTimeout, "per Check; a Check that takes longer is an error")
	asJSON := fs.Bool("json", false, "print the result as JSON ("+loadgen.Schema+") instead of a table")
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	switch {
	case *target == "":
		return usageErrorf(fs.Name(), "--target is required")
	case fs.isSet("token") && fs.isSet("token-file"):
		return usageErrorf(fs.Name(), "--token and --token-file exclude each other")
	case *streams <= 0:
		return usageErrorf(fs.Name(), "--streams must be positive")
	case *rate < 0:
		return usageErrorf(fs.Name(), "--rate must not be negative")
	case *duration < 0 || *warmup < 0 || *requests < 0:
		return usageErrorf(fs.Name(), "--duration, --warmup and --requests must not be negative")
	case *duration == 0 && *requests == 0:
		return usageErrorf(fs.Name(), "give --duration, --requests or both")
	case *timeout <= 0:
		return usageErrorf(fs.Name(), "--timeout must be positive")
	case !validMethod(*method):
		return usageErrorf(fs.Name(), "--method %q is not an HTTP method", *method)
	case !strings.HasPrefix(*path, "/"):
		return usageErrorf(fs.Name(), "--path must begin with /")
	}
	if _, _, err := net.SplitHostPort(*target); err != nil {
		return usageErrorf(fs.Name(), "--target %q is not HOST:PORT", *target)
	}
	cfg := grpcload.Config{
		Target:  *target,
		Request: grpcload.Request{Method: *method, Host: *host, Path: *path, Header: headers},
		Streams: *streams, Rate: *rate, Warmup: *warmup, Duration: *duration, Requests: *requests, Timeout: *timeout,
	}
	switch {
	case *tokenFile != "":
		tokens, err := readTokens(*tokenFile)
		if err != nil {
			return fmt.Errorf("bench extauthz: tokens: %w", err)
		}
		cfg.Tokens = tokens
	case *token != "":
		cfg.Tokens = []string{*token}
	}
	if err := a.raiseFileLimit(slices.Max(conns)); err != nil {
		return err
	}
	var steps []grpcload.Config
	for _, n := range conns {
		step := cfg
		step.Connections = n
		steps = append(steps, step)
	}
	results, err := runSteps(a, steps, func(c grpcload.Config) int { return c.Connections },
		func(c grpcload.Config, p func(loadgen.Progress)) (*loadgen.Result, error) {
			c.Progress = p
			return grpcload.Run(ctx, c)
		})
	if errors.Is(err, grpcload.ErrConfig) {
		return usageErrorf(fs.Name(), "%v", err)
	}
	return errors.Join(a.writeExtauthz(cfg, results, *asJSON), err)
}

// writeExtauthz prints the steps with loadgen's printers: the target is
// the Check method at the server's address, its header names those of the
// HTTP request Envoy asks about.
func (a *app) writeExtauthz(cfg grpcload.Config, steps []*loadgen.Result, asJSON bool) error {
	if len(steps) == 0 {
		return nil
	}
	hs := slices.Clone(cfg.Request.Header)
	if len(cfg.Tokens) > 0 {
		hs = append(hs, loadgen.Header{Name: "authorization", Value: "Bearer"})
	}
	lc := loadgen.Config{Request: loadgen.Request{Method: cfg.Request.Method,
		URL: fmt.Sprintf("grpc://%s%s (%s%s, %d calls per connection)", cfg.Target, grpcload.CheckMethod,
			cfg.Request.Host, cfg.Request.Path, cfg.Streams), Header: hs},
		Warmup: cfg.Warmup, Duration: cfg.Duration, Requests: cfg.Requests, Timeout: cfg.Timeout}
	rep := loadgen.NewReport(lc, steps)
	if len(cfg.Tokens) > 1 {
		rep.Target.PoolSize = len(cfg.Tokens)
	}
	if asJSON {
		return rep.WriteJSON(a.stdout)
	}
	return rep.WriteTable(a.stdout)
}

// validMethod reports whether s is an HTTP token (a method).
func validMethod(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
