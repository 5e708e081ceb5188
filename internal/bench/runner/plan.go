package runner

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// Series is one side of a plan: a target and the requests it gets.
type Series struct {
	Name  string
	Start func(ctx context.Context, env *Env) (*Target, error)
	// Pool returns the requests to send to the started target, in turn.
	Pool func(ctx context.Context, t *Target) ([]loadgen.Request, error)
}

// Plan is a load test: series measured at the same steps, interleaved
// step by step so that drift on a shared machine hits them alike.
type Plan struct {
	Name, Title string
	Series      []Series
	Connections []int
	Rate        float64 // open loop when above 0
	Warmup      time.Duration
	Duration    time.Duration
	Requests    int64 // also bounds each step when above 0
	Timeout     time.Duration
	// Rounds repeats every step this many times (0 or 1: once), the
	// series' order reversed in every other round (A B, B A, A B, ...) so
	// that a machine speeding up or slowing down through the run favours
	// neither; the document then gives the median of each round's ratios.
	Rounds int
	Notes  []string
}

// Options tune a Run.
type Options struct {
	// Profile takes a CPU profile over the last step's measured window
	// (and an allocation profile at its end) of every series whose target
	// serves them, saved in OutDir.
	Profile bool
	OutDir  string
	// Progress reports what runs (may be nil).
	Progress func(series string, connections int, p loadgen.Progress)
	Log      io.Writer // one line per step and target start (may be nil)
}

// TopN is how many functions a profile's summary keeps.
const TopN = 15

// Run starts every series' target, measures each step on each series in
// turn, and returns the document with its validity checked; the targets
// are stopped before it returns. On an error it returns what was measured
// with the error.
func Run(ctx context.Context, env *Env, plan *Plan, opt Options) (*loadgen.Document, error) {
	doc, err := run(ctx, env, plan, opt)
	doc.Check()
	doc.Compare()
	return doc, err
}

func run(ctx context.Context, env *Env, plan *Plan, opt Options) (*loadgen.Document, error) {
	logf := func(format string, args ...any) {
		if opt.Log != nil {
			fmt.Fprintf(opt.Log, format+"\n", args...)
		}
	}
	doc := loadgen.NewDocument(plan.Title, "", nil...)
	doc.Series = []*loadgen.Report{}
	doc.Notes = append(doc.Notes, plan.Notes...)
	targets := make([]*Target, len(plan.Series))
	defer func() {
		for _, t := range targets {
			t.Stop()
		}
	}()
	cfgs := make([]loadgen.Config, len(plan.Series))
	for i, s := range plan.Series {
		logf("starting %s", s.Name)
		t, err := s.Start(ctx, env)
		if err != nil {
			return doc, fmt.Errorf("%s: %w", s.Name, err)
		}
		targets[i] = t
		pool, err := s.Pool(ctx, t)
		if err != nil {
			return doc, fmt.Errorf("%s: %w", s.Name, err)
		}
		cfgs[i] = loadgen.Config{Pool: pool, Rate: plan.Rate, Warmup: plan.Warmup, Duration: plan.Duration,
			Requests: plan.Requests, Timeout: plan.Timeout}
		rep := loadgen.NewReport(cfgs[i], nil)
		rep.Name = s.Name
		doc.Series = append(doc.Series, rep)
	}
	rounds := max(plan.Rounds, 1)
	for si, n := range plan.Connections {
		for r := range rounds {
			last := si == len(plan.Connections)-1 && r == rounds-1
			for _, i := range roundOrder(len(plan.Series), r) {
				if err := step(ctx, plan, opt, doc, targets, cfgs, i, n, r, rounds, last, logf); err != nil {
					return doc, err
				}
			}
		}
	}
	return doc, nil
}

// roundOrder is the order the series run in round r: as given in even
// rounds, reversed in odd ones.
func roundOrder(n, r int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if r%2 == 1 {
			order[i] = n - 1 - i
		}
	}
	return order
}

