package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/bench/report"
	"github.com/keygate/keygate/internal/bench/runner"
)

// benchReproduce is 'keygate bench reproduce NAME'.
func (a *app) benchReproduce(ctx context.Context, args []string) error {
	var names []string
	for _, r := range runner.Reproductions {
		names = append(names, r.Name)
	}
	fs := a.flags("keygate bench reproduce", "NAME [--connections N,...] [--duration D] [--warmup D] [--tokens N]\n"+
		"    [--out DIR] [--profile] [--target-cpus LIST | --no-pin] [--json]",
		"Redraws one of the load-test reports keygate was started from on this machine: the\n"+
			"report's naive set-up beside keygate, at rising connection counts, each a fresh process of\n"+
			"this binary pinned to its own CPU while the load generator runs on the others. Prints the\n"+
			"table (requests/s, p99, the target's CPU, errors, keygate's ratio to naive) and writes\n"+
			"report.json (keygate.bench.report/v1) and the targets' logs to --out. NAME is one of:\n  "+
			strings.Join(names, "\n  ")+"\nSee docs/bench-load.md.")
	var conns intsFlag
	fs.Var(&conns, "connections", "`N[,N...]` connection counts (default: the reproduction's own)")
	tokens := fs.Int("tokens", runner.DefaultTokens, "distinct tokens, sent in turn (token reproductions)")
	timeout := fs.Duration("timeout", loadgen.DefaultTimeout, "per request and per connect: an answer later than this is a timeout error")
	pf := a.planFlags(fs, 8*time.Second)
	rest, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	rep, ok := runner.FindReproduction(rest[0])
	switch {
	case !ok:
		return usageErrorf(fs.Name(), "no reproduction %q (one of %s)", rest[0], strings.Join(names, ", "))
	case *pf.duration < time.Second:
		return usageErrorf(fs.Name(), "--duration must be at least 1s")
	case *pf.warmup < 0:
		return usageErrorf(fs.Name(), "--warmup must not be negative")
	case *tokens <= 0:
		return usageErrorf(fs.Name(), "--tokens must be positive")
	case *timeout <= 0 || *timeout >= *pf.duration:
		return usageErrorf(fs.Name(), "--timeout must be positive and shorter than --duration (or no request could time out within a step)")
	}
	return a.runPlan(ctx, fs, pf, rep.Name, "keygate bench reproduce "+strings.Join(args, " "),
		func(env *runner.Env) (*runner.Plan, error) {
			return rep.Plan(env, runner.ReproduceOptions{Connections: conns, Warmup: *pf.warmup, Duration: *pf.duration, Tokens: *tokens,
				Timeout: *timeout})
		})
}

// planFlags are the flags bench reproduce and bench scenario share.
type planFlags struct {
	duration, warmup *time.Duration
	out              *string
	profile, asJSON  *bool
	pin              pinning
}

func (a *app) planFlags(fs *flagSet, duration time.Duration) *planFlags {
	return &planFlags{
		duration: fs.Duration("duration", duration, "measured time per step and series"),
		warmup:   fs.Duration("warmup", 2*time.Second, "unmeasured time before each step"),
		out:      fs.String("out", "", "directory for report.json, report.html, profiles and logs (default ./keygate-bench-NAME-TIME)"),
		profile:  fs.Bool("profile", false, "save CPU and allocation profiles of each target over the last step, and summarise them"),
		pin:      a.pinFlags(fs),
		asJSON:   fs.Bool("json", false, "print the report's JSON instead of the table"),
	}
}

// runPlan makes the output directory, sets the CPUs, has build make the
// plan in that environment, runs it and writes the report.
func (a *app) runPlan(ctx context.Context, fs *flagSet, pf *planFlags, name, command string,
	build func(*runner.Env) (*runner.Plan, error)) error {
	dir, err := a.benchOutDir(*pf.out, name)
	if err != nil {
		return err
	}
	env, restore, err := a.benchEnv(fs, pf.pin, dir)
	if err != nil {
		return err
	}
	defer restore()
	plan, err := build(env)
	if err != nil {
		return err
	}
	if err := a.raiseFileLimit(slices.Max(plan.Connections)); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "%s: %d steps × %d series of %s + %s warm-up; %s; writing to %s\n",
		command, len(plan.Connections), len(plan.Series), *pf.duration, *pf.warmup, env.Describe(), dir)
	doc, runErr := runner.Run(ctx, env, plan, runner.Options{Profile: *pf.profile, OutDir: dir,
		Progress: a.seriesProgress(), Log: a.stderr})
	doc.Command = command
	doc.Notes = append(doc.Notes, env.Describe())
	return errors.Join(runErr, a.writeDocument(doc, dir, *pf.asJSON))
}

