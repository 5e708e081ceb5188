package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/bench/runner"
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
		"    [--connections N[,N...]] [--rate R[,R...]] [--duration D] [--warmup D] [--requests N] [--timeout D] [--json]",
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
	rates := floatsFlag{0}
	fs.Var(&rates, "rate", "open loop: `R[,R...]` requests/s over all connections (0: closed loop); several rates are\n"+
		"steps, each run at every connection count")
	duration := fs.Duration("duration", 10*time.Second, "measured time per step (0: --requests alone bounds it)")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured time before each step's measurement")
	requests := fs.Int64("requests", 0, "stop each step after `N` measured requests (0: no bound)")
	timeout := fs.Duration("timeout", loadgen.DefaultTimeout, "per request and per connect; a request that takes longer is an error")
	values := fs.String("values", "", "`FILE` of values, one per line: each makes one request, {{value}} in --url, -H and the body\n"+
		"replaced by it; the requests are sent in turn (a distinct token per request, say)")
	compareURL := fs.String("compare-url", "", "a second target's `URL`: the same requests go to its host and port too, step by\n"+
		"step, and the result is a side-by-side table with ratios (a "+loadgen.DocumentSchema+" document)")
	rounds := fs.Int("rounds", 5, "with --compare-url: measure each step `N` times, the two targets back to back in\n"+
		"alternating order, and report the median of the rounds' ratios of requests/s and of each\n"+
		"target's CPU per request (read from /proc when it runs on this machine)")
	asJSON := fs.Bool("json", false, "print the result as JSON ("+loadgen.Schema+") instead of a table")
	format := fs.String("format", "table", "output `format`: table, json (as --json) or line (one key=value line per step, for scripts)")
	x := loadExtraFlags(fs) // --http2, --streams, --token-file: benchload_h2.go
	if _, err := fs.parse(args, 0, 0); err != nil {
		return err
	}
	if *asJSON {
		*format = "json"
	}
	switch {
	case *url == "":
		return usageErrorf(fs.Name(), "--url is required")
	case fs.isSet("body") && fs.isSet("body-file"):
		return usageErrorf(fs.Name(), "--body and --body-file exclude each other")
	case *compareURL != "" && len(rates) > 1:
		return usageErrorf(fs.Name(), "--compare-url takes one --rate")
	case *duration < 0 || *warmup < 0 || *requests < 0:
		return usageErrorf(fs.Name(), "--duration, --warmup and --requests must not be negative")
	case *duration == 0 && *requests == 0:
		return usageErrorf(fs.Name(), "give --duration, --requests or both")
	case *timeout <= 0:
		return usageErrorf(fs.Name(), "--timeout must be positive")
	case !slices.Contains([]string{"table", "json", "line"}, *format):
		return usageErrorf(fs.Name(), "--format must be table, json or line")
	case *rounds < 1:
		return usageErrorf(fs.Name(), "--rounds must be at least 1")
	case fs.isSet("rounds") && *compareURL == "":
		return usageErrorf(fs.Name(), "--rounds needs --compare-url")
	case *compareURL != "" && *format == "line":
		return usageErrorf(fs.Name(), "--format line prints one target; use table or json with --compare-url")
	}
	cfg := loadgen.Config{
		Request: loadgen.Request{Method: *method, URL: *url, Header: headers, Body: []byte(*body)},
		Rate:    rates[0], Warmup: *warmup, Duration: *duration, Requests: *requests, Timeout: *timeout,
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
	if *values != "" && x.tokenFile != "" {
		return usageErrorf(fs.Name(), "--values and --token-file exclude each other")
	}
	if err := x.apply(fs, &cfg); err != nil {
		return err
	}
	if *values != "" {
		var err error
		if cfg.Pool, err = valuePool(cfg.Request, *values); err != nil {
			return usageErrorf(fs.Name(), "--values: %v", err)
		}
	}
	if *compareURL != "" {
		if !fs.isSet("duration") {
			cfg.Duration = compareDuration
		}
		return a.compareLoad(ctx, fs, cfg, conns, *compareURL, *rounds, *format == "json")
	}
	if err := a.raiseFileLimit(slices.Max(conns)); err != nil {
		return err
	}
	var steps []loadgen.Config
	for _, n := range conns {
		for _, r := range rates {
			step := cfg
			step.Connections, step.Rate = n, r
			steps = append(steps, step)
		}
	}
	results, err := runSteps(a, steps, func(c loadgen.Config) int { return c.Connections },
		func(c loadgen.Config, p func(loadgen.Progress)) (*loadgen.Result, error) {
			c.Progress = p
			return x.run(ctx, c)
		})
	return errors.Join(a.writeLoad(cfg, results, *format), err)
}