// step measures series i at n connections in round r (of rounds) and adds
// the result, its profiles and notes to doc.
func step(ctx context.Context, plan *Plan, opt Options, doc *loadgen.Document, targets []*Target,
	cfgs []loadgen.Config, i, n, r, rounds int, last bool, logf func(string, ...any)) error {
	s := plan.Series[i]
	cfg := cfgs[i]
	cfg.Connections = n
	if opt.Progress != nil {
		cfg.Progress = func(p loadgen.Progress) { opt.Progress(s.Name, n, p) }
	}
	if busy, waited := settle(ctx, targets, i); waited > 2*settleStep {
		logf("%s, %d connections: waited %s for the other targets to finish their backlog", s.Name, n, waited.Round(time.Millisecond))
		if busy != "" {
			doc.Notes = append(doc.Notes, fmt.Sprintf("%s at %d connections was measured while %s was still busy after %s.",
				s.Name, n, busy, SettleMax))
		}
	}
	res, prof, perr, err := measure(ctx, targets[i], cfg, opt.Profile && last, opt.OutDir)
	if res != nil { // the next step goes on through the pool: a distinct token stays distinct
		cfgs[i].PoolStart += res.PoolSent
	}
	if perr != nil { // a target too loaded to answer its profile is a finding, not a failed run
		doc.Notes = append(doc.Notes, fmt.Sprintf("No profile of %s at %d connections: %v.", s.Name, n, perr))
		logf("%s, %d connections: no profile: %v", s.Name, n, perr)
	}
	if res != nil {
		if rounds > 1 {
			res.Round = r + 1
		}
		doc.Series[i].Steps = append(doc.Series[i].Steps, res)
		logf("%s, %d connections: %.0f requests/s, p99 %s", s.Name, n, res.RequestsPerSec,
			time.Duration(res.Latency.P99).Round(time.Microsecond))
	}
	for j := range prof {
		prof[j].Series, prof[j].Step = s.Name, len(doc.Series[i].Steps)-1
	}
	doc.Profiles = append(doc.Profiles, prof...)
	if err != nil {
		return fmt.Errorf("%s, %d connections: %w", s.Name, n, err)
	}
	if targets[i].Proc.Exited() {
		return fmt.Errorf("%s: %w during the run\n%s", s.Name, ErrExited, targets[i].Proc.Tail())
	}
	return nil
}

// measure runs one step against t, sampling its usage over the measured
// window, and profiles it when asked; perr is why a profile is missing.
func measure(ctx context.Context, t *Target, cfg loadgen.Config, profile bool, dir string) (
	res *loadgen.Result, profs []loadgen.Profile, perr, err error) {
	var smp *Sampler
	if t.Probe != nil {
		smp = StartSampler(ctx, t.Probe, cfg.Warmup, cfg.Duration, t.cpus)
	}
	var wg sync.WaitGroup
	if secs := int(cfg.Duration/time.Second) - 1; profile && secs >= 1 && t.ProfileURL("profile", 1) != "" {
		wg.Go(func() {
			select {
			case <-time.After(cfg.Warmup):
			case <-ctx.Done():
				return
			}
			file := t.Name + "-cpu.pprof"
			top, err := FetchProfile(ctx, t.ProfileURL("profile", secs), t.pprofToken, filepath.Join(dir, file), TopN)
			if err != nil {
				perr = err
				return
			}
			profs = append(profs, loadgen.Profile{Kind: "cpu", File: file, Top: top})
		})
	}
	res, err = loadgen.Run(ctx, cfg)
	wg.Wait()
	if profile && perr == nil && t.ProfileURL("allocs", 0) != "" {
		file := t.Name + "-allocs.pprof"
		top, aerr := FetchProfile(ctx, t.ProfileURL("allocs", 0), t.pprofToken, filepath.Join(dir, file), TopN)
		if aerr == nil {
			profs = append(profs, loadgen.Profile{Kind: "heap", File: file, Top: top})
		}
		perr = aerr
	}
	if smp != nil && res != nil {
		u, uerr := smp.Finish(ctx, res.Requests)
		if uerr == nil {
			res.Server = u
		}
	}
	return res, profs, perr, err
}

// SettleMax bounds how long a step waits for the other targets to go
// quiet; settleStep is how often it looks, and settleQuiet the CPU share
// under which a target is quiet.
const (
	SettleMax   = 30 * time.Second
	settleStep  = 250 * time.Millisecond
	settleQuiet = 0.05
)

// settle waits until every target but targets[i] is quiet: a server that
// fell behind in its own step goes on working off the requests it had read
// (the naive decrypt server's scrypt calls), on the CPUs the next series
// is measured on. It returns how long it waited, and the name of a target
// still busy after SettleMax ("" when all went quiet).
func settle(ctx context.Context, targets []*Target, i int) (busy string, waited time.Duration) {
	start := time.Now()
	prev := make([]Sample, len(targets))
	for j, t := range targets {
		if j != i && t != nil && t.Probe != nil {
			prev[j], _ = cpuProbe(t).Read(ctx)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return "", time.Since(start)
		case <-time.After(settleStep):
		}
		busy = ""
		for j, t := range targets {
			if j == i || t == nil || t.Probe == nil {
				continue
			}
			cur, err := cpuProbe(t).Read(ctx)
			if err != nil {
				continue
			}
			if dt := cur.At.Sub(prev[j].At).Seconds(); dt > 0 && (cur.CPU-prev[j].CPU)/dt > settleQuiet {
				busy = t.Name
			}
			prev[j] = cur
		}
		if busy == "" || time.Since(start) >= SettleMax {
			return busy, time.Since(start)
		}
	}
}

// cpuProbe is the cheapest probe of t's CPU: /proc for a child.
func cpuProbe(t *Target) Probe {
	if cp, ok := t.Probe.(ChildProbe); ok {
		return ProcProbe{Pid: cp.Pid}
	}
	return t.Probe
}
