package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/keygate/keygate/internal/loadgen"
)

// headersFlag is the repeatable -H 'Name: value'.
type headersFlag []loadgen.Header

func (h *headersFlag) String() string { return "" }

func (h *headersFlag) Set(v string) error {
	hd, err := loadgen.ParseHeader(v)
	if err != nil {
		return err
	}
	*h = append(*h, hd)
	return nil
}

// intsFlag is a comma-separated list of positive integers.
type intsFlag []int

func (l *intsFlag) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *intsFlag) Set(v string) error {
	*l = nil
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		*l = append(*l, n)
	}
	return nil
}

// benchLoad is 'keygate bench load': an HTTP load generator.
func (a *app) benchLoad(ctx context.Context, args []string) error {
	fs := a.flags("keygate bench load", "--url URL [--method M] [-H 'Name: value']... [--body S | --body-file F]\n"+
		"    [--connections N[,N...]] [--rate R] [--duration D] [--warmup D] [--requests N] [--timeout D] [--json]",
		"Sends one request, over and over, on N keep-alive HTTP/1.1 connections and reports\n"+
			"requests/s, latency percentiles, errors by kind (connect, read, write, timeout, parse),\n"+
			"non-2xx answers and the generator's own CPU use. Without --rate it runs closed loop, like\n"+
			"wrk: each connection sends as soon as it has its answer. With --rate it sends R requests/s\n"+
			"in all, spread over the connections, and measures latency from when each request was meant\n"+
			"to be sent, so a stalled server shows its real tail (like wrk2). Several connection counts\n"+
			"run one after the other. Header values are never printed. See docs/bench-load.md.")
	url := fs.String("url", "", "`URL` to load, http://host[:port]/path (required)")
	method := fs.String("method", "GET", "request `method`")
	var headers headersFlag
	fs.Var(&headers, "H", "request header `'Name: value'` (repeatable)")
	body := fs.String("body", "", "request body `STRING`")
	bodyFile := fs.String("body-file", "", "read the request body from `FILE`")
	conns := intsFlag{50}
	fs.Var(&conns, "connections", "`N[,N...]` keep-alive connections; each count is a step, run in turn")
	rate := fs.Float64("rate", 0, "open loop: `requests/s` over all connections (0: closed loop)")
	duration := fs.Duration("duration", 10*time.Second, "measured time per step (0: --requests alone bounds it)")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured time before each step's measurement")
	requests := fs.Int64("requests", 0, "stop each step after `N` measured requests (0: no bound)")
	timeout := fs.Duration("timeout", loadgen.DefaultTimeout, "per request and per connect; a request that takes longer is an error")
	asJSON := fs.Bool("json", false, "print the result as JSON ("+loadgen.Schema+") instead of a table")
	x := loadExtraFlags(fs) // --http2, --streams, --token-file: benchload_h2.go
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	switch {
	case *url == "":
		return usageErrorf(fs.Name(), "--url is required")
	case fs.isSet("body") && fs.isSet("body-file"):
		return usageErrorf(fs.Name(), "--body and --body-file exclude each other")
	case *rate < 0:
		return usageErrorf(fs.Name(), "--rate must not be negative")
	case *duration < 0 || *warmup < 0 || *requests < 0:
		return usageErrorf(fs.Name(), "--duration, --warmup and --requests must not be negative")
	case *duration == 0 && *requests == 0:
		return usageErrorf(fs.Name(), "give --duration, --requests or both")
	case *timeout <= 0:
		return usageErrorf(fs.Name(), "--timeout must be positive")
	}
	cfg := loadgen.Config{
		Request: loadgen.Request{Method: *method, URL: *url, Header: headers, Body: []byte(*body)},
		Rate:    *rate, Warmup: *warmup, Duration: *duration, Requests: *requests, Timeout: *timeout,
	}
	if err := cfg.Request.Validate(); err != nil {
		return usageErrorf(fs.Name(), "%v", err)
	}
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			return fmt.Errorf("bench load: body: %w", err)
		}
		cfg.Request.Body = b
	}
	if err := x.apply(fs, &cfg); err != nil {
		return err
	}
	raised, before, after, err := loadgen.EnsureFileLimit(slices.Max(conns))
	if err != nil {
		return err
	}
	if raised {
		fmt.Fprintf(a.stderr, "bench load: raised the open-file limit (RLIMIT_NOFILE) from %d to %d for %d connections\n",
			before, after, slices.Max(conns))
	}
	progress := a.progressLine()
	var steps []*loadgen.Result
	for _, n := range conns {
		step := cfg
		step.Connections = n
		if progress != nil {
			step.Progress = func(p loadgen.Progress) { progress(n, p) }
		}
		res, err := x.run(ctx, step)
		if progress != nil {
			fmt.Fprint(a.stderr, "\r\033[K")
		}
		if res != nil {
			steps = append(steps, res)
		}
		if err != nil {
			return errors.Join(a.writeLoad(cfg, steps, *asJSON), err)
		}
	}
	return a.writeLoad(cfg, steps, *asJSON)
}

func (a *app) writeLoad(cfg loadgen.Config, steps []*loadgen.Result, asJSON bool) error {
	if len(steps) == 0 {
		return nil
	}
	rep := loadgen.NewReport(cfg, steps)
	if asJSON {
		return rep.WriteJSON(a.stdout)
	}
	return rep.WriteTable(a.stdout)
}

// progressLine returns the live one-line progress for a terminal's stderr,
// or nil when stderr is not a terminal.
func (a *app) progressLine() func(conns int, p loadgen.Progress) {
	f, ok := a.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return func(conns int, p loadgen.Progress) { writeProgress(f, conns, p) }
}

func writeProgress(w io.Writer, conns int, p loadgen.Progress) {
	phase := "warming up"
	if p.Measuring {
		phase = "measuring"
	}
	fmt.Fprintf(w, "\r\033[K%d connections: %s, %s elapsed, %d requests measured", conns, phase,
		p.Elapsed.Round(time.Second), p.Requests)
}