// runSteps runs each step in turn with the live progress line (conns names
// a step's connection count in it) and returns the results measured,
// the interrupted step's included, with the first error.
func runSteps[T any](a *app, steps []T, conns func(T) int,
	run func(T, func(loadgen.Progress)) (*loadgen.Result, error)) ([]*loadgen.Result, error) {
	line := a.progressLine()
	var results []*loadgen.Result
	for _, step := range steps {
		var progress func(loadgen.Progress)
		if line != nil {
			n := conns(step)
			progress = func(p loadgen.Progress) { line(n, p) }
		}
		res, err := run(step, progress)
		if line != nil {
			fmt.Fprint(a.stderr, "\r\033[K")
		}
		if res != nil {
			results = append(results, res)
		}
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// floatsFlag is a comma-separated list of numbers, none negative.
type floatsFlag []float64

func (l *floatsFlag) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

func (l *floatsFlag) Set(v string) error {
	*l = nil
	for f := range strings.SplitSeq(v, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			return fmt.Errorf("%q is not a rate (a number, 0 or more)", f)
		}
		*l = append(*l, x)
	}
	return nil
}

func (a *app) writeLoad(cfg loadgen.Config, steps []*loadgen.Result, format string) error {
	if len(steps) == 0 {
		return nil
	}
	rep := loadgen.NewReport(cfg, steps)
	switch format {
	case "json":
		return rep.WriteJSON(a.stdout)
	case "line":
		return rep.WriteLines(a.stdout)
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

// valuePlaceholder is what --values replaces in a request template.
const valuePlaceholder = "{{value}}"

// valuePool makes one request of tpl per line of the file, each with the
// line in place of {{value}}.
func valuePool(tpl loadgen.Request, file string) ([]loadgen.Request, error) {
	has := strings.Contains(tpl.URL, valuePlaceholder) || bytes.Contains(tpl.Body, []byte(valuePlaceholder))
	for _, h := range tpl.Header {
		has = has || strings.Contains(h.Value, valuePlaceholder)
	}
	if !has {
		return nil, fmt.Errorf("no %s in --url, -H or the body", valuePlaceholder)
	}
	values, err := readLines(file, "value")
	if err != nil {
		return nil, err
	}
	pool := make([]loadgen.Request, 0, len(values))
	for _, v := range values {
		r := tpl
		r.URL = strings.ReplaceAll(tpl.URL, valuePlaceholder, v)
		r.Body = bytes.ReplaceAll(tpl.Body, []byte(valuePlaceholder), []byte(v))
		r.Header = slices.Clone(tpl.Header)
		for i := range r.Header {
			r.Header[i].Value = strings.ReplaceAll(r.Header[i].Value, valuePlaceholder, v)
		}
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("value %d: %w", len(pool)+1, err)
		}
		pool = append(pool, r)
	}
	return pool, nil
}

// compareDuration is a compared step's measured time unless --duration
// says otherwise: short steps, many rounds, so that drift shows up as the
// spread of the rounds' ratios rather than as a bias.
const compareDuration = 5 * time.Second

// compareLoad runs cfg's requests against their own target and against
// other's host and port, step by step, and prints the two side by side.
func (a *app) compareLoad(ctx context.Context, fs *flagSet, cfg loadgen.Config, conns []int, other string, rounds int, asJSON bool) error {
	pool := cfg.Pool
	if len(pool) == 0 {
		pool = []loadgen.Request{cfg.Request}
	}
	ou, err := url.Parse(other)
	if err != nil || ou.Scheme != "http" || ou.Host == "" {
		return usageErrorf(fs.Name(), "--compare-url %q is not http://host[:port]", other)
	}
	moved := make([]loadgen.Request, len(pool))
	for i, r := range pool {
		u, err := url.Parse(r.URL)
		if err != nil {
			return usageErrorf(fs.Name(), "--url: %v", err)
		}
		u.Host = ou.Host
		moved[i] = r
		moved[i].URL = u.String()
	}
	var notes []string
	fixed := func(name string, reqs []loadgen.Request) runner.Series {
		base := reqs[0].URL
		t := &runner.Target{Name: name, Base: base}
		if pid, err := runner.ListenerPID(name); err == nil {
			t.Probe = runner.ProcProbe{Pid: pid}
		} else {
			notes = append(notes, fmt.Sprintf("%s's CPU per request is not shown: %v.", name, err))
		}
		return runner.Series{Name: name,
			Start: func(context.Context, *runner.Env) (*runner.Target, error) { return t, nil },
			Pool:  func(context.Context, *runner.Target) ([]loadgen.Request, error) { return reqs, nil }}
	}
	a1, a2 := hostOf(pool[0].URL), hostOf(moved[0].URL)
	if a1 == a2 {
		return usageErrorf(fs.Name(), "--compare-url names the same host and port as --url")
	}
	plan := &runner.Plan{Title: "bench load: " + pool[0].URL + " compared with " + moved[0].URL,
		Series:      []runner.Series{fixed(a1, pool), fixed(a2, moved)},
		Connections: conns, Rate: cfg.Rate, Warmup: cfg.Warmup, Duration: cfg.Duration, Requests: cfg.Requests, Timeout: cfg.Timeout,
		Rounds: rounds, Notes: notes}
	if err := a.raiseFileLimit(slices.Max(conns)); err != nil {
		return err
	}
	doc, runErr := runner.Run(ctx, &runner.Env{}, plan, runner.Options{Progress: a.seriesProgress()})
	doc.Command = "keygate bench load"
	var werr error
	if asJSON {
		werr = doc.WriteJSON(a.stdout)
	} else {
		werr = doc.WriteTable(a.stdout)
	}
	return errors.Join(runErr, werr)
}

func hostOf(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Host
}