// pinning is the --target-cpus and --no-pin flags.
type pinning struct {
	cpus  *string
	noPin *bool
}

func (a *app) pinFlags(fs *flagSet) pinning {
	return pinning{
		cpus: fs.String("target-cpus", "", "`CPUs` (e.g. 0 or 0-1) for the targets this command starts; the load generator\n"+
			"gets the others (default: CPU 0 when there are at least two, the targets with GOMAXPROCS=1)"),
		noPin: fs.Bool("no-pin", false, "pin nothing: targets and generator share every CPU"),
	}
}

// benchEnv sets where started targets and the generator run; restore
// undoes the generator's pinning.
func (a *app) benchEnv(fs *flagSet, p pinning, dir string) (*runner.Env, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("the keygate binary: %w", err)
	}
	env := &runner.Env{Exe: exe, Dir: dir}
	n := runtime.NumCPU()
	if *p.noPin || (n < 2 && *p.cpus == "") {
		return env, func() {}, nil
	}
	targets := []int{0}
	if *p.cpus != "" {
		if targets, err = parseCPUs(*p.cpus, n); err != nil {
			return nil, nil, usageErrorf(fs.Name(), "--target-cpus: %v", err)
		}
	}
	var gen []int
	for c := range n {
		if !slices.Contains(targets, c) {
			gen = append(gen, c)
		}
	}
	if len(gen) == 0 {
		return nil, nil, usageErrorf(fs.Name(), "--target-cpus leaves no CPU for the load generator (use --no-pin)")
	}
	env.CPUs, env.Procs = targets, len(targets)
	if err := runner.PinSelf(gen); err != nil {
		return nil, nil, err
	}
	old := runtime.GOMAXPROCS(len(gen))
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return env, func() {
		runtime.GOMAXPROCS(old)
		runner.PinSelf(all) //nolint:errcheck // best effort: the command is ending
	}, nil
}

// parseCPUs reads "0", "0,2" or "0-3".
func parseCPUs(s string, n int) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b >= n {
			return nil, fmt.Errorf("%q is not a CPU or range of CPUs 0 to %d", part, n-1)
		}
		for c := a; c <= b; c++ {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// benchOutDir creates the report directory (default: a new one named for
// the run in the working directory).
func (a *app) benchOutDir(dir, name string) (string, error) {
	if dir == "" {
		dir = fmt.Sprintf("keygate-bench-%s-%s", name, a.now().UTC().Format("20060102-150405"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}

func (a *app) raiseFileLimit(conns int) error {
	raised, before, after, err := loadgen.EnsureFileLimit(conns)
	if err != nil {
		return err
	}
	if raised {
		fmt.Fprintf(a.stderr, "bench: raised the open-file limit (RLIMIT_NOFILE) from %d to %d for %d connections\n",
			before, after, conns)
	}
	return nil
}

// seriesProgress is the live progress line of a multi-series run, or nil
// when stderr is not a terminal.
func (a *app) seriesProgress() func(series string, conns int, p loadgen.Progress) {
	line := a.progressLine()
	if line == nil {
		return nil
	}
	return func(series string, conns int, p loadgen.Progress) {
		fmt.Fprintf(a.stderr, "\r\033[K%s: ", series)
		line(conns, p)
	}
}

// writeDocument saves doc as report.json and report.html in dir and
// prints it (table or JSON) on stdout.
func (a *app) writeDocument(doc *loadgen.Document, dir string, asJSON bool) error {
	for name, write := range map[string]func(io.Writer) error{
		"report.json": doc.WriteJSON,
		"report.html": func(w io.Writer) error { return report.WriteHTML(w, doc) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := errors.Join(write(f), f.Close()); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if asJSON {
		return doc.WriteJSON(a.stdout)
	}
	if err := doc.WriteTable(a.stdout); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "report: %s (and report.json)\n", filepath.Join(dir, "report.html"))
	return nil
}
